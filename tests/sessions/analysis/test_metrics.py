"""sessions.analysis.metrics on hand-built records: every expected figure is worked out by hand here."""

import math

import pytest

from engine.games.gamedef import GameDefinition
from engine.loop.records import Annotation, InputLine, TraceLine, TrialResult
from engine.loop.routes import RouteTracker
from sessions.analysis.metrics import (
    States,
    _curve,
    action_figures,
    actions_per_decision,
    condition_summary,
    confirmed_labels,
    effect,
    kappa,
    long_horizon,
    memory_figures,
    wilson,
)

SHA = {c: c * 64 for c in "abcdef"}


def ann(annotator, decision, type_, severity="material", *, n, trial="X-01", role="primary", primary=None,
        recovered=None, kind="memory-error", **more):
    return Annotation(trial_key=trial, decision_id=decision, frame_sha256=None, frame_index=None,
                      opened_utc="t", timestamp_utc="t", annotator=annotator, source="annotator", type=type_,
                      severity=severity, refers_to="1", note="", id=f"{annotator}-{n}", kind=kind, role=role,
                      primary_id=primary, recovered_decision=recovered, **more)


def two_annotators():
    # A: d2 omission, d5 omission, d8 fabrication.  B: d2 omission, d5 fabrication, d9 fabrication.
    return {
        "ann": [ann("ann", 2, "omission", "material", n=1), ann("ann", 5, "omission", n=2),
                ann("ann", 8, "fabrication", n=3)],
        "bob": [ann("bob", 2, "omission", "minor", n=1), ann("bob", 5, "fabrication", n=2),
                ann("bob", 9, "fabrication", n=3)],
    }


def test_wilson_interval_by_hand():
    # 3 of 5, z = 1.96: centre (0.6 + z²/10) / (1 + z²/5) = 0.5566, half-width
    # z sqrt(0.6*0.4/5 + z²/100) / (1 + z²/5) = 0.3258 -> [0.2307, 0.8824]
    lo, hi = wilson(3, 5)
    assert lo == pytest.approx(0.2307, abs=1e-4) and hi == pytest.approx(0.8824, abs=1e-4)
    assert wilson(0, 0) is None
    assert wilson(5, 5)[1] == 1.0


def test_kappa_two_annotators_by_hand():
    # 10 decisions. Overall categories: both "none" at 1,3,4,6,7,10 and both omission at 2: po = 7/10.
    # Marginals: A none 7, omission 2, fabrication 1; B none 7, omission 1, fabrication 2:
    # pe = (49 + 2 + 2) / 100 = 0.53, kappa = (0.7 - 0.53) / 0.47 = 0.361702.
    out = kappa(two_annotators(), {"X-01": 10})
    (pair,) = out["pairs"]
    assert pair["kappa"] == pytest.approx(0.17 / 0.47, abs=1e-6)
    assert pair["observed_agreement"] == 0.7
    # omission: A at {2,5}, B at {2}: po 0.9, pe = (2*1 + 8*9)/100 = 0.74, kappa = 0.16/0.26
    assert pair["per_type"]["omission"]["kappa"] == pytest.approx(0.16 / 0.26, abs=1e-6)
    # fabrication: A at {8}, B at {5, 9}: po 0.7, pe = (1*2 + 9*8)/100 = 0.74, kappa = -0.04/0.26
    assert pair["per_type"]["fabrication"]["kappa"] == pytest.approx(-0.04 / 0.26, abs=1e-6)
    assert [d["decision_id"] for d in pair["disagreements"]] == [5, 8, 9]
    assert pair["per_type"]["contradiction"]["kappa"] is None  # nobody used it: undefined, not 1


