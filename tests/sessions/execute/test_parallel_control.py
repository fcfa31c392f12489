"""Operator controls over a run of many trials at once (`--workers 2`, locally and on a local Ray
instance): pause, step, tag and end go through the run's control socket to the worker playing the
named trial, and only to it; the evidence records exactly what was done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from sessions.execute.control_socket import POINTER, ControlClient
from tests.conftest import write_manifest
from tests.sessions.execute.test_control_socket import lines_in, steady, wait_for

REPO = Path(__file__).resolve().parents[3]


def ray_installed() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


EXECUTORS = ["local", pytest.param("ray", marks=[pytest.mark.xdist_group("ray"), pytest.mark.skipif(not ray_installed(),
                                                                   reason="Ray (the optional extra `ray`) "
                                                                          "is not installed")])]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_pause_step_tag_end_reach_the_named_trial_only(tmp_path, executor):
    manifest = write_manifest(
        tmp_path, budgets={"accepted_actions": 500_000, "model_decisions": None, "wall_time_minutes": None,
                           "unrecoverable_loop_repeats": None},
        conditions=[{"id": "rnd", "policy": "random", "seed": 9}], trials={"per_condition": 2})
    out = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--workers", "2",
                             "--executor", executor, "--output", str(out)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        client = ControlClient(out)
        wait_for(lambda: client.available or proc.poll() is not None, timeout=120, what="the control socket")
        wait_for(lambda: len(client.status().get("running", [])) == 2 or proc.poll() is not None, timeout=120,
                 what="two running trials")
        a, b = client.status()["running"]
        traces = {k: out / "trials" / k / layout.TRACE for k in (a, b)}
        # The trials' records grow in the driver's folder while they play (on Ray: mirrored as they happen).
        wait_for(lambda: all(lines_in(t) >= 5 for t in traces.values()), timeout=120, what="decisions")

        assert client.pause(a)["ok"]
        held = steady(traces[a], 1.0)
        assert client.status()["paused_trials"] == [a]
        before = lines_in(traces[b])
        wait_for(lambda: lines_in(traces[b]) > before + 5, timeout=30, what="the other trial to go on")
        assert lines_in(traces[a]) == held  # paused: nothing more is decided in the paused trial only

        assert client.step(a)["ok"]
        wait_for(lambda: lines_in(traces[a]) >= held + 1, timeout=30, what="the stepped decision")
        assert steady(traces[a], 1.0) == held + 1  # exactly one

        tag = client.tag(a, held + 1, "other", "minor", refers_to=str(held), note="tagged in a worker")
        assert tag["ok"] is True, tag
        bad = client.tag(a, held + 1, "other", "minor", refers_to="fact-9999", note="no such fact")
        assert bad["ok"] is False and "never held" in bad["error"]
        assert client.pause("Z-99")["ok"] is False

        assert client.end(a, "ended through the socket")["ok"]
        assert client.end(b, "the other one, ended too")["ok"]
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (out / POINTER).exists()
    results = {k: json.loads(next(iter(out.glob(f"*/{k}/result.json"))).read_text()) for k in (a, b)}
    assert (results[a]["termination_reason"], results[a]["termination_detail"]) == \
        ("operator-abort", "ended through the socket")
    assert results[a]["last_decision"] == held + 1
    assert results[b]["termination_detail"] == "the other one, ended too"
    assert results[b]["last_decision"] > before + 5  # it went on while the other was paused
    tag_file = next(iter(out.glob(f"*/{a}/{layout.TRIAL_ANNOTATIONS}")))
    tags = [json.loads(x) for x in tag_file.read_text().splitlines()]
    assert [(t["decision_id"], t["note"]) for t in tags] == [(held + 1, "tagged in a worker")]
    assert not list(out.glob(f"*/{b}/{layout.TRIAL_ANNOTATIONS}")) or \
        not next(iter(out.glob(f"*/{b}/{layout.TRIAL_ANNOTATIONS}"))).read_text().strip()
    assert verify_experiment(out) == []
