"""Faults, injected for real: kill -9 at random points, signals to the process group, a full disk
(a real small filesystem, and ENOSPC injected into each writer in turn), a dead frame store.
Every one ends in a truthful record: the folder verifies as it stands or after `oakwatch recover`,
and `oakwatch run --resume` completes the schedule."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sessions.evidence.durable as durable
import sessions.evidence.framestore as framestore
from sessions.audit.recover import recover
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from sessions.evidence.records import Summary
from tests.conftest import read_jsonl, run_experiment, write_manifest


# Budgets replace the whole section: only the action budget (and no loop rule) ends these trials.
def budget(actions: int) -> dict:
    return {"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
            "unrecoverable_loop_repeats": None}


RANDOM_TRIALS = {"conditions": [{"id": "rnd", "policy": "random", "seed": 9},
                                {"id": "alt", "policy": "random", "seed": 11}],
                 "trials": {"per_condition": 2, "blinding_seed": 2}}


def oakwatch(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def finished(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def summary_of(root: Path) -> Summary:
    return Summary.model_validate_json((root / layout.SUMMARY).read_text())


def all_trials(root: Path) -> list[Path]:
    return sorted([*root.glob("trials/*"), *root.glob("void-*/*-*")])


def assert_whole(root: Path) -> None:
    """Verified, every trial classified by a result, and no torn line anywhere."""
    assert verify_experiment(root) == []
    for trial in all_trials(root):
        assert (trial / layout.RESULT).is_file(), trial
        for name in layout.STREAMS:
            data = (trial / name).read_bytes()
            assert not data or data.endswith(b"\n"), f"{trial.name}/{name} ends torn"
    assert not (root / layout.LOCK).exists()


def wait_for(predicate, timeout: float = 60, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# -- kill -9 --------------------------------------------------------------------------------------

def _lines_in(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def _kill_sweep(tmp_path, seed: int, kills: int, actions: int) -> int:
    """Kill points drawn at random (seeded) by where the run is: in folder creation, or at a
    random decision of a random trial of the schedule; each killed folder is recovered (every
    other one resumed too). Returns how many were recovered."""
    manifest = write_manifest(tmp_path, budgets=budget(actions), **RANDOM_TRIALS)
    rng = random.Random(seed)
    order = ["X-01", "Y-01", "Y-02", "X-02"]
    points = [("startup", rng.uniform(0.0, 0.4))]
    points += [(rng.choice(order), rng.randint(1, actions - 100)) for _ in range(kills)]
    recovered = 0
    for n, (where, when) in enumerate(points):
        out = tmp_path / f"kill-{n}"
        proc = oakwatch("run", manifest, "--headless", "--output", out)
        if where == "startup":
            time.sleep(when)
        else:
            trace = out / "trials" / where / layout.TRACE
            wait_for(lambda p=proc, t=trace, w=when: _lines_in(t) >= w or p.poll() is not None,
                     what=f"{where} to reach decision {when}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not out.exists():  # killed while the folder was being built: nothing is at the path
            continue
        if (out / layout.SUMMARY).is_file() and not (out / layout.LOCK).exists():
            assert_whole(out)  # it finished before the kill
            continue
        problems = verify_experiment(out)
        assert problems and all("recover" in p or "interrupted" in p or "torn" in p for p in problems), problems
        report = recover(out)
        recovered += 1
        assert_whole(out)
        for trial in report.finished:
            result = json.loads(next(p for p in all_trials(out) if p.name == trial).joinpath("result.json")
                                .read_text())
            assert (result["outcome"], result["invalid_cause"], result["recovered"]) == \
                ("harness-error", "process-died", True)
        if n % 2 == 1:  # resume reruns what is missing, in the same schedule positions
            code, _, err = finished(oakwatch("run", "--resume", out))
            assert code == 1, err  # random play runs out its budget: valid game-failures only
            assert_whole(out)
            assert summary_of(out).missing_positions == []
    return recovered


def test_kill_9_at_random_points_then_recover_and_resume(tmp_path):
    assert _kill_sweep(tmp_path, seed=7, kills=2, actions=600) >= 2


@pytest.mark.slow
def test_kill_9_sweep_of_long_trials_then_recover_and_resume(tmp_path):
    assert _kill_sweep(tmp_path, seed=11, kills=7, actions=2500) >= 6


DIE_MID_DECISION = """
import os, sys
import sessions.evidence.framestore as fs
add, calls = fs.FrameStoreWriter.add, [0]
def dying_add(self, *args):  # the response, inputs and memory lines are written; the trace line is not
    calls[0] += 1
    if calls[0] == 30:
        os._exit(9)
    return add(self, *args)
