"""Seed 000's frozen controls (starter, text speed, battle style): told to the agent, checked against
the probed start state in preflight, and every trial's restore checked against that probe."""

import dataclasses

import yaml

from engine.games.gamedef import GameDefinition
from sessions.audit.verify import verify_experiment
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import prepare, system_prompt_for
from sessions.preflight.manifest import load_manifest
from tests.conftest import write_manifest
from tests.sessions.preflight.test_bad_input import assert_refused, oakwatch

CARTRIDGE_DEF = ASSETS / "games" / "parcel-quest.yaml"


def cartridge_with_controls(tmp_path, controls: dict):
    """The cartridge's definition with `controls` mapped onto its real fields, and a manifest using it."""
    definition = yaml.safe_load(CARTRIDGE_DEF.read_text())
    definition["controls"] = controls
    (tmp_path / "game.yaml").write_text(yaml.safe_dump(definition))
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    return write_manifest(tmp_path, game={**game, "definition": "game.yaml"})


def test_a_control_the_start_state_contradicts_is_refused(tmp_path):
    # The cartridge's start state is the bedroom, map_id 0 (assets/cartridge/RAM.md): a "starter"
    # mapped onto map_id with SPROUTLE encoded as 3 cannot be what the state holds.
    m = cartridge_with_controls(tmp_path, {"starter": {"field": "map_id", "values": {"SPROUTLE": 3, "NONE": 0}}})
    out = tmp_path / "o"
    assert_refused(oakwatch("run", m, "--headless", "--output", out), "game.starter", "'SPROUTLE' (map_id = 3)",
                   "holds 'NONE' (map_id = 0)", out=out)


def test_a_manifest_value_the_mapping_does_not_know_is_refused(tmp_path):
    m = cartridge_with_controls(tmp_path, {"battle_style": {"field": "flags1", "mask": 0x02,
                                                            "values": {"shift": 0}}})
    out = tmp_path / "o"
    assert_refused(oakwatch("run", m, "--headless", "--output", out), "game.battle_style", "'set' is not a value",
                   out=out)


def test_a_matching_control_is_checked_and_the_rest_unchecked(tmp_path):
    # masked: flags0 is 0 at the start, so bits 4-7 decode to 0 whatever the encoding of the others
    m = cartridge_with_controls(tmp_path, {"starter": {"field": "flags0", "mask": 0xF0,
                                                       "values": {"sproutle": 0, "driplet": 1}}})
    prepared = prepare(m, tmp_path / "o")
    assert prepared.controls == {"starter": "checked", "text_speed": "unchecked", "battle_style": "unchecked"}
    assert prepared.provenance()["controls"] == prepared.controls


def test_every_result_records_unmapped_controls_as_unchecked(dry_run):
    # The cartridge has no options menu: the dry-run's text speed and battle style (and its starter,
    # chosen later in the game) are fixed by the manifest but cannot be read from its start state.
    folder, _, results = dry_run
    assert results and all(r.provenance["controls"] == {"starter": "unchecked", "text_speed": "unchecked",
                                                         "battle_style": "unchecked"} for r in results)


def test_the_agent_is_told_the_frozen_controls(dry_run):
    folder, _, _ = dry_run
    frozen = (folder / "prompts" / "system.txt").read_text()  # what models are sent, hashed with the folder
    assert "text speed instant, battle style set" in frozen and "choose SPROUTLE" in frozen
    assert "{controls}" not in frozen
    # a manifest that fixes none is told none (and gets no empty rule)
    manifest = load_manifest(DEFAULT_MANIFEST)
    game = manifest.game.model_copy(update=dict.fromkeys(("starter", "text_speed", "battle_style")))
    manifest = manifest.model_copy(update={"game": game})  # frozen: a changed copy
    text = system_prompt_for(manifest)
    assert "{controls}" not in text and "starter" not in text and text.endswith("for this decision.\n")


def test_controls_decode_a_bitfield():
    from engine.games.controls import check_controls

    game = GameDefinition.model_validate({
        "id": "g", "title": "g", "platform": "gba",
        "fields": {"options": {"address": 0x100, "kind": "u16le"}},
        "controls": {"text_speed": {"field": "options", "mask": 0x7, "values": {"slow": 0, "mid": 1, "fast": 2}},
                     "battle_style": {"field": "options", "mask": 0x200, "values": {"shift": 0, "set": 1}}},
        "milestones": [{"id": "M1", "name": "m", "points": 1, "all": [{"field": "options", "ge": 0}]}]})
    sample = {"options": 0x200 | 0b11000 | 2}  # battle style set, a window frame, text speed fast
    statuses, problems = check_controls(game, {"text_speed": "FAST", "battle_style": "set", "starter": None}, sample)
    assert statuses == {"starter": "not-set", "text_speed": "checked", "battle_style": "checked"} and not problems
    _, problems = check_controls(game, {"text_speed": "slow", "battle_style": "shift"}, sample)
    assert [p.control for p in problems] == ["text_speed", "battle_style"]
    assert "holds 'fast' (options = 2)" in problems[0].message


def test_a_restore_to_other_hidden_state_ends_the_trial_as_a_harness_error(tmp_path):
    """A state whose first frame matches the preflight's but whose RAM differs (here the player's
    column, one byte of the state's WRAM image) is caught at the restore, not played."""
    out = tmp_path / "o"
    prepared = prepare(None, out)  # the bundled dry-run: one scripted trial
    # WRAM from 0xD000 as the preflight read it: magic, map_id, x, y, facing, flags0, flags1, bag_count
    s = prepared.start_sample
    pattern = bytes([s[k] for k in ("magic", "map_id", "x", "y", "facing", "flags0", "flags1", "bag_count")])
    state = prepared.start_state
    at = state.find(pattern)
    assert at >= 0 and state.find(pattern, at + 1) < 0, "the WRAM image is not where this test expects"
    tampered = bytearray(state)
    tampered[at + 2] = s["x"] + 1
    prepared = dataclasses.replace(prepared, start_state=bytes(tampered))
    folder = create_folder(prepared, out)
    runner = ExperimentRunner(prepared, folder, sinks=[])
    runner.run()
    assert runner.results
    for result in runner.results:
        assert result.outcome == "harness-error" and result.invalid_cause == "start-state-mismatch"
        assert f"x {s['x'] + 1} (preflight {s['x']})" in result.termination_detail
        assert result.last_decision == 0 and result.milestones_reached == []
    assert verify_experiment(out) == []
