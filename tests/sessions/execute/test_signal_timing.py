"""A second signal at every moment of a run's end gives an exit status by the README's rules
(issue 20, item 5): before the summary is written it exits at once with status 2 and `oakwatch
recover` finishes the folder; once the summary and sums are written and the folder released, a
signal changes nothing and the process exits with the run's own status (it used to end the
process by the signal, or as an "interrupted" 130).

The moments are held deterministically without any hook: the run's stdout is a one-page pipe the
test fills, so the process blocks in its next print, and the test sees where from the folder and
from /proc (the main thread waiting in `pipe_write`). Its first print after the signal handlers
are installed is the "experiment → folder" line, its next one (when the run is stopped before its
first trial) is the summary table, written after the summary, the sums and the lock's removal.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.commands.signals import SAME_REQUEST_S
from sessions.audit.recover import recover
from sessions.evidence import layout
from sessions.evidence.records import Summary
from tests.sessions.execute.test_faults import assert_whole, wait_for

PAGE = 4096


def _wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return ""


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _need_wchan() -> None:
    """Where a sleeping process waits must be visible (some kernels show only "0")."""
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        for _ in range(200):
            if _wchan(sleeper.pid) not in ("", "0"):
                return
            time.sleep(0.01)
        pytest.skip("/proc/<pid>/wchan does not say where a process waits here")
    finally:
        sleeper.kill()
        sleeper.wait()


class HeldRun:
    """`oakwatch run --headless` whose stdout is a one-page pipe, full before it starts."""

    def __init__(self, out: Path):
        _need_wchan()
        self.out = out
        self.read_end, self.write_end = os.pipe()
        if fcntl.fcntl(self.write_end, fcntl.F_SETPIPE_SZ, PAGE) != PAGE:
            pytest.skip("cannot make a one-page pipe here")
        os.write(self.write_end, b"." * PAGE)  # full: the run's first print blocks
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", "--headless", "--output", str(out)],
                                     stdout=self.write_end, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True)
        self._reader.start()

    def blocked_in_a_print(self) -> bool:
        return _wchan(self.proc.pid).endswith("pipe_write")  # "anon_pipe_write" on newer kernels

    def said(self, text: str) -> bool:
        return any(text in line for line in list(self.stderr))

    def let_one_line_through(self, line: bytes) -> None:
        """Stopped, the process cannot write: empty the pipe, then leave room for exactly `line`."""
        self.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: _state(self.proc.pid) == "T", what="the run to stop")
        drained = 0
        while drained < PAGE:
            drained += len(os.read(self.read_end, PAGE - drained))
        os.write(self.write_end, b"." * (PAGE - len(line)))
        self.proc.send_signal(signal.SIGCONT)

    def finish(self, timeout: float = 120) -> tuple[int, bytes]:
        """Let the process print the rest and end; its status and what it printed."""
        os.close(self.write_end)
        chunks = []
        while chunk := os.read(self.read_end, 1 << 16):
            chunks.append(chunk)
        os.close(self.read_end)
        code = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=30)
        return code, b"".join(chunks)


def _at_the_first_print_after_the_handlers(run: HeldRun) -> None:
    wait_for(lambda: run.out.is_dir() and run.blocked_in_a_print() or run.proc.poll() is not None,
             timeout=120, what="the run to block in its first print")
    assert run.proc.poll() is None, run.stderr


def test_a_second_signal_before_the_summary_exits_at_once_with_status_2_and_recover_finishes(tmp_path):
    run = HeldRun(tmp_path / "out")
    _at_the_first_print_after_the_handlers(run)
    run.proc.send_signal(signal.SIGINT)
    wait_for(lambda: run.said("ending the run at the next decision boundary"), what="the first signal's answer")
    assert not (run.out / layout.SUMMARY).exists()  # held: the run cannot reach its summary
    time.sleep(SAME_REQUEST_S)  # the same signal sooner would be the first one delivered twice (timeout + uv)
    run.proc.send_signal(signal.SIGINT)
    code = run.proc.wait(timeout=60)  # at once: nothing more was let through the pipe
    run.finish()
    assert code == 2, run.stderr
    assert run.said("again: exiting now") and not run.said("Traceback")
    assert (run.out / layout.LOCK).exists() and not (run.out / layout.SUMMARY).exists()
    recover(run.out)
    assert_whole(run.out)


@pytest.mark.parametrize("late", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_after_the_summary_is_written_exits_with_the_runs_status(tmp_path, late):
    run = HeldRun(tmp_path / "out")
    _at_the_first_print_after_the_handlers(run)
    run.proc.send_signal(signal.SIGINT)  # the first: stops the run before its first trial
    wait_for(lambda: run.said("ending the run at the next decision boundary"), what="the first signal's answer")
    experiment_id = json.loads((run.out / layout.SCHEDULE).read_text())["experiment_id"]
    run.let_one_line_through(f"oakwatch: experiment {experiment_id} → {run.out}\n".encode())
    # Its next print is the summary table: held there, with the summary and sums written and the folder released.
    wait_for(lambda: (run.out / layout.SUMMARY).exists() and not (run.out / layout.LOCK).exists()
             and run.blocked_in_a_print() or run.proc.poll() is not None, what="the run to block after its summary")
    assert run.proc.poll() is None, run.stderr
    run.proc.send_signal(late)
    code, printed = run.finish()
    assert code == 2, (code, run.stderr)  # the run's own status: stopped early by the first signal
    assert b"stopped early: signal" in printed and not run.said("Traceback")
    assert_whole(run.out)
    summary = Summary.model_validate_json((run.out / layout.SUMMARY).read_text())
    assert (summary.stopped_early, summary.stop_reason) == (True, "signal")


def test_a_ctrl_c_before_the_runs_handlers_are_installed_still_finishes_the_folder(tmp_path, monkeypatch):
    """The folder exists a moment before the run's handlers do (imports, the console's setup): a Ctrl-C
    there used to leave a locked folder and exit 130. It is a signal stop before the first trial now.
    (The moment cannot be held from outside; the interrupt is raised where it would land.)"""
    import app.cli as cli
    from app.commands import run_cli

    def interrupted(*args, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_cli, "_start", interrupted)
    out = tmp_path / "out"
    assert cli.main(["run", "--headless", "--output", str(out)]) == 2
    assert_whole(out)
    summary = Summary.model_validate_json((out / layout.SUMMARY).read_text())
    assert (summary.stopped_early, summary.stop_reason, summary.missing_positions) == (True, "signal", [0])
