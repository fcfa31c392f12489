"""SIGINT, SIGTERM and SIGHUP: end the run at the next decision boundary, with everything written.

The first signal asks the run control to stop (a policy call in flight is cancelled and its
decision recorded as aborted); the trial ends as an invalid run and the run's summary and
sums are written as usual. A second signal exits at once with status 2 (a run that stopped
early): every record on disk is whole up to the last decision, and `oakwatch recover` finishes
the folder. The same signal again within SAME_REQUEST_S of the first is not a second request but
the first delivered twice: `timeout CMD` signals its whole process group and `uv run` forwards the
signal to its child as well, so `timeout 60 uv run oakwatch run ...` sends oakwatch two SIGTERMs at
once, which must end the run as one would.

Once the run has released a whole folder (summary and sums written, `.lock` gone), a signal changes
nothing: the process exits with the run's own status, and from `restore()` on the signals are ignored,
so no timing lets one end the process by the signal instead.

A Python signal handler runs only when the main thread runs Python; while it is stuck inside the
emulator's core it never does. The C-level handler still writes to a wakeup pipe, which a small
thread reads: `waiting()` says how long a signal has gone unhandled, for the run's watchdog.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sessions.evidence.layout import LOCK

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_AT_ONCE = 2  # docs/commands.md, "Exit status of run": a run that stopped early
SAME_REQUEST_S = 1.0  # the same signal again this soon is the first one delivered twice (timeout + uv run)


class SignalStop:
    def __init__(self, stop: Callable[[str], None], folder: Path,
                 defer: Callable[[Callable[[], None]], None] | None = None,
                 on_second: Callable[[], None] | None = None,
                 settled: Callable[[], bool] | None = None, clock: Callable[[], float] = time.monotonic):
        """`stop(name)` ends the run; `defer` runs a callback outside the signal handler (the
        console's event loop: a handler must not take a lock its own thread may hold). `settled()`
        says the run has released a whole folder (default: its `.lock` is gone, which a run removes
        last, once the summary and sums are written)."""
        self._stop = stop
        self._folder = folder
        self._settled = settled or (lambda: not (folder / LOCK).exists())
        self._defer = defer
        self._on_second = on_second
        self._count = 0
        self._clock = clock
        self._first: tuple[int, float] | None = None  # the first request's signal and when its handler ran
        self._previous: dict[int, object] = {}
        self.received: str | None = None
        self._delivered_at: float | None = None
        self._pipe: tuple[int, int] | None = None
        self._old_wakeup = -1

    def install(self) -> SignalStop:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._pipe = (read, write)
        self._old_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        threading.Thread(target=self._watch_pipe, args=(read,), name="signal-pipe", daemon=True).start()
        return self

    def _watch_pipe(self, read: int) -> None:
        try:
            while os.read(read, 64):
                if self._delivered_at is None:
                    self._delivered_at = time.monotonic()
        except OSError:
            pass

    def waiting(self) -> float | None:
        """Seconds a delivered signal has gone without its handler running; None if none waits."""
        if self._delivered_at is None or self.received is not None or self._settled():
            return None
        return time.monotonic() - self._delivered_at

    def restore(self, *, ignore_late: bool = True) -> None:
        """Stop handling signals. The run's command exits next, so by default a stop signal is
        ignored from here on: the exit status stays the run's (SIG_IGN also outlasts the
        interpreter's shutdown, which puts Python-level handlers back to the default). An
        in-process caller that goes on afterwards passes ignore_late=False."""
        for sig, handler in self._previous.items():
            signal.signal(sig, signal.SIG_IGN if ignore_late else handler)
        self._previous.clear()
        if self._pipe is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None

    def _handle(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self._settled():  # the summary and sums are written and the folder released: nothing to stop
            _say(f"oakwatch: {name}: the run has finished; exiting with its status")
            return
        now = self._clock()
        if self._first is not None and self._first[0] == signum and now - self._first[1] < SAME_REQUEST_S:
            _say(f"oakwatch: {name} again at once (timeout and uv run each send one): the same request")
            return
        self._count += 1
        if self._count == 1:
            self._first = (signum, now)
            self.received = name
            _say(f"oakwatch: {name}: ending the run at the next decision boundary "
                 f"(signal again to exit at once)")
            if self._defer is not None:
                self._defer(lambda: self._stop(name))
            else:
                self._stop(name)
            return
        _say(f"oakwatch: {name} again: exiting now (status {EXIT_AT_ONCE}); `oakwatch recover {self._folder}` "
             f"finishes the folder")
        if self._on_second is not None:
            self._on_second()
        os._exit(EXIT_AT_ONCE)


def _say(line: str) -> None:
    try:
        os.write(sys.stderr.fileno(), (line + "\n").encode())
    except (OSError, ValueError):  # the terminal is gone (SIGHUP): nothing to tell
        pass
