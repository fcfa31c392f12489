import pytest

from sessions.analysis.summary import exit_status, summarise
from sessions.execute.schedule import blind_labels, trial_order


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


def result(key, outcome, points=0, cost=0.0, position=0):
    from engine.loop.records import Chain, TrialResult
    from engine.loop.tally import TraceTally

    tally = TraceTally(decisions=5, accepted_actions=10, cost_usd=cost)
    return TrialResult.model_construct(
        condition=key[0], trial_key=key, position=position, attempt=1, outcome=outcome, progress_points=points,
        deepest_milestone=None, telemetry=tally.telemetry(),
        chain=Chain.model_construct(trace_head="ab" * 32)), "cd" * 32


def summary(results: dict, order, voids=(), stopped=False, reason=None):
    from sessions.evidence.records import VoidRecord

    voids = [VoidRecord(void=i + 1, positions=v, trial_keys=[order[p] for p in v], trigger=order[v[0]],
                        outcome="harness-error", cause="emulator-fault", timestamp_utc="t")
             for i, v in enumerate(voids)]
    return summarise(experiment_id="e", manifest_sha256="a" * 64, schedule_sha256="b" * 64, order=list(order),
                     results=results, voids=voids, labels=sorted({k[0] for k in order}), stopped_early=stopped,
                     stop_reason=reason, recovered=False, run_log_head="c" * 64)


def test_summary_counts_and_rates_use_valid_runs_only():
    order = ["X-01", "Y-01", "Y-02", "X-02"]
    rs = {"X-01": result("X-01", "success", 20), "X-02": result("X-02", "game-failure", 3, position=3)}
    s = summary(rs, order, voids=[[1, 2]], stopped=True, reason="external-provider-failure")
    assert (s.completed, s.valid, s.successful, s.failed, s.invalid) == (2, 2, 1, 1, 2)
    assert s.success_rate == 0.5 and not s.all_succeeded and s.missing_positions == [1, 2]
    assert s.per_condition["X"]["progress_points"] == {"median": 11.5, "min": 3, "max": 20}
    assert s.per_condition["Y"]["progress_points"]["median"] is None
    assert exit_status(s) == 2


def test_summary_unknown_cost_stays_null_and_exit_codes():
    order = ["X-01", "X-02"]
    s = summary({"X-01": result("X-01", "success", 20, cost=None), "X-02": result("X-02", "success", 20)}, order)
    assert s.per_condition["X"]["cost_usd"]["median"] is None
    assert s.all_succeeded and exit_status(s) == 0
    s = summary({"X-01": result("X-01", "game-failure")}, ["X-01"])
    assert exit_status(s) == 1
    s = summary({}, ["X-01"], voids=[[0]])
    assert s.success_rate is None and s.missing_positions == [0] and exit_status(s) == 2
