"""The human policy (keyboard play) and a run that fails inside the console."""

from __future__ import annotations

import json

from app.console.console import OakwatchConsole
from engine.policies.human import HumanPolicy, key_queue, offer
from engine.policies.policy import Observation, PolicyExhausted
from panes.dialogs import EndTrialDialog
from sessions.audit.verify import verify_experiment
from tests.app.conftest import human_manifest, prepare_run, quit_and_wait, settle, wait_for
from tests.conftest import find_trial

SIZE = (160, 50)


async def test_human_key_presses_are_logged_as_actions(tmp_path):
    prepared, experiment = prepare_run(human_manifest(tmp_path), tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app._human_active, what="human play to become active")
        pressed = [("right", "RIGHT"), ("z", "A"), ("x", "B"), ("up", "UP"), ("enter", "START"),
                   ("backspace", "SELECT"), ("left", "LEFT"), ("down", "DOWN")]
        for n, (key, _) in enumerate(pressed, start=1):
            await pilot.press(key)
            await wait_for(pilot, lambda n=n: app.sink.status().decisions == n, what=f"decision {n}")
        assert not isinstance(app.screen, EndTrialDialog)  # x is the B button here
        assert "ctrl+x" in {b.binding.key for b in app.active_bindings.values()
                            if b.binding.action == "end_trial_human" and b.enabled}
        await quit_and_wait(pilot, app)
    trial = find_trial(folder, "X-01")
    rows = [json.loads(x) for x in (trial / "inputs.jsonl").read_text().splitlines()]
    assert [r["action"] for r in rows] == [action for _, action in pressed]
    assert [r["decision_id"] for r in rows] == list(range(1, len(pressed) + 1))
    result = json.loads((trial / "result.json").read_text())
    assert (result["termination_reason"], result["outcome"]) == ("operator-quit", "harness-error")
    assert verify_experiment(folder) == []


async def test_human_trial_ends_with_ctrl_x(tmp_path):
    prepared, experiment = prepare_run(human_manifest(tmp_path), tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app._human_active, what="human play to become active")
        await pilot.press("ctrl+x")
        await wait_for(pilot, lambda: isinstance(app.screen, EndTrialDialog), what="the end-trial dialog")
        await pilot.press(*"done playing", "enter")
        await wait_for(pilot, lambda: app.run_done, what="the run to end")
        await quit_and_wait(pilot, app)
    # The player ended their own trial: they played it, so it is a valid game-failure.
    result = json.loads((folder / "trials" / "X-01" / "result.json").read_text())
    assert (result["outcome"], result["termination_reason"], result["termination_detail"]) == \
        ("game-failure", "player-ended", "done playing")
    assert verify_experiment(folder) == []


async def test_human_policy_wakes_on_terminate():
    import numpy as np

    keys = key_queue()
    reason: list[str] = []
    policy = HumanPolicy(keys, lambda: reason[0] if reason else None, poll_seconds=0.005)
    obs = Observation(1, np.zeros((144, 160, 3), np.uint8), "0" * 64, (), (), None, (), 1, ("A", "B"))
    assert offer(keys, "A")
    reply = await policy.decide(obs)
    assert json.loads(reply.text)["actions"] == ["A"]
    reason.append("stop")
    try:
        await policy.decide(obs)
    except PolicyExhausted:
        pass
    else:
        raise AssertionError("decide did not wake up on terminate")


class Boom:
    name = "boom"
    model_id = None
    paid = False

    async def decide(self, observation):
        raise ValueError("policy exploded")

    def close(self):
        pass


async def test_a_failing_run_shows_in_the_console_and_keeps_the_evidence(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=None, policy_factories={"scripted": lambda c, n: Boom()})
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.run_done, what="the run to end")
        await settle(pilot, 0.3)
        status = app.sink.status()
        assert "policy exploded" in (status.error or "")
        assert app.is_running  # the console stays up
        await quit_and_wait(pilot, app)
    result = json.loads((find_trial(folder, "X-01") / "result.json").read_text())
    assert (result["outcome"], result["invalid_cause"]) == ("harness-error", "harness-bug")
    assert verify_experiment(folder) == []
