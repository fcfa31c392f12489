"""How a trial ends and what that makes it: the one table of termination reasons (seed 001).

Only the agent's own play yields a valid measurement (success or game-failure). Everything
else is invalid and excluded from rates: the provider failed (invalid-provider), or the
harness, its operator or its host did (harness-error), with the cause named in
`invalid_cause`. A human player ending their own trial has played; an operator ending an
agent's trial has not.
"""

from __future__ import annotations

from dataclasses import dataclass

SUCCESS, GAME_FAILURE = "success", "game-failure"
INVALID_PROVIDER, HARNESS_ERROR = "invalid-provider", "harness-error"
VALID_OUTCOMES = (SUCCESS, GAME_FAILURE)
OUTCOMES = (SUCCESS, GAME_FAILURE, INVALID_PROVIDER, HARNESS_ERROR)


@dataclass(frozen=True)
class Ending:
    outcome: str
    default_cause: str | None  # invalid_cause when the caller names none
    at_decision: bool  # True: only the decision that ended the trial can carry this reason


# reason -> what it makes the trial
ENDINGS: dict[str, Ending] = {
    "final-milestone": Ending(SUCCESS, None, True),  # every required rung reached or pre-satisfied
    "goal-met": Ending(SUCCESS, None, True),  # the run's goal (engine.games.goals) held on two frames
    # the final rung reached with an earlier required rung skipped (engine.games.ladder): not a success
    "final-milestone-skipped-required": Ending(GAME_FAILURE, None, True),
    "budget:accepted_actions": Ending(GAME_FAILURE, None, True),
    "budget:model_decisions": Ending(GAME_FAILURE, None, True),
    "budget:total_cost": Ending(GAME_FAILURE, None, True),
    "budget:tokens": Ending(GAME_FAILURE, None, True),
    "budget:wall_time": Ending(GAME_FAILURE, None, False),  # checked between decisions too
    "unrecoverable-loop": Ending(GAME_FAILURE, None, True),
    # an episodic trial's last episode ended (failure predicate, its actions, a reset) without the goal
    "episode-budget": Ending(GAME_FAILURE, None, True),
    "policy-exhausted": Ending(GAME_FAILURE, None, False),  # the script or recording ran out
    "player-ended": Ending(GAME_FAILURE, None, False),  # a human player ended their own trial
    "budget:cost_unknown": Ending(INVALID_PROVIDER, "usage-unknown", True),
    "budget:tokens_unknown": Ending(INVALID_PROVIDER, "usage-unknown", True),
    "provider-failure": Ending(INVALID_PROVIDER, "provider-failure", False),
    # an agent playing through the tool server (policy mcp, cli) closed its connection mid-trial
    "agent-disconnected": Ending(INVALID_PROVIDER, "agent-disconnected", False),
    "operator-abort": Ending(HARNESS_ERROR, "operator-abort", False),
    "operator-quit": Ending(HARNESS_ERROR, "operator-quit", False),
    "signal": Ending(HARNESS_ERROR, "signal", False),
    "emulator-error": Ending(HARNESS_ERROR, "emulator-fault", False),
    "evidence-failure": Ending(HARNESS_ERROR, "evidence-io-error", False),
    "harness-error": Ending(HARNESS_ERROR, "harness-bug", False),
    "process-died": Ending(HARNESS_ERROR, "process-died", False),  # finished by `oakwatch recover`
    # --workers N: a trial still running when another trial of its block turned invalid (the block is
    # void, so it is stopped and moved with it), or when the run stopped for another trial's reason
    "block-voided": Ending(HARNESS_ERROR, "block-voided", False),
    "run-stopped": Ending(HARNESS_ERROR, "run-stopped", False),
    # budgets.experiment_cost_usd reached: the experiment's money ran out, not the agent's play
    "experiment-cost-ceiling": Ending(HARNESS_ERROR, "experiment-cost-ceiling", False),
}


def ending(reason: str) -> Ending:
    try:
        return ENDINGS[reason]
    except KeyError:
        raise ValueError(f"unknown termination reason {reason!r}") from None


def classify(reason: str, cause: str | None = None) -> tuple[str, str | None]:
    """(outcome, invalid_cause) for a termination reason; valid outcomes carry no cause."""
    e = ending(reason)
    if e.outcome in VALID_OUTCOMES:
        return e.outcome, None
    return e.outcome, cause or e.default_cause


def is_valid(outcome: str) -> bool:
    return outcome in VALID_OUTCOMES


@dataclass(frozen=True)
class EndRequest:
    """A request, from outside the loop, to end the current trial (and maybe the whole run)."""

    reason: str  # a key of ENDINGS: operator-abort, player-ended, operator-quit, signal
    detail: str | None = None  # the operator's words, or the signal's name
    cause: str | None = None  # invalid_cause, e.g. "signal:SIGINT"
    stop_run: bool = False  # True: no further trial starts either
