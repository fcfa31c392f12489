"""Operator control of a run: one long-lived object for every trial of it.

Commands (pause, resume, step, end the trial, stop the run, tag, pacing) may come from any
thread: the console's UI thread, a signal handler. The loop obeys them at decision
boundaries; a request to end interrupts a policy call in flight through the canceller the
trial registers. Pause and pacing outlive a trial (a pause pressed between trials holds the
next one); an end request belongs to the trial it was made in.

States: running -> paused <-> stepping, and any -> stopping (the run is ending). Time spent
paused or pacing is counted apart so the wall-time budget measures only the agent's time.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable

from engine.loop.outcomes import EndRequest

SPEEDS: tuple[float | None, ...] = (1.0, 2.0, 4.0, None)  # None: as fast as possible

RUNNING, PAUSED, STEPPING, STOPPING = "running", "paused", "stepping", "stopping"
HOLD = object()  # checkpoint(wait=False): it would have held

Tagger = Callable[[dict, bool], object]  # (annotation, commit) -> the record; raises to refuse


class TagForAnotherTrial(LookupError):
    """The tag was begun in a trial that is no longer the one running."""


class RunControl:
    def __init__(self, speed: float | None = None):
        self._cond = threading.Condition()
        self._state = RUNNING
        self._steps = 0
        self._end: EndRequest | None = None  # for the current trial
        self._stop: EndRequest | None = None  # for the whole run
        self.speed = speed
        self.held_seconds = 0.0  # this trial's paused or pacing time, excluded from wall time
        self._tagger: Tagger | None = None
        self._late_tagger: Tagger | None = None  # tags for a trial that has ended
        self._canceller: Callable[[], None] | None = None
        self._listeners: list[Callable[[str], None]] = []
        self._announced = RUNNING  # the last state the listeners heard

    # -- commands (any thread) ------------------------------------------------------------------
    def pause(self) -> None:
        self._transition(lambda: PAUSED if self._state != STOPPING else None)

    def resume(self) -> None:
        self._transition(lambda: RUNNING if self._state in (PAUSED, STEPPING) else None)

    def toggle_pause(self) -> None:
        (self.resume if self.paused else self.pause)()

    def step(self) -> None:
        """While paused, let exactly one more decision run."""
        def to() -> str | None:
            if self._state not in (PAUSED, STEPPING):
                return None
            self._steps += 1
            return STEPPING
        self._transition(to)

    def end_trial(self, detail: str, *, by_player: bool = False) -> EndRequest:
        """End the current trial: an operator's abort (invalid), or a human player's own end."""
        request = EndRequest("player-ended" if by_player else "operator-abort", detail or "no reason given")
        with self._cond:
            if self._end is None:
                self._end = request
            self._cond.notify_all()
        self._cancel()
        return request

    def end_trial_as(self, request: EndRequest) -> None:
        """End the current trial for a reason of its own (a tool server's client that disconnected);
        the loop sees it at its next boundary. The first end request wins."""
        with self._cond:
            if self._end is None:
                self._end = request
            self._cond.notify_all()

    def stop_run(self, reason: str, detail: str | None = None, cause: str | None = None) -> None:
        """End the current trial and start no other (operator quit, a signal). The first reason wins."""
        with self._cond:
            if self._stop is None:
                self._stop = EndRequest(reason, detail, cause, stop_run=True)
            self._state = STOPPING
            self._cond.notify_all()
        self._cancel()
        self._announce(STOPPING)

    def tag(self, annotation: dict, commit: bool = True):
        """Record an operator annotation now, whatever the loop is doing (commit=False only checks
        it). A tag begun in a trial that has since ended goes to the late tagger."""
        tagger = self._tagger
        if tagger is not None:
            try:
                return tagger(annotation, commit)
            except TagForAnotherTrial:
                pass
        if self._late_tagger is not None:
            return self._late_tagger(annotation, commit)
        raise RuntimeError("no trial is running")

    def set_late_tagger(self, tagger: Tagger | None) -> None:
        self._late_tagger = tagger

    def set_speed(self, speed: float | None) -> None:
        with self._cond:
            self.speed = speed
            self._cond.notify_all()

    # -- state ----------------------------------------------------------------------------------
    @property
    def state(self) -> str:
        return self._state

    @property
    def paused(self) -> bool:
        return self._state in (PAUSED, STEPPING)

    @property
    def stopping(self) -> bool:
        return self._stop is not None

    @property
    def request(self) -> EndRequest | None:
        """What ends the current trial now, if anything: a run stop outranks a trial end."""
        return self._stop or self._end

    @property
    def stop_request(self) -> EndRequest | None:
        return self._stop

    def on_state(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def _transition(self, to: Callable[[], str | None]) -> None:
        with self._cond:
            new = to()
            if new is None:
                return
            if new == RUNNING:
                self._steps = 0
            self._state = new
            self._cond.notify_all()
        self._announce(new)

    def _announce(self, state: str) -> None:
        self._announced = state
        for listener in list(self._listeners):
            listener(state)

    def _cancel(self) -> None:
        canceller = self._canceller
        if canceller is not None:
            canceller()

    # -- loop side ------------------------------------------------------------------------------
    def begin_trial(self, tagger: Tagger | None,
                    canceller: Callable[[], None] | None = None) -> None:
        with self._cond:
            self._end = None
            self.held_seconds = 0.0
            self._tagger = tagger
            self._canceller = canceller

    def end_of_trial(self) -> None:
        with self._cond:
            self._tagger = None
            self._canceller = None

    def checkpoint(self, *, wait: bool = True, since: float | None = None) -> EndRequest | None | object:
        """Block while paused; consume one step if stepping. Return what ends the trial, or None.
        Holding again after a step is announced (paused): the step is over, and every display says so.
        wait=False: return HOLD instead of blocking (nothing consumed, nothing counted), for
        checkpoint_async; `since`: when the hold began (it is counted from then)."""
        start = time.monotonic() if since is None else since
        with self._cond:
            stepped = self._state == PAUSED and self._announced == STEPPING and self.request is None
        if stepped:
            self._announce(PAUSED)
        with self._cond:
            while self._state == PAUSED and self.request is None:
                if not wait:
                    return HOLD
                self._cond.wait(0.25)
            if self._state == STEPPING and self.request is None:
                self._steps -= 1
                if self._steps <= 0:
                    self._steps = 0
                    self._state = PAUSED  # the stepped decision runs; the next checkpoint holds
        self.held_seconds += time.monotonic() - start
        return self.request

    async def checkpoint_async(self) -> EndRequest | None:
        """checkpoint() for an event loop that serves others too (oakwatch mcp plays and serves on one
        loop): a hold waits in a worker thread, so the loop goes on serving; anything else is inline,
        with no thread hop on the way of every decision."""
        if self._state == RUNNING:  # the usual case, once a decision: nothing to hold, step or announce
            return self.request
        start = time.monotonic()
        request = self.checkpoint(wait=False)
        if request is HOLD:  # held from now, not from when the worker thread gets to it
            return await asyncio.to_thread(functools.partial(self.checkpoint, since=start))
        return request  # type: ignore[return-value]

    async def pace_async(self, emulated_seconds: float, started: float) -> EndRequest | None:
        """pace(), waiting in a worker thread only when there is a wait (as checkpoint_async)."""
        speed, start = self.speed, time.monotonic()
        if speed is None or emulated_seconds / speed <= start - started:
            return self.request
        return await asyncio.to_thread(self.pace, emulated_seconds, started, since=start)

    def hold(self, seconds: float) -> EndRequest | None:
        """Wait `seconds` (a provider's backoff), counted apart from the agent's time; an end
        request cuts the wait short and is returned."""
        start = time.monotonic()
        with self._cond:
            while self.request is None:
                remaining = seconds - (time.monotonic() - start)
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        self.held_seconds += time.monotonic() - start
        return self.request

    def pace(self, emulated_seconds: float, started: float, since: float | None = None) -> EndRequest | None:
        """Wait until emulated_seconds / speed of real time has passed since `started`; the wait is
        counted apart from `since` (default: now)."""
        start = time.monotonic() if since is None else since
        with self._cond:
            while self.request is None and self.speed is not None:
                remaining = emulated_seconds / self.speed - (time.monotonic() - started)
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
        self.held_seconds += time.monotonic() - start
        return self.request

