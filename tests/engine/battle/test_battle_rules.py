"""engine.battle.battle: the rules of seed 004's battle tools, on the cartridge's adapter and on a 2-slot layout
(a game the cartridge cannot play: party > 1, levels, items, a move menu, switch and send menus)."""

from __future__ import annotations

import pytest

from engine.battle.battle import BattleAdapter, BattleJudge, BattleRefused, BattleSettings, check_settings
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition

TWO = BattleAdapter.model_validate({
    "source": "a test layout",
    "party": {"count": 0x10, "species": [0x11, 0x12], "levels": [0x13, 0x14], "items": [0x15, 0x16],
              "moves": [[0x17, 0x18], [0x19, 0x1A]]},
    "own_hp": 0x20, "enemy_species": 0x21, "enemy_hp": 0x22, "state": 0x23, "state_names": {1: "in-battle"},
    "phase": {"address": 0x24, "names": {0: "menu", 1: "text", 9: "over"}, "menu": 0, "to_menu": {1: 1},
              "over": [9]},
    "cursor": {"address": 0x25, "fight": 0, "press": "UP"},
    "fight": ["A", "A"], "move_select": [["A"], ["DOWN", "A"]],
    "switch": [["RIGHT", "A"], ["RIGHT", "DOWN", "A"]], "send": [["A"], ["DOWN", "A"]],
    "species": [{"id": 1, "name": "ONE", "type": "FIRE", "moves": ["EMBER", "TACKLE"]},
                {"id": 2, "name": "TWO", "type": "WATER", "moves": ["SPLASH", "TACKLE"]},
                {"id": 3, "name": "BANNED", "moves": ["TACKLE"]}],
    "items": [{"id": 7, "name": "BERRY"}, {"id": 8, "name": "ORB"}],
    "move_ids": {"EMBER": 52, "TACKLE": 33, "SPLASH": 150},
})


class Ram:
    def __init__(self, **values):
        self.mem = dict.fromkeys(range(0x40), 0)
        self.mem.update({0x10: 1, 0x11: 1, 0x20: 30, 0x22: 30})
        self.mem.update({int(k[1:], 16): v for k, v in values.items()})

    def read(self, address, length):
        return [self.mem[a] for a in range(address, address + length)]

    def write(self, plan):
        for a, b in plan.writes:
            self.mem[a] = b[0]


def settings(**kw):
    base = {"party_limit": 2, "level_cap": 50,
            "pool": {"species": ["ONE", "TWO"], "moves": ["EMBER", "SPLASH", "TACKLE"], "items": ["BERRY"]}}
    return BattleSettings.model_validate(base | kw)


def play(judge, ram, tool, **arguments):
    plan = judge.plan(tool, arguments, ram.read)
    ram.write(plan)
    judge.accepted(plan)
    return plan


TEAM = [{"species": "ONE", "level": 50, "moves": ["EMBER", "TACKLE"], "item": "BERRY"},
        {"species": "TWO", "level": 12, "moves": ["SPLASH"]}]


def test_a_two_slot_team_is_written_and_led_by_its_second_member():
    judge, ram = BattleJudge(TWO, settings()), Ram()
    plan = play(judge, ram, "apply_team", team=TEAM)
    assert ram.mem[0x10] == 2 and (ram.mem[0x11], ram.mem[0x12]) == (1, 2)
    assert (ram.mem[0x13], ram.mem[0x14], ram.mem[0x15], ram.mem[0x16]) == (50, 12, 7, 0)
    assert (ram.mem[0x17], ram.mem[0x18], ram.mem[0x19], ram.mem[0x1A]) == (52, 33, 150, 0)  # the game's move ids
    assert plan.record()["writes"][0] == {"address": 0x10, "bytes": [2]}
    play(judge, ram, "lead", slot=1)  # swapped into the first slot
    assert (ram.mem[0x11], ram.mem[0x12], ram.mem[0x13], ram.mem[0x14]) == (2, 1, 12, 50)
    snap = judge.snapshot(ram.read)
    assert [p["species"] for p in snap["party"]] == ["TWO", "ONE"] and snap["party"][0]["hp"] == 30
    assert [p["moves"] for p in snap["party"]] == [["SPLASH"], ["EMBER", "TACKLE"]]  # read from RAM, swapped too
    assert judge.plan("action", {"kind": "FIGHT", "move": "SPLASH"}, ram.read).presses == ["A", "A", "A"]
    with pytest.raises(BattleRefused, match=r"knows \(SPLASH\)"):  # the lead's moves, not member 0's
        judge.plan("action", {"kind": "FIGHT", "move": "EMBER"}, ram.read)
    assert snap["party"][1]["hp"] is None  # only the active creature's HP is on the screen


def test_fight_presses_advance_text_move_the_cursor_and_pick_the_move():
    judge, ram = BattleJudge(TWO, settings()), Ram(x24=1, x25=1)
    play(judge, ram, "apply_team", team=TEAM)
    plan = judge.plan("action", {"kind": "FIGHT", "move": "TACKLE"}, ram.read)
    assert plan.presses == ["A", "UP", "A", "DOWN", "A", "A"]
    with pytest.raises(BattleRefused, match="knows"):
        judge.plan("action", {"kind": "FIGHT", "move": "SPLASH"}, ram.read)


