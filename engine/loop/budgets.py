"""Budgets that start together and end a trial mechanically.

Unknown cost is not zero: once a model call reports no cost, the cost total is unknown,
and a trial with a cost limit stops (it can no longer prove it is within budget).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.loop.records import Usage


@dataclass(frozen=True)
class BudgetLimits:
    accepted_actions: int | None = None
    model_decisions: int | None = None
    wall_time_minutes: float | None = None
    total_cost_usd: float | None = None
    tokens: int | None = None


@dataclass
class Budgets:
    limits: BudgetLimits
    accepted_actions: int = 0
    model_decisions: int = 0  # every model call, retries included
    active_seconds: float = 0.0  # wall time excluding pauses and pacing
    cost_usd: float | None = 0.0
    tokens: int | None = 0

    def add_call(self, usage: Usage | None) -> None:
        """Charge one policy call. usage None means the policy made no paid call."""
        self.model_decisions += 1
        if usage is None:
            return
        if usage.cost_usd is None or self.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd += usage.cost_usd
        total = usage.total_tokens
        if total is None or self.tokens is None:
            self.tokens = None
        else:
            self.tokens += total

    def calls_left(self) -> int | None:
        if self.limits.model_decisions is None:
            return None
        return max(0, self.limits.model_decisions - self.model_decisions)

    def wall_time_exhausted(self) -> bool:
        minutes = self.limits.wall_time_minutes
        return minutes is not None and self.active_seconds >= minutes * 60

    def actions_left(self) -> int | None:
        if self.limits.accepted_actions is None:
            return None
        return max(0, self.limits.accepted_actions - self.accepted_actions)

    def exhausted(self) -> str | None:
        """The first exhausted budget, as a termination reason, or None."""
        lim = self.limits
        if lim.accepted_actions is not None and self.accepted_actions >= lim.accepted_actions:
            return "budget:accepted_actions"
        if lim.model_decisions is not None and self.model_decisions >= lim.model_decisions:
            return "budget:model_decisions"
        if lim.wall_time_minutes is not None and self.active_seconds >= lim.wall_time_minutes * 60:
            return "budget:wall_time"
        if lim.total_cost_usd is not None:
            if self.cost_usd is None:
                return "budget:cost_unknown"
            if self.cost_usd >= lim.total_cost_usd:
                return "budget:total_cost"
        if lim.tokens is not None:
            if self.tokens is None:
                return "budget:tokens_unknown"
            if self.tokens >= lim.tokens:
                return "budget:tokens"
        return None

    def snapshot(self) -> dict:
        lim = self.limits
        return {
            "accepted_actions": {"used": self.accepted_actions, "limit": lim.accepted_actions},
            "model_decisions": {"used": self.model_decisions, "limit": lim.model_decisions},
            "wall_time_minutes": {"used": round(self.active_seconds / 60, 4), "limit": lim.wall_time_minutes},
            # Nothing paid is a known zero, as in result.json; one unmeasured call makes it unknown.
            "total_cost_usd": {"used": self.cost_usd, "limit": lim.total_cost_usd},
            "tokens": {"used": self.tokens, "limit": lim.tokens},
        }
