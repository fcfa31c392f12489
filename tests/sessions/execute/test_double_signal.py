"""`timeout … uv run oakwatch run …` (issue 34 item 2): `timeout` signals its whole process group and
`uv run` forwards the signal to oakwatch as well, so oakwatch gets SIGTERM twice at once. Two identical
signals within a moment are one request: the run ends truthfully (exit 2, the trial void, the folder
whole and verifying), never as the "exit at once" a second request means."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.commands.signals import SAME_REQUEST_S, SignalStop
from sessions.audit.recover import needs_recovery
from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.sessions.execute.test_faults import assert_whole, wait_for

ROOT = Path(__file__).resolve().parents[3]


def long_manifest(tmp_path: Path) -> Path:
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data["conditions"] = [{"id": "r", "policy": "random", "seed": 1}]
    data["budgets"] = {"accepted_actions": 100_000, "model_decisions": None, "wall_time_minutes": 10}
    data["emulator"]["speed_multiplier"] = 1  # real time: the trial is still playing when the signal comes
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def playing(out: Path) -> bool:
    return any(p.stat().st_size for p in out.glob("trials/*/trace.jsonl"))


@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv on PATH (the README's way to run oakwatch)")
def test_sigterm_to_the_process_group_of_uv_run_ends_the_run_once_and_the_folder_verifies(tmp_path):
    out = tmp_path / "out"
    # What `timeout` does on expiry: SIGTERM to its child and to its process group (it leads one of its own).
    run = subprocess.Popen(["uv", "run", "--locked", "oakwatch", "run", str(long_manifest(tmp_path)), "--headless",
                            "--output", str(out)], cwd=ROOT, start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: playing(out) or run.poll() is not None, timeout=120, what="the trial to play")
        assert run.poll() is None, run.stderr.read()
        os.killpg(run.pid, signal.SIGTERM)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 2, err  # a run stopped early
    assert "ending the run at the next decision boundary" in err and "exiting now" not in err, err
    assert not needs_recovery(out)
    assert_whole(out)
    (void,) = out.glob("void-*/*/result.json")  # the interrupted trial, invalid and recorded as such
    result = json.loads(void.read_text())
    assert (result["outcome"], result["termination_reason"]) == ("harness-error", "signal")


def test_two_sigterms_sent_back_to_back_are_one_request(tmp_path):
    """The same without uv: the two deliveries, sent by hand, to `python -m app.cli run`."""
    out = tmp_path / "out"
    run = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(long_manifest(tmp_path)), "--headless",
                            "--output", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    try:
        wait_for(lambda: playing(out) or run.poll() is not None, timeout=120, what="the trial to play")
        os.kill(run.pid, signal.SIGTERM)
        os.kill(run.pid, signal.SIGTERM)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 2 and "exiting now" not in err, err  # (the kernel may merge the two into one)
    assert_whole(out)


class Second(Exception):
    """Raised by on_second in place of the process exiting (the handler exits right after it)."""


@pytest.mark.parametrize(("second", "after", "at_once"), [
    (signal.SIGTERM, 0.0, False),  # the same signal at once: one request
    (signal.SIGTERM, SAME_REQUEST_S * 0.9, False),
    (signal.SIGTERM, SAME_REQUEST_S, True),  # a moment later: the operator asks again
    (signal.SIGINT, 0.0, True),  # another signal is another request, however soon
])
def test_what_counts_as_a_second_request(tmp_path, second, after, at_once):
    """Real signals, raised in this process, on a clock the test steps."""
    now = [100.0]
    stops: list[str] = []

    def again():
        raise Second

    stop = SignalStop(stops.append, tmp_path, on_second=again, settled=lambda: False, clock=lambda: now[0]).install()
    try:
        signal.raise_signal(signal.SIGTERM)
        now[0] += after
        if at_once:
            with pytest.raises(Second):
                signal.raise_signal(second)
        else:
            signal.raise_signal(second)
            signal.raise_signal(signal.SIGTERM)  # and a third at once too
    finally:
        stop.restore(ignore_late=False)
    assert stops == ["SIGTERM"] and stop.received == "SIGTERM"
