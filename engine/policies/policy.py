"""The policy interface: what a policy sees, what it returns, how it fails.

Scripted, random, replay, human and model-provider policies all implement `Policy`.
An Observation carries only what the information contract allows the agent: the screen,
its own memory and its recent actions. No probe value enters one, but on the structured track
the game definition's allowlist of them (engine.games.tracks), never a field a milestone rung reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from engine.frozen import quick_frozen
from engine.loop.records import ReplyOversize, Usage


class ProviderFailure(RuntimeError):
    """The model provider failed (auth, quota, startup, a turn): the run is invalid-provider.

    `retryable`: a transport fault worth another attempt (rate limit, server error, timeout);
    the loop retries it within the policy's `transport` limits, logging and charging each."""

    kind: str = "provider-failure"
    retryable: bool = False
    retry_after: float | None = None
    status: int | None = None
    billed: bool | None = None  # False: nothing was charged; None: unknown
    latency_ms: float | None = None  # time from sending until it failed (a timeout: until the timeout)


class PolicyExhausted(RuntimeError):
    """A finite policy (an input script, a recorded trace) has nothing left to play."""


@quick_frozen  # made every decision (engine.frozen)
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
    refused_writes: tuple[str, ...] = ()  # memory writes of the previous decision the store refused, and why
    # The structured information track (engine.games.tracks): the game definition's allowlisted fields and
    # the decoded dialogue text; None on the visual track (the screen only).
    structured: dict | None = None
    # The battle ruleset's snapshot (engine.battle.battle, its `observe` tool): the battle screen's facts, read
    # from RAM by the game's battle adapter; None under any other ruleset.
    battle: dict | None = None


# The information contract, checked by a test: adding a field here is a protocol change.
OBSERVATION_FIELDS = frozenset({
    "decision_id", "frame", "frame_sha256", "recent_actions", "recent_observations",
    "current_objective", "memory", "max_actions", "allowed_actions", "retry_feedback", "refused_writes",
    "structured", "battle",
})


@quick_frozen  # made every decision (engine.frozen)
@dataclass(frozen=True)
class PolicyReply:
    text: str  # the raw response, exactly as produced
    model_id: str | None = None
    response_id: str | None = None
    usage: Usage | None = None  # None: no paid model call was made (see engine.loop.records.Usage)
    latency_ms: float | None = None
    prompt_sha256: str | None = None
    prompt_core_sha256: str | None = None
    stop_reason: str | None = None
    identity: dict | None = None
    reply: dict | None = None  # the API's reply body, kept in the evidence
    # The reply passed the manifest's agent.max_reply_bytes: an invalid output, `text` empty and
    # nothing of the body kept but this record of its size and digest.
    oversize: ReplyOversize | None = None
    # bounded context (engine.loop.context): the request's turn in its segment, the segment, the notebook's
    # length and whether its last write was cut; None without agent.context
    context: dict | None = None
    # A tool server's `reset` call (ruleset battle): a decision that presses nothing and ends the episode
    # (Trial.request_reset); refused and charged as an invalid output where no episode can follow.
    reset: bool = False
    # A tool server's battle call (ruleset battle: apply_team, lead, action): {"tool", "arguments"}, judged by
    # the loop's battle rules (engine.battle.battle) into RAM writes and presses, or refused and charged.
    battle: dict | None = None
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TransportRetry:
    """How the loop retries a provider's transport faults (manifest: the condition's `request`)."""

    max_attempts: int = 3  # calls per decision for transport faults, the first included
    backoff_seconds: float = 1.0  # doubled after each fault, unless the provider says retry-after
    backoff_cap_seconds: float = 30.0
    timeout_seconds: float = 60.0


class Policy(Protocol):
    name: str
    model_id: str | None
    # True when a call costs money: a call cancelled in flight is then recorded as an aborted
    # attempt of unknown cost. False (scripted, random, replay, human): nothing was spent.
    paid: bool
    # Model policies: the loop's limits for retrying transport faults; None for the others.
    transport: TransportRetry | None

    async def decide(self, observation: Observation) -> PolicyReply: ...

    def close(self) -> None: ...
