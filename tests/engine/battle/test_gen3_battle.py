"""The FireRed battle adapter (engine.battle.gen3_battle) on RAM images laid out as FireRed's RAM: the bundled
definition's addresses (pret/pokefirered symbols), records built with engine.battle.gen3_record, the battle's
gBattleMons filled in as the game fills them when a battle starts."""

from __future__ import annotations

import struct

import pytest

from engine.battle.battle import BattleRefused, BattleSettings, make_judge
from engine.battle.gen3_battle import BM_SIZE, Gen3BattleAdapter, Gen3BattleJudge, grid
from engine.battle.gen3_record import NATURES, RECORD_SIZE, decode
from engine.games.gamedef import GameDefinition
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition

GAME = load_game_definition(ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml")
FR: Gen3BattleAdapter = GAME.battle
SB2 = 0x02024588 + 0x24  # where the image puts SaveBlock2 (gSaveBlock2Ptr points inside its move range)
TRAINER_ID = 0x1234ABCD
PLAYER = bytes([0xC8, 0xBF, 0xBE, 0xFF, 0xFF, 0xFF, 0xFF])  # "RED" in the game's charset, EOS filled


class Ram:
    """A sparse FireRed RAM image: unset bytes read 0."""

    def __init__(self):
        self.mem: dict[int, int] = {}
        self.put(0x0300500C, struct.pack("<I", SB2))  # gSaveBlock2Ptr
        self.put(SB2 + 0x0, PLAYER)  # SaveBlock2.playerName
        self.put(SB2 + 0xA, struct.pack("<I", TRAINER_ID))  # SaveBlock2.playerTrainerId

    def put(self, address: int, data: bytes) -> None:
        for k, b in enumerate(data):
            self.mem[address + k] = b

    def read(self, address: int, length: int) -> list[int]:
        return [self.mem.get(a, 0) for a in range(address, address + length)]

    def apply(self, plan) -> None:
        for address, data in plan.writes:
            self.put(address, bytes(data))

    def record(self, slot: int):
        return decode(bytes(self.read(0x02024284 + 100 * slot, RECORD_SIZE)))

    # -- the battle starting: what the game copies into gBattleMons (src/battle_main.c) -------------------
    def start_battle(self, enemy_species: int, enemy_level: int, enemy_hp: int, enemy_max: int) -> None:
        self.mem[0x03003529] = 0b10  # gMain.inBattle
        self.mem[0x02023E8A] = 0  # gBattleOutcome
        self.battler(0, self.record(0).mon, party_index=0)
        base = 0x02023BE4 + BM_SIZE
        self.put(base, struct.pack("<H", enemy_species))
        self.put(base + 0x28, struct.pack("<H", enemy_hp))
        self.mem[base + 0x2A] = enemy_level
        self.put(base + 0x2C, struct.pack("<H", enemy_max))
        self.put(0x0203B0DC, bytes([0x01, 0x23, 0x45]))  # gBattlePartyCurrentOrder: 0,1,2,3,4,5
        self.menu()

    def battler(self, k: int, mon, party_index: int) -> None:
        base = 0x02023BE4 + k * BM_SIZE
        self.put(base, struct.pack("<H", mon.growth.species))
        self.put(base + 0x0C, struct.pack("<4H", *mon.attacks.moves))
        self.put(base + 0x24, bytes(mon.attacks.pp))
        self.put(base + 0x28, struct.pack("<H", mon.stats.hp))
        self.mem[base + 0x2A] = mon.level
        self.put(base + 0x2C, struct.pack("<H", mon.stats.max_hp))
        self.put(0x02023BCE + 2 * k, struct.pack("<H", party_index))

    def menu(self, state: int = 1, cursor: int = 0, move_cursor: int = 0) -> None:
        self.mem[0x02023E82] = state  # gBattleCommunication[0]: STATE_WAIT_ACTION_CHOSEN
        self.put(0x02023BC8, struct.pack("<I", 1))  # gBattleControllerExecFlags: battler 0's controller runs
        self.mem[0x02023FF8], self.mem[0x02023FFC] = cursor, move_cursor


def settings(**kw) -> BattleSettings:
    return BattleSettings.model_validate({"party_limit": 3, "level_cap": 12} | kw)


def play(judge, ram, tool, **arguments):
    plan = judge.plan(tool, arguments, ram.read)
    ram.apply(plan)
    judge.accepted(plan)
    return plan


TEAM = [{"species": "CHARMANDER", "level": 12, "moves": ["SCRATCH", "EMBER", "GROWL"], "item": "CHARCOAL",
         "nature": "MODEST", "ability": "BLAZE", "evs": {"sp_attack": 252, "speed": 252},
         "ivs": {"attack": 0}},
        {"species": "RATTATA", "level": 10, "moves": ["QUICK ATTACK", "HYPER FANG"], "ability": "GUTS"},
        {"species": "PIDGEY"}]


def test_the_definition_picks_the_gen3_judge_and_its_battle_section_round_trips():
    assert isinstance(make_judge(FR, settings()), Gen3BattleJudge)
    again = Gen3BattleAdapter.model_validate(FR.model_dump(mode="json"))
    assert again == FR
    # and through the definition's discriminated field: the record kind picks the model again
    field = GameDefinition.model_fields["battle"]
    from pydantic import TypeAdapter
    assert TypeAdapter(field.annotation).validate_python(FR.model_dump(mode="json")) == FR


def test_the_whole_firered_definition_round_trips_through_its_json_dump():
    again = GameDefinition.model_validate(GAME.model_dump(mode="json"))
    assert again == GAME and isinstance(again.battle, Gen3BattleAdapter)


def test_apply_team_writes_encrypted_records_the_game_accepts():
    judge, ram = make_judge(FR, settings()), Ram()
    plan = play(judge, ram, "apply_team", team=TEAM)
    assert ram.mem[0x02024029] == 3  # gPlayerPartyCount
    first = ram.record(0)
    assert first.checksum_ok and not first.mon.is_bad_egg and first.mon.flags & 0b10  # hasSpecies
    m = first.mon
    assert (m.growth.species, m.level, m.growth.held_item) == (4, 12, 215)
    assert m.attacks.moves == (10, 52, 45, 0) and m.attacks.pp == (35, 25, 40, 0)  # each move's base PP
    assert NATURES[m.nature] == "MODEST" and m.misc.ability_num == 0
    assert m.condition.evs == (0, 0, 0, 252, 252, 0) and m.misc.ivs == (31, 0, 31, 31, 31, 31)
    assert m.ot_id == TRAINER_ID and m.ot_name == PLAYER  # the player's own: it obeys
    assert m.stats.hp == m.stats.max_hp > 0 and m.misc.is_egg == 0
    rattata = ram.record(1).mon
    assert rattata.misc.ability_num == 1 and rattata.level == 10  # GUTS is its second ability
    pidgey = ram.record(2).mon
    assert pidgey.level == 12 and pidgey.attacks.moves == (33, 28, 16, 98)  # the cap; its first four moves
    assert all(ram.record(i).mon.growth.species == 0 and ram.record(i).checksum_ok for i in (3, 4, 5))
    # the trace line carries every byte, so replay writes the same records
    rec = plan.record()
    assert rec["writes"][1]["address"] == 0x02024284 and len(rec["writes"][1]["bytes"]) == 100
    assert "nature" in rec["team"][0] and "nature" not in rec["team"][2]


@pytest.mark.parametrize(("member", "why"), [
    ({"species": "CHARMANDER", "level": 13}, "over the task's level cap of 12"),
    ({"species": "CHARMANDER", "nature": "GRUMPY"}, "no nature 'GRUMPY'"),
    ({"species": "CHARMANDER", "ability": "GUTS"}, "abilities are BLAZE, not GUTS"),
    ({"species": "CHARMANDER", "evs": {"attack": 255, "speed": 255, "hp": 1}}, "at most 510"),
    ({"species": "CHARMANDER", "evs": {"luck": 4}}, "no stat luck"),
    ({"species": "CHARMANDER", "moves": ["BUBBLE"]}, "cannot learn BUBBLE"),
    ({"species": "CHARMANDER", "item": "MASTER BALL"}, "no item 'MASTER BALL'"),
    ({"species": "MEW"}, "no species 'MEW'"),
])
def test_a_member_that_breaks_a_rule_is_refused_with_its_reason(member, why):
    with pytest.raises(BattleRefused, match=why):
        make_judge(FR, settings()).plan("apply_team", {"team": [member]}, Ram().read)


def test_apply_team_keeps_the_slots_personality_but_for_the_nature():
    judge, ram = make_judge(FR, settings()), Ram()
    play(judge, ram, "apply_team", team=[{"species": "SQUIRTLE", "nature": "BOLD"}])
    before = ram.record(0).mon.personality
    judge.new_episode()
    play(judge, ram, "apply_team", team=[{"species": "SQUIRTLE", "nature": "CALM"}])
    after = ram.record(0).mon.personality
    assert NATURES[after % 25] == "CALM" and after & 0xFF == before & 0xFF and ram.record(0).checksum_ok


def test_lead_swaps_whole_records_and_observe_before_the_battle():
    judge, ram = make_judge(FR, settings()), Ram()
    play(judge, ram, "apply_team", team=TEAM)
    play(judge, ram, "lead", slot=1)
    assert ram.record(0).mon.growth.species == 19 and ram.record(1).mon.growth.species == 4
    assert ram.record(0).checksum_ok and ram.record(1).checksum_ok
    snap = judge.snapshot(ram.read)
    assert snap["phase"] == "before-battle" and snap["own"] is None and snap["enemy"] is None
    assert [p["species"] for p in snap["party"]] == ["RATTATA", "CHARMANDER", "PIDGEY"]
    assert snap["party"][1]["moves"] == ["SCRATCH", "EMBER", "GROWL"]
    # the first action starts the battle: the adapter's lead-in, then FIGHT and the move from cursors 0
    plan = judge.plan("action", {"kind": "FIGHT", "move": "HYPER FANG"}, ram.read)
    assert plan.presses == FR.menus.before + ["A", "RIGHT", "A"] + FR.menus.settle


def test_observe_in_battle_shows_only_the_battle_screen():
    judge, ram = make_judge(FR, settings()), Ram()
    play(judge, ram, "apply_team", team=TEAM)
    play(judge, ram, "lead", slot=0)
    ram.start_battle(enemy_species=16, enemy_level=9, enemy_hp=20, enemy_max=30)
    snap = judge.snapshot(ram.read)
    assert snap["phase"] == "choose-action" and snap["turn"] == "yours" and snap["active"] == 0
    own = snap["own"]
    assert own["species"] == "CHARMANDER" and own["hp"] == own["max_hp"] == ram.record(0).mon.stats.max_hp
    assert [(m["move"], m["pp"]) for m in own["moves"]] == [("SCRATCH", 35), ("EMBER", 25), ("GROWL", 40)]
    assert snap["enemy"] == {"species": "PIDGEY", "types": ["NORMAL", "FLYING"], "level": 9, "hp_fraction": 0.667}
    assert "hp" not in snap["enemy"] and "max_hp" not in snap["enemy"]  # a bar, not the number
    ram.mem[0x02023E82] = 5  # STATE_SELECTION_SCRIPT ...: the turn is playing out
    assert judge.snapshot(ram.read)["turn"] == "playing"
    ram.mem[0x02023E8A] = 1  # B_OUTCOME_WON
    assert judge.snapshot(ram.read)["phase"] == "won"


def test_fight_moves_both_cursors_as_the_2x2_menus_take_them():
    judge, ram = make_judge(FR, settings()), Ram()
    play(judge, ram, "apply_team", team=TEAM)
    play(judge, ram, "lead", slot=0)
    ram.start_battle(16, 9, 30, 30)
    ram.menu(cursor=3, move_cursor=1)  # on RUN, the move cursor on EMBER
    assert judge.plan("action", {"kind": "FIGHT", "move": "GROWL"}, ram.read).presses == \
        ["LEFT", "UP", "A", "LEFT", "DOWN", "A"] + FR.menus.settle
    ram.put(0x02023BE4 + 0x24, bytes([35, 0, 40, 0]))  # EMBER's PP spent
    with pytest.raises(BattleRefused, match="EMBER has no PP left"):
        judge.plan("action", {"kind": "FIGHT", "move": "EMBER"}, ram.read)
    with pytest.raises(BattleRefused, match=r"knows \(SCRATCH, EMBER, GROWL\)"):
        judge.plan("action", {"kind": "FIGHT", "move": "TACKLE"}, ram.read)
    ram.mem[0x02023E82] = 5  # mid-turn: the adapter's frames first, then the menu as it will be
    assert judge.plan("action", {"kind": "FIGHT", "move": "SCRATCH"}, ram.read).presses[:8] == FR.menus.to_menu
    with pytest.raises(BattleRefused, match="apply_team: the lead is chosen"):
        judge.plan("apply_team", {"team": TEAM}, ram.read)


def test_switch_and_send_through_the_party_menu_in_its_battle_order():
    judge, ram = make_judge(FR, settings()), Ram()
    play(judge, ram, "apply_team", team=TEAM)
    play(judge, ram, "lead", slot=0)
    ram.start_battle(16, 9, 30, 30)
    with pytest.raises(BattleRefused, match="already in battle"):
        judge.plan("action", {"kind": "SWITCH", "slot": 0}, ram.read)
    with pytest.raises(BattleRefused, match="SEND is for when"):
        judge.plan("action", {"kind": "SEND", "slot": 1}, ram.read)
    # cursor on FIGHT: DOWN to POKEMON, A; the menu opens on entry 0; slot 2 is its entry 2
    assert play(judge, ram, "action", kind="SWITCH", slot=2).presses == \
        ["DOWN", "A", "DOWN", "DOWN", "A", "A"] + FR.menus.settle
    # the game swaps the two in its battle order (party ids 2,1,0) and sends slot 2 out
    ram.put(0x0203B0DC, bytes([0x21, 0x03, 0x45]))
    ram.battler(0, ram.record(2).mon, party_index=2)
    ram.menu()
    assert judge.snapshot(ram.read)["active"] == 2 and judge.snapshot(ram.read)["own"]["species"] == "PIDGEY"
    ram.put(0x02023BE4 + 0x28, struct.pack("<H", 0))  # PIDGEY fainted: the party menu asks for the next
    assert judge.snapshot(ram.read)["phase"] == "send"
    with pytest.raises(BattleRefused, match="fainted: SEND"):
        judge.plan("action", {"kind": "SWITCH", "slot": 0}, ram.read)
    # slot 0 is the menu's entry 2 now (order 2,1,0): two DOWNs
    assert judge.plan("action", {"kind": "SEND", "slot": 0}, ram.read).presses == \
        ["DOWN", "DOWN", "A", "A"] + FR.menus.settle
    ram.put(0x02024284 + 100 * 1 + 0x56, struct.pack("<H", 0))  # RATTATA's record: 0 HP
    with pytest.raises(BattleRefused, match="slot 1 has fainted"):
        judge.plan("action", {"kind": "SEND", "slot": 1}, ram.read)


def test_a_task_team_is_written_at_the_lead_and_a_reset_forgets_the_episode():
    judge = make_judge(FR, settings(team=[{"species": "BULBASAUR", "level": 5, "nature": "CALM"}]))
    ram = Ram()
    plan = play(judge, ram, "lead", slot=0)
    assert plan.team == [{"species": "BULBASAUR", "level": 5, "moves": [], "item": None, "nature": "CALM"}]
    assert ram.record(0).mon.growth.species == 1 and NATURES[ram.record(0).mon.nature] == "CALM"
    judge.new_episode()
    assert judge.team is None and judge.lead is None and judge.active == 0


def test_the_battle_copied_the_party_so_apply_team_and_lead_wait_for_the_next_episode():
    judge, ram = make_judge(FR, settings()), Ram()
    play(judge, ram, "apply_team", team=TEAM)
    ram.start_battle(16, 9, 30, 30)
    with pytest.raises(BattleRefused, match="read the party already"):
        judge.plan("lead", {"slot": 1}, ram.read)
    judge.new_episode()
    with pytest.raises(BattleRefused, match="read the party already"):
        judge.plan("apply_team", {"team": TEAM}, ram.read)


def test_the_2x2_grid_refuses_nothing_the_game_refuses():
    # LEFT/UP before RIGHT/DOWN: from 1 to 2 with three moves the game ignores DOWN onto slot 3
    assert grid(1, 2) == ["LEFT", "DOWN"] and grid(2, 1) == ["UP", "RIGHT"] and grid(0, 3) == ["RIGHT", "DOWN"]
    assert grid(3, 3) == [] and grid(3, 0) == ["LEFT", "UP"]


def test_a_gb_style_member_field_on_a_gen3_game_and_gen3_fields_on_the_cartridge():
    from engine.battle.battle import settings_problem
    cart = load_game_definition(ASSETS / "games" / "parcel-quest.yaml")
    bad = BattleSettings.model_validate({"party_limit": 1, "team": [{"species": "SPROUTLE", "nature": "CALM"}]})
    assert "have no nature" in settings_problem(bad, cart.battle, "parcel-quest")
    ok = BattleSettings.model_validate({"party_limit": 2, "level_cap": 20, "pool": {"species": ["RATTATA"]},
                                        "team": [{"species": "RATTATA", "evs": {"speed": 252}}]})
    assert settings_problem(ok, FR, "firered") is None
    too_many = BattleSettings.model_validate({"party_limit": 2, "pool": {"moves": ["SURF"]}})
    assert "SURF not in the game's table" in settings_problem(too_many, FR, "firered")


def test_the_trace_lines_writes_alone_rebuild_the_party_as_replay_applies_them():
    import json
    judge, ram = make_judge(FR, settings()), Ram()
    plan = play(judge, ram, "apply_team", team=TEAM)
    line = json.loads(json.dumps(plan.record()))  # as the trace stores it
    again = Ram()
    for w in line["writes"]:
        again.put(w["address"], bytes(w["bytes"]))
    party = range(0x02024284, 0x02024284 + 600)
    assert [again.mem.get(a, 0) for a in party] == [ram.mem.get(a, 0) for a in party]
    assert again.mem[0x02024029] == 3 and again.record(0).checksum_ok
    assert [Ram().mem.get(a, 0) for a in party] != [ram.mem.get(a, 0) for a in party]  # without them: not the team


SPECIES = [s.name for s in FR.species]


def _members():
    from hypothesis import strategies as st
    stat = st.sampled_from(["hp", "attack", "defense", "speed", "sp_attack", "sp_defense"])
    return st.fixed_dictionaries(
        {"species": st.sampled_from(SPECIES)},
        optional={"level": st.integers(1, 12), "nature": st.sampled_from(NATURES),
                  "evs": st.dictionaries(stat, st.integers(0, 85), max_size=6),
                  "ivs": st.dictionaries(stat, st.integers(0, 31), max_size=6),
                  "item": st.sampled_from([i.name for i in FR.items])})


def test_every_team_the_rules_accept_is_written_without_a_bad_egg():
    from hypothesis import given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st

    @hsettings(max_examples=150, deadline=None)
    @given(st.lists(_members(), min_size=1, max_size=3), st.binary(min_size=600, max_size=600))
    def check(team, old_party):
        judge, ram = make_judge(FR, settings()), Ram()
        ram.put(0x02024284, old_party)  # whatever the slots held before (garbage, bad eggs)
        play(judge, ram, "apply_team", team=team)
        for i, m in enumerate(team):
            rec = ram.record(i)
            assert rec.checksum_ok and not rec.mon.is_bad_egg and rec.mon.misc.is_egg == 0
            assert FR.species_of(rec.mon.growth.species).name == m["species"]
            assert rec.mon.level == m.get("level", 12) and rec.mon.ot_id == TRAINER_ID
            if "nature" in m:
                assert NATURES[rec.mon.nature] == m["nature"]
        for i in range(len(team), 6):
            assert ram.record(i).mon.growth.species == 0

    check()


def test_a_start_state_with_an_earlier_battles_outcome_is_still_before_the_battle():
    """FireRed clears gBattleOutcome only when a battle starts: a challenge after an earlier win reads 1."""
    judge, ram = make_judge(FR, settings()), Ram()
    ram.mem[0x02023E8A] = 1  # B_OUTCOME_WON, from the battle before this task's
    assert judge.snapshot(ram.read)["phase"] == "before-battle"
    play(judge, ram, "apply_team", team=TEAM)
    play(judge, ram, "action", kind="FIGHT", move="EMBER")
    ram.start_battle(16, 9, 30, 30)
    assert judge.snapshot(ram.read)["phase"] == "choose-action"
    ram.mem[0x02023E8A], ram.mem[0x03003529] = 1, 0  # won again, back in the field
    assert judge.snapshot(ram.read)["phase"] is None
    with pytest.raises(BattleRefused, match="no battle is on"):
        judge.plan("action", {"kind": "FIGHT", "move": "EMBER"}, ram.read)
    judge.new_episode()  # the start state again: before its battle
    ram.mem[0x03003529] = 0
    assert judge.snapshot(ram.read)["phase"] == "before-battle"


def _game_moves_cursor(cursor: int, press: str, moves: int) -> int:
    """src/battle_controller_player.c HandleInputChooseMove's D-pad rules, as facts: LEFT/UP always toggle
    back; RIGHT/DOWN only onto a slot below gNumberOfMovesToChoose."""
    if press == "LEFT" and cursor & 1:
        return cursor ^ 1
    if press == "UP" and cursor & 2:
        return cursor ^ 2
    if press == "RIGHT" and not cursor & 1 and (cursor ^ 1) < moves:
        return cursor ^ 1
    if press == "DOWN" and not cursor & 2 and (cursor ^ 2) < moves:
        return cursor ^ 2
    return cursor


def test_grid_presses_reach_every_move_from_every_cursor_under_the_games_rules():
    for moves in range(1, 5):
        for cursor in range(moves):
            for target in range(moves):
                at = cursor
                for press in grid(cursor, target):
                    at = _game_moves_cursor(at, press, moves)
                assert at == target, (moves, cursor, target, grid(cursor, target))
