"""The GBA path's pieces that need no GBA ROM: the header of an open cartridge (no boot logo), a
definition's round trip to the probe child, a GBA game asked of PyBoy, and conformance builds."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from engine.emulators.romheader import gba_complement, platform_of, read_header
from engine.games.gamedef import GameDefinition
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.gamedefs import load_game_definition
from sessions.preflight.romid import RomIdentityError, identify
from tests.sessions.preflight.test_romid import gba_rom

FIRERED = ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml"


def open_gba_rom(branch: bool = True) -> bytes:
    """A GBA header with our own bytes where the logo goes: an ARM branch at 0, 0x96, the complement."""
    rom = bytearray(0x400)
    if branch:
        rom[0:4] = bytes([0x2E, 0x00, 0x00, 0xEA])  # b 0xC0
    rom[4:0xA0] = b"\x5a" * 0x9C
    rom[0xA0:0xAC] = b"OPEN CART".ljust(12, b"\0")
    rom[0xAC:0xB0] = b"OPEN"
    rom[0xB2] = 0x96
    rom[0xBD] = gba_complement(bytes(rom))
    return bytes(rom)


def test_an_open_gba_header_without_the_boot_logo_is_gba():
    rom = open_gba_rom()
    h = read_header(rom)
    assert (h.platform, h.title, h.code, h.header_checksum_ok) == ("gba", "OPEN CART", "OPEN", True)
    assert platform_of(open_gba_rom(branch=False)) is None  # no logo and no entry branch: not a header
    wrong = bytearray(rom)
    wrong[0xBD] ^= 1
    assert platform_of(bytes(wrong)) is None  # without the logo the complement must hold


def _gba_manifest(tmp_path, **game_changes):
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data["game"] = {**data["game"], "definition": "bundled:pokemon-firered-leafgreen-en.yaml",
                    "start_states": {"mgba": {"state": "firered.state", "sha256": "0" * 64,
                                              "emulator_version": "0.10.2"}}, **game_changes}
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("how", ["manifest", "--emulator"])
def test_a_gba_game_on_pyboy_is_one_line_exit_2_nothing_written(tmp_path, how):
    manifest = _gba_manifest(tmp_path)
    if how == "--emulator":  # a manifest for mGBA, run with --emulator pyboy
        data = yaml.safe_load(manifest.read_text())
        data["emulator"].update({"name": "mgba", "frame_width": 240, "frame_height": 160})
        manifest.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    args = [sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output", str(out)]
    args += ["--emulator", "pyboy"] if how == "--emulator" else []
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("oakwatch: error: ")
    assert "pyboy runs gb, gbc games" in lines[0] and "is for gba (run it on mgba)" in lines[0]
    assert "make-state" not in lines[0]  # a PyBoy state would not help
    assert not out.exists() and proc.stdout == ""


def _with_conformance(rom: bytes) -> GameDefinition:
    data = yaml.safe_load(FIRERED.read_text())
    data["conformance"] = [{"build": "Open Cart (FireRed layout)", "rom": "bundled:open.gba",
                            "rom_sha256": read_header(rom).sha256, "commit": "abcdef1",
                            "ran": "a test"}]
    return GameDefinition.model_validate(data)


def test_a_conformance_build_is_accepted_and_labelled_never_as_the_game():
    rom = open_gba_rom()
    plain = load_game_definition(FIRERED)
    with pytest.raises(RomIdentityError):  # not a FireRed dump
        identify(rom, plain)
    game = _with_conformance(rom)
    ident = identify(rom, game)
    assert (ident.matched, ident.forced, ident.conformance_build) == (None, False, "Open Cart (FireRed layout)")
    assert ident.as_dict()["conformance_build"] == "Open Cart (FireRed layout)"
    label = ident.label(game.title)
    assert label.startswith("conformance build Open Cart") and f"not a {game.title} ROM" in label
    assert game.verified is False  # a conformance record never makes the definition verified
    # another ROM with the same header is still refused: the record names one ROM by its SHA-256
    other = bytearray(rom)
    other[0x200] = 1
    with pytest.raises(RomIdentityError):
        identify(bytes(other), game)
    # and a real dump's identification is unchanged
    dump = gba_rom(b"POKEMON FIRE", b"BPRE", 1)
    with pytest.raises(RomIdentityError, match="SHA-1 is not that dump's"):
        identify(dump, game)


def test_a_conformance_rom_listed_twice_is_refused():
    rom = open_gba_rom()
    data = _with_conformance(rom).model_dump(mode="json")
    data["conformance"] *= 2
    with pytest.raises(ValueError, match="listed twice"):
        GameDefinition.model_validate(data)
