import pytest

from engine.budgets import BudgetLimits, Budgets
from engine.gamedef import GameDefinition
from engine.ladder import Ladder
from engine.policy import Usage
from engine.routes import RouteTracker

GAME = GameDefinition.model_validate({
    "id": "t", "title": "t", "platform": "gb",
    "fields": {"magic": {"address": 1}, "flags": {"address": 2}, "bag": {"address": 3, "kind": "bytes", "length": 2}},
    "ready": [{"field": "magic", "eq": 0x4F}],
    "milestones": [
        {"id": "M1", "name": "one", "points": 1, "all": [{"field": "flags", "bit_set": 0}]},
        {"id": "M2", "name": "two", "points": 2, "all": [{"field": "bag", "contains": 1}]},
        {"id": "M3", "name": "three", "points": 3, "all": [{"field": "flags", "bit_set": 2},
                                                          {"field": "bag", "lacks": 1}]},
    ],
})


def s(flags=0, bag=(0, 0), magic=0x4F):
    return {"magic": magic, "flags": flags, "bag": list(bag)}


def upd(ladder, prev, cur, did=1):
    return [a.id for a in ladder.update(prev, cur, decision_id=did, frame_index=did * 16,
                                                   frame_sha256=f"{did:064x}")]


def test_needs_two_consecutive_qualifying_frames():
    lad = Ladder(GAME, s())
    assert upd(lad, s(), s(flags=1)) == []  # one frame only
    assert upd(lad, s(flags=1), s(flags=1), did=2) == ["M1"]
    award = lad.awards["M1"]
    assert (award.decision_id, award.frame_index, award.probe["flags"]) == (2, 32, 1)


def test_awarded_once():
    lad = Ladder(GAME, s())
    assert upd(lad, s(flags=1), s(flags=1)) == ["M1"]
    assert upd(lad, s(), s(), did=2) == []
    assert upd(lad, s(flags=1), s(flags=1), did=3) == []
    assert lad.points == 1 and lad.awards["M1"].decision_id == 1


def test_never_awarded_when_true_at_start():
    lad = Ladder(GAME, s(flags=1))
    assert lad.pre_satisfied == {"M1"}
    assert upd(lad, s(flags=1), s(flags=1)) == []
    assert upd(lad, s(flags=1, bag=(1, 0)), s(flags=1, bag=(1, 0)), did=2) == ["M2"]
    assert lad.deepest is None  # M1 never reached, so nothing is reached in order


def test_not_ready_samples_award_nothing():
    lad = Ladder(GAME, s(magic=0, flags=0xFF))
    assert lad.pre_satisfied == frozenset()  # garbage before init does not count as "true at start"
    assert upd(lad, s(magic=0, flags=1), s(magic=0, flags=1)) == []
    assert upd(lad, s(flags=1), s(flags=1), did=2) == ["M1"]


def test_deepest_and_points_follow_ladder_order():
    lad = Ladder(GAME, s())
    upd(lad, s(flags=1), s(flags=1), 1)
    upd(lad, s(flags=5), s(flags=5), 2)  # M3 (bit 2, no parcel) before M2
    assert lad.reached == ["M1", "M3"] and lad.deepest == "M1" and lad.points == 4
    upd(lad, s(flags=5, bag=(1, 0)), s(flags=5, bag=(1, 0)), 3)
    assert lad.deepest == "M3" and lad.final_reached


def test_definition_rejects_unknown_fields():
    with pytest.raises(ValueError, match="undefined fields: nope"):
        GameDefinition.model_validate({**GAME.model_dump(), "progress_fields": ["nope"]})


def test_budgets_stop_at_first_exhausted():
    b = Budgets(BudgetLimits(accepted_actions=3, model_decisions=10))
    assert b.exhausted() is None
    b.accepted_actions = 3
    assert b.exhausted() == "budget:accepted_actions" and b.actions_left() == 0
    b2 = Budgets(BudgetLimits(model_decisions=2))
    b2.add_call(None)
    b2.add_call(None)
    assert b2.exhausted() == "budget:model_decisions"


def test_unknown_cost_is_null_and_stops_a_cost_budget():
    b = Budgets(BudgetLimits(total_cost_usd=1.0))
    b.add_call(None)  # a call that costs nothing (a script): a known zero, as result.json says
    assert b.snapshot()["total_cost_usd"] == {"used": 0.0, "limit": 1.0} and b.snapshot()["tokens"]["used"] == 0
    b.add_call(Usage(input_tokens=10, output_tokens=5, cost_usd=0.25))
    assert b.cost_usd == 0.25 and b.tokens == 15 and b.exhausted() is None
    b.add_call(Usage(input_tokens=10, output_tokens=5, cost_usd=None))
    assert b.cost_usd is None and b.exhausted() == "budget:cost_unknown"
    assert b.snapshot()["total_cost_usd"] == {"used": None, "limit": 1.0}


def test_cost_and_token_limits():
    b = Budgets(BudgetLimits(total_cost_usd=0.5, tokens=100))
    b.add_call(Usage(input_tokens=60, output_tokens=50, cost_usd=0.1))
    assert b.exhausted() == "budget:tokens"
    b = Budgets(BudgetLimits(total_cost_usd=0.5))
    b.add_call(Usage(input_tokens=1, output_tokens=1, cost_usd=0.5))
    assert b.exhausted() == "budget:total_cost"


def test_wall_time_budget():
    b = Budgets(BudgetLimits(wall_time_minutes=1))
    b.active_seconds = 59.9
    assert b.exhausted() is None
    b.active_seconds = 60
    assert b.exhausted() == "budget:wall_time"


def test_route_loop_detected_after_three_repeats_without_progress():
    r = RouteTracker(loop_repeats=3)
    lap = [((0, 1, 1), "RIGHT", (0, 2, 1)), ((0, 2, 1), "DOWN", (0, 2, 2)),
           ((0, 2, 2), "LEFT", (0, 1, 2)), ((0, 1, 2), "UP", (0, 1, 1))]
    looped = [r.record(*t) for t in lap * 3]
    assert not any(looped[:-1]) and looped[-1] and r.loops_detected == 1
    assert r.repeated_actions > 0


def test_route_progress_resets_and_bumps_are_not_transitions():
    r = RouteTracker(loop_repeats=3)
    lap = [((0, 1, 1), "RIGHT", (0, 2, 1)), ((0, 2, 1), "LEFT", (0, 1, 1))]
    for _ in range(3):
        for t in lap * 2:
            assert not r.record(*t)
        r.progress()
    assert not r.record((0, 1, 1), "UP", (0, 1, 1))  # a wall bump moves nothing
    assert r.transitions == []


@pytest.mark.parametrize("cond", [
    {"field": "v", "eq": 5}, {"field": "v", "ne": 5}, {"field": "v", "ge": 5}, {"field": "v", "le": 5},
    {"field": "v", "bit_set": 2}, {"field": "v", "bit_clear": 2}, {"field": "v", "ge": 2, "bit_set": 0},
    {"field": "b", "contains": 1}, {"field": "b", "lacks": 1},
])
def test_compiled_conditions_agree_with_holds(cond):
    from engine.gamedef import Condition

    c = Condition.model_validate(cond)
    compiled = c.compile()
    for v in range(9):
        for bag in ([0, 0], [1, 0], [2, 1]):
            sample = {"v": v, "b": bag}
            assert compiled(sample) == c.holds(sample), (cond, sample)
