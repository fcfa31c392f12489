"""`oakwatch bench`: the harness's speed as a ratio to the raw emulator, and its memory.

On the bundled cartridge with the dry-run's inputs, one run measures:
  (a)  raw PyBoy: the same frames and button presses, nothing else;
  (a+) (a) plus SHA-256 of every captured frame;
  (b)  (a+) plus one lossless PNG encode per decision, inline in one thread (the naive floor);
  (c)  oakwatch's headless dry-run (trial loop, contract, probe, ladder, evidence on disk);
  (d)  oakwatch's replay of (c)'s trial.
Each figure is the median over --runs repetitions, timed from restoring the start state to
the last action (and, for (c), the last evidence on disk); constructing the emulator and
starting the frame-writer process are setup, untimed everywhere.
Targets: (c) at least as fast as (b); (d) at least 0.9x (a+).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from engine.emulator import Timing, frame_sha256
from engine.events import FrameCaptured
from engine.pyboy_backend import BUTTONS, PyBoyEmulator, _rgb
from sessions.assets import DEFAULT_MANIFEST
from sessions.evidence_worker import encode_png
from sessions.experiment import create_folder, prepare
from sessions.replay import load_trial, replay_records
from sessions.runner import ExperimentRunner, trial_config


def _raw(rom: Path, state: bytes, actions: list[str], timing: Timing, hashing: bool, png: bool,
         write_to: Path | None = None) -> float:
    if write_to is not None:
        write_to.mkdir(parents=True)
    list_written: list[int] = []
    emu = PyBoyEmulator(rom)
    pb = emu._pyboy  # the raw emulator, deliberately without our step()
    try:
        t0 = time.perf_counter()
        emu.restore(state)
        for action in actions:
            if action != "NOOP":
                pb.button_press(BUTTONS[action])
                pb.tick(timing.press_frames, False, False)
                pb.button_release(BUTTONS[action])
            else:
                pb.tick(timing.press_frames, False, False)
            pb.tick(timing.settle_frames - 1, False, False)
            pb.tick(1, True, False)
            if hashing or png:
                rgb = _rgb(pb.screen.ndarray)  # the harness's own frame capture and hash
                frame_sha256(rgb)
                if png:
                    buf = io.BytesIO()
                    encode_png(rgb.tobytes(), rgb.shape[1], rgb.shape[0], buf)
                    if write_to is not None:
                        (write_to / f"{len(list_written):06d}.png").write_bytes(buf.getbuffer())
                        list_written.append(1)
        return time.perf_counter() - t0
    finally:
        emu.close()


def _harness_run(out: Path) -> tuple[float, Path, dict]:
    """Time the runner's own trial path from restoring the start state to the last evidence on disk."""
    prepared = prepare(DEFAULT_MANIFEST, out)
    folder = create_folder(prepared, out)
    runner = ExperimentRunner(prepared, folder)
    # Starting the emulator and the frame-writer process is setup, untimed.
    trial = runner.build_trial(trial_config(prepared, *prepared.schedule[0]))
    try:
        t0 = time.perf_counter()
        result = asyncio.run(trial.run())
        elapsed = time.perf_counter() - t0
    finally:
        trial.emulator.close()
    return elapsed, folder / "trials" / result["trial_key"], result


def _replay(trial: Path) -> float:
    rom, state, game, trace, inputs, timing = load_trial(trial)
    emu = PyBoyEmulator(rom)
    try:
        t0 = time.perf_counter()
        replay_records(emu, state, game, trace, inputs, timing)
        return time.perf_counter() - t0
    finally:
        emu.close()


def _file_create_us(folder: Path, count: int = 200) -> float:
    """What creating one small file costs on this disk right now (it varies on virtual disks)."""
    folder.mkdir()
    t0 = time.perf_counter()
    for i in range(count):
        (folder / f"{i:06d}.png").write_bytes(b"x" * 1600)
    return (time.perf_counter() - t0) / count * 1e6


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


class _MemorySampler:
    def __init__(self, every: int):
        self.every = every
        self.samples: list[tuple[int, float]] = []
        self.actions = 0

    def handle(self, event) -> None:
        if isinstance(event, FrameCaptured):
            self.actions += 1
            if self.actions % self.every == 0:
                self.samples.append((self.actions, _rss_mb()))


def memory_soak(actions: int, tmp: Path) -> dict:
    """A random-policy trial of `actions` actions; RSS after the first 1,000 vs the peak after."""
    import yaml

    base = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    base["experiment_id"] = "memory-soak"
    base["conditions"] = [{"id": "random", "policy": "random", "seed": 1, "memory_policy": "persistent"}]
    base["budgets"] = {"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
                       "unrecoverable_loop_repeats": None}
    base["trials"] = {"per_condition": 1}
    manifest = tmp / "soak.yaml"
    manifest.write_text(yaml.safe_dump(base))
    prepared = prepare(manifest, tmp / "soak")
    folder = create_folder(prepared, tmp / "soak")
    sampler = _MemorySampler(500)
    runner = ExperimentRunner(prepared, folder, sinks=[sampler])
    t0 = time.perf_counter()
    asyncio.run(runner.run_async())
    elapsed = time.perf_counter() - t0
    after_1k = next(mb for n, mb in sampler.samples if n >= 1000)
    peak = max(mb for n, mb in sampler.samples if n >= 1000)
    return {"actions": sampler.actions, "rss_after_1000_mb": round(after_1k, 1), "rss_peak_mb": round(peak, 1),
            "growth_mb": round(peak - after_1k, 1), "seconds": round(elapsed, 1),
            "outcome": runner.results[0]["termination_reason"]}


