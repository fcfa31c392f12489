"""The console's sink: the run thread publishes events here, the UI pulls snapshots on timers.

`handle` is called on the run (worker) thread for every event and must stay cheap: it only
stores references under a lock and bumps version counters. Trace items wait in a bounded
buffer and are formatted on the UI thread when the trace pane drains them. Never imports
Textual (so it can be tested and benchmarked without an app).

Blinding: the console shows the condition's blinded label, never a model's identity. Trace
items carry the TraceLine (whose `model_id` no pane shows); the model ids the run reports are
collected, and free text that may quote them (an ended trial's error and detail, run state
details, console notes) is shown with them replaced by MODEL_REDACTED.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.loop.display import Display
from engine.loop.events import (
    AnnotationAdded,
    BudgetUpdated,
    DecisionRecorded,
    EpisodeStarted,
    Event,
    FrameCaptured,
    MemoryChanged,
    MilestoneReached,
    StateChanged,
    TrialEnded,
    TrialStarted,
)

TRACE_BUFFER = 5_000  # pending trace items kept between drains; older ones are dropped
MODEL_REDACTED = "[model]"


@dataclass
class FrameSnapshot:
    frame: np.ndarray
    decision_id: int
    frame_sha256: str
    frame_index: int
    version: int


@dataclass
class StatusSnapshot:
    experiment_id: str
    label: str | None = None
    trial_key: str | None = None
    schedule_index: int | None = None  # this trial's place in the whole schedule, from 1
    trials_total: int | None = None  # trials in the schedule, across conditions
    state: str = "starting"  # starting, running, paused, stepping, ended, quitting, finished
    detail: str | None = None
    decisions: int = 0
    elapsed: float = 0.0
    error: str | None = None
    frame_sha256: str | None = None  # the frame the last recorded decision ended on
    frame_index: int | None = None


@dataclass
class LadderSnapshot:
    milestones: tuple[tuple[str, str, int], ...] = ()
    pre_satisfied: tuple[str, ...] = ()
    awards: dict[str, dict] = field(default_factory=dict)  # id -> MilestoneAward as a dict
    version: int = 0
    optional: tuple[str, ...] = ()


@dataclass
class MemorySnapshot:
    facts: tuple[dict, ...] = ()
    contradictions: tuple[tuple[str, ...], ...] = ()
    last_read: tuple[str, ...] = ()
    version: int = 0


class ConsoleSink(Display):
    """Thread-safe latest state of the run, plus a bounded buffer of pending trace items."""

    # The loop builds these events only for sinks that show them.
    wants_budgets = wants_frames = wants_memory_store = True

    def __init__(self, experiment_id: str = "", clock: Callable[[], float] = time.monotonic):
        self._lock = threading.Lock()
        self.clock = clock
        self._started = clock()
        self._stopped: float | None = None  # the elapsed clock stops when the run is over
        self._experiment_id = experiment_id
        self._frame: FrameSnapshot | None = None
        self._frame_version = 0
        self._budgets: dict = {}
        self._budgets_version = 0
        self._ladder = LadderSnapshot()
        self._memory = MemorySnapshot()
        self._status = StatusSnapshot(experiment_id)
        self._status_version = 0
        self._pending: deque[tuple[str, object]] = deque(maxlen=TRACE_BUFFER)
        self.dropped_trace = 0  # items pushed out of the buffer before the UI drained them
        self.events = 0
        self.results: list[dict] = []
        self.handle_errors: list[str] = []
        self._model_ids: set[str] = set()  # every model id the run reported (redacted from shown text)
        self._redacted: list[str] = []  # those ids, longest first

    # -- run thread ------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        try:
            self._handle(event)
        except Exception as exc:  # a display must never break the run or its evidence
            if len(self.handle_errors) < 20:
                self.handle_errors.append(f"{type(event).__name__}: {type(exc).__name__}: {exc}")

    def _push(self, kind: str, payload: object) -> None:
        if len(self._pending) == self._pending.maxlen:
            self.dropped_trace += 1
        self._pending.append((kind, payload))

    def _handle(self, event: Event) -> None:
        with self._lock:
            self.events += 1
            if isinstance(event, FrameCaptured):
                self._set_frame(event.frame, event.decision_id, event.frame_sha256, event.frame_index)
            elif isinstance(event, DecisionRecorded):
                self._on_decision(event)
            elif isinstance(event, BudgetUpdated):
                self._budgets = event.budgets
                self._budgets_version += 1
            elif isinstance(event, MemoryChanged):
                m = self._memory
                facts = m.facts if event.facts is None else event.facts  # None: a read, store unchanged
                conflicts = m.contradictions if event.contradictions is None else event.contradictions
                self._memory = MemorySnapshot(facts, conflicts, event.last_read, m.version + 1)
            elif isinstance(event, MilestoneReached):
                record = event.award.model_dump()
                lad = self._ladder
                self._ladder = LadderSnapshot(lad.milestones, lad.pre_satisfied,
                                              {**lad.awards, record["id"]: record}, lad.version + 1, lad.optional)
                self._push("milestone", record)
            elif isinstance(event, AnnotationAdded):
                self._push("annotation", event.record.model_dump())
            elif isinstance(event, StateChanged):
                self._status.state = event.state
                self._status.detail = self._redact(event.detail)
                self._status_version += 1
                if event.state != "ended":
                    self._push("state", event.state)
            elif isinstance(event, TrialStarted):
                self._on_trial_started(event)
            elif isinstance(event, EpisodeStarted):  # the start state again, within the same trial
                self._set_frame(event.frame, self._status.decisions, event.frame_sha256, event.frame_index)
                self._push("episode", {"episode": event.episode, "budget": event.budget,
                                       "previous_ended": event.previous_ended, "frame_sha256": event.frame_sha256})
            elif isinstance(event, TrialEnded):
                self._on_trial_ended(event)

    def _on_decision(self, event: DecisionRecorded) -> None:
        """A decision: any new model id noted (for redaction), the status and frame moved on."""
        t = event.trace  # a TraceLine: formatted on the UI thread, not here
        if t.model_id is not None and t.model_id not in self._model_ids:
            self._note_model(t.model_id)
        for attempt in event.response.attempts:
            if attempt.model_id is not None and attempt.model_id not in self._model_ids:
                self._note_model(attempt.model_id)
        self._status.decisions = t.decision_id
        self._status.frame_sha256, self._status.frame_index = t.result_frame_sha256, t.result_frame_index
        self._status_version += 1
        self._set_frame(event.frame, t.decision_id, t.result_frame_sha256, t.result_frame_index)
        self._push("decision", t)

    def _on_trial_started(self, event: TrialStarted) -> None:
        """A new trial: status, ladder, memory and budgets start afresh, with its first frame."""
        s = self._status
        s.label, s.trial_key = event.label, event.trial_key
        s.schedule_index, s.trials_total = event.position + 1, event.schedule_length
        s.state, s.detail, s.decisions = "running", None, 0
        s.frame_sha256, s.frame_index = event.frame_sha256, event.frame_index
        self._status_version += 1
        self._ladder = LadderSnapshot(event.milestones, event.pre_satisfied, {},
                                      self._ladder.version + 1, event.optional)
        self._memory = MemorySnapshot(version=self._memory.version + 1)
        self._budgets = event.budgets
        self._budgets_version += 1
        self._set_frame(event.frame, 0, event.frame_sha256, event.frame_index)
        self._push("trial", {"trial_key": event.trial_key, "label": event.label,
                             "schedule_index": event.position + 1, "trials_total": event.schedule_length,
                             "frame_sha256": event.frame_sha256})

    def _on_trial_ended(self, event: TrialEnded) -> None:
        """A trial's result, kept whole; shown with its detail and error redacted."""
        r = event.result.model_dump(mode="json")
        self.results.append(r)
        shown = {**r, "termination_detail": self._redact(r.get("termination_detail")),
                 "error": self._redact(r.get("error"))}
        s = self._status
        s.state, s.detail = "ended", r.get("termination_reason")
        if shown["error"]:
            s.error = shown["error"]
        self._status_version += 1
        self._push("ended", shown)

    def blind(self, model_ids) -> None:
        """Redact these model ids from the start (the manifest's own), before any reply names one."""
        with self._lock:
            for model_id in model_ids:
                self._note_model(model_id)

    def redact(self, text: str | None) -> str | None:
        with self._lock:
            return self._redact(text)

    def _note_model(self, model_id: str) -> None:
        """Remember a model id to redact (ids of under three characters would mangle ordinary text)."""
        self._model_ids.add(model_id)
        self._redacted = sorted((m for m in self._model_ids if len(m) >= 3), key=len, reverse=True)

    def _redact(self, text: str | None) -> str | None:
        """Text with every model id the run reported replaced (longest first: an id containing another)."""
        if text is None:
            return None
        for model_id in self._redacted:
            if model_id in text:
                text = text.replace(model_id, MODEL_REDACTED)
        return text

    def _set_frame(self, frame: np.ndarray, decision_id: int, sha: str, index: int) -> None:
        self._frame_version += 1
        self._frame = FrameSnapshot(frame, decision_id, sha, index, self._frame_version)

    # -- UI thread -------------------------------------------------------------------------
    def preset_ladder(self, milestones: tuple[tuple[str, str, int], ...], optional: tuple[str, ...] = ()) -> None:
        """Show the game's ladder before the first trial starts (so its size never changes)."""
        with self._lock:
            self._ladder = LadderSnapshot(tuple(milestones), (), {}, self._ladder.version + 1, tuple(optional))

    def mark(self, state: str, detail: str | None = None, error: str | None = None) -> None:
        """Console-side state changes (quitting, finished, run error)."""
        with self._lock:
            self._status.state, self._status.detail = state, self._redact(detail)
            if state in ("finished", "error") and self._stopped is None:
                self._stopped = self.clock()
            if error:
                self._status.error = self._redact(error)
            self._status_version += 1

    def note(self, kind: str, payload: object) -> None:
        """A console-side trace item (run errors, notices)."""
        with self._lock:
            self._push(kind, self._redact(payload) if isinstance(payload, str) else payload)

    @property
    def frame_version(self) -> int:
        return self._frame_version

    def frame(self) -> FrameSnapshot | None:
        with self._lock:
            return self._frame

    def budgets(self) -> tuple[int, dict]:
        with self._lock:
            return self._budgets_version, self._budgets

    def ladder(self) -> LadderSnapshot:
        with self._lock:
            return self._ladder

    def memory(self) -> MemorySnapshot:
        with self._lock:
            return self._memory

    def status(self) -> StatusSnapshot:
        with self._lock:
            s = self._status
            return StatusSnapshot(s.experiment_id, s.label, s.trial_key, s.schedule_index, s.trials_total,
                                  s.state, s.detail, s.decisions,
                                  (self._stopped or self.clock()) - self._started, s.error,
                                  s.frame_sha256, s.frame_index)

    def drain_trace(self) -> list[tuple[str, object]]:
        with self._lock:
            items = list(self._pending)
            self._pending.clear()
        return items
