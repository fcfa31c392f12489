"""engine.gen3_record and the FireRed adapter's apply_team against Parcel Quest Advance (the GBA cartridge
in FireRed's RAM layout), on real mGBA: the codec reads the record the cartridge's own C code wrote, byte
for byte, and the cartridge's code reads the record our writer wrote (its battle names our species)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.battle import BattleSettings, make_judge
from engine.gen3_record import decode, encode
from engine.probe import Probe
from engine.script import parse_script
from engine.tracks import charmap

REPO = Path(__file__).resolve().parents[2]
CART = REPO / "assets" / "gba-cartridge"
PARTY = 0x02024284  # gPlayerParty (pret/pokefirered symbols)
DISPLAYED_BATTLE = 0x0202298C  # gDisplayedStringBattle, where the cartridge prints battle text (RAM.md)

pytest.importorskip("mgba.core", reason="mGBA's binding is not installed")
if not (CART / "parcel-quest-advance.gba").is_file():
    pytest.skip("the GBA cartridge is not built", allow_module_level=True)

from tests.cartridge.test_gba_cartridge import TIMING, emulator, firered  # noqa: E402


def _to_the_challenge():
    """The walkthrough up to KIT's challenge text: the moment before the rival battle."""
    game = firered()
    probe = Probe(game)
    emu = emulator()
    actions = parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8"))
    for i, action in enumerate(actions):
        state = emu.save_state()
        r = emu.step(action, TIMING, probe)
        if r.ram_last["in_battle"]:
            emu.restore(state)  # one press short of the battle: its challenge text
            return game, probe, emu, actions[i:]
    raise AssertionError("the walkthrough never started a battle")


def test_the_codec_reads_the_cartridges_own_record_and_the_cartridge_reads_ours():
    game, probe, emu, rest = _to_the_challenge()
    raw = bytes(emu.read_range(PARTY, 100))
    got = decode(raw)
    assert got.checksum_ok and got.mon.growth.species == 1 and got.mon.level == 5  # the starter it gave
    assert got.mon.flags & 0b10 and got.mon.language == 2  # hasSpecies, LANGUAGE_ENGLISH
    sb2 = int.from_bytes(bytes(emu.read_range(0x0300500C, 4)), "little")
    assert got.mon.ot_id == int.from_bytes(bytes(emu.read_range(sb2 + 0xA, 4)), "little")  # playerTrainerId
    assert encode(got.mon) == raw  # every byte where ours puts it: an independent writer agrees

    judge = make_judge(game.battle, BattleSettings(party_limit=1, level_cap=5))
    plan = judge.plan("apply_team", {"team": [{"species": "CHARMANDER", "nature": "ADAMANT",
                                              "evs": {"attack": 252}}]}, emu.read_range)
    for address, data in plan.writes:
        emu.write(address, bytes(data))
    judge.accepted(plan)
    ours = decode(bytes(emu.read_range(PARTY, 100)))
    assert ours.checksum_ok and ours.mon.growth.species == 4 and ours.mon.ot_id == got.mon.ot_id
    # the battle starts; its "Go! ...!" line names the species the cartridge decrypted from our record
    table, texts = charmap(game.tracks.structured.dialogue), []
    for action in ["A", "A", "A", "A"]:
        emu.step(action, TIMING, probe)
        raw_text = bytes(emu.read_range(DISPLAYED_BATTLE, 160)).split(b"\xff")[0]  # EOS
        texts.append("".join(table.get(b, "?") for b in raw_text))
    assert any("Go! EMBERPUP!" in (t or "") for t in texts), texts  # the cartridge's name for species 4
    snap = judge.snapshot(emu.read_range)
    assert snap["party"][0]["species"] == "CHARMANDER" and snap["party"][0]["level"] == 5