def run_bench(runs: int, memory_actions: int, console: bool) -> int:
    prepared = prepare(DEFAULT_MANIFEST, None)
    actions = next(iter(prepared.scripts.values()))
    m = prepared.manifest
    timing = Timing(m.emulator.press_frames, m.emulator.settle_frames)
    rom, state = prepared.rom_path, prepared.start_state
    print(f"oakwatch bench: {len(actions)} actions × {timing.frames_per_action} frames on {rom.name}, "
          f"median of {runs} runs", flush=True)
    times: dict[str, list[float]] = {k: [] for k in ("a", "a+", "b", "b'", "c", "d")}
    # Evidence goes where real runs put it (./runs), not the system temp folder: on some machines
    # creating files there is over ten times slower, which would measure the disk, not oakwatch.
    Path("runs").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bench-", dir="runs") as tmp:
        print(f"evidence written under {Path(tmp).resolve().parent}", flush=True)
        tmp_path = Path(tmp)
        create_before = _file_create_us(tmp_path / "create-probe-before")
        for i in range(runs):
            times["a"].append(_raw(rom, state, actions, timing, hashing=False, png=False))
            times["a+"].append(_raw(rom, state, actions, timing, hashing=True, png=False))
            times["b"].append(_raw(rom, state, actions, timing, hashing=True, png=True))
            times["b'"].append(_raw(rom, state, actions, timing, hashing=True, png=True,
                                    write_to=tmp_path / f"floor-{i}"))
            elapsed, trial, result = _harness_run(tmp_path / f"run-{i}")
            if result["outcome"] != "success":
                print(f"oakwatch bench: the dry-run did not succeed ({result['termination_reason']})", file=sys.stderr)
                return 1
            times["c"].append(elapsed)
            times["d"].append(_replay(trial))
            print(f"  run {i + 1}/{runs} done", flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        labels = {"a": "(a)  raw PyBoy", "a+": "(a+) raw PyBoy + frame SHA-256",
                  "b": "(b)  naive floor: + inline PNG encode",
                  "b'": "(b') naive floor + writing each PNG file",
                  "c": "(c)  oakwatch headless dry-run",
                  "d": "(d)  oakwatch replay"}
        print(f"{'measure':42} {'seconds':>8} {'actions/s':>10} {'speed vs (a)':>13}")
        for k, label in labels.items():
            print(f"{label:42} {med[k]:8.3f} {len(actions) / med[k]:10.0f} {med['a'] / med[k]:12.2f}x")
        create_after = _file_create_us(tmp_path / "create-probe-after")
        print(f"this disk: creating one small file cost {create_before:.0f} µs before the runs and "
              f"{create_after:.0f} µs after ((c) creates two per decision, (b') one, (b) none)")
        c_vs_b = med["b"] / med["c"]
        c_vs_b_prime = med["b'"] / med["c"]
        d_vs_a_plus = med["a+"] / med["d"]
        print(f"target (c) >= (b): (c) runs at {c_vs_b:.2f}x the speed of (b) -> {'met' if c_vs_b >= 1 else 'NOT met'}"
              f"; against (b'): {c_vs_b_prime:.2f}x")
        print(f"target (d) >= 0.9x (a+): {d_vs_a_plus:.2f}x -> {'met' if d_vs_a_plus >= 0.9 else 'NOT met'}")
        report = {"actions": len(actions), "median_seconds": med, "c_vs_b": c_vs_b,
                  "c_vs_b_prime": c_vs_b_prime, "d_vs_a_plus": d_vs_a_plus,
                  "file_create_us": [round(create_before, 1), round(create_after, 1)]}
        if memory_actions:
            print(f"memory soak: random policy, {memory_actions} actions …", flush=True)
            soak = memory_soak(memory_actions, tmp_path)
            report["memory"] = soak
            print(f"memory: RSS {soak['rss_after_1000_mb']} MB after 1,000 actions, peak {soak['rss_peak_mb']} MB "
                  f"after; growth {soak['growth_mb']} MB over {soak['actions']} actions in {soak['seconds']} s -> "
                  f"{'met' if soak['growth_mb'] <= 50 else 'NOT met'} (target <= 50 MB)")
        if console:
            from app.bench_console import bench_console

            figures = bench_console(runs)
            report["console"] = figures
            for key, value in figures.items():
                print(f"console {key}: {value}")
    print("json: " + json.dumps(report, default=str))
    return 0