fs.FrameStoreWriter.add = dying_add
from app.cli import main
sys.exit(main(["run", "--headless", "--output", sys.argv[1]]))
"""


def test_death_between_a_decisions_response_and_its_trace_line_is_interrupted_not_tampered(tmp_path):
    out = tmp_path / "exp"
    done = subprocess.run([sys.executable, "-c", DIE_MID_DECISION, str(out)], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    trial = next((out / "trials").iterdir())
    assert _lines_in(trial / layout.RESPONSES) == _lines_in(trial / layout.TRACE) + 1  # the torn decision
    problems = verify_experiment(out)
    assert any("lines after the last recorded decision" in p for p in problems)
    assert all("recover" in p or "interrupted" in p or "torn" in p for p in problems), problems
    recover(out)
    assert_whole(out)
    assert _lines_in(trial / layout.RESPONSES) == _lines_in(trial / layout.TRACE)  # recover cut it


def test_recover_refuses_a_folder_held_by_a_live_run(tmp_path):
    manifest = write_manifest(tmp_path, budgets=budget(1_000_000),
                              conditions=[{"id": "rnd", "policy": "random", "seed": 1}])
    out = tmp_path / "live"
    proc = oakwatch("run", manifest, "--headless", "--output", out)
    try:
        wait_for(lambda: (out / "trials").is_dir() and list(out.glob("trials/*/trace.jsonl")), what="the trial")
        code, _, err = finished(oakwatch("recover", out))
        assert code == 2 and "held by a live oakwatch process" in err and f"pid {proc.pid}" in err
    finally:
        proc.send_signal(signal.SIGTERM)
        finished(proc)
    assert_whole(out)


# -- signals --------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_process_group_ends_the_run_with_everything_written(tmp_path, sig):
    manifest = write_manifest(tmp_path, budgets=budget(1_000_000),
                              conditions=[{"id": "rnd", "policy": "random", "seed": 9}])
    out = tmp_path / "out"
    proc = oakwatch("run", manifest, "--headless", "--output", out, start_new_session=True)
    wait_for(lambda: list(out.glob("trials/*/trace.jsonl")) and
             next(out.glob("trials/*/trace.jsonl")).stat().st_size > 50_000, what="a running trial")
    os.killpg(proc.pid, sig)  # as a terminal does: the whole foreground process group
    code, out_text, err = finished(proc)
    assert code == 2 and "Traceback" not in err, err
    assert signal.Signals(sig).name in err
    assert_whole(out)
    summary = summary_of(out)
    assert (summary.stopped_early, summary.stop_reason, summary.invalid, summary.valid) == (True, "signal", 1, 0)
    (trial,) = all_trials(out)
    result = json.loads((trial / layout.RESULT).read_text())
    assert (result["outcome"], result["termination_reason"], result["invalid_cause"]) == \
        ("harness-error", "signal", f"signal:{signal.Signals(sig).name}")


# A second signal before and after the summary: tests/sessions/execute/test_signal_timing.py (held deterministically).


# -- a full disk ----------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A real filesystem of a chosen size (tmpfs); skipped where mounting is not allowed."""
    mounted = []

    def make(kib: int) -> Path:
        where = tmp_path / f"disk-{kib}"
        where.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a small filesystem here: {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.parametrize("kib", [1400, 1800, 2600])
def test_a_real_full_disk_ends_the_trial_as_invalid_with_a_whole_folder(tmp_path, small_disk, kib):
    manifest = write_manifest(tmp_path, budgets=budget(1_000_000),
                              conditions=[{"id": "rnd", "policy": "random", "seed": 9}])
    out = small_disk(kib) / "exp"
    code, _, err = finished(oakwatch("run", manifest, "--headless", "--output", out))
    assert code == 2 and "Traceback" not in err, err
    assert_whole(out)
    summary = summary_of(out)
    assert (summary.stop_reason, summary.valid, summary.invalid) == ("disk-full", 0, 1)
    (trial,) = all_trials(out)
    result = json.loads((trial / layout.RESULT).read_text())
    assert (result["outcome"], result["termination_reason"], result["invalid_cause"]) == \
        ("harness-error", "evidence-failure", "disk-full")


class FullDisk:
    """ENOSPC from one writer (matched by what it writes), from its `after`-th write on."""

    def __init__(self, monkeypatch, target: str, after: int = 0, times: int | None = None):
        self.target, self.after, self.times, self.hits = target, after, times, 0
        self.seen = 0
        real = durable._write_all

        def write_all(fd, data, what):
            if self.target in what:
                self.seen += 1
                if self.seen > self.after and (self.times is None or self.hits < self.times):
                    self.hits += 1
                    half = len(data) // 2  # a short write first, as a filling disk gives
                    if half:
                        os.write(fd, bytes(data)[:half])
                    raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, data, what)

        monkeypatch.setattr(durable, "_write_all", write_all)