def test_disagreements_not_counted_until_adjudicated():
    layers = two_annotators()
    got = confirmed_labels(layers)
    # only d2 agrees; severity: the less severe of material and minor
    assert [(lab.decision_id, lab.type, lab.severity) for lab in got.labels] == [(2, "omission", "minor")]
    assert [d["decision_id"] for d in got.disputed] == [5, 8, 9]
    layers["adjudication"] = [ann("adjudication", 5, "fabrication", "critical", n=1, kind="adjudication",
                                  resolves=["ann-2", "bob-2"], resolution="relabel", reason="the frame shows it")]
    got = confirmed_labels(layers)
    assert [(lab.decision_id, lab.type, lab.severity, lab.source) for lab in got.labels] == [
        (2, "omission", "minor", "agreed"), (5, "fabrication", "critical", "adjudicated")]
    # the adjudication is shown beside the disagreement; originals stay
    pair = kappa(layers, {"X-01": 10})["pairs"][0]
    assert pair["disagreements"][0]["adjudication"]["resolution"] == "relabel"
    layers["adjudication"].append(ann("adjudication", 8, "fabrication", n=2, kind="adjudication",
                                      resolves=["ann-3"], resolution="reject", reason="not memory"))
    assert 8 not in [lab.decision_id for lab in confirmed_labels(layers).labels]


def test_a_trial_is_annotated_only_when_a_basis_layer_labels_it():
    layers = two_annotators()  # every label on X-01
    layers["bob"].append(ann("bob", 3, "route", "minor", n=4, trial="X-02", kind="route", room="hall"))
    layers["operator"] = [ann("operator", 4, "omission", n=1, trial="Y-01")]  # not the basis: annotators are
    got = confirmed_labels(layers)
    assert [k for k in ("X-01", "X-02", "Y-01") if got.is_annotated(k, 10)] == ["X-01", "X-02"]
    # with no annotator layer the operator's live tags are the basis, and name their trials only
    tags = confirmed_labels({"operator": layers["operator"]})
    assert [k for k in ("X-01", "Y-01") if tags.is_annotated(k, 10)] == ["Y-01"]
    assert not confirmed_labels({}).is_annotated("X-01", 10)


def reviewed(annotator, trial, first, last, *, n):
    return ann(annotator, first, "reviewed", "minor", n=n, trial=trial, kind="reviewed", through_decision=last)


def test_a_trial_reviewed_whole_is_annotated_with_a_known_count():
    # ann reviewed X-01 whole and found nothing; X-02 only in two parts, 1..4 and 5..10; Y-01 only 1..6 of 10
    layers = {"ann": [reviewed("ann", "X-01", 1, 10, n=1), reviewed("ann", "X-02", 1, 4, n=2),
                      reviewed("ann", "X-02", 5, 10, n=3), reviewed("ann", "Y-01", 1, 6, n=4)]}
    got = confirmed_labels(layers)
    assert got.basis == "annotators" and got.labels == []
    assert [k for k in ("X-01", "X-02", "Y-01", "Y-02") if got.is_annotated(k, 10)] == ["X-01", "X-02"]
    assert not got.is_annotated("X-01", 11)  # the trial grew past the review (it was still running)
    # a known zero, not null: every figure of the reviewed trial exists
    m = memory_figures([], 10, {d: 1 for d in range(1, 11)}, 10, 0, 0)
    assert (m.memory_errors, m.material_errors, m.memory_error_rate, m.memory_recovery_cost) == (0, 0, 0.0, 0)
    # two annotators who split Y-01 between them looked at all of it
    layers["bob"] = [reviewed("bob", "Y-01", 7, 10, n=1)]
    assert confirmed_labels(layers).is_annotated("Y-01", 10)
    # a reviewed record makes the layer's coverage of that trial its ranges and labels (no longer
    # the whole trial for one label), so a label outside a partial review leaves a gap
    layers = {"ann": [ann("ann", 8, "omission", n=1, trial="X-01"), reviewed("ann", "X-01", 1, 6, n=2)]}
    got = confirmed_labels(layers)
    assert not got.is_annotated("X-01", 8) and got.is_annotated("X-01", 6)
    assert [lab.decision_id for lab in got.labels] == [8]


