"""Required, optional and pre-satisfied rungs end to end: the real cartridge in real PyBoy, through
ExperimentRunner into an evidence folder that must verify (`oakwatch verify`) and replay
(`oakwatch replay`), with a modified copy of the bundled definition:
  - M1 holds at the start (its condition is the init magic byte): pre-satisfied, 0 points;
  - a rung MX between M4 and M5 that never holds (the magic byte changed while the game is ready),
    required or optional.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine.games.ladder import FINAL, FINAL_SKIPPED
from sessions.analysis.summary import exit_status
from sessions.audit.replay import Divergence, replay_trial
from sessions.audit.verify import verify_experiment
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import prepare
from tests.conftest import find_trial, write_manifest

ROOT = Path(__file__).resolve().parents[3]
GAME_YAML = ROOT / "assets" / "games" / "parcel-quest.yaml"
BASE = yaml.safe_load((ROOT / "assets" / "experiments" / "dry-run.yaml").read_text())
WALK = {"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt", "actions_per_decision": 4}


def definition(tmp: Path, *, mx_required: bool) -> Path:
    game = yaml.safe_load(GAME_YAML.read_text())
    rungs = game["milestones"]
    assert [m["id"] for m in rungs][:4] == ["M1", "M2", "M3", "M4"]
    rungs[0]["all"] = [{"field": "magic", "eq": 0x4F}]  # true from the start state on
    rungs.insert(4, {"id": "MX", "name": "Never", "points": 5, "required": mx_required,
                     "all": [{"field": "magic", "ne": 0x4F}]})  # never while the game is ready
    path = tmp / "game.yaml"
    path.write_text(yaml.safe_dump(game, sort_keys=False))
    return path


def run_walkthrough(tmp: Path, *, mx_required: bool):
    manifest = write_manifest(tmp, game=dict(BASE["game"], definition=str(definition(tmp, mx_required=mx_required))),
                              conditions=[WALK])
    out = tmp / "out"
    prepared = prepare(manifest, out)
    runner = ExperimentRunner(prepared, create_folder(prepared, out))
    summary = runner.run()
    (result,) = runner.results
    return summary, result, out, find_trial(out, result.trial_key)


def test_a_required_rung_skipped_on_the_way_to_m8_is_a_game_failure_that_verifies_and_replays(tmp_path):
    summary, r, out, trial = run_walkthrough(tmp_path, mx_required=True)
    assert (r.termination_reason, r.outcome) == (FINAL_SKIPPED, "game-failure")
    assert r.milestones_reached == ["M2", "M3", "M4", "M5", "M6", "M7", "M8"]
    assert (r.pre_satisfied, r.skipped_required, r.deepest_milestone) == (["M1"], ["MX"], "M4")
    assert (r.progress_points, r.total_points) == (19, 25)  # M1 held at the start: its point is not earned
    assert exit_status(summary) == 1 and summary.successful == 0 and summary.failed == 1
    saved = json.loads((trial / "result.json").read_text())
    assert saved["skipped_required"] == ["MX"] and saved["pre_satisfied"] == ["M1"]
    assert verify_experiment(out) == []
    assert replay_trial(trial)["milestones"] == r.milestones_reached

    # A result claiming success for the same evidence is caught by both.
    forged = dict(saved, termination_reason=FINAL, outcome="success", skipped_required=[])
    (trial / "result.json").write_text(json.dumps(forged, indent=2) + "\n")
    problems = verify_experiment(out)
    assert any("final-milestone, but the trace never reached MX" in p for p in problems), problems
    with pytest.raises(Divergence, match="claims final-milestone; the replay ends the ladder with "
                                         "final-milestone-skipped-required"):
        replay_trial(trial)
    # So is a result that hides the pre-satisfied rung (it would change the deepest rung and success).
    forged = dict(saved, pre_satisfied=[])
    (trial / "result.json").write_text(json.dumps(forged, indent=2) + "\n")
    assert any("deepest_milestone M4 does not follow" in p for p in verify_experiment(out))
    with pytest.raises(Divergence, match=r"start state satisfies \['M1'\]"):
        replay_trial(trial)


def test_an_optional_rung_passed_over_and_a_rung_held_at_the_start_still_succeed(tmp_path):
    summary, r, out, trial = run_walkthrough(tmp_path, mx_required=False)
    assert (r.termination_reason, r.outcome) == (FINAL, "success")
    assert (r.pre_satisfied, r.skipped_required, r.deepest_milestone) == (["M1"], [], "M8")
    assert r.progress_points == 19 and "M1" not in [m.id for m in r.milestones]
    assert exit_status(summary) == 0
    assert verify_experiment(out) == []
    assert replay_trial(trial)["milestones"] == ["M2", "M3", "M4", "M5", "M6", "M7", "M8"]


def test_required_backtracking_is_not_repetition_in_the_live_loop_or_the_replay(tmp_path):
    """The same random play, with and without the cartridge's whole map declared required
    backtracking: the live count of repeated navigation drops to nothing, and replay agrees."""
    import yaml

    from sessions.audit.replay import replay_trial
    from sessions.preflight.assets import ASSETS
    from tests.conftest import run_experiment, write_manifest

    counts = {}
    for name, backtracking in (("plain", []), ("excused", [{"from_map": 0, "to_map": 6, "via": [1, 2, 3, 4, 5]}])):
        game = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
        game["required_backtracking"] = backtracking
        (tmp_path / name).mkdir()
        (tmp_path / name / "game.yaml").write_text(yaml.safe_dump(game))
        data = yaml.safe_load(write_manifest(tmp_path / name).read_text())
        manifest = write_manifest(
            tmp_path / name, game={**data["game"], "definition": str(tmp_path / name / "game.yaml")},
            conditions=[{"id": "rnd", "policy": "random", "seed": 5}],
            budgets={**data["budgets"], "accepted_actions": 400, "unrecoverable_loop_repeats": None})
        root, _summary, (result,) = run_experiment(manifest, tmp_path / name / "exp")
        counts[name] = result.telemetry.repeated_navigation_actions
        replay_trial(root / "trials" / result.trial_key)  # the replay reaches the same ending
    assert counts["plain"] > 0 and counts["excused"] == 0, counts
