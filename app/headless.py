"""The plain display for CI and pipes: milestones as they happen, a progress line at least
every few seconds, and a summary table at the end. Never imports Textual."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from engine.events import DecisionRecorded, Event, MilestoneReached, TrialEnded, TrialStarted
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


class HeadlessPrinter:
    def __init__(self, out: TextIO = sys.stdout, interval: float = 5.0):
        self.out = out
        self.closed = False  # the reader went away (a closed pipe): the run goes on, silently
        self.interval = interval
        self._lock = threading.Lock()
        self._trial = ""
        self._decision = 0
        self._actions = 0
        self._points = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)

    def start(self) -> None:
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()

    def _print(self, line: str) -> None:
        with self._lock:
            if not self.closed:
                self.closed = not print_line(line, self.out)

    def _tick(self) -> None:
        # A timer thread, so the progress line keeps coming even while one decision is slow.
        while not self._stop.wait(self.interval):
            if self._trial:
                elapsed = time.monotonic() - self._started
                self._print(f"  … {self._trial}: decision {self._decision}, {self._actions} actions, "
                            f"{self._points} points, {elapsed:.0f}s elapsed")

    def handle(self, event: Event) -> None:
        if isinstance(event, TrialStarted):
            self._trial, self._decision, self._actions, self._points = event.trial_key, 0, 0, 0
            self._print(trial_started_line(event.trial_key, event.position + 1, event.schedule_length,
                                           event.frame_sha256))
        elif isinstance(event, DecisionRecorded):
            self._decision = event.trace.decision_id
            self._actions += event.trace.accepted_actions
        elif isinstance(event, MilestoneReached):
            a = event.award
            self._points += a.points
            self._print(f"  ✓ {milestone_line(a.model_dump())}")
        elif isinstance(event, TrialEnded):
            self._print(trial_ended_line(event.result.model_dump()))
            self._trial = ""


def summary_table(summary, results: list) -> str:
    """The trials run (engine.records.TrialResult) and the series (sessions.records.Summary)."""
    rows = [("trial", "outcome", "deepest", "points", "actions", "decisions", "cost", "end reason")]
    for r in results:
        t = r.telemetry
        cost = t.cost_usd if t else None
        why = r.termination_reason + (f" ({r.invalid_cause})" if r.invalid_cause else "")
        rows.append((r.trial_key, r.outcome, r.deepest_milestone or "-", f"{r.progress_points}/{r.total_points}",
                     str(t.accepted_actions) if t else "-", str(t.decisions) if t else "-",
                     "unknown" if cost is None else f"${cost:.4f}", why))
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
