import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.games.gamedef import GameDefinition
from engine.games.ladder import Ladder
from engine.loop.budgets import BudgetLimits, Budgets
from engine.loop.routes import RouteTracker
from engine.policies.policy import Usage

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
    # M1 held at the start: it is never awarded and earns nothing, but it blocks nothing either.
    assert lad.deepest == "M2" and lad.points == 2 and lad.skipped_required == []


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
    from engine.games.gamedef import Condition

    c = Condition.model_validate(cond)
    compiled = c.compile()
    for v in range(9):
        for bag in ([0, 0], [1, 0], [2, 1]):
            sample = {"v": v, "b": bag}
            assert compiled(sample) == c.holds(sample), (cond, sample)


# -- required and optional rungs (engine.games.ladder's rules) -------------------------------------------

RUNGS = ["R1", "R2", "R3", "R4"]


def ladder_game(required=(True, True, True, True), final=None, extra=()):
    """Four rungs on bits 0..3 of `flags` (plus `extra` rungs on bits 4.. after them)."""
    rungs = [{"id": f"R{i + 1}", "name": f"r{i + 1}", "points": i + 1, "required": req,
              "all": [{"field": "flags", "bit_set": i}]} for i, req in enumerate(required)]
    rungs += [{"id": x, "name": x, "points": 10, "all": [{"field": "flags", "bit_set": 4 + i}]}
              for i, x in enumerate(extra)]
    return GameDefinition.model_validate({
        "id": "t", "title": "t", "platform": "gb", "fields": {"magic": {"address": 1}, "flags": {"address": 2}},
        "ready": [{"field": "magic", "eq": 0x4F}], "milestones": rungs, "final_milestone": final})


def f(flags):
    return {"magic": 0x4F, "flags": flags}


def test_a_skipped_required_rung_ends_the_trial_without_success_and_is_reported():
    from engine.games.ladder import FINAL_SKIPPED

    lad = Ladder(ladder_game(), f(0))
    assert upd(lad, f(0b0001), f(0b0001)) == ["R1"] and lad.ending is None
    assert upd(lad, f(0b0101), f(0b0101), 2) == ["R3"] and lad.ending is None  # R2 passed over
    assert lad.skipped_required == ["R2"] and lad.deepest == "R1"
    assert upd(lad, f(0b1101), f(0b1101), 3) == ["R4"]
    assert lad.ending == FINAL_SKIPPED and lad.final_reached
    assert lad.skipped_required == ["R2"] and lad.deepest == "R1" and lad.points == 1 + 3 + 4


def test_a_skipped_optional_rung_is_stepped_over():
    from engine.games.ladder import FINAL

    lad = Ladder(ladder_game(required=(True, False, True, True)), f(0))
    upd(lad, f(0b0001), f(0b0001))
    upd(lad, f(0b0101), f(0b0101), 2)
    assert lad.deepest == "R3" and lad.skipped_required == [] and lad.ending is None
    upd(lad, f(0b1101), f(0b1101), 3)
    assert lad.ending == FINAL and lad.deepest == "R4" and lad.reached == ["R1", "R3", "R4"]


def test_a_pre_satisfied_rung_is_reported_earns_nothing_and_blocks_nothing():
    from engine.games.ladder import FINAL

    lad = Ladder(ladder_game(), f(0b0010))
    assert lad.pre_satisfied == {"R2"} and lad.deepest is None  # R1 still stops the walk
    upd(lad, f(0b0011), f(0b0011))
    assert lad.deepest == "R2" and lad.points == 1  # passes R2 without its 2 points
    upd(lad, f(0b1111), f(0b1111), 2)
    assert lad.reached == ["R1", "R3", "R4"] and "R2" not in lad.awards
    assert lad.ending == FINAL and lad.skipped_required == [] and lad.points == 1 + 3 + 4


def test_a_pre_satisfied_final_rung_ends_the_trial_when_the_last_required_rung_is_reached():
    from engine.games.ladder import FINAL

    lad = Ladder(ladder_game(), f(0b1000))
    assert lad.pre_satisfied == {"R4"} and lad.ending is None  # it cannot be reached again: play on
    upd(lad, f(0b1011), f(0b1011))
    assert lad.ending is None
    upd(lad, f(0b1111), f(0b1111), 2)
    assert lad.ending == FINAL and lad.deepest == "R4" and lad.points == 6


