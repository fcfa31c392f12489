"""Opt-in tests on real ROMs the user owns: identification and the first rungs of each definition.

Skipped (with the reason) unless the environment names the ROM and an opening:
  OAKWATCH_ROM_<GAME>      path to the ROM (GAME: RED, BLUE, FIRERED, LEAFGREEN, EMERALD)
  OAKWATCH_OPENING_<GAME>  an input script played from power-on (no boot frames), with the rungs it
                           must reach on a line `# expect: M1 M2`; `oakwatch state new --boot-frames 0`
                           records one (its inputs.txt), then walk on to the first rungs.
No ROM, and nothing derived from one, is in the project: these run on the user's machine only.
A definition may say `verified: true` only once this test has passed on it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing
from engine.emulators.romheader import read_header
from engine.games.ladder import Ladder
from engine.games.probe import Probe
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition
from sessions.preflight.romid import identify

GAMES = {  # env suffix -> (definition, backend, timing)
    "RED": ("pokemon-red-blue-en", "pyboy", Timing(4, 12)),
    "BLUE": ("pokemon-red-blue-en", "pyboy", Timing(4, 12)),
    "FIRERED": ("pokemon-firered-leafgreen-en", "mgba", Timing(2, 8)),
    "LEAFGREEN": ("pokemon-firered-leafgreen-en", "mgba", Timing(2, 8)),
    "EMERALD": ("pokemon-emerald-en", "mgba", Timing(2, 8)),
}


def _inputs(game: str) -> tuple[bytes, list[str], list[str]]:
    rom_path, opening = os.environ.get(f"OAKWATCH_ROM_{game}"), os.environ.get(f"OAKWATCH_OPENING_{game}")
    if not rom_path:
        pytest.skip(f"set OAKWATCH_ROM_{game} to your own {game.title()} ROM to run this test")
    if not opening:
        pytest.skip(f"set OAKWATCH_OPENING_{game} to an input script from power-on (with `# expect: M1 ...`)")
    text = Path(opening).read_text(encoding="utf-8")
    expect = [m for line in re.findall(r"#\s*expect:(.*)", text) for m in line.split()]
    return Path(rom_path).read_bytes(), parse_script(text, opening), expect


@pytest.mark.parametrize("game", list(GAMES))
def test_real_rom_is_identified_and_reaches_the_first_rungs(game):
    rom, actions, expect = _inputs(game)
    definition_id, backend_name, timing = GAMES[game]
    definition = load_game_definition(ASSETS / "games" / f"{definition_id}.yaml")
    identity = identify(rom, definition)  # raises, naming what was found, for a dump it does not list
    listed = next(r for r in definition.roms if r.name == identity.matched)
    header = read_header(rom)
    assert (header.title, header.code, header.revision, header.header_checksum) == (
        listed.title, listed.code, listed.revision, listed.header_checksum)
    if BACKENDS[backend_name].version() is None:
        pytest.skip(BACKENDS[backend_name].missing_message())

    probe = Probe(definition)
    machine = BACKENDS[backend_name].open(rom, game, definition.platform)
    try:
        start = probe(machine.read_range)
        ladder = Ladder(definition, start)
        assert not ladder.pre_satisfied, "no rung may hold at power-on"
        for i, action in enumerate(actions, start=1):
            step = machine.step(action, timing, probe)
            ladder.update(step.ram_before_last, step.ram_last, decision_id=i, frame_index=step.frame_index,
                          frame_sha256=step.frame_sha256)
        assert definition.is_ready(step.ram_last), "the opening should end in the game proper"
    finally:
        machine.close()
    missing = [m for m in expect if m not in ladder.awards]
    assert not missing, f"rungs {missing} were not reached (reached: {ladder.reached})"
