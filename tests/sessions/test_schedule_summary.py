import pytest

from sessions.schedule import blind_labels, trial_order
from sessions.summary import exit_status, summarise


def test_counterbalanced_default_matches_seed():
    order = trial_order(["X", "Y"], 5, "counterbalanced")
    assert [lab for lab, _ in order] == list("XYYXXYYXXY")
    assert order[:4] == [("X", 1), ("Y", 1), ("Y", 2), ("X", 2)]


def test_explicit_order_must_balance():
    with pytest.raises(ValueError, match="exactly 2 times"):
        trial_order(["X", "Y"], 2, ["X", "X", "Y"])
    assert [lab for lab, _ in trial_order(["X", "Y"], 1, ["Y", "X"])] == ["Y", "X"]


def test_blinding_is_a_bijection_and_seedable():
    a = blind_labels(["model_a", "model_b", "model_c"], seed=7)
    assert sorted(a.values()) == ["X", "Y", "Z"]
    assert a == blind_labels(["model_a", "model_b", "model_c"], seed=7)


def result(label, outcome, points=0, cost=0.0):
    return {"condition": label, "outcome": outcome, "progress_points": points, "deepest_milestone": None,
            "telemetry": {"accepted_actions": 10, "decisions": 5, "cost_usd": cost}}


def test_summary_counts_and_rates_use_valid_runs_only():
    rs = [result("X", "success", 20), result("X", "game-failure", 3), result("Y", "invalid-provider")]
    s = summarise(rs, requested=4, stopped_early=True, stop_reason="external-provider-failure", labels=["X", "Y"])
    assert (s["completed"], s["valid"], s["successful"], s["failed"], s["invalid"]) == (3, 2, 1, 1, 1)
    assert s["success_rate"] == 0.5 and not s["all_succeeded"]
    assert s["per_condition"]["X"]["progress_points"] == {"median": 11.5, "min": 3, "max": 20}
    assert s["per_condition"]["Y"]["progress_points"]["median"] is None
    assert exit_status(s) == 2


def test_summary_unknown_cost_stays_null_and_exit_codes():
    rs = [result("X", "success", 20, cost=None), result("X", "success", 20)]
    s = summarise(rs, 2, False, None, ["X"])
    assert s["per_condition"]["X"]["cost_usd"]["median"] is None
    assert s["all_succeeded"] and exit_status(s) == 0
    s = summarise([result("X", "game-failure")], 1, False, None, ["X"])
    assert exit_status(s) == 1
    assert summarise([], 1, False, None, ["X"])["success_rate"] is None
