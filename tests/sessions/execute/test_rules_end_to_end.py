"""Every rule of the trial loop (tests/engine/loop/test_loop_rules.py tests each on the fake emulator),
again end to end: the real cartridge in real PyBoy, through ExperimentRunner into an evidence
folder, which must then verify (`oakwatch verify`) and, where the emulator decides the ending,
replay (`oakwatch replay`).

A test policy stands in for a model provider (the network edge): `Stub` below, injected through
the runner's policy factories in place of the `random` policy of the condition `agent`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from engine.emulators.emulator import Timing
from engine.emulators.pyboy_backend import PyBoyEmulator
from engine.emulators.romheader import gb_header_checksum as header_checksum
from engine.games import cartridge_tables as ct
from engine.games.probe import Probe
from engine.loop.control import RunControl
from engine.loop.events import DecisionRecorded, TrialEnded
from engine.loop.records import Usage
from engine.loop.script import parse_script
from engine.loop.trial import TagRefused
from engine.policies.base import contract_json
from engine.policies.policy import PolicyExhausted, PolicyReply, ProviderFailure
from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.evidence.records import Summary
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import DEFAULT_MANIFEST
from sessions.preflight.experiment import prepare
from sessions.preflight.gamedefs import load_game_definition
from sessions.preflight.startstate import make_start_state
from tests.conftest import find_trial, read_jsonl, write_manifest

ROOT = Path(__file__).resolve().parents[3]
CART = ROOT / "assets" / "cartridge"
ROM = CART / "parcel-quest.gb"
BUNDLED_STATE = (CART / "parcel-quest.state").read_bytes()
GAME_YAML = ROOT / "assets" / "games" / "parcel-quest.yaml"
GAME = load_game_definition(GAME_YAML)
WALKTHROUGH = parse_script((CART / "walkthrough.txt").read_text())
BASE = yaml.safe_load(DEFAULT_MANIFEST.read_text())
TIMING = Timing(BASE["emulator"]["press_frames"], BASE["emulator"]["settle_frames"])
PER_ACTION = TIMING.frames_per_action  # 16 frames

AGENT = {"id": "agent", "policy": "random", "seed": 1}  # its policy is replaced by a Stub
MODEL = "stub-model-1"
KNOWN = Usage(input_tokens=10, output_tokens=5, cached_tokens=0, cost_usd=0.01, cost_source="provider")
UNKNOWN = {"input_tokens": None, "output_tokens": None, "cached_tokens": None, "cost_usd": None,
           "cost_source": None}
SIGINT = ("signal", "SIGINT", "signal:SIGINT")

# Walks in the house (assets/cartridge/art/maps.txt): from the bedroom (10,7) down the stairs to
# the ground floor (15,4), then to (14,12), just above the doormat (14-15,13) that leads out.
TO_GROUND_FLOOR = ["RIGHT"] * 6 + ["UP"] * 3  # the stairs at (16,4) warp to HOUSE_1F (15,4)
TO_ABOVE_DOORMAT = TO_GROUND_FLOOR + ["DOWN"] * 8 + ["LEFT"]  # 18 moves, ending at HOUSE_1F (14,12)
SQUARE = ["UP", "LEFT", "DOWN", "RIGHT"]  # (14,12) -> (14,11) -> (13,11) -> (13,12) -> (14,12)
OUT_AND_BACK = ["DOWN", "UP"]  # doormat -> ACORN_TOWN (3,6): LEFT_HOUSE, M1; the door (3,5) -> back to (14,12)


def game_section(*, pinned: bool = True, initial_state: str | None = None, initial_state_sha256: str | None = None,
                 **changes) -> dict:
    """The bundled manifest's game section, its PyBoy start state replaced when given; unpinned: no
    first_frame_sha256 (the preflight's is used)."""
    pyboy = dict(BASE["game"]["start_states"]["pyboy"])
    if initial_state is not None:
        pyboy.update(state=initial_state, sha256=initial_state_sha256)
    if not pinned:
        pyboy["first_frame_sha256"] = None
    return dict(BASE["game"], **changes, start_states={"pyboy": pyboy})


def budgets(**limits) -> dict:
    """The whole budgets section (write_manifest replaces it): no limit but those given."""
    section = {"accepted_actions": None, "model_decisions": None, "wall_time_minutes": None,
               "total_cost_usd": None, "tokens": None, "unrecoverable_loop_repeats": 3}
    section.update(limits)
    return section


def script_condition(tmp: Path, actions: list[str], **extra) -> dict:
    path = tmp / "script.txt"
    path.write_text(" ".join(actions) + "\n")
    return {"id": "walk", "policy": "scripted", "script": str(path), **extra}


class Stub:
    """A test policy. Each call answers with the next reply: a list of actions (a valid contract
    response), a raw text (exactly as given), or an exception (raised); after the list, `then`
    (None: PolicyExhausted). Paid: a model provider's stand-in, every answered call reporting
    `usage`. `delay` (or `delays[call]`) seconds per call, cancellable; `on_call(call, obs)` as
    each call starts."""

    name = "stub"

    def __init__(self, replies, *, paid: bool = False, usage: Usage | None = KNOWN, then=None,
                 delay: float = 0.0, delays: dict[int, float] | None = None, on_call=None):
        self.replies = list(replies)
        self.paid = paid
        self.model_id = MODEL if paid else None
        self.usage = usage if paid else None
        self.then = then
        self.delay = delay
        self.delays = delays or {}
        self.on_call = on_call
        self.calls = 0
        self.cancelled = 0
        self.closed = False

    async def decide(self, observation) -> PolicyReply:
        self.calls += 1
        call = self.calls
        if self.on_call is not None:
            self.on_call(call, observation)
        delay = self.delays.get(call, self.delay)
        if delay:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        reply = self.replies[call - 1] if call <= len(self.replies) else self.then
        if reply is None:
            raise PolicyExhausted("the stub has no replies left")
        if isinstance(reply, BaseException):
            raise reply
        text = contract_json(list(reply), summary="stub") if isinstance(reply, list) else reply
        return PolicyReply(text=text, model_id=self.model_id, response_id=f"resp-{call}" if self.paid else None,
                           usage=self.usage, latency_ms=250.0 if self.paid else None)

    def close(self) -> None:
        self.closed = True


def run(manifest: Path, out: Path, policy=None, *, factory=None, sinks=(), control: RunControl | None = None):
    """Run in-process with `policy` (or `factory`) in place of the `random` policy: (summary, results)."""
    prepared = prepare(manifest, out)
    folder = create_folder(prepared, out)
    if policy is not None:
        factory = lambda condition, trial_number: policy  # noqa: E731
    runner = ExperimentRunner(prepared, folder, sinks=list(sinks), control=control or RunControl(),
                              policy_factories={"random": factory} if factory else None)
    summary = runner.run()
    return summary, runner.results


def evidence_whole(out: Path, *replayed: Path) -> None:
    """The folder verifies, and each given trial replays on PyBoy (frames, milestones, ending)."""
    assert verify_experiment(out) == []
    for trial in replayed:
        replay_trial(trial)


def only_trial(out: Path, results) -> tuple:
    (result,) = results
    return result, find_trial(out, result.trial_key)


# -- 1. accepted actions ---------------------------------------------------------------------------

def test_accepted_actions_budget_hit_mid_decision_is_never_exceeded(tmp_path):
    # Four actions a decision from the walkthrough; 10 accepted actions: 4, 4, then 2 of 4.
    condition = {"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt", "actions_per_decision": 4}
    manifest = write_manifest(tmp_path, conditions=[condition], budgets=budgets(accepted_actions=10))
    summary, results = run(manifest, tmp_path / "out")
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("game-failure", "budget:accepted_actions", None)
    assert (r.last_decision, r.telemetry.accepted_actions, r.telemetry.rejected_actions) == (3, 10, 2)
    trace = read_jsonl(trial / "trace.jsonl")
    assert [(t["parsed_actions"], t["accepted_actions"], t["termination_reason"]) for t in trace] == [
        (["RIGHT"] * 4, 4, None), (["RIGHT", "RIGHT", "UP", "UP"], 4, None),
        (["UP", "DOWN", "DOWN", "DOWN"], 2, "budget:accepted_actions")]
    inputs = read_jsonl(trial / "inputs.jsonl")
    assert [i["action"] for i in inputs] == WALKTHROUGH[:10]
    assert [(i["decision_id"], i["index"]) for i in inputs[-2:]] == [(3, 0), (3, 1)]
    assert inputs[-1]["capture_frame"] - inputs[0]["press_frame"] == 10 * PER_ACTION
    assert (summary.valid, summary.failed, summary.stopped_early) == (1, 1, False)
    evidence_whole(tmp_path / "out", trial)


# -- 2. model decisions ----------------------------------------------------------------------------

def test_model_decisions_budget_counts_retries_and_makes_no_call_beyond_it(tmp_path):
    bad = "I would press UP"
    # Decision 1: invalid, retried, valid (2 calls). Decision 2: valid (3). Decision 3: invalid (4):
    # its retry would be a fifth call, beyond the budget, so it is never made.
    policy = Stub([bad, ["RIGHT"], ["RIGHT"], bad, ["RIGHT"]])
    manifest = write_manifest(tmp_path, conditions=[AGENT], budgets=budgets(model_decisions=4))
    summary, results = run(manifest, tmp_path / "out", policy)
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("game-failure", "budget:model_decisions", None)
    assert policy.calls == 4 and policy.closed
    assert (r.last_decision, r.telemetry.model_calls, r.telemetry.invalid_outputs) == (3, 4, 2)
    assert (r.telemetry.accepted_actions, r.telemetry.decisions) == (2, 3)
    trace = read_jsonl(trial / "trace.jsonl")
    assert [(t["attempts"], t["invalid_output"], t["accepted_actions"], t["termination_reason"])
            for t in trace] == [(2, True, 1, None), (1, False, 1, None), (1, True, 0, "budget:model_decisions")]
    responses = read_jsonl(trial / "responses.jsonl")
    assert [[a["raw"] for a in line["attempts"]] for line in responses][2] == [bad]
    assert responses[0]["attempts"][0]["error"].startswith("response is not a JSON object")
    assert trace[2]["result_frame_sha256"] == trace[2]["frame_sha256"]  # nothing pressed in decision 3
    assert (summary.valid, summary.stopped_early) == (1, False)
    evidence_whole(tmp_path / "out", trial)


# -- 3. paid budgets -------------------------------------------------------------------------------

@pytest.mark.parametrize("usage, limits, reason, outcome, last", [
    (KNOWN, {"total_cost_usd": 0.025}, "budget:total_cost", "game-failure", 3),
    (KNOWN, {"tokens": 40}, "budget:tokens", "game-failure", 3),
    (Usage(input_tokens=10, output_tokens=5), {"total_cost_usd": 1.0}, "budget:cost_unknown",
     "invalid-provider", 1),
    (Usage(cost_usd=0.01, cost_source="provider"), {"tokens": 1000}, "budget:tokens_unknown",
     "invalid-provider", 1),
], ids=["total-cost", "tokens", "cost-unknown", "tokens-unknown"])
def test_paid_policy_budgets(tmp_path, usage, limits, reason, outcome, last):
    policy = Stub([], paid=True, usage=usage, then=["NOOP"])  # $0.01 and 10 + 5 tokens a call, where known
    manifest = write_manifest(tmp_path, conditions=[AGENT], budgets=budgets(**limits))
    summary, results = run(manifest, tmp_path / "out", policy)
    r, trial = only_trial(tmp_path / "out", results)
    cause = "usage-unknown" if outcome == "invalid-provider" else None
    assert (r.outcome, r.termination_reason, r.invalid_cause) == (outcome, reason, cause)
    assert (r.last_decision, policy.calls, r.telemetry.model_calls) == (last, last, last)
    trace = read_jsonl(trial / "trace.jsonl")
    assert [t["termination_reason"] for t in trace] == [None] * (last - 1) + [reason]
    assert all(t["paid_calls"] == 1 and t["model_id"] == MODEL for t in trace)
    assert [t["response_id"] for t in trace] == [f"resp-{n}" for n in range(1, last + 1)]
    tel = r.telemetry
    if reason == "budget:cost_unknown":
        assert (trace[0]["provider_cost_usd"], tel.cost_usd, tel.tokens) == (None, None, 15)
        assert r.derived["progress_efficiency"] is None
    elif reason == "budget:tokens_unknown":
        assert (trace[0]["input_tokens"], tel.tokens, tel.cost_usd) == (None, None, 0.01)
    else:
        assert (tel.input_tokens, tel.output_tokens, tel.tokens) == (30, 15, 45)
        assert tel.cost_usd == pytest.approx(0.03) and tel.cost_source == ["provider"]
        assert tel.model_latency_ms == 750.0
    if outcome == "invalid-provider":  # a provider's fault stops the series (seed 001)
        assert (summary.stopped_early, summary.stop_reason, summary.invalid) == (True, "external-provider-failure", 1)
        assert trial.parent.name == "void-1"
    else:
        assert (summary.stopped_early, summary.stop_reason, summary.failed) == (False, None, 1)
    evidence_whole(tmp_path / "out", trial)


# -- 4. wall time ----------------------------------------------------------------------------------

class PauseFromThread:
    """At decision `at`, a thread pauses the run for `seconds`, then resumes it (always)."""

    def __init__(self, control: RunControl, at: int, seconds: float):
        self.control, self.at, self.seconds = control, at, seconds
        self.thread: threading.Thread | None = None

    def handle(self, event) -> None:
        if isinstance(event, DecisionRecorded) and event.trace.decision_id == self.at:
            def hold() -> None:
                self.control.pause()
                try:
                    time.sleep(self.seconds)
                finally:
                    self.control.resume()
            self.thread = threading.Thread(target=hold)
            self.thread.start()


def test_wall_time_budget_excludes_time_spent_paused(tmp_path):
    limit = 0.01  # minutes: 0.6 s of the agent's own time
    control = RunControl()
    pauser = PauseFromThread(control, at=2, seconds=1.0)  # longer than the whole budget
    policy = Stub([], then=["NOOP"], delay=0.05)
    manifest = write_manifest(tmp_path, conditions=[AGENT], budgets=budgets(wall_time_minutes=limit))
    started = time.monotonic()
    summary, results = run(manifest, tmp_path / "out", policy, sinks=[pauser], control=control)
    elapsed = time.monotonic() - started
    pauser.thread.join()
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("game-failure", "budget:wall_time", None)
    tel = r.telemetry
    assert tel.held_seconds >= 0.95
    assert limit * 60 <= tel.wall_time_seconds < limit * 60 + 0.3  # ended on the agent's time alone
    assert elapsed > tel.held_seconds + limit * 60
    # Had the pause counted, the budget would have been spent when it ended, before decision 3.
    assert r.last_decision >= 4 and policy.calls == r.last_decision
    trace = read_jsonl(trial / "trace.jsonl")
    assert [t["termination_reason"] for t in trace] == [None] * r.last_decision  # ends between decisions
    assert (summary.failed, summary.stopped_early) == (1, False)
    evidence_whole(tmp_path / "out", trial)


# -- 5. unrecoverable loops ------------------------------------------------------------------------

@pytest.mark.parametrize("walk, ends_at, milestones, repeated", [
    (TO_ABOVE_DOORMAT + SQUARE * 3, 18 + 12, [], 5),
    # Leaving the house (LEFT_HOUSE in flags0, a progress field; M1) between the squares: counting
    # starts again, so the square after it (action 32, the third overall) does not end the trial.
    (TO_ABOVE_DOORMAT + SQUARE * 2 + OUT_AND_BACK + SQUARE * 4, 18 + 8 + 2 + 12, ["M1"], 6),
], ids=["no-progress", "progress-between"])
def test_the_same_route_segment_three_times_without_progress_is_an_unrecoverable_loop(
        tmp_path, walk, ends_at, milestones, repeated):
    manifest = write_manifest(tmp_path, conditions=[script_condition(tmp_path, walk)], budgets=budgets())
    summary, results = run(manifest, tmp_path / "out")
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("game-failure", "unrecoverable-loop", None)
    assert (r.last_decision, r.telemetry.accepted_actions) == (ends_at, ends_at)
    assert (r.telemetry.repeated_position_loops, r.telemetry.repeated_navigation_actions) == (1, repeated)
    assert r.milestones_reached == milestones
    trace = read_jsonl(trial / "trace.jsonl")
    assert [t["termination_reason"] for t in trace] == [None] * (ends_at - 1) + ["unrecoverable-loop"]
    assert [i["action"] for i in read_jsonl(trial / "inputs.jsonl")] == walk[:ends_at]
    if milestones:
        (m1,) = r.milestones
        assert m1.decision_id == 18 + 8 + 1 and m1.probe["map_id"] == 2  # stepped out into ACORN_TOWN
    assert verify_experiment(tmp_path / "out") == []
    # The replay passes only if its own route tracker finds the loop the result claims.
    report = replay_trial(trial)
    assert (report["decisions"], report["actions"], report["milestones"]) == (ends_at, ends_at, milestones)


# -- 6. milestones ---------------------------------------------------------------------------------

def pyboy_walk(state: bytes, actions: list[str]):
    """Restore `state` in PyBoy, play `actions` with the manifest's timing: (emulator, steps)."""
    emulator = PyBoyEmulator(ROM)
    emulator.restore(state)
    probe = Probe(GAME)
    return emulator, [emulator.step(a, TIMING, probe) for a in actions]


def test_milestones_need_two_qualifying_frames_and_never_award_what_held_at_the_start(tmp_path):
    # A start state part-way through the walkthrough: out of the house, in ACORN_TOWN (M1 holds).
    emulator, _ = pyboy_walk(BUNDLED_STATE, WALKTHROUGH[:18])
    state = emulator.save_state()
    emulator.close()
    state_path = tmp_path / "in-town.state"
    state_path.write_bytes(state)
    walk = WALKTHROUGH[18:29]  # RIGHT*6 UP*5: the professor stops you at the north exit (M2)
    # A rung on the VBlank counter (RAM.md: frames, u32 at 0xD01C) that first holds on the capture
    # frame of decision 5, so that decision's two probed frames are K-1 and K: only one qualifies.
    emulator, steps = pyboy_walk(state, walk[:6])
    emulator.close()
    k = steps[4].ram_last["frames"]
    assert steps[4].ram_before_last["frames"] == k - 1 and steps[5].ram_last["frames"] == k + PER_ACTION
    game = yaml.safe_load(GAME_YAML.read_text())
    game["milestones"].append({"id": "T1", "name": f"Frame counter at {k}", "points": 1,
                               "all": [{"field": "frames", "ge": k}]})
    game["final_milestone"] = "M8"
    (tmp_path / "game.yaml").write_text(yaml.safe_dump(game))
    section = game_section(pinned=False, definition=str(tmp_path / "game.yaml"), initial_state=str(state_path),
                           initial_state_sha256=hashlib.sha256(state).hexdigest())
    manifest = write_manifest(tmp_path, game=section, conditions=[script_condition(tmp_path, walk)],
                              budgets=budgets())
    summary, results = run(manifest, tmp_path / "out")
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.last_decision) == ("game-failure", "policy-exhausted", 11)
    assert r.pre_satisfied == ["M1"]
    assert r.milestones_reached == ["M2", "T1"] and "M1" not in [m.id for m in r.milestones]
    # M1 held at the start: never awarded, no points, but it blocks nothing (engine.games.ladder): the deepest is M2
    assert (r.progress_points, r.total_points, r.deepest_milestone, r.skipped_required) == (2, 21, "M2", [])
    inputs = read_jsonl(trial / "inputs.jsonl")
    awards = {m.id: m for m in r.milestones}
    t1 = awards["T1"]
    assert (t1.decision_id, t1.frame_index, t1.frame_sha256) == (6, inputs[5]["capture_frame"],
                                                                 inputs[5]["frame_sha256"])
    assert t1.probe["frames"] == k + PER_ACTION
    m2 = awards["M2"]
    assert (m2.decision_id, m2.probe["flags0"] & 0b11, m2.probe["map_id"]) == (11, 0b11, 2)
    trace = read_jsonl(trial / "trace.jsonl")
    assert [t["milestones_after"] for t in trace] == [[]] * 5 + [["T1"]] * 5 + [["M2", "T1"]]
    assert verify_experiment(tmp_path / "out") == []
    assert replay_trial(trial)["milestones"] == ["M2", "T1"]  # each award on the same decision and frame


