"""Events the trial loop emits. The recorder writes the records they carry; displays draw them.

The first sink is the trial's recorder: if it fails (a full disk, a dead frame store) it raises
SinkFailure and the loop ends the trial as an invalid run. Display sinks never raise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine.frozen import quick_frozen
from engine.loop.records import (
    Annotation,
    InputLine,
    MemoryOp,
    MilestoneAward,
    ResponseLine,
    TraceLine,
    TrialResult,
)


class SinkFailure(RuntimeError):
    """A sink that must not fail did (the evidence recorder): the trial cannot go on."""

    def __init__(self, message: str, cause: str = "evidence-io-error"):
        super().__init__(message)
        self.cause = cause  # invalid_cause: disk-full, frame-store-failed, evidence-io-error


@dataclass(frozen=True)
class TrialStarted:
    trial_key: str  # "<blinded label>-<NN>"
    label: str
    trial_number: int  # within its condition
    position: int  # in the schedule, from 0
    schedule_length: int  # trials in the whole experiment, across conditions
    frame: np.ndarray
    frame_sha256: str
    frame_index: int
    milestones: tuple[tuple[str, str, int], ...]  # (id, name, points) in ladder order
    pre_satisfied: tuple[str, ...]
    budgets: dict
    optional: tuple[str, ...] = ()  # rungs that do not decide success


@dataclass(frozen=True)
class EpisodeStarted:
    """An episodic trial (engine.battle.episodes) restored its start state as a new episode."""

    trial_key: str
    episode: int  # from 1; the trial's first episode starts with TrialStarted
    budget: int
    previous_ended: str  # failure, episode-actions or reset
    frame: np.ndarray
    frame_sha256: str
    frame_index: int


@dataclass(frozen=True)
class FrameCaptured:
    """One settled frame after one action (for live display; evidence comes with the decision)."""

    decision_id: int
    frame: np.ndarray
    frame_sha256: str
    frame_index: int
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@quick_frozen  # made every decision (engine.frozen)
@dataclass(frozen=True)
class DecisionRecorded:
    trace: TraceLine  # without the recorder's chain fields
    response: ResponseLine
    inputs: tuple[InputLine, ...]
    frame: np.ndarray  # the frame after the decision's last action (or unchanged)
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class MilestoneReached:
    award: MilestoneAward
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class MemoryChanged:
    op: MemoryOp
    # The whole store after the change, for displays; None when the op only read (unchanged).
    facts: tuple[dict, ...] | None = None
    contradictions: tuple[tuple[str, ...], ...] | None = None
    last_read: tuple[str, ...] = ()
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class BudgetUpdated:
    budgets: dict
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class AnnotationAdded:
    record: Annotation
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class StateChanged:
    """Operator-visible run state: running, paused, stepping, stopping, ended."""

    state: str
    detail: str | None = None
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class TrialEnded:
    result: TrialResult
    # The trial it belongs to, stamped on by sessions.execute.workers for displays of many trials at once.
    trial_key: str | None = field(default=None, kw_only=True)


Event = (TrialStarted | EpisodeStarted | FrameCaptured | DecisionRecorded | MilestoneReached | MemoryChanged
         | BudgetUpdated | AnnotationAdded | StateChanged | TrialEnded)


class Sink(Protocol):
    def handle(self, event: Event) -> None: ...