DRY_RUN_TAGGED = None


@pytest.mark.parametrize("target, after", [("trace.jsonl", 40), ("responses.jsonl", 40), ("inputs.jsonl", 40),
                                           ("memory.jsonl", 10), ("the frame store", 10), ("trial.json", 0)])
def test_enospc_in_each_trial_writer(tmp_path, monkeypatch, target, after):
    disk = FullDisk(monkeypatch, target, after)
    folder, summary, results = run_experiment(None, tmp_path / "out")
    assert disk.hits >= 1
    monkeypatch.undo()
    assert summary is not None and summary.stop_reason == "disk-full" and summary.missing_positions == [0]
    if target == "trial.json":  # the trial could not even begin: no folder, and the run says why
        assert results == [] and not (folder / "trials" / "X-01").exists()
        assert_whole(folder)
        return
    (r,) = results
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("harness-error", "evidence-failure", "disk-full")
    assert target in r.error or "frame" in r.error
    assert_whole(folder)
    # Cut back to the last whole decision: every line on disk belongs to a committed decision.
    trial = next(p for p in all_trials(folder))
    decided = len(read_jsonl(trial / layout.TRACE))
    assert decided == r.last_decision and len(read_jsonl(trial / layout.RESPONSES)) == decided
    assert all(m["decision_id"] <= decided for m in read_jsonl(trial / layout.MEMORY))


@pytest.mark.parametrize("target", ["result.json", "run.jsonl", "summary.json", "SHA256SUMS"])
def test_enospc_in_each_experiment_writer_leaves_a_folder_recover_finishes(tmp_path, monkeypatch, target):
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare

    prepared = prepare(None, tmp_path / "out")
    folder = create_folder(prepared, tmp_path / "out")
    FullDisk(monkeypatch, target, after=0 if target != "run.jsonl" else 0)
    runner = ExperimentRunner(prepared, folder)
    summary = runner.run()
    monkeypatch.undo()  # space is freed
    root = tmp_path / "out"
    if summary is None or verify_experiment(root):
        assert runner.fatal and ("No space" in runner.fatal or "cannot write" in runner.fatal)
        recover(root)
    assert_whole(root)


def test_the_disk_filling_once_is_absorbed_by_the_reserve(tmp_path, monkeypatch):
    """result.json fails once; releasing the reserve lets the retry through, and the trial stays valid."""
    disk = FullDisk(monkeypatch, "result.json", times=1)
    folder, summary, (r,) = run_experiment(None, tmp_path / "out")
    assert disk.hits == 1 and r.outcome == "success" and summary.all_succeeded
    assert_whole(folder)


# -- a dead frame store ---------------------------------------------------------------------------

