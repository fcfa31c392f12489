"""ROM identification: header fields and SHA-1 against the dumps a definition lists."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.emulators.romheader import GBA_LOGO_START, gb_header_checksum, gba_complement, read_header
from engine.games.gamedef import GameDefinition
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition
from sessions.preflight.romid import RomIdentityError, identify

CARTRIDGE = ASSETS / "cartridge" / "parcel-quest.gb"


def gba_rom(title: bytes, code: bytes, revision: int, body: bytes = b"") -> bytes:
    rom = bytearray(0x200) + bytearray(body)
    rom[4:8] = GBA_LOGO_START
    rom[0xA0:0xAC] = title.ljust(12, b"\0")
    rom[0xAC:0xB0] = code
    rom[0xB0:0xB2] = b"01"
    rom[0xB2] = 0x96
    rom[0xBC] = revision
    rom[0xBD] = gba_complement(bytes(rom))
    return bytes(rom)


def definition(roms: list[dict]) -> GameDefinition:
    return GameDefinition.model_validate({
        "id": "test-game", "title": "Test", "platform": "gba", "roms": roms,
        "fields": {"a": {"address": 0x02000000}},
        "milestones": [{"id": "M1", "name": "one", "points": 1, "all": [{"field": "a", "eq": 1}]}]})


def entry(rom: bytes, name: str, **over) -> dict:
    h = read_header(rom)
    return {"name": name, "title": h.title, "code": h.code, "revision": h.revision,
            "header_checksum": h.header_checksum, "sha1": h.sha1, "source": "built in the test", **over}


def test_gb_header_of_the_bundled_cartridge():
    rom = CARTRIDGE.read_bytes()
    h = read_header(rom)
    assert h.platform == "gb"
    assert h.header_checksum == rom[0x14D] == gb_header_checksum(rom)
    assert h.header_checksum_ok is True
    assert h.sha1 == hashlib.sha1(rom).hexdigest() and h.sha256 == hashlib.sha256(rom).hexdigest()
    assert h.title and h.code is None


def test_gba_header_fields_and_complement():
    rom = gba_rom(b"POKEMON FIRE", b"BPRE", 1)
    h = read_header(rom)
    assert (h.platform, h.title, h.code, h.revision) == ("gba", "POKEMON FIRE", "BPRE", 1)
    assert h.header_checksum_ok is True
    broken = bytearray(rom)
    broken[0xA1] ^= 0x20  # the title changed, the check byte did not
    assert read_header(bytes(broken)).header_checksum_ok is False


def test_a_file_with_no_header_is_described_not_crashed():
    h = read_header(b"\x00" * 64)
    assert h.platform is None and h.title is None
    assert "no Game Boy or Game Boy Advance header" in h.describe()


def test_identified_by_sha1_and_the_name_recorded():
    rom = gba_rom(b"POKEMON FIRE", b"BPRE", 0)
    game = definition([entry(rom, "FireRed 1.0")])
    ident = identify(rom, game)
    assert ident.matched == "FireRed 1.0" and ident.forced is False
    assert ident.as_dict()["sha256"] == hashlib.sha256(rom).hexdigest()


def test_wrong_game_is_refused_naming_what_was_found():
    known = gba_rom(b"POKEMON FIRE", b"BPRE", 0)
    other = gba_rom(b"POKEMON EMER", b"BPEE", 0)
    game = definition([entry(known, "FireRed 1.0")])
    with pytest.raises(RomIdentityError) as err:
        identify(other, game, source="emerald.gba")
    text = str(err.value)
    assert "emerald.gba" in text and "'POKEMON EMER'" in text and "BPEE" in text
    assert "FireRed 1.0" in text and "--force" in text


def test_other_revision_is_refused():
    rev0 = gba_rom(b"POKEMON FIRE", b"BPRE", 0)
    rev1 = gba_rom(b"POKEMON FIRE", b"BPRE", 1)
    with pytest.raises(RomIdentityError, match="revision 1"):
        identify(rev1, definition([entry(rev0, "FireRed 1.0")]))


def test_same_header_different_bytes_is_called_a_bad_or_patched_dump():
    good = gba_rom(b"POKEMON FIRE", b"BPRE", 0, body=b"original")
    patched = gba_rom(b"POKEMON FIRE", b"BPRE", 0, body=b"patched!")
    with pytest.raises(RomIdentityError, match="patched, trimmed or bad dump"):
        identify(patched, definition([entry(good, "FireRed 1.0")]))


def test_force_runs_it_and_says_so():
    known = gba_rom(b"POKEMON FIRE", b"BPRE", 0)
    other = gba_rom(b"SOMETHING", b"XXXX", 3)
    ident = identify(other, definition([entry(known, "FireRed 1.0")]), force=True)
    assert ident.forced is True and ident.matched is None
    assert ident.as_dict()["code"] == "XXXX"


def test_the_open_cartridge_lists_no_dumps_and_is_never_refused():
    game = load_game_definition(ASSETS / "games" / "parcel-quest.yaml")
    ident = identify(CARTRIDGE.read_bytes(), game)
    assert ident.matched is None and ident.forced is False


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=0x300))
def test_any_bytes_give_a_header_or_none_never_an_exception(data):
    h = read_header(data)
    assert h.platform in (None, "gb", "gba")
    assert h.describe()
