"""The policy interface: what a policy sees, what it returns, how it fails.

Scripted, random, replay, human and model-provider policies all implement `Policy`.
An Observation carries only what the information contract allows the agent: the screen,
its own memory and its recent actions. No probe value ever enters one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine.records import Usage


class ProviderFailure(RuntimeError):
    """The model provider failed (auth, quota, startup, a turn): the run is invalid-provider."""


class PolicyExhausted(RuntimeError):
    """A finite policy (an input script, a recorded trace) has nothing left to play."""


@dataclass(frozen=True)
class Observation:
    """Everything the agent may see for one decision (the information contract)."""

    decision_id: int
    frame: np.ndarray  # (H, W, 3) uint8, the settled screen
    frame_sha256: str
    recent_actions: tuple[str, ...]
    recent_observations: tuple[dict, ...]
    current_objective: str | None
    memory: tuple[dict, ...]  # facts retrieved from the agent's own store, bounded
    max_actions: int
    allowed_actions: tuple[str, ...]
    retry_feedback: str | None = None  # why the previous attempt was rejected


# The information contract, checked by a test: adding a field here is a protocol change.
OBSERVATION_FIELDS = frozenset({
    "decision_id", "frame", "frame_sha256", "recent_actions", "recent_observations",
    "current_objective", "memory", "max_actions", "allowed_actions", "retry_feedback",
})


@dataclass(frozen=True)
class PolicyReply:
    text: str  # the raw response, exactly as produced
    model_id: str | None = None
    response_id: str | None = None
    usage: Usage | None = None  # None: no paid model call was made (see engine.records.Usage)
    latency_ms: float | None = None
    prompt_sha256: str | None = None
    extra: dict = field(default_factory=dict)


class Policy(Protocol):
    name: str
    model_id: str | None
    # True when a call costs money: a call cancelled in flight is then recorded as an aborted
    # attempt of unknown cost. False (scripted, random, replay, human): nothing was spent.
    paid: bool

    async def decide(self, observation: Observation) -> PolicyReply: ...

    def close(self) -> None: ...
