"""The plain display for CI and pipes: milestones as they happen, a progress line at least
every few seconds, and a summary table at the end. Never imports Textual."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from engine.events import DecisionRecorded, Event, MilestoneReached, TrialEnded, TrialStarted


class HeadlessPrinter:
    def __init__(self, out: TextIO = sys.stdout, interval: float = 5.0):
        self.out = out
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
            print(line, file=self.out, flush=True)

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
            self._print(f"trial {event.trial_key} ({event.trial_number}/{event.trials_total}) started, "
                        f"first frame {event.frame_sha256[:12]}")
        elif isinstance(event, DecisionRecorded):
            self._decision = event.trace["decision_id"]
            self._actions += event.trace["accepted_actions"]
        elif isinstance(event, MilestoneReached):
            a = event.award
            self._points += a.points
            self._print(f"  ✓ {a.milestone_id} {a.name} (+{a.points}) at decision {a.decision_id}, "
                        f"frame {a.frame_index}")
        elif isinstance(event, TrialEnded):
            r = event.result
            self._print(f"trial {r['trial_key']} ended: {r['outcome']} ({r['termination_reason']})"
                        + (f" — {r['error']}" if r.get("error") else ""))
            self._trial = ""


def summary_table(summary: dict, results: list[dict]) -> str:
    rows = [("trial", "outcome", "deepest", "points", "actions", "decisions", "cost", "end reason")]
    for r in results:
        t = r["telemetry"]
        cost = t.get("cost_usd")
        rows.append((r["trial_key"], r["outcome"], r["deepest_milestone"] or "-",
                     f"{r['progress_points']}/{r['total_points']}", str(t.get("accepted_actions", "-")),
                     str(t.get("decisions", "-")), "unknown" if cost is None else f"${cost:.4f}",
                     r["termination_reason"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    rate = summary["success_rate"]
    lines.append("")
    lines.append(f"runs: {summary['completed']}/{summary['requested']} completed, {summary['valid']} valid, "
                 f"{summary['successful']} succeeded, {summary['failed']} failed, {summary['invalid']} invalid; "
                 f"success rate {'n/a' if rate is None else f'{rate:.0%}'}"
                 + (f"; stopped early: {summary['stop_reason']}" if summary["stopped_early"] else ""))
    return "\n".join(lines)