# -- 7. a signal while a paid call is in flight ----------------------------------------------------

def test_a_signal_during_a_slow_paid_call_cancels_it_and_records_the_decision_aborted(tmp_path):
    control = RunControl()

    def signal_during_call_2(call, observation):
        if call == 2:  # from another thread, as the signal handler does
            threading.Timer(0.05, control.stop_run, SIGINT).start()

    policy = Stub([["NOOP"], ["NOOP"]], paid=True, delays={2: 30.0}, on_call=signal_during_call_2)
    manifest = write_manifest(tmp_path, conditions=[AGENT], budgets=budgets(total_cost_usd=5.0),
                              trials={"per_condition": 2})
    started = time.monotonic()
    summary, results = run(manifest, tmp_path / "out", policy, control=control)
    assert time.monotonic() - started < 10 and policy.cancelled == 1 and policy.closed
    r, trial = only_trial(tmp_path / "out", results)  # the second trial never started
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("harness-error", "signal", "signal:SIGINT")
    assert (r.termination_detail, r.last_decision) == ("SIGINT", 2)
    tel = r.telemetry
    assert (tel.decisions, tel.model_calls, tel.aborted_calls, tel.invalid_outputs) == (2, 2, 1, 0)
    assert (tel.cost_usd, tel.tokens, tel.accepted_actions) == (None, None, 1)
    trace = read_jsonl(trial / "trace.jsonl")
    t2 = trace[1]
    assert (t2["aborted"], t2["attempts"], t2["paid_calls"], t2["accepted_actions"]) == (True, 1, 1, 0)
    assert (t2["termination_reason"], t2["provider_cost_usd"], t2["input_tokens"]) == ("signal", None, None)
    assert t2["result_frame_sha256"] == t2["frame_sha256"]
    responses = read_jsonl(trial / "responses.jsonl")
    assert responses[1] == {"decision_id": 2, "attempts": [{
        "raw": None, "valid": False, "error": "aborted: the trial was ended during the call", "aborted": True,
        "model_id": MODEL, "response_id": None, "latency_ms": None, "usage": UNKNOWN, "prompt_sha256": None,
        "stop_reason": None, "identity": None, "failure": None, "reply": None, "oversize": None}]}
    assert (summary.stopped_early, summary.stop_reason) == (True, "signal")
    assert (summary.completed, summary.invalid, summary.missing_positions) == (0, 1, [0, 1])
    assert trial.parent.name == "void-1"
    evidence_whole(tmp_path / "out", trial)


