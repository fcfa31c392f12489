"""summary.json: the series' counts and per-condition medians, computed from result.json files."""

from __future__ import annotations

from statistics import median

VALID = ("success", "game-failure")


def _spread(values: list) -> dict:
    """Median and range; null when any value is unknown or there are none."""
    if not values or any(v is None for v in values):
        return {"median": None, "min": None, "max": None}
    return {"median": median(values), "min": min(values), "max": max(values)}


def summarise(results: list[dict], requested: int, stopped_early: bool, stop_reason: str | None,
              labels: list[str]) -> dict:
    valid = [r for r in results if r["outcome"] in VALID]
    successful = [r for r in results if r["outcome"] == "success"]
    per_condition = {}
    for label in labels:
        rows = [r for r in valid if r["condition"] == label]
        per_condition[label] = {
            "trials": len([r for r in results if r["condition"] == label]),
            "valid": len(rows),
            "successful": len([r for r in rows if r["outcome"] == "success"]),
            "completion_rate": (len([r for r in rows if r["outcome"] == "success"]) / len(rows))
            if rows else None,
            "zero_progress": len([r for r in rows if r["progress_points"] == 0]),
            "progress_points": _spread([r["progress_points"] for r in rows]),
            "accepted_actions": _spread([r["telemetry"]["accepted_actions"] for r in rows]),
            "decisions": _spread([r["telemetry"]["decisions"] for r in rows]),
            "cost_usd": _spread([r["telemetry"]["cost_usd"] for r in rows]),
            "deepest_milestones": [r["deepest_milestone"] for r in rows],
        }
    return {
        "requested": requested,
        "completed": len(results),
        "valid": len(valid),
        "successful": len(successful),
        "failed": len([r for r in valid if r["outcome"] == "game-failure"]),
        "invalid": len(results) - len(valid),
        "success_rate": (len(successful) / len(valid)) if valid else None,
        "stopped_early": stopped_early,
        "stop_reason": stop_reason,
        "all_succeeded": len(successful) == requested,
        "per_condition": per_condition,
    }


def exit_status(summary: dict) -> int:
    """Seed 001: 0 every run succeeded; 1 a valid game-failure and no invalid run; 2 any invalid run."""
    if summary["invalid"] or summary["stopped_early"]:
        return 2
    return 0 if summary["all_succeeded"] else 1
