"""summary.json: the series' counts and per-condition figures, from result.json files only.

Only valid trials (success, game-failure) enter rates and medians; invalid attempts are
counted apart (they sit in void-<n>/). Unknown stays null: one trial of unknown cost makes
that condition's cost figures null, never smaller.
"""

from __future__ import annotations

from statistics import median

from engine.loop.outcomes import SUCCESS, is_valid
from engine.loop.records import TrialResult
from sessions.evidence.records import Summary, TrialSeal, VoidRecord


def _spread(values: list) -> dict:
    """Median and range; null when any value is unknown or there are none."""
    if not values or any(v is None for v in values):
        return {"median": None, "min": None, "max": None}
    return {"median": median(values), "min": min(values), "max": max(values)}


def per_condition(valid: list[TrialResult], labels: list[str]) -> dict[str, dict]:
    out = {}
    for label in labels:
        rows = [r for r in valid if r.condition == label]
        successes = sum(r.outcome == SUCCESS for r in rows)
        out[label] = {
            "valid": len(rows),
            "successful": successes,
            "completion_rate": successes / len(rows) if rows else None,
            "zero_progress": sum(r.progress_points == 0 for r in rows),
            "progress_points": _spread([r.progress_points for r in rows]),
            "accepted_actions": _spread([r.telemetry.accepted_actions if r.telemetry else None for r in rows]),
            "decisions": _spread([r.telemetry.decisions if r.telemetry else None for r in rows]),
            "cost_usd": _spread([r.telemetry.cost_usd if r.telemetry else None for r in rows]),
            "deepest_milestones": [r.deepest_milestone for r in rows],
        }
    return out


def missing_positions(order: list[str], results: dict[str, tuple[TrialResult, str]]) -> list[int]:
    """Schedule positions with no valid trial among `results` (what `run --resume` reruns)."""
    return [i for i, key in enumerate(order) if key not in results or not is_valid(results[key][0].outcome)]


def summarise(*, experiment_id: str, manifest_sha256: str, schedule_sha256: str, order: list[str],
              results: dict[str, tuple[TrialResult, str]], voids: list[VoidRecord], labels: list[str],
              stopped_early: bool, stop_reason: str | None, recovered: bool, run_log_head: str) -> Summary:
    """`results`: trial key -> (result, SHA-256 of its result.json) for the trials in trials/."""
    valid = [r for r, _ in results.values() if is_valid(r.outcome)]
    successes = sum(r.outcome == SUCCESS for r in valid)
    invalid_attempts = sum(len(v.trial_keys) for v in voids)
    invalid_attempts += sum(not is_valid(r.outcome) for r, _ in results.values())
    missing = missing_positions(order, results)
    seals = [TrialSeal(position=r.position, trial_key=r.trial_key, attempt=r.attempt, outcome=r.outcome,
                       result_sha256=sha, trace_head=r.chain.trace_head if r.chain else "0" * 64)
             for r, sha in sorted(results.values(), key=lambda rs: rs[0].position)]
    return Summary(
        experiment_id=experiment_id, manifest_sha256=manifest_sha256, schedule_sha256=schedule_sha256,
        requested=len(order), completed=len(valid), valid=len(valid), successful=successes,
        failed=len(valid) - successes, invalid=invalid_attempts,
        success_rate=successes / len(valid) if valid else None,
        stopped_early=stopped_early, stop_reason=stop_reason,
        all_succeeded=successes == len(order),
        missing_positions=missing, per_condition=per_condition(valid, labels), trials=seals, voids=voids,
        recovered=recovered, run_log_head=run_log_head)


def exit_status(summary: Summary) -> int:
    """Seed 001: 0 every run succeeded; 1 a valid game-failure and no invalid run; 2 an invalid run
    whose schedule position has no valid rerun yet (`--resume` reruns it), or a run stopped early."""
    if summary.stopped_early or summary.missing_positions:
        return 2
    return 0 if summary.all_succeeded else 1
