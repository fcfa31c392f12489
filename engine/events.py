"""Events the trial loop emits. Writers and displays consume them; none of them drive the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engine.ladder import Award


@dataclass(frozen=True)
class TrialStarted:
    trial_key: str  # "<blinded label>-<NN>"
    label: str
    trial_number: int
    trials_total: int
    frame: np.ndarray
    frame_sha256: str
    frame_index: int
    milestones: tuple[tuple[str, str, int], ...]  # (id, name, points) in ladder order
    pre_satisfied: tuple[str, ...]
    budgets: dict


@dataclass(frozen=True)
class FrameCaptured:
    """One settled frame after one action (for live display; evidence comes with the decision)."""

    decision_id: int
    frame: np.ndarray
    frame_sha256: str
    frame_index: int


@dataclass(frozen=True)
class Attempt:
    raw: str
    valid: bool
    error: str | None
    model_id: str | None
    response_id: str | None
    latency_ms: float | None
    usage: dict | None


@dataclass(frozen=True)
class InputRecord:
    decision_id: int
    index: int  # position within the decision
    action: str
    press_frame: int | None
    release_frame: int | None
    capture_frame: int
    frame_sha256: str

    def record(self) -> dict:
        return {"decision_id": self.decision_id, "index": self.index, "action": self.action,
                "press_frame": self.press_frame, "release_frame": self.release_frame,
                "capture_frame": self.capture_frame, "frame_sha256": self.frame_sha256}


@dataclass(frozen=True)
class DecisionRecorded:
    trace: dict  # the trace.jsonl line, every field of seed 000's record
    attempts: tuple[Attempt, ...]
    inputs: tuple[InputRecord, ...]
    frame: np.ndarray  # the frame after the decision's last action (or unchanged)
    observed: dict | None


@dataclass(frozen=True)
class MilestoneReached:
    award: Award


@dataclass(frozen=True)
class MemoryChanged:
    op: dict  # the memory.jsonl line
    # The whole store after the change, for displays; None when the op only read (unchanged).
    facts: tuple[dict, ...] | None = None
    contradictions: tuple[tuple[str, ...], ...] | None = None
    last_read: tuple[str, ...] = ()


@dataclass(frozen=True)
class BudgetUpdated:
    budgets: dict


@dataclass(frozen=True)
class AnnotationAdded:
    record: dict


@dataclass(frozen=True)
class StateChanged:
    """Operator-visible run state: running, paused, stepping, ended."""

    state: str
    detail: str | None = None


@dataclass(frozen=True)
class TrialEnded:
    result: dict  # result.json's content


Event = (TrialStarted | FrameCaptured | DecisionRecorded | MilestoneReached | MemoryChanged
         | BudgetUpdated | AnnotationAdded | StateChanged | TrialEnded)


class Sink(Protocol):
    def handle(self, event: Event) -> None: ...
