"""Issue 32 item 4's party menu outside battle on the GBA cartridge (FireRed build), on real mGBA from
pqa-reorder-party's start state (after the DEX, a critter caught: a party of two). START, PARTY, a critter,
SWITCH, another: the two gPlayerParty records trade places, read back through the FireRed definition's party
view (the gameplay track's, decrypted); the battle then sends out the new lead. Every way out without a
second pick (B, CANCEL, the same critter twice) leaves the records as they were. The task's reference trace
wins it, through the everyday command, and its goal is our own var, not the records the track shows."""

from __future__ import annotations

import json
import struct

import pytest
import yaml

from app.cli import main
from engine.games.gameplay import read_party
from engine.games.probe import Probe
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition
from sessions.tasks.tasks import TaskError, catalog, load_task
from tests.gba.conftest import FIRERED, TIMING, needs_mgba

pytestmark = needs_mgba

TASKS = ASSETS / "tasks"
TASK = "pqa-reorder-party"
START_STATE = TASKS / f"{TASK}.mgba.state"
REFERENCE = (TASKS / f"{TASK}.txt").read_text(encoding="utf-8")
PARTY, MON = 0x02024284, 100  # gPlayerParty, struct Pokemon (pret/pokefirered pokefirered.sym, include/pokemon.h)
BATTLE_MONS = 0x02023BE4  # gBattleMons[0].species, the first u16 of struct BattlePokemon (include/pokemon.h)
TO_PARTY = "START DOWN DOWN A"  # the START menu's third row, PARTY: the list opens on the lead



class Play:
    def __init__(self, emu):
        self.emu = emu
        self.firered = load_game_definition(FIRERED)
        self.probe = Probe(load_game_definition(ASSETS / "games" / "parcel-quest-advance-battles.yaml"))
        emu.restore(START_STATE.read_bytes())

    def press(self, text: str) -> None:
        for line in text.splitlines():
            body = line.split("#", 1)[0].strip()
            for action in parse_script(body) if body else []:
                self.emu.step(action, TIMING, lambda read: {})

    def records(self) -> list[bytes]:
        return [bytes(self.emu.read_range(PARTY + i * MON, MON)) for i in range(2)]

    def party(self) -> list[str]:
        """The species in party order, as the FireRed definition's gameplay track reads them."""
        return [m["species"] for m in read_party(self.firered.tracks.gameplay.party, self.emu.read_range)]

    def sample(self) -> dict:
        return self.probe(self.emu.read_range)


def test_switch_trades_the_two_records_and_the_battle_sends_out_the_new_lead(machine):
    play = Play(machine)
    before, order = play.records(), play.party()
    assert len(order) == 2 and order[0] != order[1]  # the starter leads, the caught critter second
    assert play.sample()["switched_lead"] == 0 and play.sample()["party_count"] == 2
    play.press(REFERENCE)
    assert play.records() == before[::-1]  # whole records swapped, checksums and all (SwitchPartyMon)
    assert play.party() == order[::-1]
    s = play.sample()
    assert s["party_count"] == 2 and s["in_battle"] == 0 and s["map"] == 0x1303  # back in NORTH PATH's grass
    task = yaml.safe_load((TASKS / f"{TASK}.yaml").read_text())
    assert s["switched_lead"] == task["goal"]["probe"][0]["eq"]
    play.press("LEFT RIGHT LEFT RIGHT A A")  # the next wild critter (pqa-catch-two's), its intro played out
    s = play.sample()
    assert s["in_battle"] == 1 and s["battle_menu"] == 1
    assert s["party_order_0"] >> 4 == 0  # gBattlePartyCurrentOrder: party slot 0 is out
    lead_species = struct.unpack("<H", bytes(machine.read_range(BATTLE_MONS, 2)))[0]
    assert lead_species == s["switched_lead"]  # the battle reads the new gPlayerParty order


@pytest.mark.parametrize("presses", [
    f"{TO_PARTY} B B",                     # the list, back to the START menu, the field
    f"{TO_PARTY} DOWN A DOWN A B B",       # a critter, CANCEL, back out
    f"{TO_PARTY} DOWN A B B B",            # a critter, B at SWITCH / CANCEL
    f"{TO_PARTY} DOWN A A B B B",          # SWITCH, then B instead of a second pick
    f"{TO_PARTY} DOWN A A A B B",          # SWITCH onto the same critter: nothing to trade
    "START UP LEFT RIGHT A B B",           # UP wraps to PARTY, where LEFT/RIGHT change no option; A opens it
], ids=["list", "cancel", "b-at-switch", "b-at-move", "same-critter", "wrap"])
def test_leaving_the_menu_without_a_second_pick_keeps_the_order(machine, presses):
    play = Play(machine)
    before, order, options = play.records(), play.party(), play.sample()["options"]
    play.press(presses)
    s = play.sample()
    assert play.records() == before and play.party() == order
    assert s["switched_lead"] == 0 and s["options"] == options
    play.press(REFERENCE)  # back in the field, the menu closed: the reference trace still swaps them
    assert play.records() == before[::-1]


def test_the_reference_trace_wins_the_task_without_shortcuts(tmp_path):
    task = next(t for t in catalog() if t.id == TASK)
    assert task.file.shortcuts == [] and "menu" in task.file.tags and task.file.track == "gameplay"
    out = tmp_path / "batch"
    assert main(["tasks", "run", TASK, "--output", str(out)]) == 0
    (entry,) = json.loads((out / "batch.json").read_text())["tasks"]
    assert [t["outcome"] for t in entry["trials"]] == ["success"]
    result = json.loads((out / "runs" / TASK / "trials" / "X-01" / "result.json").read_text())
    assert result["provenance"]["shortcuts"] == []
    assert main(["verify", str(out)]) == 0


def test_a_goal_on_the_party_records_is_refused(tmp_path):
    """The records are the gameplay track's party view: a goal reading them (party_level, gPlayerParty +0x54)
    would tell the agent its goal, so the loader refuses it; hence the cartridge's own var."""
    data = yaml.safe_load((TASKS / f"{TASK}.yaml").read_text())
    data["goal"]["probe"] = [{"field": "party_level", "eq": 3}]
    data["start_states"]["mgba"]["state"] = str(START_STATE)
    data["start_prefix"] = str(TASKS / f"{TASK}.prefix.txt")
    data["reference_script"] = str(TASKS / f"{TASK}.txt")
    path = tmp_path / f"{TASK}.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(TaskError, match="cannot be hidden"):
        load_task(path)
