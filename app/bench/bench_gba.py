"""`oakwatch bench`'s GBA phase: the harness on the open GBA cartridge against raw mGBA (issue 29.7).

Per accepted action: a random-policy trial of `--gba-actions` actions (one per decision, no loop
ending) on the bundled GBA dry-run's ROM and start state, through the runner's own timed slot path
(app.bench._harness_trial: genesis, recorder, trial loop, probe of the FireRed definition through
its moving save-block pointers, ladder, frame store, seal), against the raw baseline: exactly the
trial's accepted inputs read back from its inputs.jsonl, played with the same press/settle timing
straight on mGBA's native calls (setKeys, runFrame), with the harness's frame capture and SHA-256 of
every captured frame. Median over min(--runs, 3) alternating pairs. Target: oakwatch <= 1.3x the
baseline per action (wall time); the CPU-time ratio is printed beside it.

Raw mGBA speed: frames per second of mGBA alone on the cartridge (runFrame, no input, no capture),
from the same start state: the ceiling every GBA figure above is read against.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import yaml

from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing, frame_sha256
from sessions.evidence import layout
from sessions.preflight.assets import ASSETS

GBA_DRY_RUN = ASSETS / "experiments" / "parcel-quest-advance-dry-run.yaml"
GBA_TARGET = 1.3
FPS_FRAMES = 3000


def _open(prepared):
    return BACKENDS["mgba"].open(prepared.rom, str(prepared.rom_path), prepared.game.platform)


def raw_mgba(prepared, actions: list[str], timing: Timing) -> tuple[float, float]:
    """(wall, CPU) seconds of mGBA playing `actions` straight from restoring the start state, with
    the harness's frame capture and SHA-256 of every captured frame; construction untimed."""
    from app.bench.bench import _now, _since

    emu = _open(prepared)
    native, run, set_keys, keys = emu._native, emu._run, emu._set_keys, emu._keys
    press, settle = timing.press_frames, timing.settle_frames
    try:
        t0 = _now()
        emu.restore(prepared.start_state)
        for action in actions:
            set_keys(native, 0 if action == "NOOP" else keys[action])
            for _ in range(press):
                run(native)
            set_keys(native, 0)
            for _ in range(settle):
                run(native)
            frame_sha256(emu.frame())
        return _since(t0)
    finally:
        emu.close()


def raw_fps(prepared, frames: int = FPS_FRAMES) -> float:
    """Frames per second of mGBA alone: no input, no capture, no hash."""
    emu = _open(prepared)
    native, run = emu._native, emu._run
    try:
        emu.restore(prepared.start_state)
        t0 = time.perf_counter()
        for _ in range(frames):
            run(native)
        return frames / (time.perf_counter() - t0)
    finally:
        emu.close()


def _random_manifest(source: Path, tmp: Path, actions: int) -> Path:
    """The GBA dry-run with one random condition: one action per decision, `actions` accepted actions.
    Its bundled references stay valid (the file is rewritten with absolute paths where relative)."""
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["experiment_id"] = "gba-per-action"
    data["conditions"] = [{"id": "random", "policy": "random", "seed": 1, "memory_policy": "persistent",
                           "actions_per_decision": 1}]
    data["budgets"] = {"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
                       "unrecoverable_loop_repeats": None}
    data["trials"] = {"per_condition": 1}
    path = tmp / "gba-per-action.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return path


def gba_figures(actions: int, runs: int, tmp: Path, manifest: Path = GBA_DRY_RUN) -> dict:
    from app.bench.bench import BenchFailure, _harness_trial
    from sessions.preflight.experiment import PreflightError, prepare

    if BACKENDS["mgba"].version() is None:
        print(f"gba: not measured ({BACKENDS['mgba'].missing_message()})", flush=True)
        return {"skipped": BACKENDS["mgba"].missing_message()}
    if not manifest.is_file():
        print(f"gba: not measured (no bundled GBA dry-run at {manifest})", flush=True)
        return {"skipped": f"no {manifest.name}"}
    reps = max(1, min(runs, 3))
    random_manifest = _random_manifest(manifest, tmp, actions)
    try:
        prepared = prepare(random_manifest, None)
    except PreflightError as exc:
        raise BenchFailure(f"the GBA dry-run cannot run: {exc}") from None
    m = prepared.manifest
    timing = Timing(m.emulator.press_frames, m.emulator.settle_frames)
    print(f"gba: per accepted action on {prepared.rom_path.name} (mGBA, 240x160, the {prepared.game.id} definition): "
          f"a {actions:,}-action random trial vs raw mGBA + frame SHA-256 on the same inputs, median of {reps} pairs",
          flush=True)
    pairs = []
    for i in range(reps):
        (wall, cpu), trial, result = _harness_trial(random_manifest, tmp / f"gba-{i}")
        with (trial / layout.INPUTS).open("rb") as f:
            inputs = [json.loads(line)["action"] for line in f]
        raw, raw_cpu = raw_mgba(prepared, inputs, timing)
        pairs.append({"accepted_actions": len(inputs), "outcome": result.termination_reason,
                      "oakwatch_wall_s": wall, "oakwatch_cpu_s": cpu, "raw_wall_s": raw, "raw_cpu_s": raw_cpu})
        print(f"  pair {i + 1}/{reps}: {len(inputs):,} actions ({result.termination_reason}); oakwatch {wall:.2f} s "
              f"wall, {cpu:.2f} s CPU; raw mGBA + hash {raw:.2f} s wall, {raw_cpu:.2f} s CPU", flush=True)
    n = pairs[0]["accepted_actions"]
    ours = statistics.median(p["oakwatch_wall_s"] for p in pairs)
    raw = statistics.median(p["raw_wall_s"] for p in pairs)
    ratio = ours / raw
    cpu_ratio = statistics.median(p["oakwatch_cpu_s"] for p in pairs) / statistics.median(p["raw_cpu_s"] for p in pairs)
    fps = statistics.median(raw_fps(prepared) for _ in range(reps))
    frames = timing.frames_per_action
    print(f"target per action on the GBA cartridge <= {GBA_TARGET:.1f}x raw mGBA + frame hash: measured "
          f"{ours / n * 1e6:.0f} µs vs {raw / n * 1e6:.0f} µs = {ratio:.2f}x -> "
          f"{'met' if ratio <= GBA_TARGET else 'NOT met'} (CPU time: {cpu_ratio:.2f}x, the frame store's PNG encoding "
          f"on its own thread included)")
    print(f"raw mGBA on the GBA cartridge: {fps:,.0f} frames/s ({fps / 60:.1f}x real time; {frames} frames per "
          f"action: at most {fps / frames:,.0f} actions/s)", flush=True)
    return {"actions": n, "pairs": pairs, "per_action_us": {"oakwatch": ours / n * 1e6, "raw": raw / n * 1e6},
            "ratio": ratio, "cpu_ratio": cpu_ratio, "target": GBA_TARGET, "target_met": ratio <= GBA_TARGET,
            "raw_fps": fps, "frames_per_action": frames, "rom": prepared.rom_path.name}
