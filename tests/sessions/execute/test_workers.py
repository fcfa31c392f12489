"""`oakwatch run --workers N`: the same evidence as a serial run, trial for trial; a worker that
dies takes only its own trial; a stop signal ends every worker with its records written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.cli import main
from engine.loop.events import DecisionRecorded, TrialEnded, TrialStarted
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from sessions.evidence.digest import trial_digest
from sessions.evidence.records import Summary
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import prepare
from tests.conftest import write_manifest


def budget(actions: int) -> dict:
    return {"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
            "unrecoverable_loop_repeats": None}


TWO_BY_THREE = {"conditions": [{"id": "rnd", "policy": "random", "seed": 5},
                               {"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt",
                                "actions_per_decision": 1}],
                "trials": {"per_condition": 3, "blinding_seed": 4}}


class Collect:
    def __init__(self):
        self.events = []

    def handle(self, event) -> None:
        self.events.append(event)


def digests(root: Path) -> dict[str, str]:
    return {p.name: trial_digest(p) for p in sorted((root / "trials").iterdir())}


def summary_of(root: Path) -> Summary:
    return Summary.model_validate_json((root / layout.SUMMARY).read_text())


def test_workers_write_what_a_serial_run_writes(tmp_path):
    manifest = write_manifest(tmp_path, budgets=budget(300), **TWO_BY_THREE)
    assert main(["run", str(manifest), "--headless", "--output", str(tmp_path / "serial")]) in (0, 1)
    prepared = prepare(manifest, tmp_path / "par")
    folder = create_folder(prepared, tmp_path / "par")
    sink = Collect()
    summary = ExperimentRunner(prepared, folder, sinks=[sink], workers=2).run()
    serial, parallel = tmp_path / "serial", tmp_path / "par"
    assert verify_experiment(serial) == [] and verify_experiment(parallel) == []
    assert len(digests(serial)) == 6
    assert digests(serial) == digests(parallel)
    assert summary.completed == 6 and not summary.stopped_early
    # every event reached the driver's sinks, each naming its trial
    started = [e for e in sink.events if isinstance(e, TrialStarted)]
    ended = [e for e in sink.events if isinstance(e, TrialEnded)]
    assert len(started) == len(ended) == 6
    decisions = [e for e in sink.events if isinstance(e, DecisionRecorded)]
    assert decisions and all(e.trial_key in {s.trial_key for s in started} for e in decisions)
    per_trial = {s.trial_key: sum(1 for e in decisions if e.trial_key == s.trial_key) for s in started}
    assert per_trial == {e.result.trial_key: e.result.telemetry.decisions for e in ended}
    pids = {json.loads((p / layout.TRIAL).read_text())["pid"] for p in (parallel / "trials").iterdir()}
    assert os.getpid() not in pids and len(pids) == 6  # each trial in its own process


class Milestones(Collect):
    wants_decisions = False  # a display of trial starts, ends and rungs only


def test_a_driver_whose_displays_take_no_decisions_is_sent_none(tmp_path):
    """Workers ship each decision to the driver only for a display that takes them: the others still
    get every start, rung and end, and the evidence (written in the workers) is the same."""
    manifest = write_manifest(tmp_path, budgets=budget(120), conditions=TWO_BY_THREE["conditions"],
                              trials={"per_condition": 1, "blinding_seed": 4})
    runs = {}
    for name, sink in (("all", Collect()), ("some", Milestones())):
        prepared = prepare(manifest, tmp_path / name)
        ExperimentRunner(prepared, create_folder(prepared, tmp_path / name), sinks=[sink], workers=2).run()
        runs[name] = sink.events
    for events in runs.values():
        assert len([e for e in events if isinstance(e, TrialEnded)]) == 2
    assert any(isinstance(e, DecisionRecorded) for e in runs["all"])
    assert not any(isinstance(e, DecisionRecorded) for e in runs["some"])
    assert digests(tmp_path / "all") == digests(tmp_path / "some")
    assert verify_experiment(tmp_path / "some") == []


def _run(args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _wait(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _trial_pids(root: Path) -> dict[str, int]:
    out = {}
    for p in (root / "trials").glob("*/trial.json"):
        try:
            out[p.parent.name] = json.loads(p.read_text())["pid"]
        except (ValueError, OSError):
            pass
    return out


def test_a_dying_worker_takes_only_its_trial_and_a_signal_stops_them_all(tmp_path):
    manifest = write_manifest(tmp_path, budgets=budget(4000), **{
        "conditions": [{"id": "a", "policy": "random", "seed": 1}, {"id": "b", "policy": "random", "seed": 2}],
        "trials": {"per_condition": 2, "blinding_seed": 1}})
    out = tmp_path / "run"
    proc = _run(["run", manifest, "--headless", "--workers", "2", "--output", out])
    _wait(lambda: len(_trial_pids(out)) == 2 and all((out / "trials" / k / layout.TRACE).is_file()
                                                      and (out / "trials" / k / layout.TRACE).stat().st_size > 0
                                                      for k in _trial_pids(out)))
    (victim, pid), (other, _) = sorted(_trial_pids(out).items())
    os.kill(pid, signal.SIGKILL)
    # the other worker goes on; then a Ctrl-C to the driver ends the rest with records written
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert verify_experiment(out) == [], err
    results = {p.parent.name: json.loads(p.read_text()) for p in out.glob("void-*/*/result.json")}
    results.update({p.parent.name: json.loads(p.read_text()) for p in out.glob("trials/*/result.json")})
    assert (results[victim]["outcome"], results[victim]["invalid_cause"]) == ("harness-error", "process-died")
    assert all(r["outcome"] in ("harness-error", "game-failure", "success") for r in results.values())
    s = summary_of(out)
    assert s.stopped_early and s.stop_reason == "signal"
    assert not (out / layout.LOCK).exists()


def test_the_run_log_records_the_workers(tmp_path):
    from sessions.evidence.reader import read_run_log

    manifest = write_manifest(tmp_path, budgets=budget(50), conditions=TWO_BY_THREE["conditions"],
                              trials={"per_condition": 1, "blinding_seed": 4})
    assert main(["run", str(manifest), "--headless", "--workers", "2", "--output", str(tmp_path / "o")]) in (0, 1)
    events = read_run_log(tmp_path / "o")[0]
    assert [e.workers for e in events if e.event == "limits"] == [2]
    assert verify_experiment(tmp_path / "o") == []


def _modules_at_start(conn) -> None:
    conn.send("pyboy" in sys.modules)
    conn.close()


def test_the_forkserver_imports_pyboy_once_for_every_trial(tmp_path):
    """A trial's process starts with PyBoy imported (a tenth of a second each, otherwise)."""
    from sessions.execute.workers import _context

    ctx = _context()
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_modules_at_start, args=(child,), daemon=True)
    process.start()
    try:
        assert parent.poll(60) and parent.recv() is True
    finally:
        process.join(10)
