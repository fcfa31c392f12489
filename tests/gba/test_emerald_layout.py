"""The Emerald build of Parcel Quest Advance through the whole harness on real mGBA, read by the
UNCHANGED Emerald definition: every rung of its 68-rung ladder in order (the 8 optional ones too), the
long-horizon score (seed 002) in the report, a branch that skips required rungs, the catch goal;
verify and replay. The ROM is the definition's conformance build, never Emerald."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
import yaml

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.preflight.assets import ASSETS, resolve
from tests.gba.conftest import needs_mgba, oakwatch

pytestmark = needs_mgba
EMERALD = ASSETS / "games" / "pokemon-emerald-en.yaml"
DRY_RUN = ASSETS / "experiments" / "parcel-quest-advance-emerald-dry-run.yaml"
BUILD = "Parcel Quest Advance (Emerald layout)"


def run(manifest, out):
    done = oakwatch("run", manifest, "--headless", "--output", out)
    (trial,) = out.glob("trials/*")
    return done, trial, json.loads((trial / "result.json").read_text())


@pytest.fixture(scope="module")
def emerald_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("emerald") / "exp"
    return out, *run("bundled:parcel-quest-advance-emerald-dry-run.yaml", out)


def test_the_emerald_build_reaches_every_rung_through_the_emerald_definition(emerald_run):
    out, done, trial, result = emerald_run
    assert done.returncode == 0, done.stderr
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert result["milestones_reached"] == [f"M{i}" for i in range(1, 69)]  # in ladder order, optional ones too
    assert result["skipped_required"] == [] and result["pre_satisfied"] == []
    prov = result["provenance"]
    assert prov["game_definition_sha256"] == hashlib.sha256(EMERALD.read_bytes()).hexdigest()
    assert prov["rom_identity"]["conformance_build"] == BUILD and prov["rom_identity"]["matched"] is None
    assert prov["game_definition_verified"] is False
    assert verify_experiment(out) == []
    assert replay_trial(trial)["milestones"][-1] == "M68"


def test_the_report_scores_the_long_horizon_ladder(emerald_run, tmp_path):
    out, *_ = emerald_run
    done = oakwatch("report", out, "--output", tmp_path / "r")
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert doc["scorers"]["long_horizon"]["used"] is True
    (row,) = doc["trials"]
    lh = row["long_horizon"]
    assert (lh["reached_required"], lh["required_milestones"], lh["gate"]) == (60, 60, 1)
    assert lh["progress"] == 70.0
    # discipline from the party's highest level (the starter at 45, the cartridge's course): full below 60
    assert lh["level"] == 45 and lh["discipline"] == 10.0
    # speed on the trial's active time, by seed 002's formula (uncapped)
    assert lh["speed"] == pytest.approx(40 * math.log2(1 + 20 / lh["active_hours"]), rel=1e-4)
    assert lh["overall"] == pytest.approx(lh["progress"] + lh["speed"] + lh["discipline"], rel=1e-6)
    section = (tmp_path / "r" / "report.md").read_text().split("## Game and ROM", 1)[1].split("##", 1)[0]
    assert BUILD in section and "not a check on that game itself" in section


def test_a_branch_that_skips_required_rungs_is_a_game_failure_naming_them(tmp_path):
    data = yaml.safe_load(DRY_RUN.read_text())
    for key in ("definition", "rom"):
        data["game"][key] = str(resolve(data["game"][key], DRY_RUN.parent))
    for entry in data["game"]["start_states"].values():
        entry["state"] = str(resolve(entry["state"], DRY_RUN.parent))
    data["conditions"][0]["script"] = str(ASSETS / "gba-cartridge" / "walkthrough-emerald-skip.txt")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))
    done, trial, result = run(tmp_path / "m.yaml", tmp_path / "out")
    assert done.returncode == 1, done.stderr
    assert (result["outcome"], result["termination_reason"]) == ("game-failure", "final-milestone-skipped-required")
    assert result["skipped_required"] == ["M19", "M20"]
    assert "M18" not in result["milestones_reached"] and result["milestones_reached"][-1] == "M68"
    assert verify_experiment(tmp_path / "out") == []
    replay_trial(trial)


def test_the_catch_goal_on_the_emerald_build(tmp_path):
    done, trial, result = run("bundled:parcel-quest-advance-emerald-catch.yaml", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert (result["outcome"], result["termination_reason"]) == ("success", "goal-met")
    assert result["goal"]["species"] and result["goal"]["probe"]["battle_outcome"] == 7
    assert verify_experiment(tmp_path / "out") == []
    replay_trial(trial)