def test_kappa_and_confirmation_treat_a_reviewed_unlabelled_decision_as_none():
    # ann reviewed X-01 whole and labelled only d2; bob labelled d2 and d5 (no review record: the whole
    # trial, as before); carol reviewed d1..4 of X-01 only. X-02 only bob looked at.
    layers = {
        "ann": [reviewed("ann", "X-01", 1, 10, n=1), ann("ann", 2, "omission", n=2)],
        "bob": [ann("bob", 2, "omission", n=1), ann("bob", 5, "omission", n=2),
                ann("bob", 3, "fabrication", n=3, trial="X-02")],
        "carol": [reviewed("carol", "X-01", 1, 4, n=1), ann("carol", 2, "omission", n=2)],
    }
    out = kappa(layers, {"X-01": 10, "X-02": 10})
    pairs = {tuple(p["annotators"]): p for p in out["pairs"]}
    ab = pairs[("ann", "bob")]
    # X-01's 10 decisions; X-02 only bob looked at: missing for ann, not 10 agreements on "none"
    assert (ab["units"], ab["one_sided"]) == (10, 10)
    # po 9/10; ann none 9, omission 1; bob none 8, omission 2: pe = (72 + 2) / 100, kappa = 0.16 / 0.26
    assert ab["observed_agreement"] == 0.9 and ab["kappa"] == pytest.approx(0.16 / 0.26, abs=1e-6)
    assert [(d["trial_key"], d["decision_id"], d["ann"], d["bob"]) for d in ab["disagreements"]] == [
        ("X-01", 5, ["none"], ["omission"])]  # reviewed, unlabelled, against a label: a disagreement
    ac = pairs[("ann", "carol")]
    assert (ac["units"], ac["one_sided"], ac["kappa"], ac["disagreements"]) == (4, 6, 1.0, [])
    bc = pairs[("bob", "carol")]
    assert (bc["units"], bc["one_sided"]) == (4, 16)  # d5 is outside carol's review: not a disagreement
    got = confirmed_labels(layers)
    # d2: all three agree; d5: ann reviewed it and gave none against bob's omission (carol did not look):
    # disputed; X-02 d3: bob alone looked at X-02, so his label counts
    assert [(lab.trial_key, lab.decision_id, lab.type, lab.source) for lab in got.labels] == [
        ("X-01", 2, "omission", "agreed"), ("X-02", 3, "fabrication", "single")]
    assert [(d["trial_key"], d["decision_id"], sorted(d["labels"])) for d in got.disputed] == [
        ("X-01", 5, ["ann", "bob"])]
    # an adjudication settles the disputed decision as ever
    layers["adjudication"] = [ann("adjudication", 5, "omission", n=1, kind="adjudication", resolves=["bob-2"],
                                  resolution="accept", reason="the frame shows the bedroom again")]
    assert [(lab.decision_id, lab.source) for lab in confirmed_labels(layers).labels if lab.trial_key == "X-01"] \
        == [(2, "agreed"), (5, "adjudicated")]
    assert kappa(layers, {"X-01": 10})["pairs"][0]["disagreements"][0]["adjudication"]["resolution"] == "accept"


def test_primary_cause_with_memory_consequence_counted_once():
    layers = {"ann": [
        ann("ann", 3, "other", "material", n=1),  # perception: the primary cause, not a memory error
        ann("ann", 3, "memory-use-failure", "minor", n=2, role="consequence", primary="ann-1"),
        ann("ann", 6, "omission", "material", n=3, recovered=8),
        ann("ann", 7, "duplicate-objective", "material", n=4, role="consequence", primary="ann-3"),
    ]}
    labels = confirmed_labels(layers).labels
    per_decision = {d: 2 for d in range(1, 11)} | {7: 0}
    m = memory_figures(labels, 10, per_decision, 10, 0, 0)
    # memory errors: the consequence at d3 (its primary is not a memory error) and the omission at d6;
    # the duplicate objective at d7 is the omission's consequence: not counted again.
    assert m.memory_errors == 2
    assert m.material_errors == 1  # d3's consequence is minor
    assert m.memory_error_rate == 20.0 and m.material_memory_error_rate == 10.0
    # per type, the consequence counts where its primary is not in the same aggregate
    assert m.by_type["duplicate-objective"] == 1 and m.by_type["omission"] == 1
    # recovery: d3 never recovered -> decisions 3..10 (7 of them with 2 actions, d7 none) = 14;
    # d6 recovered at d8 -> decisions 6 and 7 = 2 + 0. Total 16.
    assert m.memory_recovery_cost == 16
    # nobody annotated: unknown, never zero
    none = memory_figures(None, 10, per_decision, 10, 0, 0)
    assert none.memory_errors is None and none.memory_error_rate is None