def test_switch_and_send_on_a_party_of_two():
    judge, ram = BattleJudge(TWO, settings()), Ram()
    play(judge, ram, "apply_team", team=TEAM)
    with pytest.raises(BattleRefused, match="already in battle"):
        judge.plan("action", {"kind": "SWITCH", "slot": 0}, ram.read)
    with pytest.raises(BattleRefused, match="SEND is for when"):
        judge.plan("action", {"kind": "SEND", "slot": 1}, ram.read)
    assert play(judge, ram, "action", kind="SWITCH", slot=1).presses == ["RIGHT", "DOWN", "A"]
    assert judge.active == 1
    ram.mem[0x20] = 0
    with pytest.raises(BattleRefused, match="fainted: SEND"):
        judge.plan("action", {"kind": "SWITCH", "slot": 0}, ram.read)
    assert judge.plan("action", {"kind": "SEND", "slot": 0}, ram.read).presses == ["A"]


@pytest.mark.parametrize(("team", "why"), [
    (TEAM + [{"species": "ONE"}], "over the task's party limit of 2"),
    ([{"species": "ONE", "level": 51}], "over the task's level cap of 50"),
    ([{"species": "BANNED"}], "not in the task's pool"),
    ([{"species": "NOPE"}], "no species 'NOPE'"),
    ([{"species": "ONE", "moves": ["SPLASH"]}], "cannot learn SPLASH"),
    ([{"species": "ONE", "item": "ORB"}], "item ORB is not in the task's pool"),
    ([{"species": "ONE", "nature": "calm"}], "member 0: this game.s creatures have no nature: leave them null"),
    ([{"species": "ONE", "shiny": True}], "member 0: shiny: Extra inputs are not permitted"),
    ([], "at least one member"),
])
def test_team_violations_are_refused_with_the_reason(team, why):
    with pytest.raises(BattleRefused, match=why):
        BattleJudge(TWO, settings()).plan("apply_team", {"team": team}, Ram().read)


def test_move_outside_the_pool_is_refused():
    judge = BattleJudge(TWO, settings(pool={"moves": ["EMBER"]}))
    with pytest.raises(BattleRefused, match="move TACKLE is not in the task's pool"):
        judge.plan("apply_team", {"team": [{"species": "ONE", "moves": ["TACKLE"]}]}, Ram().read)
    with pytest.raises(BattleRefused, match="move TACKLE is not in the task's pool"):  # no moves: its first two
        judge.plan("apply_team", {"team": [{"species": "ONE"}]}, Ram().read)


def test_order_rules_apply_team_before_lead_lead_before_actions_unknown_kind():
    judge, ram = BattleJudge(TWO, settings(team=[{"species": "TWO"}])), Ram()
    with pytest.raises(BattleRefused, match="unknown kind 'RUN'"):
        judge.plan("action", {"kind": "RUN"}, ram.read)
    plan = play(judge, ram, "action", kind="FIGHT", move="SPLASH")  # no lead: the task's team, slot 0 leads
    assert plan.team == [{"species": "TWO", "level": None, "moves": [], "item": None}] and ram.mem[0x11] == 2
    with pytest.raises(BattleRefused, match="only be applied before lead"):
        judge.plan("apply_team", {"team": TEAM}, ram.read)
    with pytest.raises(BattleRefused, match="once per episode"):
        judge.plan("lead", {"slot": 0}, ram.read)
    judge.new_episode()
    assert judge.plan("apply_team", {"team": TEAM}, ram.read).team is not None
    ram.mem[0x24] = 9
    with pytest.raises(BattleRefused, match="decided"):
        judge.plan("action", {"kind": "FIGHT", "move": "SPLASH"}, ram.read)


def test_the_cartridge_refuses_switch_send_levels_and_a_party_over_one():
    adapter = load_game_definition(ASSETS / "games" / "parcel-quest.yaml").battle
    judge, ram = BattleJudge(adapter, BattleSettings(party_limit=1)), Ram()
    ram.mem = {a: 0 for a in range(0xD000, 0xD030)} | {0xD010: 1, 0xD011: 1, 0xD014: 1, 0xD015: 20, 0xD023: 1}
    with pytest.raises(BattleRefused, match="party limit of 1"):
        judge.plan("apply_team", {"team": [{"species": "DRIPLET"}, {"species": "EMBERPUP"}]}, ram.read)
    with pytest.raises(BattleRefused, match="no level in RAM"):
        judge.plan("apply_team", {"team": [{"species": "DRIPLET", "level": 5}]}, ram.read)
    with pytest.raises(BattleRefused, match="the party has one"):
        judge.plan("action", {"kind": "SWITCH", "slot": 1}, ram.read)
    with pytest.raises(BattleRefused, match="party_limit 2 is more than the game's 1 party slot"):
        check_settings(BattleSettings(party_limit=2), adapter)
    with pytest.raises(BattleRefused, match="pool.species: NOPE"):
        check_settings(BattleSettings(party_limit=1, pool={"species": ["NOPE"]}), adapter)