# -- 8. provider failures --------------------------------------------------------------------------

@pytest.mark.parametrize("replies, last", [
    ([["NOOP"], ProviderFailure("quota exceeded")], 2),
    ([ProviderFailure("quota exceeded")], 1),
], ids=["mid-trial", "first-call"])
def test_a_provider_failure_is_recorded_and_stops_the_series(tmp_path, replies, last):
    policy = Stub(replies, paid=True)
    manifest = write_manifest(tmp_path, conditions=[AGENT], budgets=budgets(), trials={"per_condition": 2})
    summary, results = run(manifest, tmp_path / "out", policy)
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("invalid-provider", "provider-failure",
                                                                 "provider-failure")
    assert (r.error, r.last_decision, policy.calls, policy.closed) == ("quota exceeded", last, last, True)
    assert (r.telemetry.model_calls, r.telemetry.cost_usd, r.telemetry.accepted_actions) == (last, None, last - 1)
    responses = read_jsonl(trial / "responses.jsonl")
    assert len(responses) == last and responses[-1] == {"decision_id": last, "attempts": [{
        "raw": None, "valid": False, "error": "provider failure: quota exceeded", "aborted": False,
        "model_id": MODEL, "response_id": None, "latency_ms": None, "usage": UNKNOWN, "prompt_sha256": None,
        "stop_reason": None, "identity": None, "failure": "provider-failure", "reply": None, "oversize": None}]}
    failure = json.loads((trial / "provider-failure.json").read_text())
    assert (failure["kind"], failure["message"], failure["decision_id"], failure["attempts"]) == \
        ("provider-failure", "quota exceeded", last, 1)
    trace = read_jsonl(trial / "trace.jsonl")
    assert trace[-1]["termination_reason"] == "provider-failure" and trace[-1]["accepted_actions"] == 0
    assert (summary.stopped_early, summary.stop_reason) == (True, "external-provider-failure")
    assert (summary.invalid, summary.missing_positions) == (1, [0, 1])
    evidence_whole(tmp_path / "out", trial)


