"""The bundled real-game definitions: every address cites its source, dumps are listed for
identification, and a memory image that has not started a game satisfies no rung."""

from __future__ import annotations

import pytest

from engine.ladder import Ladder
from engine.probe import Probe
from sessions.assets import ASSETS
from sessions.gamedefs import load_game_definition

REAL = sorted(p for p in (ASSETS / "games").glob("pokemon-*.yaml"))


def test_the_three_games_are_bundled():
    assert [p.stem for p in REAL] == ["pokemon-emerald-en", "pokemon-firered-leafgreen-en", "pokemon-red-blue-en"]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_every_value_cites_its_source_and_dumps_are_listed(path):
    game = load_game_definition(path)
    assert game.verified is False  # until the opt-in real-ROM test (tests/realroms) passes on it
    unsourced = [f"field {n}" for n, f in game.fields.items() if not f.source]
    unsourced += [f"pointer {n}" for n, p in game.pointers.items() if not p.source]
    unsourced += [f"array {n}" for n, a in game.arrays.items() if not a.source]
    assert not unsourced
    assert all("pret/" in f.source or "pokered" in f.source or "poke" in f.source for f in game.fields.values())
    assert game.roms and len({r.sha1 for r in game.roms}) == len(game.roms)
    assert {r.code is None for r in game.roms} == {game.platform != "gba"}


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.stem)
def test_blank_memory_satisfies_no_rung(path):
    game = load_game_definition(path)
    probe = Probe(game)
    for fill in (0x00, 0xFF):
        sample = probe(lambda address, length, fill=fill: [fill] * length)
        ladder = Ladder(game, sample)
        awarded = ladder.update(sample, sample, decision_id=1, frame_index=1, frame_sha256="0" * 64)
        assert not awarded, f"memory of {fill:#04x} bytes awards {[a.id for a in awarded]}"
