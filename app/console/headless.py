"""The plain display for CI and pipes: milestones as they happen, a progress line at least
every few seconds, and a summary table at the end. Never imports Textual."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from engine.figures import money
from engine.loop.display import Display
from engine.loop.events import DecisionRecorded, Event, MilestoneReached, TrialEnded, TrialStarted
from panes.lines import milestone_line, trial_ended_line, trial_started_line


def print_line(line: str, out: TextIO = sys.stdout) -> bool:
    """Print and flush; False if the output is gone. A display never takes the run down with it."""
    try:
        print(line, file=out, flush=True)
        return True
    except (OSError, ValueError):  # reader closed the pipe, terminal hung up, stream already closed
        if out is sys.stdout:  # keep the interpreter's own final flush from complaining
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return False


class HeadlessPrinter(Display):
    """One line per trial event (started, milestone, ended), each naming its trial, so trials run
    at once (`--workers N`) interleave readably; on a terminal, a live overall line kept at the
    bottom (trials done, running, left; actions per second; spend so far), redrawn in place; off
    a terminal (CI, a pipe) no live line, only a plain progress line every `interval` seconds."""

    def __init__(self, out: TextIO = sys.stdout, interval: float = 5.0, schedule: int | None = None,
                 live: bool | None = None):
        self.out = out
        self.closed = False  # the reader went away (a closed pipe): the run goes on, silently
        self.interval = interval
        self.schedule = schedule  # trials this run means to run (None: learnt from TrialStarted)
        if live is None:
            try:
                live = out.isatty()
            except (AttributeError, ValueError):
                live = False
        self.live = live
        self._lock = threading.Lock()
        self._running: dict[str, list[int]] = {}  # trial key -> [decision, actions, points]
        self._done = 0
        self._actions = 0
        self._spend: float | None = 0.0
        self._started = time.monotonic()
        self._status_shown = False
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)

    def start(self) -> None:
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._clear_status()

    # -- output ---------------------------------------------------------------------------------
    def _clear_status(self) -> None:
        if self._status_shown and not self.closed:
            try:
                self.out.write("\r\x1b[2K")
                self.out.flush()
            except (OSError, ValueError):
                self.closed = True
        self._status_shown = False

    def _print(self, line: str) -> None:
        with self._lock:
            if self.closed:
                return
            self._clear_status()
            self.closed = not print_line(line, self.out)
            if self.live and not self.closed:
                self._draw_status()

    def _draw_status(self) -> None:
        try:
            self.out.write("\r\x1b[2K" + self.overall_line())
            self.out.flush()
            self._status_shown = True
        except (OSError, ValueError):
            self.closed = True

    def overall_line(self) -> str:
        """trials done, running, left; actions per second; spend so far."""
        elapsed = max(1e-9, time.monotonic() - self._started)
        running = len(self._running)
        left = max(0, self.schedule - self._done - running) if self.schedule is not None else None
        actions = self._actions + sum(v[1] for v in self._running.values())
        return (f"trials: {self._done} done, {running} running, {'?' if left is None else left} left · "
                f"{actions / elapsed:,.0f} actions/s · spend {money(self._spend)} · {elapsed:.0f}s")

    def _tick(self) -> None:
        # A timer thread, so progress keeps coming even while one decision is slow.
        step = 0.5 if self.live else self.interval
        while not self._stop.wait(step):
            with self._lock:
                if self.closed:
                    continue
                if self.live:
                    self._draw_status()
                    continue
                running = sorted(self._running.items())
            if running and not self.live:
                elapsed = time.monotonic() - self._started
                detail = "; ".join(f"{k}: decision {v[0]}, {v[1]} actions, {v[2]} points" for k, v in running)
                self._print(f"  … {detail} · {self.overall_line() if len(running) > 1 else f'{elapsed:.0f}s elapsed'}")

    # -- events ---------------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        key = getattr(event, "trial_key", None)
        if isinstance(event, TrialStarted):
            with self._lock:
                self._running[event.trial_key] = [0, 0, 0]
                if self.schedule is None:
                    self.schedule = event.schedule_length
            self._print(trial_started_line(event.trial_key, event.position + 1, event.schedule_length,
                                           event.frame_sha256))
        elif isinstance(event, DecisionRecorded):
            with self._lock:
                row = self._row(key)
                if row is not None:
                    row[0] = event.trace.decision_id
                    row[1] += event.trace.accepted_actions
                cost = event.trace.provider_cost_usd
                if event.trace.paid_calls and self._spend is not None:
                    self._spend = None if cost is None else self._spend + cost
        elif isinstance(event, MilestoneReached):
            a = event.award
            with self._lock:
                row = self._row(key)
                if row is not None:
                    row[2] += a.points
            prefix = f"{key}: " if key and len(self._running) > 1 else ""
            self._print(f"  ✓ {prefix}{milestone_line(a.model_dump())}")
        elif isinstance(event, TrialEnded):
            r = event.result
            with self._lock:
                row = self._running.pop(r.trial_key, None)
                self._done += 1
                t = r.telemetry
                self._actions += t.accepted_actions if t else (row[1] if row else 0)
            self._print(trial_ended_line(r.model_dump()))

    def _row(self, key: str | None) -> list[int] | None:
        if key is not None:
            return self._running.get(key)
        if len(self._running) == 1:  # the serial run: events name no trial, one runs at a time
            return next(iter(self._running.values()))
        return None


def summary_table(summary, results: list) -> str:
    """The trials run (engine.loop.records.TrialResult) and the series (sessions.evidence.records.Summary)."""
    rows = [("trial", "outcome", "deepest", "points", "actions", "decisions", "cost", "end reason")]
    for r in results:
        t = r.telemetry
        cost = t.cost_usd if t else None
        why = r.termination_reason + (f" ({r.invalid_cause})" if r.invalid_cause else "")
        rows.append((r.trial_key, r.outcome, r.deepest_milestone or "-", f"{r.progress_points}/{r.total_points}",
                     str(t.accepted_actions) if t else "-", str(t.decisions) if t else "-",
                     money(cost), why))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    rate = summary.success_rate
    lines.append("")
    lines.append(f"runs: {summary.completed}/{summary.requested} positions hold a valid trial, "
                 f"{summary.successful} succeeded, {summary.failed} failed, {summary.invalid} invalid attempt(s); "
                 f"success rate {'n/a' if rate is None else f'{rate:.0%}'}"
                 + (f"; stopped early: {summary.stop_reason}" if summary.stopped_early else ""))
    return "\n".join(lines)