@pytest.mark.parametrize("pinned", [False, True], ids=["first-frame-unpinned", "first-frame-pinned"])
def test_a_provider_failure_at_startup(tmp_path, pinned):
    def refuse(condition, trial_number):
        raise ProviderFailure("no API key")

    manifest = write_manifest(tmp_path, game=game_section(pinned=pinned), conditions=[AGENT], budgets=budgets())
    summary, results = run(manifest, tmp_path / "out", factory=refuse)
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.error, r.last_decision) == ("invalid-provider", "provider-failure",
                                                                          "no API key", 0)
    assert (trial / "trace.jsonl").read_bytes() == b"" and (trial / "responses.jsonl").read_bytes() == b""
    assert summary.stop_reason == "external-provider-failure"
    evidence_whole(tmp_path / "out")


# -- 9. emulator faults ----------------------------------------------------------------------------
# PyBoy 2.8.1 cannot be made to raise mid-run by what the cartridge does: its CPU and memory core is
# Cython declared `noexcept nogil` (an error inside is printed and swallowed), and an illegal opcode
# (0xD3, 0xDB, ...) takes zero cycles without advancing PC, so `tick` spins forever, without the
# GIL. That is the real emulator fault a game can cause, and the watchdog (sessions/execute/watchdog.py)
# ends it: after emulator.hang_seconds, or a few seconds after a signal the stuck loop cannot take.

