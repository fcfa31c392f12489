"""Seed 001's catch goal end to end on a real GBA ROM (never run end to end before): the bundled
parcel-quest-advance-catch experiment starts after the walkthrough (M8, five balls) and its scripted
catch meets the FireRed definition's `catch` goal (party +1, a new owned-dex flag, gBattleOutcome 7);
the folder verifies (the goal's frame is one an input captured) and replays to the same frame."""

from __future__ import annotations

import json

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from tests.gba.conftest import needs_mgba, oakwatch

pytestmark = needs_mgba


def test_the_catch_goal_is_met_verified_and_replayed(tmp_path):
    out = tmp_path / "exp"
    done = oakwatch("run", "bundled:parcel-quest-advance-catch.yaml", "--headless", "--output", out)
    assert done.returncode == 0, done.stderr
    (trial,) = out.glob("trials/*")
    result = json.loads((trial / "result.json").read_text())
    assert (result["outcome"], result["termination_reason"]) == ("success", "goal-met")
    goal = result["goal"]
    assert goal["id"] == "catch" and goal["met"] and goal["species"] and goal["species"][0] in (16, 19)
    assert goal["start"]["party_count"] == 1 and goal["probe"]["party_count"] == 2
    assert goal["probe"]["battle_outcome"] == 7 and goal["start"]["battle_outcome"] != 7
    assert "M8" in result["pre_satisfied"] and result["milestones_reached"] == []  # the ladder earns nothing here
    assert verify_experiment(out) == []
    inputs = [json.loads(line) for line in (trial / "inputs.jsonl").read_text().splitlines()]
    assert (inputs[-1]["capture_frame"], inputs[-1]["frame_sha256"]) == (goal["frame_index"], goal["frame_sha256"])
    # the replay meets the goal on the same frame (it raises Divergence otherwise)
    assert replay_trial(trial)["decisions"] == len(inputs) == goal["decision_id"]