def test_the_frame_store_dying_mid_trial_ends_it_as_invalid(tmp_path, monkeypatch):
    real = framestore.encode_png
    calls = []

    def dying(rgb):
        calls.append(1)
        if len(calls) > 25:
            raise MemoryError("the encoder died")
        return real(rgb)

    monkeypatch.setattr(framestore, "encode_png", dying)
    folder, summary, (r,) = run_experiment(None, tmp_path / "out")
    monkeypatch.undo()
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("harness-error", "evidence-failure",
                                                                  "frame-store-failed")
    assert "the encoder died" in r.error and r.chain.frames is None
    assert summary.missing_positions == [0]
    assert_whole(folder)


def test_ctrl_c_during_the_preflight_probe_writes_nothing(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}  # the probe really runs (~1 s)
    proc = oakwatch("run", "--headless", "--output", out, start_new_session=True, env=env)
    time.sleep(0.6)
    os.killpg(proc.pid, signal.SIGINT)
    code, _, err = finished(proc)
    if code == -signal.SIGINT:  # a loaded machine: Python was still starting up, before any of our code ran
        assert not out.exists() and not list(tmp_path.glob(".out.creating-*"))
    elif code == 130:  # interrupted in the preflight, as intended
        assert err.strip() == "oakwatch: interrupted" and not out.exists()
        assert not list(tmp_path.glob(".out.creating-*"))
    else:  # the machine was fast enough to be running the trial already: a clean signal stop
        assert code == 2 and "Traceback" not in err
        assert_whole(out)


def test_a_tag_that_cannot_be_written_is_refused_and_the_evidence_stays_whole(tmp_path, monkeypatch):
    import threading

    from engine.loop.events import DecisionRecorded
    from sessions.evidence.durable import EvidenceError
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare

    refused: list[str] = []

    class Operator:  # pauses at decision 5 and tags from another thread, as the console would
        control = None

        def handle(self, event) -> None:
            if isinstance(event, DecisionRecorded) and event.trace.decision_id == 5:
                self.control.pause()
                threading.Thread(target=self.tag).start()

        def tag(self) -> None:
            try:
                self.control.tag({"trial_key": "X-01", "decision_id": 5, "type": "omission", "severity": "minor",
                                  "refers_to": None, "note": "n"})
            except EvidenceError as exc:
                refused.append(str(exc))
            finally:
                self.control.resume()

    FullDisk(monkeypatch, "annotations.jsonl")
    prepared = prepare(None, tmp_path / "out")
    operator = Operator()
    runner = ExperimentRunner(prepared, create_folder(prepared, tmp_path / "out"), sinks=[operator])
    operator.control = runner.control
    summary = runner.run()
    monkeypatch.undo()
    assert refused and "No space" in refused[0]
    assert summary.all_succeeded  # the operator's note failed; the agent's trial did not
    assert (tmp_path / "out" / "trials" / "X-01" / layout.TRIAL_ANNOTATIONS).read_bytes() == b""
    assert_whole(tmp_path / "out")


def test_the_command_module_imports_nothing_heavy_before_main_catches_ctrl_c():
    """A Ctrl-C during `import app.cli` would escape main's handler (exit -2, a traceback): the module
    itself stays light and the emulator stack (numpy, PyBoy) is imported inside main."""
    probe = subprocess.run([sys.executable, "-c", "import sys, app.cli; print(sorted(m for m in ('numpy', 'pyboy', "
                            "'engine.emulators.backends') if m in sys.modules))"], capture_output=True, text=True,
                           check=True)
    assert probe.stdout.strip() == "[]"


def test_a_kill_between_a_result_and_its_seal_is_an_interruption_that_recover_finishes(dry_run_copy):
    """The result is durable before its seal is logged: a kill -9 between the two leaves a result
    run.jsonl never sealed, and no summary. That is an interruption (recover seals it), not tampering."""
    root = dry_run_copy
    log = root / layout.RUN_LOG
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(lines[0])  # the run started; its seal and its end were never logged
    (root / layout.SUMMARY).unlink()
    sums = root / layout.SUMS  # the summary's entry goes with it (the sums are written after the summary)
    sums.write_text("".join(x for x in sums.read_text().splitlines(keepends=True) if not x.endswith(" summary.json\n")))
    problems = verify_experiment(root)
    assert problems and all("recover" in p or "interrupted" in p for p in problems), problems
    assert any("between its result and its seal" in p for p in problems), problems
    recover(root)
    assert verify_experiment(root) == []