def patched_rom(changes: dict[int, int]) -> bytes:
    rom = bytearray(ROM.read_bytes())
    for address, value in changes.items():
        rom[address] = value
    rom[0x14D] = header_checksum(bytes(rom))  # PyBoy refuses a bad header checksum
    return bytes(rom)


class ReplaceFileAfterFirstTrial:
    def __init__(self, path: Path, data: bytes):
        self.path, self.data, self.done = path, data, False

    def handle(self, event) -> None:
        if isinstance(event, TrialEnded) and not self.done:
            self.path.write_bytes(self.data)
            self.done = True


def hanging_run(tmp_path: Path, **emulator) -> tuple[subprocess.Popen, Path]:
    """`oakwatch run` on a cartridge whose joypad interrupt (enabled at start-up: rIE 0x11, was 0x01)
    lands on an illegal opcode (its vector 0x60, was RETI): decision 3 presses RIGHT and PyBoy spins."""
    code = ROM.read_bytes()
    enable = code.find(bytes.fromhex("3E01E0FF"))  # ld a, #0x01; ldh (rIE), a: the only write of rIE
    assert enable > 0 and code.find(bytes.fromhex("3E01E0FF"), enable + 1) < 0
    rom = patched_rom({enable + 1: 0x11, 0x60: 0xD3})
    rom_path = tmp_path / "illegal.gb"
    rom_path.write_bytes(rom)
    state, _ = make_start_state(rom_path, 120)
    (tmp_path / "illegal.state").write_bytes(state)
    section = game_section(pinned=False, rom=str(rom_path), rom_sha256=hashlib.sha256(rom).hexdigest(),
                           initial_state=str(tmp_path / "illegal.state"),
                           initial_state_sha256=hashlib.sha256(state).hexdigest())
    base = yaml.safe_load(DEFAULT_MANIFEST.read_text())["emulator"]
    manifest = write_manifest(tmp_path, game=section, budgets=budgets(), emulator={**base, **emulator},
                              conditions=[script_condition(tmp_path, ["NOOP", "NOOP", "RIGHT", "NOOP"])])
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, out


