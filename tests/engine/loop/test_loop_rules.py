"""Each rule of the trial loop (engine.loop.trial), unit-tested in milliseconds on the fake emulator.

Every test runs a real `Trial` over tests/engine/fake_emulator.py's grid world and asserts on the
TrialResult it returns and on the records its sinks received. Every record is also validated
against its schema (the loop builds them with model_construct).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from engine.emulators.emulator import EmulatorError, frame_sha256
from engine.loop.budgets import BudgetLimits
from engine.loop.control import RunControl
from engine.loop.events import (
    AnnotationAdded,
    BudgetUpdated,
    DecisionRecorded,
    FrameCaptured,
    MemoryChanged,
    MilestoneReached,
    StateChanged,
    TrialStarted,
)
from engine.loop.outcomes import ending
from engine.loop.records import InputLine, ResponseLine, TraceLine, TrialResult
from engine.loop.tally import TraceTally
from engine.loop.trial import TagRefused, Trial, TrialConfig
from engine.policies.policy import PolicyExhausted, ProviderFailure, Usage
from engine.policies.replay import ReplayPolicy
from engine.policies.scripted import ScriptedPolicy
from tests.engine.fake_emulator import (
    BELL_TO_GOAL,
    COINS,
    DOOR_TO_KEY,
    GAME,
    KEY_TO_BELL,
    SQUARE,
    START_STATE,
    TIMING,
    TO_DOOR,
    FailingSink,
    FakeEmulator,
    FakePolicy,
    ListSink,
    make_state,
    valid,
)

ACTIONS = ("UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP")
FULL_ROUTE = TO_DOOR + DOOR_TO_KEY + KEY_TO_BELL + BELL_TO_GOAL  # 13 actions, M1..M4
START_FRAME = 1000  # make_state's frame counter
PER_ACTION = TIMING.frames_per_action  # 6


def config(*, limits: BudgetLimits | None = None, max_actions: int = 4, retries: int = 1,
           loop_repeats: int | None = 3, memory: str = "persistent", **kw) -> TrialConfig:
    return TrialConfig(experiment_id="exp-test", label="X", trial_number=1, position=0, schedule_length=1,
                       timing=TIMING, max_actions=max_actions, allowed_actions=ACTIONS,
                       invalid_output_retries=retries, recent_window=12, memory_policy=memory,
                       limits=limits or BudgetLimits(), loop_repeats=loop_repeats, **kw)


def make_trial(policy, *, emulator: FakeEmulator | None = None, state: bytes = START_STATE,
               control: RunControl | None = None, first_sinks=(), policy_factory=None, **cfg):
    fake = emulator or FakeEmulator()
    sink = ListSink()
    trial = Trial(config(**cfg), lambda: fake, policy_factory or (lambda: policy), state, GAME,
                  [*first_sinks, sink], control, {"test": True})
    return trial, sink, fake


async def play(policy, **kw):
    """Run a trial to its end: (result, the list sink, the fake emulator)."""
    trial, sink, fake = make_trial(policy, **kw)
    result = await asyncio.wait_for(trial.run(), 5)
    return checked(result, sink, trial), sink, fake


def checked(result: TrialResult, sink: ListSink, trial: Trial) -> TrialResult:
    """Every record is valid against its schema and agrees with the others, as `oakwatch verify`
    requires (sessions/audit/verify.py), and the result counts exactly the decisions the sinks saw."""
    TrialResult.model_validate(result.model_dump())
    tally = TraceTally()
    for n, event in enumerate(sink.decisions, 1):
        t, r = event.trace, event.response
        TraceLine.model_validate(t.model_dump())
        ResponseLine.model_validate(r.model_dump())
        for line in event.inputs:
            InputLine.model_validate(line.model_dump())
        assert t.decision_id == r.decision_id == n
        assert t.attempts == len(r.attempts) and t.accepted_actions == len(event.inputs)
        assert t.invalid_output == any(not a.valid for a in r.attempts)
        assert t.aborted == bool(r.attempts and r.attempts[-1].aborted), f"decision {n}: aborted disagrees"
        assert t.paid_calls == sum(a.usage is not None for a in r.attempts)
        assert [i.action for i in event.inputs] == t.parsed_actions[:t.accepted_actions]
        assert not t.parsed_actions or r.attempts[-1].valid
        tally.add(t)
    assert result.last_decision == tally.decisions
    tel = result.telemetry
    for name in ("decisions", "model_calls", "aborted_calls", "invalid_outputs", "accepted_actions",
                 "input_tokens", "output_tokens", "cost_usd"):
        assert getattr(tel, name) == getattr(tally, name), f"telemetry.{name}"
    assert result.milestones_reached == tally.milestones_reached == [m.id for m in result.milestones]
    if ending(result.termination_reason).at_decision:
        assert tally.last is not None and tally.last.termination_reason == result.termination_reason
    limit = trial.config.limits.accepted_actions
    if result.termination_reason == "budget:accepted_actions":
        assert tally.accepted_actions == limit
    return result


def traces(sink: ListSink) -> list[TraceLine]:
    return [e.trace for e in sink.decisions]


def attempts(sink: ListSink, decision: int):
    return sink.decisions[decision - 1].response.attempts


class Running:
    """A trial on its own event loop in a thread, as the console runs it."""

    def __init__(self, trial: Trial, sink: ListSink):
        self.trial, self.sink = trial, sink
        self._box: list[TrialResult] = []
        self._thread = threading.Thread(target=lambda: self._box.append(asyncio.run(trial.run())), daemon=True)
        self._thread.start()

    def result(self) -> TrialResult:
        self._thread.join(5)
        assert not self._thread.is_alive() and self._box, "the trial did not end"
        return checked(self._box[0], self.sink, self.trial)


# -- success ---------------------------------------------------------------------------------------

async def test_final_milestone_ends_the_trial_as_success():
    policy = ScriptedPolicy(FULL_ROUTE + ["UP"] * 3, actions_per_decision=4)
    result, sink, fake = await play(policy)
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("success", "final-milestone", None)
    assert result.milestones_reached == ["M1", "M2", "M3", "M4"] and result.deepest_milestone == "M4"
    assert (result.progress_points, result.total_points, result.pre_satisfied) == (10, 10, [])
    assert [(a.id, a.decision_id) for a in result.milestones] == [("M1", 1), ("M2", 2), ("M3", 3), ("M4", 4)]
    assert [a.award.id for a in sink.of(MilestoneReached)] == ["M1", "M2", "M3", "M4"]
    # The final milestone came on the first action of decision 4: the other three are rejected.
    last = traces(sink)[-1]
    assert (result.last_decision, last.parsed_actions, last.accepted_actions) == (4, ["RIGHT", "UP", "UP", "UP"], 1)
    assert last.termination_reason == "final-milestone" and last.milestones_after == ["M1", "M2", "M3", "M4"]
    assert [t.termination_reason for t in traces(sink)[:-1]] == [None, None, None]
    assert fake.steps == 13 and fake.actions == FULL_ROUTE
    tel = result.telemetry
    assert (tel.decisions, tel.accepted_actions, tel.rejected_actions, tel.frames) == (4, 13, 3, 13 * PER_ACTION)
    assert (tel.invalid_outputs, tel.model_calls, tel.aborted_calls) == (0, 4, 0)
    assert (tel.tokens, tel.cost_usd) == (0, 0.0)  # no paid call: nothing spent, which is known
    assert result.provenance["emulator"] == {"name": "fake", "version": "0.1"} and result.provenance["test"]
    assert isinstance(sink.events[0], TrialStarted) and isinstance(sink.events[1], StateChanged)
    assert fake.closed


async def test_inputs_carry_the_fixed_press_and_settle_timing():
    result, sink, fake = await play(ScriptedPolicy(["RIGHT", "NOOP", "A"], actions_per_decision=3))
    inputs = sink.decisions[0].inputs
    assert [(i.action, i.press_frame, i.release_frame, i.capture_frame) for i in inputs] == [
        ("RIGHT", 1000, 1002, 1006), ("NOOP", None, None, 1012), ("A", 1012, 1014, 1018)]
    captured = sink.of(FrameCaptured)
    assert [(f.decision_id, f.frame_index, f.frame_sha256) for f in captured] == [
        (1, i.capture_frame, i.frame_sha256) for i in inputs]
    trace = traces(sink)[0]
    assert (trace.result_frame_index, trace.result_frame_sha256) == (1018, inputs[-1].frame_sha256)
    assert trace.frame_sha256 == sink.of(TrialStarted)[0].frame_sha256  # what the agent saw
    # NOOP and A change nothing in the grid world: two ignored inputs.
    assert result.telemetry.ignored_inputs == 2 and result.telemetry.frames == 18


# -- budgets ---------------------------------------------------------------------------------------

async def test_accepted_actions_budget_is_never_exceeded_mid_decision():
    policy = ScriptedPolicy(["A", "B"] * 10, actions_per_decision=4)
    result, sink, fake = await play(policy, limits=BudgetLimits(accepted_actions=6))
    assert (result.outcome, result.termination_reason) == ("game-failure", "budget:accepted_actions")
    assert fake.steps == 6 and result.telemetry.accepted_actions == 6
    assert result.telemetry.rejected_actions == 2  # decision 2 planned 4, two fit
    last = traces(sink)[-1]
    assert (last.decision_id, len(last.parsed_actions), last.accepted_actions) == (2, 4, 2)
    assert last.termination_reason == "budget:accepted_actions"
    assert sink.of(BudgetUpdated)[-1].budgets["accepted_actions"] == {"used": 6, "limit": 6}


async def test_accepted_actions_budget_met_exactly_ends_at_that_decision():
    result, sink, fake = await play(ScriptedPolicy(["A"] * 20, actions_per_decision=4),
                                    limits=BudgetLimits(accepted_actions=8))
    assert (result.termination_reason, result.last_decision, fake.steps) == ("budget:accepted_actions", 2, 8)
    assert result.telemetry.rejected_actions == 0
    assert traces(sink)[-1].termination_reason == "budget:accepted_actions"


async def test_model_decisions_budget_counts_retries():
    policy = FakePolicy(["not json", ["A"], ["A"], ["A"], ["A"]])
    result, sink, fake = await play(policy, limits=BudgetLimits(model_decisions=3))
    assert (result.outcome, result.termination_reason) == ("game-failure", "budget:model_decisions")
    assert result.last_decision == 2 and policy.calls == 3  # 2 calls in decision 1, 1 in decision 2
    assert [t.attempts for t in traces(sink)] == [2, 1]
    assert (result.telemetry.model_calls, result.telemetry.invalid_outputs) == (3, 1)
    assert traces(sink)[-1].termination_reason == "budget:model_decisions"


async def test_tokens_budget():
    policy = FakePolicy([["A"]] * 10, paid=True)  # 10 in + 5 out per call
    result, sink, _ = await play(policy, limits=BudgetLimits(tokens=40))
    assert (result.outcome, result.termination_reason, result.last_decision) == ("game-failure", "budget:tokens", 3)
    assert (result.telemetry.tokens, result.telemetry.input_tokens, result.telemetry.output_tokens) == (45, 30, 15)
    assert traces(sink)[-1].termination_reason == "budget:tokens"


async def test_total_cost_budget():
    policy = FakePolicy([["A"]] * 10, paid=True)  # $0.01 per call
    result, sink, _ = await play(policy, limits=BudgetLimits(total_cost_usd=0.025))
    assert (result.outcome, result.termination_reason, result.last_decision) == ("game-failure",
                                                                                 "budget:total_cost", 3)
    assert result.telemetry.cost_usd == pytest.approx(0.03) and result.telemetry.cost_source == ["provider"]
    assert result.derived["cost_per_verified_milestone"] is None  # no milestone: no ratio
    assert traces(sink)[-1].termination_reason == "budget:total_cost"


async def test_a_zero_cost_limit_never_ends_a_trial_without_a_decision_recording_it():
    result, sink, _ = await play(ScriptedPolicy(["A"] * 3), limits=BudgetLimits(total_cost_usd=0.0))
    # play() checks verify's rule: an at-decision reason is recorded by the decision that ended the trial.
    assert result.last_decision >= 1


@pytest.mark.parametrize("usage, limits, reason", [
    (Usage(input_tokens=10, output_tokens=5), BudgetLimits(total_cost_usd=1.0), "budget:cost_unknown"),
    (Usage(cost_usd=0.01, cost_source="provider"), BudgetLimits(tokens=1000), "budget:tokens_unknown"),
])
async def test_unknown_usage_under_a_limit_is_invalid_provider(usage, limits, reason):
    policy = FakePolicy([["A"]] * 5, paid=True, usage=usage)
    result, sink, _ = await play(policy, limits=limits)
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("invalid-provider", reason,
                                                                                 "usage-unknown")
    assert result.last_decision == 1 and traces(sink)[0].termination_reason == reason
    unknown = "provider_cost_usd" if reason == "budget:cost_unknown" else "input_tokens"
    assert getattr(traces(sink)[0], unknown) is None
    assert (result.telemetry.cost_usd if reason == "budget:cost_unknown" else result.telemetry.tokens) is None


async def test_active_time_stamps_exclude_pauses_and_policy_latency():
    """Each award records the active game time when it was reached: the pause at the first boundary
    and the policy's thinking (every call sleeps) are not in it. Bounds, not timing margins: the whole
    run lasted `outer` seconds, `held_seconds` of it paused and at least `delay` per call thinking
    (less the event loop's clock resolution, for which 1 ms a call is allowed)."""
    pause, delay = 0.3, 0.2
    control = RunControl()
    control.pause()
    timer = threading.Timer(pause, control.resume)
    policy = FakePolicy([FULL_ROUTE[i:i + 4] for i in range(0, len(FULL_ROUTE), 4)], delay=delay)
    started = time.monotonic()
    timer.start()
    result, _sink, _ = await play(policy, control=control)
    outer = time.monotonic() - started
    timer.join()
    assert result.termination_reason == "final-milestone" and policy.calls == 4
    tel = result.telemetry
    stamps = [m.active_seconds for m in result.milestones]
    assert [m.id for m in result.milestones] == ["M1", "M2", "M3", "M4"] and None not in stamps
    assert stamps == sorted(stamps) and stamps[-1] <= tel.active_seconds
    thinking = policy.calls * (delay - 0.001)
    assert tel.held_seconds > 0 and tel.policy_seconds >= thinking
    assert tel.active_seconds == pytest.approx(tel.wall_time_seconds - tel.policy_seconds, abs=0.002)
    # M4 is reached during the 4th decision, after 4 calls and the pause: neither is in its stamp
    assert stamps[-1] <= tel.active_seconds <= outer - tel.held_seconds - thinking


async def test_a_hold_inside_a_policy_call_is_held_time_not_policy_time():
    """A limiter's wait happens inside the call, through the run control (sessions.execute.limits.CallGate):
    it is held time, and not taken away again as policy time. Held, policy and active time are
    disjoint parts of the run, so they add up to no more than its whole length (to the rounding)."""
    control = RunControl()
    policy = FakePolicy([FULL_ROUTE[i:i + 4] for i in range(0, len(FULL_ROUTE), 4)],
                        on_call=lambda _obs: control.hold(0.2))
    started = time.monotonic()
    result, _sink, _ = await play(policy, control=control)
    outer = time.monotonic() - started
    tel = result.telemetry
    assert result.termination_reason == "final-milestone" and tel.held_seconds >= policy.calls * 0.2
    assert tel.held_seconds + tel.policy_seconds + tel.active_seconds <= outer + 0.003


async def test_wall_time_budget_excludes_time_spent_paused():
    control = RunControl()
    control.pause()  # held at the first decision boundary for 0.4 s
    timer = threading.Timer(0.4, control.resume)
    timer.start()
    policy = FakePolicy([["A"]] * 500, delay=0.01)
    limit_s = 0.15
    result, sink, _ = await play(policy, control=control, limits=BudgetLimits(wall_time_minutes=limit_s / 60))
    timer.join()
    assert (result.outcome, result.termination_reason) == ("game-failure", "budget:wall_time")
    assert result.telemetry.held_seconds >= 0.35
    assert limit_s <= result.telemetry.wall_time_seconds < limit_s + 0.1  # the pause is not in it
    assert result.last_decision >= 3  # had the pause counted, the budget would have been spent before decision 1
    assert traces(sink)[-1].termination_reason is None  # wall time ends between decisions


# -- unrecoverable loops ---------------------------------------------------------------------------

async def test_the_same_segment_three_times_without_progress_is_an_unrecoverable_loop():
    result, sink, fake = await play(ScriptedPolicy(SQUARE * 4))
    assert (result.outcome, result.termination_reason) == ("game-failure", "unrecoverable-loop")
    assert result.last_decision == 12 and fake.steps == 12
    assert traces(sink)[-1].termination_reason == "unrecoverable-loop"
    assert result.telemetry.repeated_position_loops == 1
    # The 4 rotations of the square each seen twice, then the first a third time.
    assert result.telemetry.repeated_navigation_actions == 5


async def test_loop_repeats_none_never_ends_a_trial():
    result, _, _ = await play(ScriptedPolicy(SQUARE * 4), loop_repeats=None)
    assert (result.termination_reason, result.last_decision) == ("policy-exhausted", 16)


@pytest.mark.parametrize("detour, ends_at", [
    (["UP", "DOWN"], 14),  # a detour with no progress: the third square still repeats
    (["LEFT", "RIGHT"], 22),  # the coin is progress: counting starts again after it
])
async def test_progress_resets_the_loop_count(detour, ends_at):
    result, _, fake = await play(ScriptedPolicy(SQUARE * 2 + detour + SQUARE * 4))
    assert (result.termination_reason, result.last_decision) == ("unrecoverable-loop", ends_at)
    assert fake.ram[COINS] == (detour == ["LEFT", "RIGHT"])


async def test_a_milestone_is_progress_for_the_loop_count():
    trip = TO_DOOR + ["LEFT"] * 4  # through the door and back to the start: M1 the first time only
    result, _, _ = await play(ScriptedPolicy(SQUARE * 2 + trip + SQUARE * 2 + trip + SQUARE * 2))
    # Without the reset at M1 the square after the first trip would be its third (action 20); it
    # is the square after the second trip, which awards nothing, that ends the trial.
    assert (result.termination_reason, result.last_decision) == ("unrecoverable-loop", 36)
    assert result.milestones_reached == ["M1"]


# -- milestones ------------------------------------------------------------------------------------

def test_the_fake_world_is_deterministic():
    from engine.games.probe import Probe
    probe = Probe(GAME)

    def walk(actions):
        fake = FakeEmulator()
        fake.restore(START_STATE)
        return fake, [fake.step(a, TIMING, probe).frame_sha256 for a in actions]

    a, hashes_a = walk(SQUARE + TO_DOOR + ["LEFT"] * 4)
    b, hashes_b = walk(SQUARE + TO_DOOR + ["LEFT"] * 4)
    assert hashes_a == hashes_b and a.save_state() == b.save_state()
    start = FakeEmulator()
    start.restore(START_STATE)
    start_sha = frame_sha256(start.frame())
    assert hashes_a[3] == hashes_a[-1] == start_sha  # back at the start: the same screen
    assert len(set(hashes_a[:4])) == 4 and a.frame_index == START_FRAME + 12 * PER_ACTION
    a.restore(START_STATE)
    assert (frame_sha256(a.frame()), a.frame_index) == (start_sha, START_FRAME)


def test_the_fake_bell_qualifies_on_one_frame_only():
    from engine.games.probe import Probe
    fake = FakeEmulator()
    fake.restore(make_state(map_id=1, x=3, y=5, flags=1))
    step = fake.step("LEFT", TIMING, Probe(GAME))
    assert (step.ram_before_last["flags"], step.ram_last["flags"]) == (1, 3)
    step = fake.step("NOOP", TIMING, Probe(GAME))
    assert (step.ram_before_last["flags"], step.ram_last["flags"]) == (3, 3)


async def test_a_milestone_needs_two_consecutive_qualifying_frames():
    script = TO_DOOR + DOOR_TO_KEY + KEY_TO_BELL + ["NOOP", "NOOP"]
    result, sink, _ = await play(ScriptedPolicy(script))
    assert result.termination_reason == "policy-exhausted" and result.milestones_reached == ["M1", "M2", "M3"]
    bell = traces(sink)[8]  # decision 9 stepped onto the bell: its flag held on the capture frame only
    assert bell.parsed_actions == ["LEFT"] and "M3" not in bell.milestones_after
    award = {a.id: a for a in result.milestones}["M3"]
    assert award.decision_id == 10 and award.frame_index == START_FRAME + 10 * PER_ACTION
    assert award.frame_sha256 == sink.decisions[9].inputs[0].frame_sha256 and award.probe["flags"] == 3
    assert [(m.award.id, m.award.decision_id) for m in sink.of(MilestoneReached)] == [("M1", 4), ("M2", 6),
                                                                                      ("M3", 10)]


async def test_a_milestone_that_held_at_the_start_is_never_awarded():
    policy = ScriptedPolicy(FULL_ROUTE)
    result, sink, _ = await play(policy, state=make_state(flags=0b1))  # the key is held from the start
    assert result.pre_satisfied == ["M2"] and sink.of(TrialStarted)[0].pre_satisfied == ("M2",)
    assert (result.outcome, result.milestones_reached) == ("success", ["M1", "M3", "M4"])
    # M2 earns nothing and blocks nothing: the deepest rung in order is M4, nothing was skipped
    assert result.deepest_milestone == "M4" and result.progress_points == 8 and result.skipped_required == []
    assert "M2" not in [m.award.id for m in sink.of(MilestoneReached)]


# -- invalid responses -----------------------------------------------------------------------------

async def test_an_invalid_response_is_logged_retried_with_feedback_and_counted():
    policy = FakePolicy(["not json at all", ["UP"]])
    result, sink, fake = await play(policy)
    first, second = attempts(sink, 1)
    assert (first.raw, first.valid, second.valid) == ("not json at all", False, True)
    assert first.error.startswith("response is not a JSON object") and second.error is None
    assert policy.observations[0].retry_feedback is None
    assert policy.observations[1].retry_feedback == f"Your previous response was rejected: {first.error}"
    assert policy.observations[1].decision_id == 1
    trace = traces(sink)[0]
    assert (trace.attempts, trace.invalid_output, trace.parsed_actions) == (2, True, ["UP"])
    assert (result.telemetry.invalid_outputs, result.telemetry.model_calls) == (1, 2)
    assert fake.actions == ["UP"]


async def test_too_many_actions_are_rejected_never_truncated():
    policy = FakePolicy([valid(["UP", "UP", "UP"]), ["DOWN"]])
    result, sink, fake = await play(policy, max_actions=2)
    first = attempts(sink, 1)[0]
    assert not first.valid and "3 actions given, at most 2 allowed" in first.error
    assert fake.actions == ["DOWN"]  # nothing of the long response was pressed
    assert result.telemetry.rejected_actions == 3 and result.telemetry.accepted_actions == 1


async def test_a_decision_whose_retries_all_fail_presses_nothing_and_the_trial_goes_on():
    policy = ReplayPolicy([["nope", valid(["UP"] * 9)], [valid(["A"])]])
    result, sink, fake = await play(policy, max_actions=4)
    assert [(t.attempts, t.parsed_actions, t.accepted_actions) for t in traces(sink)] == [(2, [], 0),
                                                                                        (1, ["A"], 1)]
    assert traces(sink)[0].result_frame_sha256 == traces(sink)[0].frame_sha256
    assert fake.actions == ["A"] and result.termination_reason == "policy-exhausted"
    assert (result.telemetry.invalid_outputs, result.telemetry.rejected_actions) == (2, 9)


async def test_a_deeply_nested_response_is_an_invalid_output():
    policy = FakePolicy(["[" * 100_000, ["A"]])
    result, sink, _ = await play(policy)
    assert result.termination_reason == "policy-exhausted", result.error
    assert attempts(sink, 1)[0].error == "response is not a JSON object: nested too deeply"


# -- the policy running out ------------------------------------------------------------------------

async def test_a_policy_out_before_any_attempt_means_the_decision_does_not_exist():
    result, sink, fake = await play(ScriptedPolicy(["A", "B"]))
    assert (result.outcome, result.termination_reason, result.last_decision) == ("game-failure",
                                                                                 "policy-exhausted", 2)
    assert [t.termination_reason for t in traces(sink)] == [None, None]  # no line for a third decision
    assert fake.steps == 2


async def test_a_policy_with_nothing_at_all_records_no_decision():
    policy = FakePolicy([], paid=True)
    result, sink, fake = await play(policy, limits=BudgetLimits(total_cost_usd=1.0))
    assert (result.termination_reason, result.last_decision) == ("policy-exhausted", 0)
    assert sink.decisions == [] and sink.of(MemoryChanged) == [] and fake.steps == 0
    assert result.telemetry.model_calls == 0 and result.telemetry.cost_usd == 0.0


async def test_a_policy_out_on_a_retry_records_the_decision():
    policy = ReplayPolicy([["garbage"]])
    result, sink, _ = await play(policy, retries=2)
    assert (result.outcome, result.termination_reason, result.last_decision) == ("game-failure",
                                                                                 "policy-exhausted", 1)
    trace = traces(sink)[0]
    assert (trace.attempts, trace.invalid_output, trace.termination_reason) == (1, True, "policy-exhausted")
    assert result.telemetry.invalid_outputs == 1


# -- operator control ------------------------------------------------------------------------------

def test_pause_holds_decisions_and_step_runs_exactly_one():
    control = RunControl()
    control.pause()
    trial, sink, fake = make_trial(ScriptedPolicy(["A"] * 50), control=control)
    running = Running(trial, sink)
    sink.wait_for(lambda s: s.of(StateChanged))
    assert sink.of(StateChanged)[0].state == "paused"
    time.sleep(0.1)
    assert sink.decisions == [] and fake.steps == 0
    for n in (1, 2):
        control.step()
        sink.wait_for(lambda s, n=n: len(s.decisions) == n)
        time.sleep(0.1)
        assert len(sink.decisions) == n and fake.steps == n and control.state == "paused"
    control.end_trial("seen enough")
    result = running.result()
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("harness-error", "operator-abort",
                                                                                 "operator-abort")
    assert (result.termination_detail, result.last_decision) == ("seen enough", 2)
    assert result.telemetry.held_seconds >= 0.25


def test_a_step_is_announced_over_when_the_loop_holds_again():
    """Displays learn the run's state from its announcements (an attached console asks the worker's):
    after a stepped decision the loop holds again, and says so (paused), instead of stepping forever."""
    control = RunControl()
    heard: list[str] = []
    control.on_state(heard.append)
    control.pause()
    trial, sink, _ = make_trial(ScriptedPolicy(["A"] * 50), control=control)
    running = Running(trial, sink)
    sink.wait_for(lambda s: s.of(StateChanged))
    for n in (1, 2):
        control.step()
        sink.wait_for(lambda s, n=n: len(s.decisions) == n)
        deadline = time.monotonic() + 30
        while heard[-1] != "paused" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert heard == ["paused", *["stepping", "paused"] * n]
    control.end_trial("seen enough")
    assert running.result().last_decision == 2


def test_resume_after_pause_runs_on():
    control = RunControl()
    control.pause()
    trial, sink, _ = make_trial(ScriptedPolicy(["A"] * 5), control=control)
    running = Running(trial, sink)
    sink.wait_for(lambda s: s.of(StateChanged))
    control.resume()
    result = running.result()
    assert (result.termination_reason, result.last_decision) == ("policy-exhausted", 5)


@pytest.mark.parametrize("by_player, outcome, reason, cause", [
    (False, "harness-error", "operator-abort", "operator-abort"),
    (True, "game-failure", "player-ended", None),
])
def test_ending_the_trial_between_decisions(by_player, outcome, reason, cause):
    control = RunControl()
    trial, sink, _ = make_trial(ScriptedPolicy(["A"] * 50), control=control)
    control.pause()
    running = Running(trial, sink)
    control.step()
    sink.wait_for(lambda s: len(s.decisions) == 1)
    control.end_trial("the agent is stuck", by_player=by_player)
    result = running.result()
    assert (result.outcome, result.termination_reason, result.invalid_cause) == (outcome, reason, cause)
    assert (result.termination_detail, result.last_decision) == ("the agent is stuck", 1)
    assert traces(sink)[0].termination_reason is None


def test_an_end_request_cancels_an_unpaid_call_and_the_decision_does_not_exist():
    control = RunControl()
    policy = FakePolicy([["A"], ["A"]], delay=[0, 10])
    trial, sink, _ = make_trial(policy, control=control)
    running = Running(trial, sink)
    sink.wait_for(lambda s: len(s.decisions) == 1)
    deadline = time.monotonic() + 5
    while policy.calls < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    started = time.monotonic()
    control.end_trial("operator: wrong condition")
    result = running.result()
    assert time.monotonic() - started < 5 and policy.cancelled == 1  # the call would take 10 s
    assert (result.termination_reason, result.termination_detail) == ("operator-abort", "operator: wrong condition")
    assert result.last_decision == 1 and traces(sink)[0].aborted is False


async def test_a_signal_during_a_paid_call_records_the_decision_as_aborted():
    control = RunControl()

    def signal_on_second_call(obs):
        if obs.decision_id == 2:  # from another thread, as a signal handler would
            threading.Timer(0.02, control.stop_run, ("signal", "SIGINT", "signal:SIGINT")).start()

    policy = FakePolicy([["A"], ["A"]], paid=True, delay=[0, 10], on_call=signal_on_second_call)
    started = time.monotonic()
    result, sink, _ = await play(policy, control=control)
    assert time.monotonic() - started < 5 and policy.cancelled == 1  # the call would take 10 s and control.stopping
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("harness-error", "signal",
                                                                                 "signal:SIGINT")
    assert result.termination_detail == "SIGINT" and result.last_decision == 2
    trace = traces(sink)[1]
    assert (trace.aborted, trace.attempts, trace.paid_calls, trace.termination_reason) == (True, 1, 1, "signal")
    assert (trace.provider_cost_usd, trace.input_tokens, trace.output_tokens) == (None, None, None)
    assert sink.decisions[1].inputs == ()
    (attempt,) = attempts(sink, 2)
    assert (attempt.aborted, attempt.raw, attempt.valid, attempt.model_id) == (True, None, False, "fake-model")
    assert attempt.usage == Usage()  # unknown, never zero
    tel = result.telemetry
    assert (tel.aborted_calls, tel.model_calls, tel.decisions, tel.invalid_outputs) == (1, 2, 2, 0)
    assert (tel.cost_usd, tel.tokens) == (None, None)


def test_an_unpaid_retry_cancelled_in_flight_keeps_the_invalid_attempt_counted():
    control = RunControl()
    policy = FakePolicy(["not json", ["A"]], delay=[0, 10], on_call=lambda obs: (
        obs.retry_feedback and threading.Timer(0.02, control.end_trial, ("stop",)).start()))
    trial, sink, _ = make_trial(policy, control=control)
    running = Running(trial, sink)
    result = running.result()
    assert result.termination_reason == "operator-abort" and policy.cancelled == 1
    trace = traces(sink)[0]
    assert trace.aborted and trace.invalid_output
    assert result.telemetry.invalid_outputs == 1  # the one invalid response that was given


async def test_tags_are_checked_against_what_the_trial_has_recorded():
    control = RunControl()
    outcomes: dict[str, object] = {}
    base = {"trial_key": "X-01", "type": "misread-screen", "severity": "minor", "note": "saw the door"}
    tags = {
        "ok": dict(base, decision_id=2, refers_to="fact-0001"),
        "earlier-decision": dict(base, decision_id=2, refers_to="1"),
        "never-held": dict(base, decision_id=2, refers_to="fact-0002"),
        "not-recorded": dict(base, decision_id=3),
        "future-reference": dict(base, decision_id=2, refers_to="3"),
        "bad-severity": dict(base, decision_id=1, severity="fatal"),
        "other-trial": dict(base, trial_key="Y-01"),  # no late tagger here: nowhere to put it
    }

    def tag_on_third_call(obs):
        if obs.decision_id != 3:
            return
        for name, tag in tags.items():
            try:
                outcomes[name] = control.tag(tag)
            except (TagRefused, RuntimeError) as exc:
                outcomes[name] = exc
        outcomes["check-only"] = control.tag(dict(base, decision_id=1), commit=False)

    write = [{"kind": "location", "value": "the room", "confidence": 0.9, "evidence": "a bed and a door"}]
    policy = FakePolicy([valid(["A"], memory_write=write), ["A"], ["A"]], on_call=tag_on_third_call)

    result, sink, _ = await play(policy, control=control)
    assert result.last_decision == 3
    refused = {k for k, v in outcomes.items() if isinstance(v, TagRefused)}
    assert refused == {"never-held", "not-recorded", "future-reference", "bad-severity"}
    assert isinstance(outcomes["other-trial"], RuntimeError) and not isinstance(outcomes["other-trial"], TagRefused)
    assert "never held" in str(outcomes["never-held"]) and "not a recorded decision" in str(outcomes["not-recorded"])
    added = [e.record for e in sink.of(AnnotationAdded)]
    assert [(a.decision_id, a.refers_to) for a in added] == [(2, "fact-0001"), (2, "1")]
    assert added[0] == outcomes["ok"] and added[0].trial_key == "X-01" and added[0].source == "operator"
    assert outcomes["check-only"].decision_id == 1  # checked, returned, not emitted
    with pytest.raises(RuntimeError, match="no trial is running"):
        control.tag(dict(base, decision_id=1))


# -- failures --------------------------------------------------------------------------------------

async def test_a_provider_failure_records_the_failed_attempt_and_ends_invalid_provider():
    policy = FakePolicy([["A"], ProviderFailure("quota exceeded")], paid=True)
    result, sink, fake = await play(policy)
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("invalid-provider",
                                                                                 "provider-failure",
                                                                                 "provider-failure")
    assert result.last_decision == 2
    (attempt,) = attempts(sink, 2)
    assert (attempt.raw, attempt.valid, attempt.aborted) == (None, False, False)
    assert attempt.error == "provider failure: quota exceeded" and attempt.usage == Usage()
    assert traces(sink)[1].termination_reason == "provider-failure" and fake.steps == 1
    assert result.telemetry.cost_usd is None  # the failed call's cost is unknown
    assert policy.closed and fake.closed


async def test_a_provider_failure_mid_trial_says_what_failed_in_the_result():
    policy = FakePolicy([["A"], ProviderFailure("quota exceeded")], paid=True)
    result, _, _ = await play(policy)
    assert result.termination_reason == "provider-failure"
    assert result.error == "quota exceeded"  # as a provider failure at startup gives


async def test_a_provider_failure_at_startup_ends_invalid_provider():
    def refuse():
        raise ProviderFailure("no API key")

    fake = FakeEmulator()
    result, sink, _ = await play(None, emulator=fake, policy_factory=refuse)
    assert (result.outcome, result.termination_reason, result.last_decision) == ("invalid-provider",
                                                                                 "provider-failure", 0)
    assert sink.events == [] and fake.closed


async def test_an_emulator_error_mid_trial_is_an_emulator_fault():
    policy = ScriptedPolicy(["A"] * 5)
    result, sink, fake = await play(policy, emulator=FakeEmulator(fail_at_step=3))
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("harness-error", "emulator-error",
                                                                                 "emulator-fault")
    assert "failed at step 3" in result.error and result.last_decision == 2
    assert result.telemetry.accepted_actions == 2 and fake.closed


@pytest.mark.parametrize("state, expected_sha, message", [
    (b"short", None, "cannot restore state"),
    (START_STATE, "0" * 64, "canonical state restored to frame"),
])
async def test_a_start_state_that_does_not_restore_is_an_emulator_fault(state, expected_sha, message):
    result, sink, fake = await play(ScriptedPolicy(["A"]), state=state, expected_first_frame_sha256=expected_sha)
    assert (result.termination_reason, result.invalid_cause, result.last_decision) == ("emulator-error",
                                                                                      "emulator-fault", 0)
    assert message in result.error and sink.events == [] and fake.closed


async def test_a_recorder_failure_counts_only_committed_decisions():
    recorder = FailingSink(at_decision=4, cause="disk-full")  # decision 4 goes through the door: M1
    result, sink, fake = await play(ScriptedPolicy(TO_DOOR + ["RIGHT"] * 3), first_sinks=[recorder])
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("harness-error",
                                                                                 "evidence-failure", "disk-full")
    assert result.last_decision == 3 and "no space left" in result.error
    assert result.milestones == [] and result.milestones_reached == [] and result.progress_points == 0
    assert sink.of(MilestoneReached)[0].award.decision_id == 4  # shown live, but never committed
    tel = result.telemetry
    assert (tel.decisions, tel.accepted_actions, tel.model_calls) == (3, 3, 3)
    assert fake.steps == 4 and fake.closed


async def test_a_recorder_failure_leaves_the_uncommitted_decision_out_of_the_loop_counters():
    recorder = FailingSink(at_decision=3)
    # Decision 3 presses A and RIGHT, then meets the action budget: its UP, UP are rejected.
    policy = ScriptedPolicy(["A", "RIGHT", "A", "LEFT"] * 2 + ["A", "RIGHT", "UP", "UP"], actions_per_decision=4)
    result, sink, fake = await play(policy, first_sinks=[recorder], limits=BudgetLimits(accepted_actions=10))
    assert (result.termination_reason, result.last_decision, fake.steps) == ("evidence-failure", 2, 10)
    committed = [i for e in sink.decisions for i in e.inputs]
    assert result.telemetry.accepted_actions == len(committed) == 8
    assert result.telemetry.frames == committed[-1].capture_frame - START_FRAME == 8 * PER_ACTION
    assert result.telemetry.ignored_inputs == 4  # the A presses of decisions 1 and 2
    assert result.telemetry.rejected_actions == 0  # decision 3's two rejected actions were never recorded


async def test_a_recorder_failure_on_the_first_decision():
    result, sink, _ = await play(ScriptedPolicy(["A"] * 3), first_sinks=[FailingSink(at_decision=1)])
    assert (result.termination_reason, result.last_decision, result.telemetry.decisions) == ("evidence-failure",
                                                                                             0, 0)


async def test_an_exception_in_a_policy_is_a_harness_bug_and_everything_is_closed():
    policy = FakePolicy([["A"], ValueError("boom")])
    result, sink, fake = await play(policy)
    assert (result.outcome, result.termination_reason, result.invalid_cause) == ("harness-error", "harness-error",
                                                                                 "harness-bug")
    assert result.error == "ValueError: boom" and result.last_decision == 1
    assert policy.closed and fake.closed


async def test_closing_a_broken_policy_does_not_mask_the_ending():
    class BrokenClose(FakePolicy):
        def close(self):
            raise OSError("already gone")

    result, _, fake = await play(BrokenClose([["A"], PolicyExhausted("done")]))
    assert (result.termination_reason, result.last_decision) == ("policy-exhausted", 1) and fake.closed


async def test_an_emulator_that_fails_to_start_is_an_emulator_fault():
    policy = FakePolicy([["A"]])

    def broken():
        raise EmulatorError("no ROM")

    trial = Trial(config(), broken, lambda: policy, START_STATE, GAME, [ListSink()])
    result = await trial.run()
    assert (result.termination_reason, result.error, result.last_decision) == ("emulator-error", "no ROM", 0)
    assert result.provenance["emulator"] == {"name": None, "version": None}


async def test_every_decision_is_recorded_before_the_next_begins():
    policy = ScriptedPolicy(["A"] * 3)
    result, sink, _ = await play(policy)
    kinds = [type(e).__name__ for e in sink.events if not isinstance(e, MemoryChanged)]
    assert kinds == ["TrialStarted", "StateChanged"] + ["FrameCaptured", "DecisionRecorded", "BudgetUpdated"] * 3
    assert all(isinstance(e, DecisionRecorded) for e in sink.decisions)
