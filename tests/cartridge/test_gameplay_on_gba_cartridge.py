"""The FireRed definition's gameplay track on the GBA cartridge (FireRed's RAM layout), on real mGBA: along
the walkthrough into the rival battle, its party is the record the cartridge keeps (decoded independently)
and its position fields are the probe's."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.battle.gen3_record import decode
from engine.games.gameplay import GameplayView
from engine.games.probe import Probe
from engine.loop.script import parse_script

REPO = Path(__file__).resolve().parents[2]
CART = REPO / "assets" / "gba-cartridge"
PARTY = 0x02024284  # gPlayerParty (pret/pokefirered symbols)

pytest.importorskip("mgba.core", reason="mGBA's binding is not installed")
if not (CART / "parcel-quest-advance.gba").is_file():
    pytest.skip("the GBA cartridge is not built", allow_module_level=True)

from tests.cartridge.test_gba_cartridge import TIMING, emulator, firered  # noqa: E402


def test_the_gameplay_party_and_position_agree_with_the_record_and_the_probe():
    game = firered()
    probe, view, emu = Probe(game), GameplayView(game), emulator()
    actions = parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8"))
    seen_party = seen_battle_hp = False
    try:
        sample = probe(emu.read_range)
        for action in actions:
            step = emu.step(action, TIMING, probe)
            now = view(step.ram_last, emu.read_range, [])
            for name in ("map", "map_group", "map_num", "x", "y"):
                assert now[name] == step.ram_last[name]
            count = step.ram_last["party_count"]
            assert len(now["party"]) == count
            for slot, member in enumerate(now["party"]):
                mon = decode(bytes(emu.read_range(PARTY + 100 * slot, 100))).mon
                assert (member["hp"], member["max_hp"], member["level"]) == (mon.stats.hp, mon.stats.max_hp,
                                                                            mon.level)
                assert member["level"] <= step.ram_last["party_level"]
                seen_party = True
                seen_battle_hp |= bool(step.ram_last["in_battle"]) and member["hp"] < member["max_hp"]
            sample = step.ram_last
            if seen_battle_hp:
                break
    finally:
        emu.close()
    assert seen_party and seen_battle_hp, "the walkthrough never hurt the starter in battle"
    assert sample["party_count"] >= 1
