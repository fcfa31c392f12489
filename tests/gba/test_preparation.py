"""Issue 32 item 4's preparation mechanics on the GBA cartridge (FireRed build), on real mGBA from the after-DEX
state: MOM heals a hurt party and counts it (our own var 0x40F0), not a party at full HP; the MAPLE CITY clerk
sells a BALL for 200 out of FireRed's SaveBlock1.money (XOR-keyed, kept across the key changes of every door),
counts it (our own var 0x40F1) and refuses when the money runs out. Fields read through the battles definition's
probe; HP, money and the balls pocket also decoded here on their own (pret/pokefirered include/global.h)."""

from __future__ import annotations

import struct

from engine.games.probe import Probe
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition
from tests.gba.conftest import TIMING, needs_mgba

pytestmark = needs_mgba

AFTER_DEX = ASSETS / "gba-cartridge" / "parcel-quest-advance-after-dex.mgba.state"
TASKS = ASSETS / "tasks"
PARTY, MON = 0x02024284, 100  # gPlayerParty; struct Pokemon hp +0x56, maxHP +0x58 (include/pokemon.h)
SB1_PTR, SB2_PTR = 0x03005008, 0x0300500C  # gSaveBlock1Ptr, gSaveBlock2Ptr (pokefirered.sym)



class Play:
    def __init__(self, emu):
        self.emu = emu
        self.probe = Probe(load_game_definition(ASSETS / "games" / "parcel-quest-advance-battles.yaml"))
        emu.restore(AFTER_DEX.read_bytes())

    def press(self, text: str) -> None:
        for line in text.splitlines():
            body = line.split("#", 1)[0].strip()
            for action in parse_script(body) if body else []:
                self.emu.step(action, TIMING, lambda read: {})

    def u32(self, address: int) -> int:
        return struct.unpack("<I", bytes(self.emu.read_range(address, 4)))[0]

    def u16(self, address: int) -> int:
        return struct.unpack("<H", bytes(self.emu.read_range(address, 2)))[0]

    def sample(self) -> dict:
        return self.probe(self.emu.read_range)

    def hp(self) -> tuple[int, int]:
        return self.u16(PARTY + 0x56), self.u16(PARTY + 0x58)

    def money(self) -> int:  # SaveBlock1.money /*0x0290*/ ^ SaveBlock2.encryptionKey /*0xF20*/ (src/money.c)
        return self.u32(self.u32(SB1_PTR) + 0x290) ^ self.u32(self.u32(SB2_PTR) + 0xF20)

    def balls(self) -> int:  # bagPocket_PokeBalls /*0x0430*/ slot 0: ITEM_POKE_BALL, quantity ^ key's low half
        sb1 = self.u32(SB1_PTR)
        assert self.u16(sb1 + 0x430) == 4
        return self.u16(sb1 + 0x432) ^ (self.u32(self.u32(SB2_PTR) + 0xF20) & 0xFFFF)


HOME_FROM_LAB = """DOWN*8
LEFT*7 UP*6 LEFT*6 UP     # ACORN TOWN -> the house door
UP*4 LEFT*3 UP            # face MOM
"""
HEAL_TRACE = (TASKS / "pqa-heal-at-home.txt").read_text()
SHOP_TRACE = (TASKS / "pqa-buy-a-ball.txt").read_text()


def test_mom_heals_a_hurt_party_and_counts_only_a_heal_that_restored_hp(machine):
    play = Play(machine)
    assert play.sample()["rests"] == 0 and play.hp()[0] == play.hp()[1]
    play.press(HEAL_TRACE.rsplit("\n", 2)[0])  # all but the last line: hurt, facing MOM
    hp, max_hp = play.hp()
    assert 0 < hp < max_hp and play.sample()["rests"] == 0
    play.press("A")
    assert play.hp() == (max_hp, max_hp) and play.sample()["rests"] == 1
    play.press("A A A")  # the message closed, MOM again at full HP: healed, not counted
    assert play.hp() == (max_hp, max_hp) and play.sample()["rests"] == 1


def test_a_party_at_full_hp_is_not_counted(machine):
    play = Play(machine)
    play.press(HOME_FROM_LAB + "A")
    s = play.sample()
    assert s["map"] == 0x0004 and s["rests"] == 0 and play.hp()[0] == play.hp()[1]


def test_the_shop_sells_balls_for_money_until_it_runs_out(machine):
    play = Play(machine)
    s = play.sample()
    assert (play.money(), play.balls(), s["purchases"]) == (3000, 5, 0)  # src/new_game.c SetMoney 3000
    assert s["money_raw"] ^ s["qty_key"] == 3000  # the definition's fields decode to the same money
    play.press(SHOP_TRACE)
    s = play.sample()
    assert (play.money(), play.balls(), s["purchases"]) == (2800, 6, 1)
    assert s["money_raw"] ^ s["qty_key"] == 2800
    play.press("A NOOP A B")  # close the thanks; ask again and say NO: nothing changes
    assert (play.money(), play.balls(), play.sample()["purchases"]) == (2800, 6, 1)
    play.press("\n".join(["A A A"] * 14))  # fourteen more at 200 each: all the money spent
    assert (play.money(), play.balls(), play.sample()["purchases"]) == (0, 20, 15)
    play.press("A A A")  # no money: refused
    assert (play.money(), play.balls(), play.sample()["purchases"]) == (0, 20, 15)
    play.press("DOWN*2 RIGHT*2 DOWN*3")  # out through the door: the blocks move and the key changes
    assert play.sample()["map"] != 0x0305 and play.money() == 0 and play.balls() == 20