def assert_hang_recorded(proc: subprocess.Popen, out: Path, timeout: float) -> None:
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2 and "emulator stopped responding" in err and "Traceback" not in err, err
    assert verify_experiment(out) == []
    result = json.loads((find_trial(out, "X-01") / "result.json").read_text())
    assert (result["outcome"], result["termination_reason"], result["invalid_cause"], result["last_decision"]) == \
        ("harness-error", "emulator-error", "emulator-fault", 2)
    assert "decision 3" in result["error"]
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    assert (summary.stop_reason, summary.invalid, summary.missing_positions) == ("emulator-fault", 1, [0])
    assert not (out / ".lock").exists()


def test_an_emulator_that_hangs_mid_run_is_ended_by_the_watchdog(tmp_path):
    proc, out = hanging_run(tmp_path, hang_seconds=1)
    assert_hang_recorded(proc, out, timeout=30)


def test_a_signal_reaches_a_run_whose_emulator_hangs(tmp_path):
    proc, out = hanging_run(tmp_path)  # hang_seconds 20: the signal ends it first
    trace = out / "trials" / "X-01" / "trace.jsonl"
    deadline = time.monotonic() + 30
    while not (trace.is_file() and trace.read_bytes().count(b"\n") >= 2):  # decision 3 presses RIGHT
        assert proc.poll() is None and time.monotonic() < deadline, "the run never reached decision 3"
        time.sleep(0.02)
    time.sleep(0.5)  # a decision takes milliseconds: PyBoy is spinning now
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert_hang_recorded(proc, out, timeout=15)
    assert time.monotonic() - started < 12  # well before the 20 s hang limit


