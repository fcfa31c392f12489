"""Totals over a trial's trace lines: the one computation behind result.json's telemetry and
`oakwatch verify`'s reconciliation of it (so the two can never disagree by construction).

Unknown stays unknown: one decision with an unmeasured token or cost figure makes the total
null, never a smaller number.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.loop.records import Telemetry, TraceLine, build

LOOP_ONLY = ("rejected_actions", "ignored_inputs", "repeated_position_loops", "repeated_navigation_actions",
             "wall_time_seconds", "held_seconds", "frames", "policy_seconds", "active_seconds")


def _add(total: float | None, value: float | None) -> float | None:
    return None if total is None or value is None else total + value


def total_latency(t: TraceLine) -> float | None:
    """A decision's latency over all its attempts (a line older than latency_total_ms held it in latency_ms)."""
    return t.latency_total_ms if "latency_total_ms" in t.model_fields_set else t.latency_ms


@dataclass
class TraceTally:
    decisions: int = 0
    model_calls: int = 0
    aborted_calls: int = 0
    invalid_outputs: int = 0
    accepted_actions: int = 0
    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cached_tokens: int | None = 0
    cost_usd: float | None = 0.0
    paid_calls: int = 0
    model_latency_ms: float | None = 0.0
    cost_sources: set[str] = field(default_factory=set)
    last: TraceLine | None = None
    # (capture frame, frame SHA-256) of a milestone award -> accepted actions up to that input (verify)
    award_actions: dict[tuple[int, str], int] = field(default_factory=dict)

    def add(self, t: TraceLine) -> None:
        self.decisions += 1
        self.model_calls += t.attempts
        self.aborted_calls += int(t.aborted)
        # A valid response carries at least one action, or is a reset call (ruleset battle: no action, but
        # an accepted response, so it has a summary); the rest of the attempts were invalid, except an
        # aborted last one, which never answered.
        self.invalid_outputs += t.attempts - int(bool(t.parsed_actions) or t.aborted or t.reasoning_summary is not None)
        self.accepted_actions += t.accepted_actions
        self.paid_calls += t.paid_calls
        if t.paid_calls:
            self.input_tokens = _add(self.input_tokens, t.input_tokens)
            self.output_tokens = _add(self.output_tokens, t.output_tokens)
            self.cached_tokens = _add(self.cached_tokens, t.cached_tokens)
            self.cost_usd = _add(self.cost_usd, t.provider_cost_usd)
            self.model_latency_ms = _add(self.model_latency_ms, total_latency(t))
        if t.cost_source:
            self.cost_sources.update(t.cost_source)
        self.last = t

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    @property
    def milestones_reached(self) -> list[str]:
        return list(self.last.milestones_after) if self.last else []

    def telemetry(self, **loop_only) -> Telemetry:
        """result.json's telemetry: the trace's figures, plus what only the loop counted (null if not given)."""
        return build(Telemetry,
            decisions=self.decisions, model_calls=self.model_calls, aborted_calls=self.aborted_calls,
            accepted_actions=self.accepted_actions, invalid_outputs=self.invalid_outputs,
            input_tokens=self.input_tokens, output_tokens=self.output_tokens, cached_tokens=self.cached_tokens,
            tokens=self.tokens, cost_usd=self.cost_usd, cost_source=sorted(self.cost_sources) or None,
            model_latency_ms=None if self.model_latency_ms is None else round(self.model_latency_ms, 3),
            **{key: loop_only.get(key) for key in LOOP_ONLY})
