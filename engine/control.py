"""Operator control of a running trial: pause, resume, step, terminate, tag, pacing.

Commands may come from any thread (the console's UI thread, a signal handler); the loop
obeys them at decision boundaries. Time spent paused or pacing is counted apart so the
wall-time budget measures only the agent's own time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

SPEEDS: tuple[float | None, ...] = (1.0, 2.0, 4.0, None)  # None: as fast as possible


class OperatorControl:
    def __init__(self, speed: float | None = None):
        self._cond = threading.Condition()
        self._paused = False
        self._steps = 0
        self._terminate: str | None = None
        self.speed = speed
        self.held_seconds = 0.0  # paused or pacing, excluded from the wall-time budget
        self._tagger: Callable[[dict], dict] | None = None
        self._listeners: list[Callable[[str], None]] = []

    # -- commands (any thread) ---------------------------------------------------------
    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._steps = 0
            self._cond.notify_all()
        self._announce("paused")

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()
        self._announce("running")

    def toggle_pause(self) -> None:
        (self.resume if self.paused else self.pause)()

    def step(self) -> None:
        """While paused, let exactly one more decision run."""
        with self._cond:
            if not self._paused:
                return
            self._steps += 1
            self._cond.notify_all()
        self._announce("stepping")

    def terminate(self, reason: str) -> None:
        with self._cond:
            self._terminate = reason or "no reason given"
            self._cond.notify_all()

    def tag(self, annotation: dict) -> dict:
        """Append an operator annotation now, whatever the loop is doing."""
        if self._tagger is None:
            raise RuntimeError("no trial is running")
        return self._tagger(annotation)

    def set_speed(self, speed: float | None) -> None:
        with self._cond:
            self.speed = speed
            self._cond.notify_all()

    # -- state -------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def terminate_reason(self) -> str | None:
        return self._terminate

    def on_state(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def _announce(self, state: str) -> None:
        for listener in self._listeners:
            listener(state)

    # -- loop side ---------------------------------------------------------------------
    def attach(self, tagger: Callable[[dict], dict] | None) -> None:
        self._tagger = tagger

    def checkpoint(self) -> str | None:
        """Block while paused; consume one step if stepping. Return a terminate reason or None."""
        start = time.monotonic()
        with self._cond:
            while self._paused and self._steps == 0 and self._terminate is None:
                self._cond.wait(0.25)
            if self._paused and self._steps > 0:
                self._steps -= 1
        self.held_seconds += time.monotonic() - start
        return self._terminate

    def pace(self, emulated_seconds: float, started: float) -> str | None:
        """Wait until emulated_seconds / speed of real time has passed since `started`."""
        start = time.monotonic()
        with self._cond:
            while self._terminate is None and self.speed is not None:
                remaining = emulated_seconds / self.speed - (time.monotonic() - started)
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        self.held_seconds += time.monotonic() - start
        return self._terminate