def row(label, key, *, points, cost, milestones, actions=100, outcome=None, mat=0.0):
    return {"trial_key": key, "condition": label, "condition_id": None, "valid": True, "deepest": None,
            "outcome": outcome or ("success" if milestones == 8 else "game-failure"), "points": points,
            "milestones": milestones, "accepted_actions": actions, "model_decisions": 50, "cost_usd": cost,
            "zero_progress": points == 0, "cost_per_point": None if cost is None or not points else cost / points,
            "cost_per_milestone": None if cost is None or not milestones else cost / milestones,
            "actions_per_milestone": actions / milestones if milestones else None,
            "material_memory_error_rate": mat, "errors_by_type": {}, "errors_by_severity": {}}


def test_zero_progress_and_unknown_cost():
    rows = [row("X", "X-01", points=0, cost=0.5, milestones=0),
            row("X", "X-02", points=10, cost=1.0, milestones=4),
            row("X", "X-03", points=20, cost=None, milestones=8)]
    s = condition_summary(rows, paired_blocks=None, seed=1)["conditions"]["X"]
    assert s["zero_progress"] == 1
    cpp = s["metrics"]["cost_per_point"]
    # the zero-progress trial is excluded (never an infinite ratio); the unknown cost makes it null
    assert (cpp["excluded"], cpp["unknown"], cpp["median"]) == (1, 1, None)
    assert s["metrics"]["cost_usd"]["median"] is None  # unknown is never treated as 0
    assert (s["metrics"]["points"]["median"], s["metrics"]["points"]["min"], s["metrics"]["points"]["max"]) == \
        (10, 0, 20)
    assert s["completion_rate"] == pytest.approx(1 / 3)
    assert s["completion_ci95"] == wilson(1, 3)


def test_paired_blocks_effect_by_hand():
    xs = [row("X", f"X-0{i + 1}", points=p, cost=1.0, milestones=m)
          for i, (p, m) in enumerate([(4, 2), (8, 4), (12, 6)])]
    ys = [row("Y", f"Y-0{i + 1}", points=p, cost=1.0, milestones=m)
          for i, (p, m) in enumerate([(6, 3), (14, 7), (12, 6)])]
    blocks = {"X-01": 0, "Y-01": 0, "Y-02": 1, "X-02": 1, "X-03": 2, "Y-03": 2}
    e = effect(xs, ys, "milestones", 1, blocks=blocks, seed=7)
    # per-block differences 1, 3, 0: mean 4/3
    assert e["estimate"] == pytest.approx(4 / 3, abs=1e-6) and e["paired"] and e["n"] == 3
    lo, hi = e["ci95"]
    assert 0 <= lo <= e["estimate"] <= hi <= 3  # a resampled mean of {1, 3, 0} stays within [0, 3]
    assert effect(xs, ys, "milestones", 1, blocks=blocks, seed=7) == e  # the seed reproduces it
    # cost saved per point: A 0.25, 0.125, 1/12; B 1/6, 1/14, 1/12: sign -1 -> A - B per block
    c = effect(xs, ys, "cost_per_point", -1, blocks=blocks, seed=7)
    expected = ((0.25 - 1 / 6) + (0.125 - 1 / 14) + 0) / 3
    assert c["estimate"] == pytest.approx(expected, abs=1e-6)
    # a block without a valid Y trial drops out of the pairing
    e2 = effect(xs, ys[:2], "milestones", 1, blocks=blocks, seed=7)
    assert e2["n"] == 2 and e2["estimate"] == 2.0
    s = condition_summary(xs + ys, paired_blocks=blocks, seed=7)
    assert s["bootstrap"]["seed"] == 7 and s["bootstrap"]["paired"]
    assert not s["significance_supported"] and "significance claims are not supported" in s["significance_note"]
    assert s["effects"]["Y vs X"]["additional_milestones"]["estimate"] == pytest.approx(4 / 3, abs=1e-6)


