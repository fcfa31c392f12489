"""Issue 31's fourth row: 2 workers against 1, as a share of the raw PyBoy pair's speed-up.

oakwatch: `trials` random-policy trials of `actions` accepted actions on the cartridge (two
conditions), run with 1 worker and then with 2; throughput = accepted actions per second of the
whole run (trial start-up and sealing included). Its speed-up = rate(2) / rate(1).

The raw pair, in the same run, does the same work without the harness: raw PyBoy + the harness's
frame capture and SHA-256 (app.bench.bench._raw), `trials` runs of `actions` random actions from
the start state (each run constructs its emulator, as each trial does), all in 1 process, then
split over 2 processes playing at once (trials // 2 each, the rest to the first). Each process
imports PyBoy first and waits for a go file, so interpreter start-up is left out; its wall time
runs from go to its last action. Like for like, oakwatch's 2-worker run starts its worker pool (the
forkserver, which imports the harness once) before its clock starts (`_ready_pool`); that start-up is
printed beside the share, with the share it would give if counted (`share_with_startup`).
Raw speed-up = rate(2) / rate(1), the rate being all actions
over the slowest process's wall time.

    share = oakwatch's speed-up / the raw pair's speed-up            target >= 95 %

The old figure (oakwatch's speed-up alone, >= 1.85x; issue 19.6) is printed beside, not judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

SHARE_TARGET = 0.95
OLD_SPEEDUP = 1.85  # issue 19.6's figure, printed for comparison
DEFAULT_SIZES = (8, 10_000)  # trials, actions per trial

# One process of the raw pair: `trials` runs of `_raw` (no harness), timed from the go file.
RAW_CHILD = """
import json, random, sys, time
from pathlib import Path
from app.bench.bench import _raw
from engine.emulators.emulator import Timing
rom, state, trials, actions, press, settle, first, go = sys.argv[1:9]
start_state, timing = Path(state).read_bytes(), Timing(int(press), int(settle))
plays = []
for t in range(int(first), int(first) + int(trials)):
    rnd = random.Random(t)
    plays.append([rnd.choice(["UP", "DOWN", "LEFT", "RIGHT", "A", "B"]) for _ in range(int(actions))])
while not Path(go).exists():
    time.sleep(0.005)
t0 = time.perf_counter()
for acts in plays:
    _raw(Path(rom), start_state, acts, timing, hashing=True, png=False)