def test_a_rom_changed_on_disk_between_trials_is_not_played(tmp_path):
    """Every trial plays the bytes hashed in preflight, whatever happens to the file afterwards."""
    rom_path = tmp_path / "cart.gb"
    rom_path.write_bytes(ROM.read_bytes())
    warp0 = ct.TABLE_ADDR + ct.OFF_WARPS + 1  # the table's first warp (assets/cartridge/TABLES.md)
    assert ROM.read_bytes()[warp0:warp0 + 7] == bytes([0, 16, 4, 1, 15, 4, 2])  # bedroom stairs -> (15,4)
    other = patched_rom({warp0 + 4: 14})  # the stairs now lead to (14,4)
    section = game_section(pinned=False, rom=str(rom_path))
    walk = script_condition(tmp_path, TO_GROUND_FLOOR + ["DOWN"])
    manifest = write_manifest(tmp_path, game=section, conditions=[walk], budgets=budgets(), trials={"per_condition": 2})
    summary, (first, second) = run(manifest, tmp_path / "out", sinks=[ReplaceFileAfterFirstTrial(rom_path, other)])
    rom_path.write_bytes(ROM.read_bytes())
    assert first.outcome == second.outcome == "game-failure" and verify_experiment(tmp_path / "out") == []
    first_inputs = read_jsonl(tmp_path / "out" / "trials" / first.trial_key / "inputs.jsonl")
    second_inputs = read_jsonl(tmp_path / "out" / "trials" / second.trial_key / "inputs.jsonl")
    assert [r["frame_sha256"] for r in first_inputs] == [r["frame_sha256"] for r in second_inputs]
    for trial in (first, second):
        replay_trial(tmp_path / "out" / "trials" / trial.trial_key)


