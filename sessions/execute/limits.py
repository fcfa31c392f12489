"""Limits shared by every trial of a run: an experiment-wide cost ceiling and one rate limiter per
provider and key.

`ExperimentLimits` lives in the driver (one per run). Before every model call a trial asks it,
through its `CallGate`: in the serial path directly, with `--workers N` over the worker's pipe
(sessions.execute.workers). The answer is how long to wait (a reservation: the driver never blocks on a
limiter) or a refusal once the ceiling is reached. The gate waits through the trial's run
control (`RunControl.hold`), so the wait is counted apart from the agent's time and excluded from
the wall-time budget exactly like a provider's backoff; the trial's total wait is recorded in
result.json as `limiter_wait_s`, never inside a call's latency.

The ceiling rule (recorded in summary.json as `limits.rule`): spend is the sum of every call's
reported or derived cost across all trials of this run (a call of unknown cost adds nothing and
is counted in `unknown_cost_calls`); before each call, if spend >= `budgets.experiment_cost_usd`,
the call is not made, the trial asking ends as invalid (harness-error, `experiment-cost-ceiling`),
every other running trial is stopped the same way at its next call or decision boundary, and no
new trial starts. Their blocks are voided, so `oakwatch run --resume` can rerun them later.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.policies.policy import PolicyExhausted

CEILING = "experiment-cost-ceiling"
CEILING_RULE = ("before every model call of every trial: if the run's spend (reported or derived costs; unknown "
                "costs add nothing) has reached budgets.experiment_cost_usd, the call is not made, that trial "
                "and every other running trial end invalid (harness-error, experiment-cost-ceiling), their "
                "blocks are voided and no new trial starts")


class RateLimiter:
    """Requests per minute as evenly spaced reservations; tokens per minute as a bucket that each
    call's reported tokens drain after the fact (a call waits until the bucket is not in debt)."""

    def __init__(self, requests_per_minute: int | None, tokens_per_minute: int | None):
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._next = 0.0  # monotonic time the next request may go
        self._level = float(tokens_per_minute or 0)  # tokens available
        self._at: float | None = None

    def _refill(self, now: float) -> None:
        if self.tpm and self._at is not None:
            self._level = min(float(self.tpm), self._level + (now - self._at) * self.tpm / 60.0)
        self._at = now

    def reserve(self, now: float) -> float:
        """Seconds the call must wait from `now`; the slot is taken."""
        self._refill(now)
        wait = 0.0
        if self.tpm and self._level < 0:
            wait = -self._level * 60.0 / self.tpm
        if self.rpm:
            start = max(now + wait, self._next)
            self._next = start + 60.0 / self.rpm
            wait = start - now
        return wait

    def charge(self, tokens: int | None, now: float) -> None:
        if self.tpm and tokens:
            self._refill(now)
            self._level -= tokens


@dataclass(frozen=True)
class Ask:
    """A trial's request to make one call."""

    key: str  # the limiter's key (provider and API key); "" for none
    trial_key: str


