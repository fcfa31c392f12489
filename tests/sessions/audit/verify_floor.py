"""verify's floor on one trial (issue 31 row 3: what the reading alone costs). Not collected by pytest;
run it by hand on a big trial (the bench's: `oakwatch bench` phase 4 leaves none, so make one with
`app.bench.bench._generate`):

    uv run python tests/sessions/audit/verify_floor.py FOLDER DECISIONS

It audits FOLDER twice in fresh processes: as `oakwatch verify` does (`full`), and with every per-decision
check in Python taken out (`floor`): every stream line is still read, validated by its record model and
hashed, every file digest still taken, the walk still split over two processes, but nothing is compared
(continuity, fields, tally beyond the count, the response's and inputs' contents). The floor is the
fastest verify could be while it validates and hashes what it reads; its problems are not meaningful.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def _floor() -> None:
    """Replace the walk's per-decision checks with their reading, validating and hashing alone."""
    import sessions.audit.verify_streams as S
    from engine.loop.tally import TraceTally

    validate_response, validate_input = S._validate_response, S._validate_input

    def trace(w, t, n, line):
        w.head = hashlib.sha256(line).hexdigest()

    def response(w, t, n, line):
        _, data = next(w.responses)
        hashlib.sha256(data).hexdigest()
        validate_response(data)

    def inputs(w, t, n, line):
        for _ in range(t.accepted_actions):
            _, data = next(w.inputs)
            hashlib.sha256(data).hexdigest()
            validate_input(data)

    def count(self, t):
        self.decisions += 1
        self.last = t

    S._check_trace_line, S._check_decision_response, S._check_decision_inputs = trace, response, inputs
    S._check_line_fields = lambda w, t, n: None
    TraceTally.add = count


def child(folder: Path, mode: str) -> dict:
    if mode == "floor":
        _floor()
    from sessions.audit.verify import audit

    t0, c0 = time.perf_counter(), os.times()
    report = audit(folder)
    t1, c1 = time.perf_counter(), os.times()
    return {"seconds": t1 - t0, "cpu_here": c1.user - c0.user + c1.system - c0.system,
            "cpu_worker": c1.children_user - c0.children_user + c1.children_system - c0.children_system,
            "problems": len(report.problems) + len(report.interrupted)}


def main(folder: Path, decisions: int, rounds: int = 3) -> None:
    for r in range(rounds):
        for mode in ("full", "floor"):
            done = subprocess.run([sys.executable, __file__, "--child", str(folder), mode], capture_output=True,
                                  text=True, check=True)
            fig = json.loads(done.stdout.strip().splitlines()[-1])
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            print(f"round {r + 1} {mode:5s}: {fig['seconds']:.3f} s = {decisions / fig['seconds']:,.0f} decisions/s "
                  f"(CPU {fig['cpu_here']:.2f} s here + {fig['cpu_worker']:.2f} s in the worker; load {load})",
                  flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        print(json.dumps(child(Path(sys.argv[2]), sys.argv[3])))
    else:
        main(Path(sys.argv[1]), int(sys.argv[2]))