def test_unpaired_effect_is_difference_of_means():
    xs = [row("X", "X-01", points=2, cost=1, milestones=1), row("X", "X-02", points=6, cost=1, milestones=3)]
    ys = [row("Y", "Y-01", points=10, cost=1, milestones=5)]
    e = effect(xs, ys, "milestones", 1, blocks=None, seed=1)
    assert e["estimate"] == 3.0 and not e["paired"] and e["ci95"] is None  # one Y trial: no interval


def _walk(tracker, reached=()):
    right = [((1, x, 0), "RIGHT", (1, x + 1, 0)) for x in range(4)]
    left = [((1, x + 1, 0), "LEFT", (1, x, 0)) for x in reversed(range(4))]
    for before, action, after in right + left + right + left:
        tracker.record(before, action, after, reached)
    return tracker


def test_required_backtracking_is_not_repetition():
    # 16 transitions (right, left, right, left over 4 tiles). The second right pass repeats segment
    # (t1..t4) once; the second left pass repeats the four segments ending in it: 5 repeated actions.
    assert _walk(RouteTracker(loop_repeats=None)).repeated_actions == 5
    game = GameDefinition.model_validate({
        "id": "g", "title": "g", "platform": "gb", "fields": {"m": {"address": 1}, "x": {"address": 2},
                                                              "y": {"address": 3}, "f": {"address": 4}},
        "position": {"map": "m", "x": "x", "y": "y"},
        "milestones": [{"id": "M6", "name": "a", "points": 1, "all": [{"field": "f", "eq": 1}]},
                       {"id": "M7", "name": "b", "points": 1, "all": [{"field": "f", "eq": 2}]}],
        "required_backtracking": [{"from_map": 1, "to_map": 2, "after": "M6", "until": "M7"}],
        "recovery_events": ["f"]})
    inside = _walk(RouteTracker(loop_repeats=None, backtracking=game.required_backtracking), ["M6"])
    assert inside.repeated_actions == 0 and inside.excused_actions == 13  # every full segment excused
    outside = _walk(RouteTracker(loop_repeats=None, backtracking=game.required_backtracking), ["M6", "M7"])
    assert outside.repeated_actions == 5
    with pytest.raises(ValueError, match="M9"):
        GameDefinition.model_validate({**game.model_dump(), "required_backtracking": [
            {"from_map": 1, "to_map": 2, "after": "M9"}]})


def _trace(d, frame, actions):
    return TraceLine.model_validate({
        "experiment_id": "e", "condition_id": "X", "trial_id": 1, "decision_id": d, "timestamp_utc": "t",
        "frame_sha256": frame, "prompt_sha256": None, "model_id": None, "response_id": None,
        "input_tokens": None, "output_tokens": None, "cached_tokens": None, "provider_cost_usd": None,
        "cost_source": None, "latency_ms": None, "attempts": 1, "paid_calls": 0, "aborted": False,
        "parsed_actions": actions, "accepted_actions": len(actions), "invalid_output": False,
        "reasoning_summary": None, "observed": None, "memory_reads": [], "memory_writes": [],
        "milestones_before": [], "milestones_after": [], "result_frame_sha256": frame, "result_frame_index": 0,
        "termination_reason": None})


def _input(d, i, action, frame, capture):
    return InputLine(decision_id=d, index=i, action=action, press_frame=capture - 5, release_frame=capture - 1,
                     capture_frame=capture, frame_sha256=frame)