def test_the_cartridge_before_its_battle_starts_and_after_it_ended():
    """KIT's challenge (battle_state 0, text showing, RIVAL_BATTLE_DONE clear): phase before-battle, no HP;
    FIGHT starts the battle first and does not trust the cursor byte (another menu's until the battle's opens).
    The same bytes once the battle is over (the flag set) are no battle at all: no phase, actions refused."""
    adapter = load_game_definition(ASSETS / "games" / "parcel-quest.yaml").battle
    judge, ram = BattleJudge(adapter, BattleSettings(party_limit=1)), Ram()
    ram.mem = {a: 0 for a in range(0xD000, 0xD030)} | {0xD010: 1, 0xD011: 1, 0xD017: 1, 0xD019: 1, 0xD021: 2}
    seen = judge.snapshot(ram.read)
    assert (seen["phase"], seen["battle_state"], seen["party"][0]["hp"], seen["enemy"]) == (
        "before-battle", "none", None, {"species": "EMBERPUP", "type": "FIRE", "hp": None})
    play(judge, ram, "apply_team", team=[{"species": "DRIPLET"}])
    plan = judge.plan("action", {"kind": "FIGHT", "move": "BUBBLE POP"}, ram.read)
    assert plan.presses == [adapter.advance] * adapter.before.to_menu + adapter.fight  # no cursor press
    in_battle = ram.mem | {0xD014: 1, 0xD015: 20, 0xD016: 20, 0xD017: 1, 0xD023: 1}
    ram.mem = in_battle
    assert judge.snapshot(ram.read)["phase"] == "text" and judge.snapshot(ram.read)["party"][0]["hp"] == 20
    assert judge.plan("action", {"kind": "FIGHT", "move": "BUBBLE POP"}, ram.read).presses == ["A", "UP", "A", "A", "A"]
    ram.mem = in_battle | {0xD014: 0, 0xD005: 0x08, 0xD023: 0}  # back in the lab, the result text showing
    assert judge.snapshot(ram.read)["phase"] is None
    with pytest.raises(BattleRefused, match="no battle is on"):
        judge.plan("action", {"kind": "FIGHT", "move": "BUBBLE POP"}, ram.read)


def test_before_the_battle_a_switch_is_not_a_send_and_the_decided_phases_do_not_count():
    """The HP and phase bytes are not set before the battle: a zero HP is no faint, a stale phase no decision."""
    early = BattleAdapter.model_validate(TWO.model_dump() | {"before": {"state": 0, "text": 0x26, "to_menu": 1,
                                                                          "cursor": 0}})
    judge, ram = BattleJudge(early, settings()), Ram(x20=0, x23=0, x24=9, x25=1, x26=1)
    play(judge, ram, "apply_team", team=TEAM)
    assert judge.snapshot(ram.read)["phase"] == "before-battle"
    assert judge.plan("action", {"kind": "SWITCH", "slot": 1}, ram.read).presses == ["A", *TWO.switch[1]]
    with pytest.raises(BattleRefused, match="SEND is for when the active creature has fainted"):
        judge.plan("action", {"kind": "SEND", "slot": 1}, ram.read)
    fight = judge.plan("action", {"kind": "FIGHT", "move": "EMBER"}, ram.read).presses
    assert fight == ["A", TWO.fight[0], *TWO.move_select[0], *TWO.fight[1:]]  # no UP: the cursor byte is not the menu's
    ram.mem[0x23] = 1  # the battle on: its phase byte counts again
    with pytest.raises(BattleRefused, match="the battle is decided"):
        judge.plan("action", {"kind": "FIGHT", "move": "EMBER"}, ram.read)


def test_verify_holds_a_trace_line_s_battle_call_to_the_ruleset_and_its_shape():
    from types import SimpleNamespace

    from sessions.audit.verify_tools import check_battle_line

    class Report:
        def __init__(self):
            self.problems = []

        def add(self, text):
            self.problems.append(text)

    battle = SimpleNamespace(agent=SimpleNamespace(ruleset="battle"))
    human = SimpleNamespace(agent=SimpleNamespace(ruleset="human"))
    good = SimpleNamespace(battle={"tool": "apply_team", "writes": [{"address": 0xD011, "bytes": [3]}]})
    for manifest, line, expected in [
        (battle, good, []), (battle, SimpleNamespace(battle=None), []),
        (human, good, ["a battle call in a trial whose ruleset is 'human'"]),
        (battle, SimpleNamespace(battle={"tool": "apply_team", "writes": [{"address": 1, "bytes": [256]}]}),
         ["a malformed battle call"]),
        (battle, SimpleNamespace(battle={"tool": "press_keys", "writes": []}), ["a malformed battle call"]),
    ]:
        report = Report()
        check_battle_line(manifest, line, "t", report)
        assert [p.split(": ", 1)[1][:len(e)] for p, e in zip(report.problems, expected, strict=True)] == expected