print(json.dumps({"wall": time.perf_counter() - t0}))
"""


def split(trials: int, processes: int) -> list[int]:
    """Trials per process, as even as can be (the first ones take the rest)."""
    base, rest = divmod(trials, processes)
    return [base + (1 if i < rest else 0) for i in range(processes)]


def speedup(actions_total: int, seconds_1: float, seconds_2: float) -> dict:
    """Rates (actions per second) alone and in parallel, and their ratio."""
    one, two = actions_total / seconds_1, actions_total / seconds_2
    return {"actions_per_second_1": one, "actions_per_second_2": two, "speedup": two / one}


def share(oakwatch_speedup: float | None, raw_speedup: float | None) -> dict:
    """oakwatch's speed-up as a share of the raw pair's, against the target (None: not measured)."""
    if not oakwatch_speedup or not raw_speedup:
        return {"share_of_raw_pair": None, "share_target": SHARE_TARGET, "meets_target": None}
    value = oakwatch_speedup / raw_speedup
    return {"share_of_raw_pair": value, "share_target": SHARE_TARGET, "meets_target": value >= SHARE_TARGET}


def raw_pair_figures(prepared, tmp: Path, trials: int, actions: int) -> dict:
    """The raw pair doing oakwatch's work: `trials` x `actions` in 1 process, then in 2 at once."""
    from app.bench.bench import PROJECT, BenchFailure

    state = tmp / "raw-pair.state"
    state.write_bytes(prepared.start_state)
    m = prepared.manifest

    def play(processes: int) -> list[float]:
        go = tmp / f"raw-pair-go-{processes}"
        procs, first = [], 0
        for count in split(trials, processes):
            args = [sys.executable, "-c", RAW_CHILD, str(prepared.rom_path), str(state), str(count), str(actions),
                    str(m.emulator.press_frames), str(m.emulator.settle_frames), str(first), str(go)]
            procs.append(subprocess.Popen(args, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
            first += count
        time.sleep(3.0)  # every child imported PyBoy and is waiting
        go.touch()
        walls = []
        for proc in procs:
            out, err = proc.communicate()
            if proc.returncode != 0:
                raise BenchFailure(f"a raw PyBoy process failed (status {proc.returncode}):\n{err[-2000:]}")
            walls.append(json.loads(out.strip().splitlines()[-1])["wall"])
        return walls

    alone, pair = play(1), play(2)
    rates = speedup(trials * actions, alone[0], max(pair))
    return {"trials": trials, "actions_each": actions, "seconds_1": round(alone[0], 2),
            "seconds_2": [round(w, 2) for w in pair], **{k: round(v, 3) for k, v in rates.items()}}


def _manifest(tmp: Path, trials: int, actions: int) -> Path:
    from sessions.preflight.assets import DEFAULT_MANIFEST
    from sessions.preflight.manifest import load_manifest

    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data["budgets"] = {"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
                       "unrecoverable_loop_repeats": None}
    data["conditions"] = [{"id": "rnd-a", "policy": "random", "seed": 3},
                          {"id": "rnd-b", "policy": "random", "seed": 4}]
    data["trials"] = {"per_condition": max(1, trials // 2), "blinding_seed": 1}
    manifest = tmp / "workers-manifest.yaml"
    manifest.write_text(yaml.safe_dump(data))
    load_manifest(manifest)
    return manifest


def _ready_pool(runner) -> float:
    """Start the run's worker pool before the clock starts, as the raw pair's processes import PyBoy
    before their go file: a no-op process forked through it returns once the forkserver has imported
    the harness. Its seconds (worker start-up, printed beside the share)."""
    from sessions.execute.workers import make_pool

    t0 = time.perf_counter()
    runner.pool = make_pool(runner)
    probe = runner.pool.ctx.Process(target=time.sleep, args=(0,))
    probe.start()
    probe.join()
    return time.perf_counter() - t0


def _oakwatch_run(manifest: Path, out: Path, workers: int) -> tuple[float, int, object, float]:
    """Wall seconds of the whole run with `workers` workers (their pool started before the clock),
    the accepted actions it played, the prepared run, and the pool's start-up seconds (0 alone)."""
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare

    prepared = prepare(manifest, None)
    folder = create_folder(prepared, out)
    runner = ExperimentRunner(prepared, folder, workers=workers)
    startup = _ready_pool(runner) if workers > 1 else 0.0
    t0 = time.perf_counter()
    runner.run()
    seconds = time.perf_counter() - t0
    done = sum(json.loads(p.read_text())["telemetry"]["accepted_actions"] for p in out.glob("trials/*/result.json"))
    return seconds, done, prepared, startup


def workers_figures(tmp: Path, trials: int = DEFAULT_SIZES[0], actions: int = DEFAULT_SIZES[1]) -> dict:
    """oakwatch's 2-worker speed-up over 1 worker, the raw pair's on the same work, and the share."""
    manifest = _manifest(tmp, trials, actions)
    trials = 2 * max(1, trials // 2)
    figures: dict = {"trials": trials, "actions_per_trial": actions, "workers": 2}
    prepared = None
    for n in (1, 2):
        print(f"workers: {trials} trials of {actions:,} actions with {n} worker(s) …", flush=True)
        seconds, done, prepared, startup = _oakwatch_run(manifest, tmp / f"workers-{n}", n)
        figures[f"seconds_{n}"] = round(seconds, 2)
        figures[f"actions_per_second_{n}"] = round(done / seconds, 1)
    figures["worker_startup_seconds"] = round(startup, 3)
    ours = figures["actions_per_second_2"] / figures["actions_per_second_1"]
    figures["speedup"] = round(ours, 3)
    with_startup = figures["seconds_1"] / (figures["seconds_2"] + startup)  # the same work: rates' ratio
    print(f"workers: the raw pair on the same work ({trials} x {actions:,} random actions, raw PyBoy + frame hash, "
          f"1 process then 2 at once) …", flush=True)
    raw = raw_pair_figures(prepared, tmp, trials, actions)
    figures["raw_pair"] = raw
    figures.update(share(figures["speedup"], raw["speedup"]))  # both as printed, to 3 places
    figures["share_with_startup"] = with_startup / raw["speedup"]
    figures["old_speedup_target"] = OLD_SPEEDUP
    print(f"target 2 workers against 1 >= {SHARE_TARGET:.0%} of the raw pair's speed-up: oakwatch "
          f"{figures['actions_per_second_1']:,.0f} -> {figures['actions_per_second_2']:,.0f} actions/s = "
          f"{figures['speedup']:.2f}x; raw pair {raw['actions_per_second_1']:,.0f} -> "
          f"{raw['actions_per_second_2']:,.0f} actions/s = {raw['speedup']:.2f}x; share "
          f"{figures['share_of_raw_pair']:.0%} -> {'met' if figures['meets_target'] else 'NOT met'} "
          f"(the workers' start-up, {startup:.2f} s, left out as the raw pair's is; with it "
          f"{figures['share_with_startup']:.0%}) "
          f"({os.cpu_count()} cores; the old >= {OLD_SPEEDUP}x on the speed-up alone: "
          f"{'met' if ours >= OLD_SPEEDUP else 'not met'})", flush=True)
    return figures