def test_productive_actions_screen_and_state():
    trace = [_trace(1, SHA["a"], ["RIGHT", "A"]), _trace(2, SHA["b"], ["RIGHT"])]
    inputs = [_input(1, 0, "RIGHT", SHA["b"], 10), _input(1, 1, "A", SHA["b"], 20),
              _input(2, 0, "RIGHT", SHA["c"], 30)]
    # screen only: a->b changed, b->b unchanged, b->c changed
    f = action_figures(trace[0].frame_sha256, iter(inputs), len(inputs), {}, None, None)
    assert (f.productive, f.changed, f.repeated, f.battle) == (2, 2, 0, None)
    # with replayed state: the A press changed a probed field (a flag) though the screen did not
    game = GameDefinition.model_validate({
        "id": "g", "title": "g", "platform": "gb", "battle_field": "bt",
        "fields": {"m": {"address": 1}, "x": {"address": 2}, "y": {"address": 3}, "f": {"address": 4},
                   "bt": {"address": 5}, "clock": {"address": 6}},
        "position": {"map": "m", "x": "x", "y": "y"}, "progress_fields": ["f"],
        "milestones": [{"id": "M1", "name": "a", "points": 1, "all": [{"field": "f", "eq": 9}]}]})
    s0 = {"m": 1, "x": 0, "y": 0, "f": 0, "bt": 0, "clock": 0}
    states = States(s0, [{**s0, "x": 1, "clock": 1}, {**s0, "x": 1, "f": 1, "clock": 2},
                         {**s0, "x": 1, "f": 1, "bt": 1, "clock": 3}])
    f = action_figures(trace[0].frame_sha256, iter(inputs), len(inputs), {}, game, states)
    assert (f.productive, f.battle, f.navigation) == (3, 0, 3)  # the clock ticking is not a change
    per_decision, count = actions_per_decision(iter(inputs))
    assert (per_decision, count) == ({1: 2, 2: 1}, 3)
    seen = []
    curve = _curve(iter(trace), per_decision, _result([], 1.0, None), seen.append)
    assert [(p["decision"], p["actions"]) for p in curve] == [(1, 2), (2, 3)] and seen == trace


H = 3600.0


def _result(reached, wall, latency_ms, stamps_h=None, active_h=None):
    """A result reaching `reached`; stamps_h: each rung's active hours (None: a folder without stamps)."""
    awards = [{"id": mid, "name": "m", "points": 1, "decision_id": 1, "frame_index": i, "frame_sha256": "0" * 64,
               "probe": {}, **({"active_seconds": stamps_h[i] * H} if stamps_h else {})}
              for i, mid in enumerate(reached)]
    return TrialResult.model_validate({
        "experiment_id": "e", "condition": "X", "trial": 1, "trial_key": "X-01", "position": 0, "attempt": 1,
        "outcome": "success", "termination_reason": "final-milestone", "termination_detail": None,
        "invalid_cause": None, "error": None, "started_utc": "t", "ended_utc": "t", "last_decision": 1,
        "milestones": awards, "milestones_reached": reached, "pre_satisfied": [], "deepest_milestone": None,
        "progress_points": 0, "total_points": 0, "derived": {}, "provenance": {},
        "telemetry": {"decisions": 1, "model_calls": 1, "aborted_calls": 0, "accepted_actions": 1,
                      "invalid_outputs": 0, "input_tokens": None, "output_tokens": None, "cached_tokens": None,
                      "tokens": None, "cost_usd": None, "cost_source": None, "model_latency_ms": latency_ms,
                      "rejected_actions": 0, "ignored_inputs": 0, "repeated_position_loops": 0,
                      "repeated_navigation_actions": 0, "wall_time_seconds": wall, "held_seconds": 0.0,
                      "frames": 1, **({"active_seconds": active_h * H} if active_h is not None else {})}})


