"""Parcel Quest Advance through the whole harness on real mGBA, read by the UNCHANGED FireRed
definition: the bundled GBA dry-run reaches M8, verifies and replays; the ROM is accepted as the
definition's conformance build and labelled so everywhere (never as FireRed); make-state, state new
and the pins."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys

import pytest
import yaml

from sessions.preflight.gamedefs import load_game_definition
from tests.gba.conftest import CART, FIRERED, ROM, ROOT, STATE, needs_mgba, oakwatch

pytestmark = needs_mgba
BUILD = "Parcel Quest Advance (FireRed layout)"


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_gba_dry_run_reaches_m8_through_the_firered_definition_and_verifies_and_replays(gba_dry_run):
    out, done = gba_dry_run
    assert done.returncode == 0, done.stderr
    (result_file,) = out.glob("trials/*/result.json")
    result = json.loads(result_file.read_text())
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert result["milestones_reached"] == [f"M{i}" for i in range(1, 9)]
    prov = result["provenance"]
    # the definition the trial read is the bundled FireRed file, byte for byte
    assert prov["game_definition_sha256"] == sha256(FIRERED)
    frozen = yaml.safe_load((out / "manifest.yaml").read_text())
    assert frozen["game"]["definition"] == "bundled:pokemon-firered-leafgreen-en.yaml"
    assert not frozen["game"].get("allow_unidentified_rom")  # identified, not forced
    assert (frozen["emulator"]["name"], frozen["emulator"]["frame_width"], frozen["emulator"]["frame_height"]) == \
        ("mgba", 240, 160)
    # identified as the definition's conformance build, never as a FireRed dump
    ident = prov["rom_identity"]
    assert (ident["platform"], ident["conformance_build"], ident["matched"], ident["forced"]) == \
        ("gba", BUILD, None, False)
    assert ident["sha256"] == sha256(ROM) == prov["rom_sha256"]
    assert prov["game_definition_verified"] is False
    (record,) = prov["game_definition_conformance"]
    assert record["build"] == BUILD and record["rom_sha256"] == sha256(ROM)
    # the frozen controls were read from the start state (FireRed's SaveBlock2 options), not left unchecked
    assert prov["controls"]["text_speed"] == "checked" and prov["controls"]["battle_style"] == "checked"
    verify = oakwatch("verify", out, "--deep")
    assert verify.returncode == 0, verify.stderr
    replay = oakwatch("replay", result_file.parent)
    assert replay.returncode == 0 and "M8" in replay.stdout, replay.stderr


def test_the_stored_frames_are_240x160(gba_dry_run, tmp_path):
    out, _ = gba_dry_run
    (trial,) = out.glob("trials/*")
    done = oakwatch("frames", trial, "--decisions", "1:2", "--output", tmp_path / "png")
    assert done.returncode == 0, done.stderr
    pngs = sorted((tmp_path / "png").glob("*.png"))
    assert pngs
    for png in pngs:
        assert struct.unpack(">II", png.read_bytes()[16:24]) == (240, 160)


def test_the_report_says_what_was_and_was_not_checked(gba_dry_run, tmp_path):
    out, _ = gba_dry_run
    done = oakwatch("report", out, "--output", tmp_path / "reports")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "reports" / "report.md").read_text()
    section = text.split("## Game and ROM", 1)[1].split("##", 1)[0]
    assert BUILD in section and "conformance build" in section
    assert "not a check on that game itself" in section and "verified: false" in section
    doc = json.loads((tmp_path / "reports" / "report.json").read_text())
    assert doc["game_and_rom"]["conformance_build"] == BUILD and doc["game_and_rom"]["verified"] is False


def test_the_pins_are_current():
    """The bundled start state is power-on + 120 frames on mGBA, and every manifest and the
    definition's conformance record name this ROM and state (tools/pin.py --check)."""
    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("not a git checkout: the conformance record's commit cannot be looked up")
    done = subprocess.run([sys.executable, str(CART / "tools" / "pin.py"), "--check"], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    record = load_game_definition(FIRERED).conformance[0]
    assert record.rom_sha256 == sha256(ROM) and record.build == BUILD


def test_make_state_on_a_gba_rom_runs_mgba_and_gives_the_bundled_state(tmp_path):
    done = oakwatch("make-state", ROM, "--frames", "120", "--output", tmp_path / "s.state")
    assert done.returncode == 0, done.stderr
    assert "emulator: mgba" in done.stdout and "platform: gba" in done.stdout
    assert (tmp_path / "s.state").read_bytes() == STATE.read_bytes()


def test_state_new_accepts_the_cartridge_as_a_conformance_build_and_its_smoke_test_runs(tmp_path):
    prefix = tmp_path / "prefix.txt"
    prefix.write_text("RIGHT\nRIGHT\n")
    folder = tmp_path / "mine"
    done = oakwatch("state", "new", "--rom", ROM, "--game", "pokemon-firered-leafgreen-en", "--inputs", prefix,
                    "--output", folder)
    assert done.returncode == 0, done.stderr
    assert f"ROM: conformance build {BUILD}" in done.stdout and "not a Pokémon FireRed" in done.stdout
    start = json.loads((folder / "start.json").read_text())
    assert start["rom_identity"]["conformance_build"] == BUILD and start["emulator"] == "mgba"
    manifest = yaml.safe_load((folder / "manifest.yaml").read_text())
    assert "allow_unidentified_rom" not in manifest["game"]
    assert (manifest["emulator"]["frame_width"], manifest["emulator"]["frame_height"]) == (240, 160)
    # the random agent of the smoke test plays it, and the folder verifies
    run = oakwatch("run", folder / "manifest.yaml", "--headless", "--output", tmp_path / "run")
    assert run.returncode in (0, 1), run.stderr
    (result_file,) = (tmp_path / "run").glob("trials/*/result.json")
    result = json.loads(result_file.read_text())
    assert result["outcome"] in ("success", "game-failure") and result["telemetry"]["accepted_actions"] > 0
    assert oakwatch("verify", tmp_path / "run").returncode == 0


def test_one_byte_changed_is_not_the_conformance_build(tmp_path):
    rom = bytearray(ROM.read_bytes())
    rom[-1] ^= 0xFF
    other = tmp_path / "changed.gba"
    other.write_bytes(bytes(rom))
    done = oakwatch("state", "new", "--rom", other, "--game", "pokemon-firered-leafgreen-en", "--inputs",
                    CART / "walkthrough.txt", "--output", tmp_path / "o")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "not a game or revision this definition was written for" in done.stderr
    assert not (tmp_path / "o").exists()
