"""The watchdog: ends a run whose emulator stopped returning, with everything written.

PyBoy's core runs without the GIL, and a game can send it into a loop it never leaves (an
illegal opcode spins in place). The loop thread is then stuck inside the emulator for good: no
decision boundary comes, and a signal's Python handler never runs. This thread sees it (the
trial marks when it enters the emulator) and, after `hang_seconds`, or a few seconds after a
signal that could not be delivered, finishes the trial and the run from here, truthfully
(`emulator-error`, invalid cause `emulator-fault`), then exits the process: the stuck thread
cannot be stopped any other way.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

HANG_SECONDS = 20.0  # one action is ~1 ms of emulation; this is a hang, not a slow machine
SIGNAL_GRACE = 3.0  # a signal nobody handled for this long means the loop thread is stuck
EXIT_STATUS = 2


class Watchdog(threading.Thread):
    def __init__(self, runner, *, hang_seconds: float = HANG_SECONDS,
                 signal_waiting: Callable[[], float | None] | None = None,
                 before_exit: Callable[[], None] | None = None, poll: float = 0.25):
        super().__init__(name="watchdog", daemon=True)
        self.runner = runner
        self.hang_seconds = hang_seconds
        self.signal_waiting = signal_waiting or (lambda: None)
        self.before_exit = before_exit
        self.poll = poll
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        while not self._stop.wait(self.poll):
            trial = self.runner.current_trial
            busy = trial.emulator_busy_since if trial is not None else None
            if busy is None:
                continue
            stuck_for = time.monotonic() - busy
            waiting = self.signal_waiting()
            if stuck_for >= self.hang_seconds or (waiting is not None and waiting >= SIGNAL_GRACE
                                                   and stuck_for >= SIGNAL_GRACE):
                self._abandon(trial, stuck_for)
                return

    def _abandon(self, trial, stuck_for: float) -> None:
        detail = (f"the emulator stopped responding: no return for {stuck_for:.0f} s during decision "
                  f"{trial.tally.decisions + 1} (a game that hangs the emulator's core)")
        try:
            self.runner.abandon_hung(trial, detail)
            message = f"oakwatch: {detail}; the trial is recorded as harness-error (emulator-fault)"
        except BaseException as exc:  # whatever happens, the process must not stay stuck
            message = (f"oakwatch: {detail}; finishing the folder failed ({type(exc).__name__}: {exc}); "
                       f"`oakwatch recover {self.runner.folder.root}` finishes it")
        if self.before_exit is not None:
            try:
                self.before_exit()
            except Exception:
                pass
        try:
            os.write(sys.stderr.fileno(), (message + "\n").encode())
        except (OSError, ValueError):
            pass
        os._exit(EXIT_STATUS)
