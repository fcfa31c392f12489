"""Issue 31 row 1's floor by hand (per accepted action, CPU, steady state, against raw PyBoy with the
harness's frame capture and SHA-256). Not collected by pytest; run it by hand:

    uv run python tests/engine/loop/steady_floor.py BIG SMALL ROUNDS

Each round measures the bench's row (`app.bench.bench_steady`: its big and small random trials, the
big minus the small per extra action, and raw PyBoy + frame hash on each one's inputs) in fresh
processes, twice: as the bench does (`full`), and with the recorder's commit taken out
(`no-evidence`: nothing serialised, hashed, written or stored; the loop, the random policy, the
contract, the probe and the ladder still run). The second is what the loop costs before any
evidence; the target (1.15x) has to hold the evidence as well. Both modes play the same seeded
random inputs, so the full run's raw figure is the baseline of both.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path


def child(big: int, small: int, mode: str, tmp: Path) -> dict:
    from app.bench.bench import DEFAULT_MANIFEST, _harness_trial, _random_manifest
    from app.bench.bench_steady import _one, steady_ratio
    from sessions.preflight.experiment import prepare

    pressed = [0]  # accepted actions, counted where the commit would have written them
    if mode == "no-evidence":
        import sessions.evidence.recorder as recorder

        def commit(self, event) -> None:
            self.decisions = event.trace.decision_id
            pressed[0] += len(event.inputs)

        recorder.TrialRecorder._commit = commit
    prepared = prepare(DEFAULT_MANIFEST, None)
    trials = {}
    for n in (small, big):
        manifest = _random_manifest(tmp, f"steady-{n}", n)
        if mode == "full":
            trials[n] = _one(prepared, manifest, tmp / f"run-{n}")
            continue
        pressed[0] = 0
        (wall, cpu), _trial, _result = _harness_trial(manifest, tmp / f"run-{n}")
        trials[n] = {"actions": pressed[0], "oakwatch_cpu_s": cpu, "raw_cpu_s": 0.0, "oakwatch_wall_s": wall,
                     "raw_wall_s": 0.0}
    figures = steady_ratio(trials[big], trials[small])
    return {k: figures[k] for k in ("oakwatch_cpu_us_per_action", "raw_cpu_us_per_action")}


def main(big: int, small: int, rounds: int) -> None:
    for r in range(rounds):
        raw = None
        for mode in ("full", "no-evidence"):
            with tempfile.TemporaryDirectory() as tmp:
                done = subprocess.run([sys.executable, __file__, "--child", str(big), str(small), mode, tmp],
                                      capture_output=True, text=True, check=True)
            fig = json.loads(done.stdout.strip().splitlines()[-1])
            raw = fig["raw_cpu_us_per_action"] if mode == "full" else raw
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            ours = fig["oakwatch_cpu_us_per_action"]
            print(f"round {r + 1} {mode:11s}: {ours:.0f} µs of CPU an extra action = {ours / raw:.2f}x raw "
                  f"({raw:.0f} µs, the full run's pair on the same seeded inputs; load {load})", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], Path(sys.argv[5]))))
    else:
        main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
