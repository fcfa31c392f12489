"""`oakwatch run --executor ray` on a local Ray instance: two conditions of two trials each (ten in
the slow lane), every trial a Ray task whose folder is mirrored into the one experiment folder; the folder verifies and
every trial's digest equals a serial run's. A Ray worker killed mid-trial takes only its trial,
which the driver finishes from what arrived."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from tests.conftest import write_manifest
from tests.sessions.execute.test_control_socket import lines_in, wait_for
from tests.sessions.execute.test_workers import budget, digests, summary_of

pytest.importorskip("ray", reason="Ray (the optional extra `ray`) is not installed")
pytestmark = pytest.mark.xdist_group("ray")  # one local Ray at a time: under xdist these share a worker

REPO = Path(__file__).resolve().parents[3]

def two_conditions(per_condition: int) -> dict:
    return {"conditions": [{"id": "rnd", "policy": "random", "seed": 5},
                           {"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt",
                            "actions_per_decision": 1}],
            "trials": {"per_condition": per_condition, "blinding_seed": 4}}


# Four trials prove the rule every run; twenty (more Ray tasks than workers many times over) run in
# the slow lane.
@pytest.mark.parametrize("per_condition", [2, pytest.param(10, marks=pytest.mark.slow)])
def test_trials_on_ray_equal_a_serial_run_trial_for_trial(tmp_path, per_condition):
    n = 2 * per_condition
    manifest = write_manifest(tmp_path, budgets=budget(60), **two_conditions(per_condition))
    serial, on_ray = tmp_path / "serial", tmp_path / "ray"
    assert main(["run", str(manifest), "--headless", "--output", str(serial)]) in (0, 1)
    assert main(["run", str(manifest), "--headless", "--executor", "ray", "--workers", "2",
                 "--output", str(on_ray)]) in (0, 1)
    assert verify_experiment(serial) == [] and verify_experiment(on_ray) == []
    assert len(digests(serial)) == n
    assert digests(serial) == digests(on_ray)
    summary = summary_of(on_ray)
    assert summary.completed == n and not summary.stopped_early
    # each trial played in its own Ray worker process, none in the driver
    pids = {json.loads((p / layout.TRIAL).read_text())["pid"] for p in (on_ray / "trials").iterdir()}
    assert len(pids) == n and os.getpid() not in pids
    log = [json.loads(x) for x in (on_ray / layout.RUN_LOG).read_text().splitlines()]
    assert any(e["event"] == "limits" and e.get("executor") == "ray" for e in log)


def test_a_killed_ray_worker_takes_only_its_trial(tmp_path):
    manifest = write_manifest(tmp_path, budgets=budget(400_000),
                              conditions=[{"id": "rnd", "policy": "random", "seed": 9}], trials={"per_condition": 2})
    out = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--workers", "2",
                             "--executor", "ray", "--output", str(out)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        trials = out / "trials"
        wait_for(lambda: trials.is_dir() and len([p for p in trials.iterdir()
                                                  if lines_in(p / layout.TRACE) >= 20]) == 2
                 or proc.poll() is not None, timeout=120, what="two trials playing")
        victim, other = sorted(p.name for p in trials.iterdir())
        pid = json.loads((trials / victim / layout.TRIAL).read_text())["pid"]
        os.kill(pid, signal.SIGKILL)
        from sessions.execute.control_socket import ControlClient

        client = ControlClient(out)
        wait_for(lambda: other in client.status().get("running", []) and victim not in
                 client.status().get("running", []), timeout=60, what="the victim's end")
        assert client.end(other, "enough")["ok"]
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    results = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/*/result.json")}
    dead = results[victim]
    assert (dead["outcome"], dead["invalid_cause"]) == ("harness-error", "process-died")
    assert "Ray task ended without a result" in dead["error"]
    assert "stopped growing" not in dead["error"]  # every piece that arrived fitted
    assert results[other]["termination_detail"] == "enough"
    assert verify_experiment(out) == []


def test_an_unreachable_cluster_ends_the_run_at_once_with_its_reason(tmp_path, capsys):
    out = tmp_path / "exp"
    assert main(["run", "--headless", "--executor", "ray", "--ray-address", "127.0.0.1:1", "--output", str(out)]) == 2
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in capsys.readouterr().err
    summary = summary_of(out)
    assert summary.stop_reason == "executor-unavailable" and summary.completed == 0 and summary.missing_positions
    assert verify_experiment(out) == []