def test_every_rung_held_at_the_start_is_a_success_at_once_worth_nothing():
    from engine.games.ladder import FINAL

    lad = Ladder(ladder_game(), f(0b1111))
    assert lad.ending == FINAL and lad.points == 0 and lad.deepest == "R4"


def test_rungs_after_the_final_rung_decide_nothing():
    from engine.games.ladder import FINAL, deciding

    game = ladder_game(final="R3", extra=("B1",))
    assert deciding(game) == ["R1", "R2", "R3"]
    lad = Ladder(game, f(0))
    upd(lad, f(0b10111), f(0b10111))  # R1, R2, R3 and the bonus rung, R4 not
    assert lad.ending == FINAL and lad.skipped_required == [] and lad.points == 1 + 2 + 3 + 10
    assert lad.deepest == "R3"  # the walk stops at R4, still a required rung of the ladder


def test_the_final_rung_must_be_required():
    with pytest.raises(ValueError, match="final milestone 'R4' must be required"):
        ladder_game(required=(True, True, True, False))
    with pytest.raises(ValueError, match="final milestone 'R2' must be required"):
        ladder_game(required=(True, False, True, True), final="R2")


@settings(max_examples=300, deadline=None)
@given(required=st.lists(st.booleans(), min_size=4, max_size=4), reached=st.sets(st.sampled_from(RUNGS)),
       pre=st.sets(st.sampled_from(RUNGS)))
def test_the_rules_agree_with_their_definitions(required, reached, pre):
    from engine.games.ladder import FINAL, FINAL_SKIPPED, complete, deepest, final_ending, skipped_required

    required[-1] = True
    game = ladder_game(required=tuple(required))
    reached -= pre  # a rung that held at the start is never reached
    need = [r for r, req in zip(RUNGS, required, strict=True) if req]
    satisfied = reached | pre
    assert complete(game, reached, pre) == (set(need) <= satisfied)
    skipped = skipped_required(game, reached, pre)
    last = max((RUNGS.index(r) for r in reached), default=-1)
    assert skipped == [r for r in need[:-1] if r not in satisfied and RUNGS.index(r) < last]
    # deepest: the last satisfied rung before the first required rung not satisfied
    stop = next((RUNGS.index(r) for r in need if r not in satisfied), len(RUNGS))
    before = [r for r in RUNGS[:stop] if r in satisfied]
    assert deepest(game, reached, pre) == (before[-1] if before else None)
    expected = FINAL if set(need) <= satisfied else FINAL_SKIPPED if "R4" in reached else None
    assert final_ending(game, reached, pre) == expected
    if expected == FINAL_SKIPPED:
        assert skipped  # the final rung was reached past something: it is named


def test_a_long_walk_without_progress_keeps_only_the_last_segment_and_counts_as_before():
    """Memory flat over a long trial (issue 31 item 8: a 1M-action walk held every transition): the tracker
    keeps SEGMENT transitions, and its counts equal those of segments taken over the whole history."""
    import random

    from engine.loop.routes import SEGMENT

    rng = random.Random(7)
    r = RouteTracker(loop_repeats=None)
    history, seen, repeated = [], {}, 0
    pos = (0, 2, 2)
    for _ in range(5000):
        action, (dx, dy) = rng.choice([("UP", (0, -1)), ("DOWN", (0, 1)), ("LEFT", (-1, 0)), ("RIGHT", (1, 0))])
        after = (0, min(4, max(0, pos[1] + dx)), min(4, max(0, pos[2] + dy)))
        r.record(pos, action, after)
        if after != pos:  # the same rule over the whole history, kept
            history.append((*pos, action, *after))
            if len(history) >= SEGMENT:
                key = tuple(history[-SEGMENT:])
                seen[key] = seen.get(key, 0) + 1
                repeated += seen[key] >= 2
        pos = after
        assert len(r.transitions) <= SEGMENT
    assert r.repeated_actions == repeated > 0 and dict(r.segments) == seen