class ExperimentLimits:
    """The driver's shared state. Thread-safe; every method answers at once."""

    def __init__(self, ceiling_usd: float | None = None, rates: dict[str, tuple[int | None, int | None]] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.ceiling_usd = ceiling_usd
        self.limiters = {k: RateLimiter(*v) for k, v in (rates or {}).items()}
        self.clock = clock
        self.spent_usd = 0.0
        self.unknown_cost_calls = 0
        self.calls = 0
        self.waits = 0
        self.wait_s = 0.0
        self.reached = False
        self.stopped_trials: list[str] = []
        self.before_usd: float | None = None  # spend of the folder's earlier runs (a resumed run), counted in
        self.before_unknown_trials = 0  # earlier trials whose cost is unknown (they add nothing)
        self._lock = threading.Lock()

    def carry_over(self, spent_usd: float, unknown_trials: int) -> None:
        """A resumed run's ceiling counts what the folder's earlier runs spent (every sealed attempt,
        voided ones included: money spent is spent)."""
        with self._lock:
            self.before_usd = spent_usd
            self.before_unknown_trials = unknown_trials
            self.spent_usd += spent_usd
            if self.ceiling_usd is not None and self.spent_usd >= self.ceiling_usd:
                self.reached = True

    @property
    def active(self) -> bool:
        return self.ceiling_usd is not None or bool(self.limiters)

    def ask(self, ask: Ask) -> tuple[float, str | None]:
        """(seconds to wait, None) or (0, reason) when the call must not be made."""
        with self._lock:
            if self.ceiling_usd is not None and self.spent_usd >= self.ceiling_usd:
                self.reached = True
                if ask.trial_key not in self.stopped_trials:
                    self.stopped_trials.append(ask.trial_key)
                return 0.0, CEILING
            limiter = self.limiters.get(ask.key)
            wait = limiter.reserve(self.clock()) if limiter is not None else 0.0
            self.calls += 1
            if wait > 0:
                self.waits += 1
                self.wait_s += wait
            return wait, None

    def spent(self, key: str, cost_usd: float | None, tokens: int | None) -> None:
        with self._lock:
            if cost_usd is None:
                self.unknown_cost_calls += 1
            else:
                self.spent_usd += cost_usd
            limiter = self.limiters.get(key)
            if limiter is not None:
                limiter.charge(tokens, self.clock())
            if self.ceiling_usd is not None and self.spent_usd >= self.ceiling_usd:
                self.reached = True

    def record(self) -> dict | None:
        """What summary.json says about the run's shared limits (None when none was declared)."""
        if not self.active:
            return None
        return {
            "experiment_cost_usd": self.ceiling_usd, "rule": CEILING_RULE if self.ceiling_usd is not None else None,
            "spent_usd": round(self.spent_usd, 6), "unknown_cost_calls": self.unknown_cost_calls,
            "spent_before_resume_usd": None if self.before_usd is None else round(self.before_usd, 6),
            "unknown_cost_trials_before_resume": self.before_unknown_trials,
            "ceiling_reached": self.reached, "stopped_by_ceiling": list(self.stopped_trials),
            "rate_limits": {k: {"requests_per_minute": v.rpm, "tokens_per_minute": v.tpm}
                            for k, v in sorted(self.limiters.items())},
            "limited_calls": self.calls, "limiter_waits": self.waits, "limiter_wait_s": round(self.wait_s, 3)}


def spend_in_folder(root) -> tuple[float, int]:
    """(sum of known costs, trials of unknown cost) over every sealed attempt in an evidence folder."""
    from sessions.evidence.folder import EvidenceFolder

    total, unknown = 0.0, 0
    # Every attempt, trials/ and void-<n>/, in the order of their paths (the sum's order, as it always was);
    # a broken result is skipped: verify reports it, the ceiling counts what can be read.
    sealed = sorted(EvidenceFolder(root).sealed_results(voided=True), key=lambda found: found[0].path)
    for _trial, result in sealed:
        cost = result.telemetry.cost_usd
        if cost is None:
            unknown += 1
        else:
            total += cost
    return total, unknown


def limiter_key(condition, api_key: str | None) -> str:
    """One limiter per provider and key: the provider, its address and a hash of the key (never the key)."""
    key_id = hashlib.sha256((api_key or "").encode()).hexdigest()[:12]
    return f"{condition.provider}|{condition.base_url or ''}|{key_id}"


def limits_for(prepared) -> ExperimentLimits:
    """The run's limits from the manifest: budgets.experiment_cost_usd and each model condition's
    request.requests_per_minute / tokens_per_minute (conditions sharing a provider and key share a
    limiter, at the strictest of their rates)."""
    m = prepared.manifest
    rates: dict[str, tuple[int | None, int | None]] = {}
    for c in m.conditions:
        if c.policy != "model" or c.request is None:
            continue
        rpm, tpm = c.request.requests_per_minute, c.request.tokens_per_minute
        if rpm is None and tpm is None:
            continue
        key = limiter_key(c, prepared.keys.get(c.id))
        old = rates.get(key, (None, None))
        rates[key] = (_least(old[0], rpm), _least(old[1], tpm))
    return ExperimentLimits(m.budgets.experiment_cost_usd, rates)


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


class CallGate:
    """A trial's side of the limits (the hook engine.providers.base.CallGate names): ask before each
    call, wait through the run control, report each call's spend."""

    def __init__(self, ask: Callable[[Ask], tuple[float, str | None]],
                 report: Callable[[str, float | None, int | None], None], control, key: str, trial_key: str):
        self._ask = ask
        self._report = report
        self.control = control
        self.key = key
        self.trial_key = trial_key
        self.waited_s = 0.0

    def before_call(self) -> None:
        wait, refused = self._ask(Ask(self.key, self.trial_key))
        if refused is not None:
            self.control.stop_run(refused, "the experiment's cost ceiling (budgets.experiment_cost_usd) was reached",
                                  refused)
            raise PolicyExhausted(refused)  # the loop ends the trial with the run control's request
        if wait > 0:
            started = time.monotonic()
            request = self.control.hold(wait)  # counted apart from the agent's time, like a backoff
            self.waited_s += time.monotonic() - started
            if request is not None:
                raise PolicyExhausted(request.reason)

    def after_call(self, cost_usd: float | None, tokens: int | None) -> None:
        self._report(self.key, cost_usd, tokens)
