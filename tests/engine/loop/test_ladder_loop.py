"""Required and optional rungs through the real trial loop (engine.loop.trial) on the fake emulator:
how the trial ends, its outcome, and the result's skipped_required, pre_satisfied, deepest rung
and points."""

from __future__ import annotations

import asyncio

from engine.games.gamedef import GameDefinition
from engine.games.ladder import FINAL_SKIPPED
from engine.loop.events import MilestoneReached
from engine.loop.outcomes import ending
from engine.loop.trial import Trial
from engine.policies.scripted import ScriptedPolicy
from tests.engine.fake_emulator import (
    BELL_TO_GOAL,
    DOOR_TO_KEY,
    GAME,
    KEY_TO_BELL,
    START_STATE,
    TO_DOOR,
    FakeEmulator,
    FakePolicy,
    ListSink,
    make_state,
)
from tests.engine.loop.test_loop_rules import checked, config

# Through the door, then round the key (M2) to the bell (M3, awarded one action later) and the goal (M4).
PAST_THE_KEY = TO_DOOR + ["DOWN", "DOWN", "RIGHT"] + ["RIGHT"] * 4
FULL_ROUTE = TO_DOOR + DOOR_TO_KEY + KEY_TO_BELL + BELL_TO_GOAL


def game(**changes) -> GameDefinition:
    """The fake world's definition with rungs changed, e.g. M2={"required": False}."""
    data = GAME.model_dump(exclude_none=True)
    for m in data["milestones"]:
        m.update(changes.get(m["id"], {}))
    return GameDefinition.model_validate(data)


async def play(policy, definition: GameDefinition, state: bytes = START_STATE):
    fake = FakeEmulator()
    sink = ListSink()
    trial = Trial(config(), lambda: fake, lambda: policy, state, definition, [sink], None, {"test": True})
    result = await asyncio.wait_for(trial.run(), 5)
    return checked(result, sink, trial), sink, fake


async def test_reaching_the_final_rung_past_a_required_one_ends_the_trial_as_a_game_failure():
    result, sink, fake = await play(ScriptedPolicy(PAST_THE_KEY + ["UP"] * 3), GAME)
    assert fake.actions == PAST_THE_KEY  # the final rung still ends the trial
    assert (result.termination_reason, result.outcome) == (FINAL_SKIPPED, "game-failure")
    assert ending(FINAL_SKIPPED).at_decision and sink.decisions[-1].trace.termination_reason == FINAL_SKIPPED
    assert result.milestones_reached == ["M1", "M3", "M4"] and result.skipped_required == ["M2"]
    assert (result.deepest_milestone, result.progress_points, result.pre_satisfied) == ("M1", 8, [])
    assert [e.award.id for e in sink.of(MilestoneReached)] == ["M1", "M3", "M4"]


async def test_an_optional_rung_passed_over_still_succeeds():
    result, _, fake = await play(ScriptedPolicy(PAST_THE_KEY), game(M2={"required": False}))
    assert (result.termination_reason, result.outcome) == ("final-milestone", "success")
    assert result.skipped_required == [] and result.deepest_milestone == "M4" and result.progress_points == 8
    assert fake.actions == PAST_THE_KEY


async def test_pre_satisfied_rungs_earn_nothing_block_nothing_and_are_reported():
    # In the yard with the key and the bell already: M1, M2, M3 hold at the start.
    state = make_state(map_id=1, x=1, y=3, flags=0b011)
    route = ["DOWN", "DOWN"] + ["RIGHT"] * 5
    result, sink, _ = await play(ScriptedPolicy(route), GAME, state)
    assert result.pre_satisfied == ["M1", "M2", "M3"] and result.milestones_reached == ["M4"]
    assert (result.outcome, result.skipped_required, result.deepest_milestone) == ("success", [], "M4")
    assert result.progress_points == 4 and result.total_points == 10
    assert [e.award.id for e in sink.of(MilestoneReached)] == ["M4"]


async def test_a_pre_satisfied_final_rung_ends_the_trial_once_every_required_rung_is_reached():
    state = make_state(flags=0b100)  # the goal's flag is set from the start
    policy = ScriptedPolicy(FULL_ROUTE)
    result, _, fake = await play(policy, GAME, state)
    until_bell_awarded = TO_DOOR + DOOR_TO_KEY + KEY_TO_BELL + BELL_TO_GOAL[:1]
    assert fake.actions == until_bell_awarded  # M3, the last one missing, ends it (a step after the bell)
    assert (result.termination_reason, result.outcome, result.pre_satisfied) == ("final-milestone", "success",
                                                                                  ["M4"])
    assert result.milestones_reached == ["M1", "M2", "M3"] and result.progress_points == 6
    assert result.deepest_milestone == "M4"


async def test_a_ladder_held_whole_at_the_start_ends_at_the_first_decision_even_without_an_action():
    state = make_state(map_id=1, x=1, y=3, flags=0b111)
    result, sink, fake = await play(FakePolicy(["not json", "still not json"]), GAME, state)
    assert fake.actions == [] and len(sink.decisions) == 1
    assert (result.termination_reason, result.outcome, result.progress_points) == ("final-milestone", "success", 0)
    assert result.pre_satisfied == ["M1", "M2", "M3", "M4"] and result.deepest_milestone == "M4"


async def test_a_game_failure_lists_only_rungs_passed_over():
    # Stop after M1 and M3 (budget runs out): M2 was passed over, M4 is simply not reached.
    route = TO_DOOR + ["DOWN", "DOWN", "RIGHT", "RIGHT"]
    result, _, _ = await play(ScriptedPolicy(route), GAME)
    assert (result.outcome, result.termination_reason) == ("game-failure", "policy-exhausted")
    assert result.milestones_reached == ["M1", "M3"] and result.skipped_required == ["M2"]
    result, _, _ = await play(ScriptedPolicy(TO_DOOR), GAME)
    assert result.skipped_required == [] and result.deepest_milestone == "M1"
