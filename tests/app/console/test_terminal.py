"""The real entry path in a real terminal (tmux): `oakwatch run` on a TTY opens the console,
draws the panes, and `q` or a real Ctrl-C ends the run cleanly with a folder that verifies;
a real Ctrl-C in a headless run does the same."""

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from sessions.audit.verify import verify_experiment
from sessions.evidence.records import Summary
from tests.conftest import write_manifest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


def _screen(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def _wait(session: str, text: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        screen = _screen(session)
        if text in screen:
            return screen
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never appeared on the terminal:\n{_screen(session)}")


def _session(tmp_path, args: str) -> tuple[str, object]:
    out = tmp_path / "exp"
    session = f"oakwatch-{uuid.uuid4().hex[:8]}"
    command = (f"XDG_CONFIG_HOME={tmp_path} {sys.executable} -m app.cli run {args} --output {out}; "
               f"echo EXIT=$?; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", command], check=True)
    return session, out


def _stopped_by(out, reason: str) -> None:
    """The run stopped early for `reason`, its one trial invalid and voided, and the folder whole."""
    assert verify_experiment(out) == []
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    assert (summary.stopped_early, summary.stop_reason, summary.invalid) == (True, reason, 1)
    assert summary.success_rate is None  # an operator's stop is never counted as the agent's failure


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_console_opens_in_a_terminal_and_quits_cleanly(tmp_path, key):
    session, out = _session(tmp_path, "--speed 4")
    try:
        screen = _wait(session, "✓ M1")  # the ladder shows a verified milestone
        for pane in ("Frame", "Budgets", "Milestones", "Memory", "Trace"):
            assert f"─ {pane} " in screen
        assert "condition X" in screen and "walkthrough" not in screen.split("\n")[0]  # blinded label only
        subprocess.run(["tmux", "send-keys", "-t", session, key], check=True)
        screen = _wait(session, "EXIT=")
        assert "EXIT=2" in screen  # the trial was ended by the operator: invalid, to be rerun
        assert "Traceback" not in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    _stopped_by(out, "operator-quit")


def test_ctrl_c_in_a_terminal_ends_a_headless_run_cleanly(tmp_path):
    """The terminal sends SIGINT to the whole foreground process group. Every budget is lifted: with
    the default model_decisions (1200) the random trial ended by itself in a second or two, so a
    Ctrl-C that a loaded machine delivered late found a finished run (a valid game-failure, EXIT=1)."""
    manifest = write_manifest(tmp_path, conditions=[{"id": "rnd", "policy": "random", "seed": 5}],
                              budgets={"accepted_actions": None, "model_decisions": None, "wall_time_minutes": None,
                                       "unrecoverable_loop_repeats": None})
    session, out = _session(tmp_path, f"--headless {manifest}")
    try:
        _wait(session, "started, first frame")
        trace = next(out.glob("trials/*/trace.jsonl"))
        deadline = time.monotonic() + 60
        while trace.read_bytes().count(b"\n") < 20 and time.monotonic() < deadline:  # decisions are being made
            time.sleep(0.05)
        subprocess.run(["tmux", "send-keys", "-t", session, "C-c"], check=True)
        screen = _wait(session, "EXIT=")
        assert "EXIT=2" in screen and "Traceback" not in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    _stopped_by(out, "signal")
