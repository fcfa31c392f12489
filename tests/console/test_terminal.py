"""The real entry path in a real terminal (tmux): `oakwatch run` on a TTY opens the console,
draws the panes, and `q` ends the run cleanly with a folder that verifies."""

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from sessions.verify import verify_experiment

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


def test_console_opens_in_a_terminal_and_quits_cleanly(tmp_path):
    out = tmp_path / "exp"
    session = f"oakwatch-{uuid.uuid4().hex[:8]}"
    command = (f"XDG_CONFIG_HOME={tmp_path} {sys.executable} -m app.cli run --speed 4 --output {out}; "
               f"echo EXIT=$?; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", command], check=True)
    try:
        screen = _wait(session, "✓ M1")  # the ladder shows a verified milestone
        for pane in ("Frame", "Budgets", "Milestones", "Memory", "Trace"):
            assert f"─ {pane} " in screen
        assert "condition X" in screen and "walkthrough" not in screen.split("\n")[0]  # blinded label only
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        screen = _wait(session, "EXIT=")
        assert "EXIT=1" in screen  # the one trial ended by the operator: a valid game-failure
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert verify_experiment(out) == []