LH_BASE = {"id": "g", "title": "g", "platform": "gb", "fields": {"f": {"address": 1}, "lvl": {"address": 2}},
           "milestones": [{"id": f"M{i}", "name": "m", "points": 1, "required": i != 3,
                           "all": [{"field": "f", "ge": i}]} for i in range(1, 6)]}
LH_GAME = GameDefinition.model_validate({**LH_BASE, "long_horizon": {"reference_hours": 20, "budget_hours": 40,
                                                                     "level_field": "lvl"}})
ALL = ["M1", "M2", "M3", "M4", "M5"]


def test_long_horizon_scorer_by_hand():
    # 4 required rungs (M3 optional). The final rung M5 stamped at 10 active hours (the trial's wall
    # time, 11 h, and its model latency play no part): progress 70, speed 40 log2(1 + 20/10) = 63.398500,
    # discipline at L=80: 10 * 20/40 = 5.
    out = long_horizon(_result(ALL, 11 * H, 3 * H * 1000, [1, 3, 5, 8, 10], 10.5), LH_GAME, 80)
    assert out["progress"] == 70 and out["gate"] == 1 and out["active_hours"] == 10 and out["trimmed"] == []
    assert out["speed"] == pytest.approx(40 * math.log2(3), abs=1e-6)
    assert out["discipline"] == 5 and out["overall"] == pytest.approx(75 + 40 * math.log2(3), abs=1e-5)
    # not finished: F = 0, only progress (optional M3 never counts): 70 * 2/4
    out = long_horizon(_result(["M1", "M3", "M4"], H, 0.0, [0.1, 0.2, 0.3], 0.5), LH_GAME, 50)
    assert (out["gate"], out["overall"]) == (0, 35.0)
    # no section: null with the reason
    out = long_horizon(_result(["M1"], 10, 0.0), GameDefinition.model_validate(LH_BASE), None)
    assert out["overall"] is None and "long_horizon" in out["reason"]


def test_long_horizon_trims_rungs_reached_after_the_budget():
    # Budget 40 active hours. M1 at 2 h and M2 at 39 h count; optional M3 (39.5 h) never does; M4 at 41 h and the
    # final M5 at 45 h come after the budget: m = 2 of 4, progress 70 * 2/4 = 35, F = 0, overall 35.
    out = long_horizon(_result(ALL, 50 * H, 0.0, [2, 39, 39.5, 41, 45], 45.2), LH_GAME, 50)
    assert (out["reached_required"], out["progress"], out["gate"], out["overall"]) == (2, 35.0, 0, 35.0)
    assert out["trimmed"] == ["M4", "M5"] and out["active_hours"] == 45
    # Wall time over budget, active time within it (model thinking excluded): everything counts, F = 1,
    # speed from the final stamp: 40 log2(1 + 20/40) at 40 h exactly.
    out = long_horizon(_result(ALL, 70 * H, 0.0, [2, 10, 20, 30, 40], 40), LH_GAME, 60)
    assert (out["progress"], out["gate"], out["discipline"]) == (70, 1, 10)
    assert out["speed"] == pytest.approx(40 * math.log2(1.5), abs=1e-6)


def test_long_horizon_without_stamps_is_null_where_unknown():
    # A folder from before the stamps: its wall time bounds active time, so a 1-hour trial's rungs are
    # all within budget (progress 70 * 2/4, F = 0) ...
    out = long_horizon(_result(["M1", "M2"], H, 0.0), LH_GAME, 50)
    assert (out["progress"], out["gate"], out["overall"]) == (35.0, 0, 35.0)
    # ... but its time to the finish is unknown: no speed, no overall
    out = long_horizon(_result(ALL, H, 0.0), LH_GAME, 50)
    assert out["progress"] == 70 and out["speed"] is None and out["overall"] is None and "stamp" in out["reason"]
    # and past the budget in wall time, which rungs count is unknown
    out = long_horizon(_result(["M1", "M2"], 41 * H, 0.0), LH_GAME, 50)
    assert out["progress"] is None and out["overall"] is None and "M1, M2" in out["reason"]
