"""Seed 001's goal benchmark (engine.games.goals): a goal chosen for the run (`game.goal`, `run --goal`) ends
a trial as a success when its predicate over the definition's fields holds against the start.

The bundled cartridge has no wild catch (its one creature is the starter, a gift), so no catch goal
ships for it; the loop, verify and replay are exercised on it under PyBoy with a test definition whose
goal reads the same kinds of source (a count that rises, a species list that gains one). The catch
goals of the real-game definitions are checked on synthetic memory laid out at their pret addresses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from app.cli import main
from engine.games.goals import GoalCheck, evidence, new_flags, recheck
from engine.games.probe import Probe
from sessions.audit.replay import Divergence, replay_trial
from sessions.audit.verify import verify_experiment
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from sessions.preflight.gamedefs import load_game_definition
from sessions.preflight.manifest import load_manifest
from tests.conftest import read_jsonl, run_experiment

CREATURE = {"name": "Obtain any creature", "instruction": "Get a creature of your own.",
            "counts": ["party_count"], "owned": "party", "owned_kind": "ids",
            "room": [{"field": "party_count", "le": 0}]}


def cartridge_with_goal(tmp: Path, goal: dict = CREATURE) -> Path:
    game = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
    game["goals"] = {"creature": goal}
    path = tmp / "parcel-quest-goal.yaml"
    path.write_text(yaml.safe_dump(game, sort_keys=False))
    return path


def goal_manifest(tmp: Path, definition: Path, goal: str | None = "creature") -> Path:
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data["game"]["definition"] = str(definition)
    data["game"]["goal"] = goal
    path = tmp / "manifest.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def goal_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("goal")
    folder, summary, (result,) = run_experiment(goal_manifest(tmp, cartridge_with_goal(tmp)), tmp / "exp")
    return folder, summary, result


# -- on the cartridge, under PyBoy --------------------------------------------------------------

def test_the_goal_ends_the_trial_as_a_success_where_it_is_met_and_verify_and_replay_agree(goal_run):
    folder, summary, r = goal_run
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("success", "goal-met", None)
    assert summary.all_succeeded
    goal = r.goal
    assert goal.id == "creature" and goal.met and len(goal.species) == 1
    assert goal.start == {"party_count": 0, "party": [0, 0, 0]}
    assert goal.probe["party_count"] == 1 and goal.species[0] in goal.probe["party"]
    # the walkthrough's starter rung (M3: party_count >= 1) comes with the goal; the ladder no longer ends it
    assert r.milestones_reached == ["M1", "M2", "M3"] and r.last_decision == goal.decision_id
    trial = folder / "trials" / r.trial_key
    inputs = read_jsonl(trial / "inputs.jsonl")
    assert {"capture_frame": goal.frame_index, "frame_sha256": goal.frame_sha256} in [
        {k: i[k] for k in ("capture_frame", "frame_sha256")} for i in inputs]
    assert read_jsonl(trial / "trace.jsonl")[-1]["termination_reason"] == "goal-met"
    assert load_manifest(folder / "manifest.yaml").game.goal == "creature"  # frozen with the run
    assert verify_experiment(folder) == []
    assert replay_trial(trial)["decisions"] == r.last_decision


def test_the_inspect_export_carries_the_goal(goal_run, tmp_path):
    from inspect_ai.log import read_eval_log

    folder, _, r = goal_run
    assert main(["export", str(folder), "--format", "inspect", "--output", str(tmp_path / "ins")]) == 0
    sample = read_eval_log(str(tmp_path / "ins" / f"{r.trial_key}.eval")).samples[0]
    assert sample.metadata["goal"]["met"] and sample.metadata["goal"]["species"] == r.goal.species
    assert sample.metadata["termination_reason"] == "goal-met" and sample.scores["success"].value == 1


def test_verify_refuses_goal_evidence_that_does_not_meet_the_goal(goal_run, tmp_path):
    folder = tmp_path / "exp"
    shutil.copytree(goal_run[0], folder)
    path = folder / "trials" / goal_run[2].trial_key / "result.json"
    data = json.loads(path.read_text())
    data["goal"]["probe"]["party_count"] = 0  # the count never rose
    path.write_text(json.dumps(data, indent=2))
    problems = verify_experiment(folder)
    assert any("does not meet the goal against its recorded start" in p for p in problems), problems
    data["goal"]["probe"]["party_count"] = 1
    data["goal"]["species"] = [3]  # another species than the probe shows
    path.write_text(json.dumps(data, indent=2))
    assert any("names species [3]" in p for p in verify_experiment(folder))
    with pytest.raises(Divergence, match="goal evidence"):
        replay_trial(folder / "trials" / goal_run[2].trial_key)


def test_a_goal_the_definition_lacks_or_a_start_without_room_is_refused_in_preflight(tmp_path):
    definition = cartridge_with_goal(tmp_path)
    with pytest.raises(PreflightError, match="defines no goal 'catch' \\(its goals: creature\\)"):
        prepare(goal_manifest(tmp_path, definition, goal="catch"), tmp_path / "out")
    roomless = cartridge_with_goal(tmp_path, {**CREATURE, "room": [{"field": "party_count", "ge": 1}]})
    with pytest.raises(PreflightError, match="leaves goal creature no room: party_count is 0"):
        prepare(goal_manifest(tmp_path, roomless), tmp_path / "out")
    with pytest.raises(PreflightError, match="defines no goal 'catch' \\(its goals: none\\)"):
        prepare(goal_manifest(tmp_path, ASSETS / "games" / "parcel-quest.yaml", goal="catch"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_run_goal_freezes_the_goal_and_no_goal_keeps_the_manifest_hash(tmp_path, capsys):
    plain = load_manifest(DEFAULT_MANIFEST)
    explicit = goal_manifest(tmp_path, ASSETS / "games" / "parcel-quest.yaml", goal=None)
    assert load_manifest(explicit).game.goal is None
    # a manifest without a goal hashes as it did before goals existed; one with a goal does not
    assert "goal" not in json.loads(plain.canonical_json())["game"]
    assert plain.model_copy(update={"game": plain.game.model_copy(update={"goal": "catch"})}).sha256() != plain.sha256()
    assert main(["run", "--headless", "--goal", "catch", "--output", str(tmp_path / "out")]) == 2
    assert "defines no goal 'catch'" in capsys.readouterr().err and not (tmp_path / "out").exists()
    definition = cartridge_with_goal(tmp_path)
    manifest = goal_manifest(tmp_path, definition, goal=None)
    assert main(["run", str(manifest), "--headless", "--goal", "creature", "--output", str(tmp_path / "run")]) == 0
    assert load_manifest(tmp_path / "run" / "manifest.yaml").game.goal == "creature"
    result = json.loads(next((tmp_path / "run" / "trials").glob("*/result.json")).read_text())
    assert (result["termination_reason"], result["goal"]["met"]) == ("goal-met", True)


# -- the real games' catch goals, on synthetic memory at their pret addresses -------------------

GEN3 = {"pokemon-emerald-en": {"sb2": 0x03005D90, "sb2_value": 0x02024A54, "sb1": 0x03005D8C,
                               "sb1_value": 0x02025A00, "party": 0x020244E9, "outcome": 0x0202433A},
        "pokemon-firered-leafgreen-en": {"sb2": 0x0300500C, "sb2_value": 0x02024588, "sb1": 0x03005008,
                                         "sb1_value": 0x0202552C, "party": 0x02024029, "outcome": 0x02023E8A}}


RED_MARKER = load_game_definition(ASSETS / "games" / "pokemon-red-blue-en.yaml").fields["new_game_marker"].address


class Memory(dict):
    def read(self, address: int, length: int) -> list[int]:
        return [self.get(address + i, 0) for i in range(length)]

    def u32(self, address: int, value: int) -> None:
        for i in range(4):
            self[address + i] = value >> (8 * i) & 0xFF

    def own(self, base: int, species: int) -> None:
        self[base + (species - 1) // 8] = self.get(base + (species - 1) // 8, 0) | 1 << ((species - 1) % 8)


def gen3(name: str, party: int, owned: list[int], outcome: int) -> Memory:
    a = GEN3[name]
    m = Memory()
    m.u32(a["sb1"], a["sb1_value"])
    m.u32(a["sb2"], a["sb2_value"])
    m[a["party"]] = party
    m[a["outcome"]] = outcome
    for species in owned:
        m.own(a["sb2_value"] + 0x28, species)  # SaveBlock2.pokedex (0x18) + Pokedex.owned (0x10)
    return m


def red(party: int, box: int, owned: list[int]) -> Memory:
    m = Memory({0xD163: party, 0xDA80: box, RED_MARKER: 0xFF})  # the game under way (the definition's ready)
    for species in owned:
        m.own(0xD2F7, species)
    return m


def check(name: str, start: Memory, *frames: Memory):
    game = load_game_definition(ASSETS / "games" / f"{name}.yaml")
    probe = Probe(game)
    samples = [probe(m.read) for m in (start, *frames)]
    goal = GoalCheck("catch", game, samples[0])
    met = None
    for n, (prev, cur) in enumerate(zip(samples, samples[1:], strict=False), 1):
        met = goal.update(prev, cur, decision_id=n, frame_index=n, frame_sha256=f"{n:064x}") or met
    return game, samples, met


@pytest.mark.parametrize("name", sorted(GEN3))
def test_a_gen3_catch_is_met_on_two_frames_with_party_dex_flag_and_battle_outcome(name):
    start = gen3(name, party=1, owned=[252], outcome=1)  # a starter owned; the last battle was won
    caught = gen3(name, party=2, owned=[252, 261], outcome=7)  # B_OUTCOME_CAUGHT: Poochyena (#261)
    game, samples, met = check(name, start, caught, caught)
    assert samples[1]["pokedex_owned"] != samples[0]["pokedex_owned"]  # read through SaveBlock2's pointer
    assert met is not None and met.species == [261] and met.decision_id == 2  # the second frame confirms
    assert recheck(game.goals["catch"], game, met) == []
    assert check(name, start, caught)[2] is None  # one frame is not enough


@pytest.mark.parametrize("name", sorted(GEN3))
@pytest.mark.parametrize("after", [
    dict(party=2, owned=[252, 261], outcome=1),  # a gift: no caught outcome
    dict(party=1, owned=[252, 261], outcome=7),  # the party did not grow
    dict(party=2, owned=[252], outcome=7),  # a species already owned: no exact new species
], ids=["gift", "no-party-growth", "no-new-species"])
def test_a_gen3_catch_needs_every_source(name, after):
    start = gen3(name, party=1, owned=[252], outcome=1)
    frame = gen3(name, **after)
    assert check(name, start, frame, frame)[2] is None


def test_red_counts_a_catch_into_the_party_or_the_box():
    start = red(party=5, box=3, owned=[4])
    game, _, met = check("pokemon-red-blue-en", start, red(5, 4, [4, 16]), red(5, 4, [4, 16]))
    assert met is not None and met.species == [16]  # Pidgey, sent to the box
    assert met.start["box_count"] == 3 and met.probe["box_count"] == 4
    assert check("pokemon-red-blue-en", start, red(5, 3, [4, 16]), red(5, 3, [4, 16]))[2] is None


@pytest.mark.parametrize("name", ["pokemon-red-blue-en", *sorted(GEN3)])
def test_a_start_with_a_full_party_has_no_room(name):
    from engine.games.goals import room_problems

    game = load_game_definition(ASSETS / "games" / f"{name}.yaml")
    full = red(6, 0, [4]) if name.startswith("pokemon-red") else gen3(name, party=6, owned=[252], outcome=1)
    assert room_problems(game.goals["catch"], Probe(game)(full.read))
    roomy = red(1, 0, [4]) if name.startswith("pokemon-red") else gen3(name, party=1, owned=[252], outcome=1)
    assert room_problems(game.goals["catch"], Probe(game)(roomy.read)) == []


def test_flags_and_evidence_are_relative_to_the_start():
    assert new_flags([0b0000_0001, 0], [0b0000_0011, 0b1000_0000]) == [2, 16]
    game = load_game_definition(ASSETS / "games" / "pokemon-red-blue-en.yaml")
    start = Probe(game)(red(1, 0, [1, 2, 3]).read)
    assert evidence(game.goals["catch"], start, start) is None
