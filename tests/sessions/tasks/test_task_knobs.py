"""Seed 004's difficulty knobs (sessions.tasks.task_knobs, `oakwatch tasks derive`): a derived task file with its
own hash, its base and knobs recorded in every result; an impossible task is one line, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml

from app.cli import main
from engine.battle.battle import BattleSettings, Knobs
from sessions.tasks.task_knobs import KnobsError, derive_rules
from sessions.tasks.tasks import TASKS_DIR, load_task

RIVAL = TASKS_DIR / "rival-battle.yaml"


def _base(tmp_path, **battle):
    """rival-battle with a level cap and a pool of min levels, in a folder of its own (its files copied)."""
    for name in ("rival-battle.state", "rival-battle.txt", "rival-battle.prefix.txt", "rival-battle.notes.yml"):
        shutil.copy(TASKS_DIR / name, tmp_path / name)
    data = yaml.safe_load(RIVAL.read_text())
    data["task_id"] = "boss"
    data["battle"] = {**data["battle"], "level_cap": 40, **battle}
    path = tmp_path / "boss.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _knobs(tmp_path, **knobs):
    path = tmp_path / "knobs.yaml"
    path.write_text(yaml.safe_dump({"base": "boss.yaml", "task_id": "boss-hard", "knobs": knobs}))
    return path


def test_a_derived_task_has_its_own_hash_and_records_its_base_and_knobs(tmp_path, capsys):
    base = _base(tmp_path, pool={"species": ["SPROUTLE", "EMBERPUP", "DRIPLET"], "moves": ["LEAF JAB", "FLARE NIP",
                                 "BUBBLE POP"], "items": [], "min_levels": {"DRIPLET": 30}})
    knobs = _knobs(tmp_path, level_cap_down_percent=10, exclude={"species": ["EMBERPUP"], "moves": ["FLARE NIP"]})
    out = tmp_path / "derived" / "boss-hard.yaml"
    assert main(["tasks", "derive", str(knobs), "--output", str(out)]) == 0
    said = capsys.readouterr().out
    task = load_task(out)  # it loads from its own folder: references rebased
    rules = task.file.battle
    assert task.id == "boss-hard" and rules.level_cap == 36 and rules.party_limit == 1
    assert rules.pool.species == ["SPROUTLE", "DRIPLET"] and rules.pool.moves == ["LEAF JAB", "BUBBLE POP"]
    base_sha = hashlib.sha256(base.read_bytes()).hexdigest()
    assert rules.derived.base_task == "boss" and rules.derived.base_sha256 == base_sha
    assert rules.derived.knobs.level_cap_down_percent == 10
    assert task.sha256 != base_sha and task.sha256 in said  # its own hash
    assert task.file.reference_script is None and "derived" in task.file.tags
    # the rules, derived record included, are what every result of the task carries (provenance.battle)
    batch = tmp_path / "batch"
    assert main(["tasks", "run", str(out), "--policy", "random", "--seed", "1", "--output", str(batch)]) in (0, 1)
    result = json.loads(next((batch / "runs/boss-hard/trials").glob("*/result.json")).read_text())
    assert result["provenance"]["battle"]["derived"]["base_sha256"] == base_sha
    assert result["provenance"]["battle"]["level_cap"] == 36
    assert result["provenance"]["battle"]["task_sha256"] == task.sha256  # its own hash, in every result
    ledger = json.loads((batch / "batch.json").read_text())
    assert ledger["tasks"][0]["task_sha256"] == task.sha256
    assert main(["verify", str(batch)]) == 0


@pytest.mark.parametrize(("battle", "knobs", "words"), [
    ({"pool": {"species": ["SPROUTLE", "DRIPLET"], "min_levels": {"SPROUTLE": 38, "DRIPLET": 39}}, "team": None},
     {"level_cap_down_percent": 10}, "level_cap 36 is below every pool species' minimum level (the lowest is 38)"),
    ({"pool": {"species": ["SPROUTLE"]}}, {"exclude": {"species": ["SPROUTLE"]}}, "default team"),
    ({"pool": {"species": ["SPROUTLE", "DRIPLET"]}, "team": None}, {"exclude": {"species": ["SPROUTLE", "DRIPLET"]}},
     "pool.species is empty"),
    ({}, {"party_limit": 2}, "party_limit 2 is above the base task's 1"),
    ({"level_cap": None}, {"level_cap_down_percent": 5}, "no level cap to scale"),
    ({}, {"level_cap_down_percent": 99}, "below level 1"),
    ({}, {"exclude": {"items": ["POTION"]}}, "exclude.items: POTION not in the base task's pool"),
    ({}, {"odds": 3}, "odds"),
])
def test_an_impossible_task_is_one_line_exit_2_nothing_written(tmp_path, capsys, battle, knobs, words):
    _base(tmp_path, **battle)
    out = tmp_path / "derived.yaml"
    assert main(["tasks", "derive", str(_knobs(tmp_path, **knobs)), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err
    assert not out.exists()


def test_a_task_file_with_an_impossible_pool_is_refused_when_it_loads(tmp_path):
    from sessions.tasks.tasks import TaskError
    path = _base(tmp_path, pool={"species": ["SPROUTLE"], "min_levels": {"SPROUTLE": 41}}, team=None)
    with pytest.raises(TaskError, match="level_cap 40 is below every pool species' minimum level"):
        load_task(path)
    with pytest.raises(TaskError, match="pool.species is empty"):
        load_task(_base(tmp_path, pool={"species": []}, team=None))


def test_knobs_fit_the_default_team_and_exclude_every_species_of_a_gen3_game():
    from sessions.preflight.assets import ASSETS
    from sessions.preflight.gamedefs import load_game_definition
    fr = load_game_definition(ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml").battle
    rules = BattleSettings.model_validate({"party_limit": 3, "level_cap": 50, "pool": {"items": ["LEFTOVERS"]},
                                          "team": [{"species": "SQUIRTLE", "level": 50, "moves": ["BUBBLE", "TACKLE"],
                                                    "item": "LEFTOVERS", "nature": "BOLD"}]})
    knobs = Knobs.model_validate({"level_cap_down_percent": 7, "party_limit": 2,
                                  "exclude": {"species": ["RATTATA"], "moves": ["TACKLE"], "items": ["LEFTOVERS"]}})
    with pytest.raises(KnobsError, match="exclude.moves: the base task's pool allows every moves"):
        derive_rules(rules, knobs, "b", "0" * 64, [s.name for s in fr.species])
    knobs = Knobs.model_validate({"level_cap_down_percent": 7, "party_limit": 2,
                                  "exclude": {"species": ["RATTATA"], "items": ["LEFTOVERS"]}})
    got = derive_rules(rules, knobs, "b", "0" * 64, [s.name for s in fr.species])
    assert got.level_cap == 46 and got.party_limit == 2 and "RATTATA" not in got.pool.species
    assert got.team[0].level == 46 and got.team[0].item is None and got.team[0].nature == "BOLD"
    assert BattleSettings.model_validate(got.model_dump(mode="json")) == got  # JSON round trip


# -- the sandbox's game data (sessions.tasks.task_data, `oakwatch tasks data`) --------------------------------

def test_task_data_writes_what_the_pool_allows_as_json(tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["tasks", "data", "rival-battle", "--output", str(out)]) == 0
    species = json.loads((out / "species.json").read_text())
    assert [s["name"] for s in species] == ["SPROUTLE", "EMBERPUP", "DRIPLET"]
    rules = json.loads((out / "task.json").read_text())
    assert rules["party_limit"] == 1 and rules["task_sha256"] == load_task(RIVAL).sha256
    assert json.loads((out / "items.json").read_text()) == []  # the pool allows none


def test_task_data_of_a_gen3_task_has_stats_abilities_and_the_pools_moves(tmp_path):
    task = tmp_path / "fr-boss.yaml"
    task.write_text(yaml.safe_dump({
        "task_id": "fr-boss", "title": "A FireRed boss", "instruction": "Win the battle.",
        "experiment": "bundled:firered-mcp.yaml",
        "goal": {"milestones": ["M4"]}, "episodes": {"budget": 10, "actions": 200},
        "battle": {"party_limit": 2, "level_cap": 12,
                   "pool": {"species": ["CHARMANDER", "RATTATA"], "moves": ["SCRATCH", "EMBER", "HYPER FANG"],
                            "items": ["CHARCOAL"], "min_levels": {"RATTATA": 10}}}}))
    out = tmp_path / "data"
    assert main(["tasks", "data", str(task), "--output", str(out)]) == 0
    species = {s["name"]: s for s in json.loads((out / "species.json").read_text())}
    assert set(species) == {"CHARMANDER", "RATTATA"}
    assert species["CHARMANDER"]["moves"] == ["SCRATCH", "EMBER"] and species["RATTATA"]["min_level"] == 10
    assert species["RATTATA"]["abilities"] == ["RUN AWAY", "GUTS"]
    assert species["CHARMANDER"]["base_stats"]["speed"] == 65
    moves = {m["name"]: m for m in json.loads((out / "moves.json").read_text())}
    assert set(moves) == {"SCRATCH", "EMBER", "HYPER FANG"} and moves["EMBER"] == {
        "name": "EMBER", "type": "FIRE", "power": 40, "accuracy": 100, "pp": 25}
    assert json.loads((out / "items.json").read_text()) == [{"name": "CHARCOAL"}]


def test_task_data_refuses_in_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["tasks", "data", "leave-house", "--output", str(out)]) == 2
    assert "no battle rules" in capsys.readouterr().err and not out.exists()
    out.mkdir()
    assert main(["tasks", "data", "rival-battle", "--output", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err and list(out.iterdir()) == []
