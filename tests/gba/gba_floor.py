"""The GBA row's floor by hand (issue 31: per action on the GBA cartridge, wall time, against raw mGBA
with the harness's frame capture and SHA-256). Not collected by pytest; run it by hand:

    uv run python tests/gba/gba_floor.py ACTIONS ROUNDS

Each round plays the bench's random GBA trial (app.bench.bench_gba) in fresh processes: as the bench
does (`full`, then raw mGBA on the same inputs, as the bench does), and with the recorder's commit
taken out (`no-evidence`: nothing serialised, hashed, written or stored; the loop, the policy, the
contract, the probe and the ladder still run). The second is what the loop costs before any evidence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(actions: int, mode: str, tmp: Path) -> dict:
    from app.bench.bench import _harness_trial
    from app.bench.bench_gba import GBA_DRY_RUN, _random_manifest, raw_mgba
    from engine.emulators.emulator import Timing
    from sessions.preflight.experiment import prepare

    if mode == "no-evidence":
        import sessions.evidence.recorder as recorder

        def commit(self, event) -> None:
            self.decisions = event.trace.decision_id

        recorder.TrialRecorder._commit = commit
    manifest = _random_manifest(GBA_DRY_RUN, tmp, actions)
    (wall, _cpu), trial, _result = _harness_trial(manifest, tmp / f"gba-{time.time_ns()}")
    figures = {"oakwatch_us": wall / actions * 1e6}
    if mode == "full":
        prepared = prepare(manifest, None)
        m = prepared.manifest
        with (trial / "inputs.jsonl").open("rb") as f:
            inputs = [json.loads(line)["action"] for line in f]
        raw, _ = raw_mgba(prepared, inputs, Timing(m.emulator.press_frames, m.emulator.settle_frames))
        figures["raw_us"] = raw / actions * 1e6
    return figures


def main(actions: int, rounds: int) -> None:
    for r in range(rounds):
        raw = None
        for mode in ("full", "no-evidence"):
            with tempfile.TemporaryDirectory() as tmp:
                done = subprocess.run([sys.executable, __file__, "--child", str(actions), mode, tmp],
                                      capture_output=True, text=True, check=True)
            fig = json.loads(done.stdout.strip().splitlines()[-1])
            raw = fig.get("raw_us", raw)
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            print(f"round {r + 1} {mode:11s}: {fig['oakwatch_us']:.0f} µs an action = {fig['oakwatch_us'] / raw:.2f}x "
                  f"raw ({raw:.0f} µs, the full run's pair; load {load})", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))))
    else:
        main(int(sys.argv[1]), int(sys.argv[2]))