# -- 10. operator tags -----------------------------------------------------------------------------

class TagAtDecision:
    """Pauses the run at one decision and tags from another thread, as the console's dialog does."""

    def __init__(self, control: RunControl, decision: int, tags: dict[str, dict]):
        self.control, self.decision, self.tags = control, decision, tags
        self.outcomes: dict[str, object] = {}
        self.thread: threading.Thread | None = None

    def handle(self, event) -> None:
        if not (isinstance(event, DecisionRecorded) and event.trace.decision_id == self.decision):
            return
        key = f"{event.trace.condition_id}-{event.trace.trial_id:02d}"
        self.control.pause()

        def tag() -> None:
            try:
                for name, fields in self.tags.items():
                    try:
                        self.outcomes[name] = self.control.tag({"trial_key": key, **fields})
                    except TagRefused as exc:
                        self.outcomes[name] = exc
            finally:
                self.control.resume()

        self.thread = threading.Thread(target=tag)
        self.thread.start()


def test_operator_tags_on_a_live_run_are_checked_and_recorded(tmp_path):
    base = {"type": "misread-screen", "severity": "material", "note": "took the stairs for a door"}
    tags = {
        "fact-held": dict(base, decision_id=5, refers_to="fact-0002"),  # written at decision 1 (the notes)
        "earlier-decision": dict(base, decision_id=3, refers_to="2", severity="minor"),
        "not-recorded": dict(base, decision_id=6),
        "later-decision": dict(base, decision_id=5, refers_to="6"),
        "never-held": dict(base, decision_id=5, refers_to="fact-0042"),
    }
    control = RunControl()
    tagger = TagAtDecision(control, 5, tags)
    condition = {"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt",
                 "script_notes": "bundled:walkthrough-notes.yaml"}
    manifest = write_manifest(tmp_path, conditions=[condition], budgets=budgets(accepted_actions=8))
    summary, results = run(manifest, tmp_path / "out", sinks=[tagger], control=control)
    tagger.thread.join()
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.termination_reason, r.last_decision) == ("budget:accepted_actions", 8)
    key = r.trial_key
    refused = {name: str(v) for name, v in tagger.outcomes.items() if isinstance(v, TagRefused)}
    assert refused == {
        "not-recorded": f"decision 6 is not a recorded decision of {key}",
        "later-decision": "refers to decision 6, but only decisions 1..5 exist",
        "never-held": "refers to fact-0042, which the agent's memory never held",
    }
    lines = read_jsonl(trial / "annotations.jsonl")
    assert [(a["trial_key"], a["decision_id"], a["refers_to"], a["severity"], a["source"], a["annotator"])
            for a in lines] == [(key, 5, "fact-0002", "material", "operator", "operator"),
                                (key, 3, "2", "minor", "operator", "operator")]
    assert all(a["note"] == "took the stairs for a door" and a["type"] == "misread-screen" for a in lines)
    assert [tagger.outcomes["fact-held"].decision_id, tagger.outcomes["earlier-decision"].decision_id] == [5, 3]
    assert r.chain.annotation_lines == 2
    assert r.telemetry.held_seconds > 0
    evidence_whole(tmp_path / "out", trial)


# -- 11. a bug in a policy -------------------------------------------------------------------------

def test_an_exception_in_a_policy_is_a_harness_bug_and_the_policy_is_closed(tmp_path):
    policy = Stub([["RIGHT"], ValueError("boom")])
    manifest = write_manifest(tmp_path, conditions=[AGENT], budgets=budgets())
    summary, results = run(manifest, tmp_path / "out", policy)
    r, trial = only_trial(tmp_path / "out", results)
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("harness-error", "harness-error", "harness-bug")
    assert (r.error, r.last_decision, policy.calls, policy.closed) == ("ValueError: boom", 1, 2, True)
    assert [t["termination_reason"] for t in read_jsonl(trial / "trace.jsonl")] == [None]
    assert (summary.stopped_early, summary.stop_reason, summary.invalid, summary.missing_positions) == (
        False, None, 1, [0])
    (void,) = summary.voids
    assert (void.trigger, void.outcome, void.cause) == (r.trial_key, "harness-error", "harness-bug")
    evidence_whole(tmp_path / "out", trial)
