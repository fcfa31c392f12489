"""Red's and FireRed's shortcuts (templates: conformant to pret's facts, not verified on the commercial games,
which do not ship). Each expansion is pressed, one press at a time as the loop does (engine.loop.shortcuts),
into a small model of the menus as pret's code handles those presses (pret/pokered engine/battle/core.asm
DisplayBattleMenu, MoveSelectionMenu, home/pokemon.asm PartyMenuInit; pret/pokefirered
src/battle_controller_player.c HandleInputChooseAction / HandleInputChooseMove, src/party_menu.c), from every
cursor start, and must end on the move or member the argument names."""

from __future__ import annotations

import pytest

from engine.battle.gen3_record import Attacks, Gen3Mon, Growth, Stats, encode
from engine.loop.shortcuts import ShortcutRefused, Shortcuts
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition

RED = load_game_definition(ASSETS / "games" / "pokemon-red-blue-en.yaml")
FIRERED = load_game_definition(ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml")
BUTTONS = frozenset({"UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT"})


def _run(shortcuts: Shortcuts, call, model) -> list[str]:
    pressed = []
    for button in shortcuts.presses(call, model.sample):
        model.press(button)
        pressed.append(button)
    call.expansion = pressed
    return pressed


# -- Red --------------------------------------------------------------------------------------------------

def _red_memory(moves: list[int], species: list[int]) -> dict[int, int]:
    """wPartySpecies and slot 1's party_struct moves (pret/pokered macros/ram.asm: Moves at +8)."""
    memory = {0xD164 + i: s for i, s in enumerate([*species, 0xFF])}
    memory.update({0xD16B + 8 + i: m for i, m in enumerate(moves)})
    return memory


class RedBattle:
    """The battle menu (2 columns of 2 rows: FIGHT/ITEM, PKMN/RUN), the move menu (items 1..n, wrapping)
    and the party menu then SWITCH/STATS/CANCEL, as engine/battle/core.asm and home/pokemon.asm run them."""

    def __init__(self, right: bool, row: int, last_move: int, moves: int, party: int, saved_slot: int):
        self.screen, self.right, self.row = "battle", right, row
        self.last_move, self.moves, self.party, self.saved_slot = last_move, moves, party, saved_slot
        self.item, self.chosen = 0, None

    def sample(self) -> dict:
        box = {"battle": (0x0B, 0x0E, 15 if self.right else 9, self.row, 1),
               "moves": (0x0B, 0x0C, 5, self.item, self.moves + 1),   # MoveSelectionMenu: Y $c, X 5
               "party": (0x0B, 1, 0, self.item, self.party - 1),
               "switch": (0x0C, 0x0C, 0x0C, self.item, 2)}[self.screen]
        return dict(zip(["text_box_id", "menu_top_y", "menu_top_x", "menu_item", "menu_max"], box, strict=True),
                    box_corner=0x79)

    def press(self, button: str) -> None:
        getattr(self, f"_{self.screen}")(button)

    def _battle(self, b: str) -> None:
        if b in ("LEFT", "RIGHT") and self.right == (b == "LEFT"):  # watched only in the other column
            self.right = not self.right
        elif b in ("UP", "DOWN"):
            self.row = max(0, self.row - 1) if b == "UP" else min(1, self.row + 1)
        elif b == "A":
            choice = self.row + (2 if self.right else 0)
            if choice == 0:
                self.screen, self.item = "moves", self.last_move + 1
            elif choice == 2:
                self.screen, self.item = "party", self.saved_slot
            else:
                self.screen = f"other {choice}"

    def _moves(self, b: str) -> None:
        if b == "UP":
            self.item = self.item - 1 or self.moves  # SelectMenuItem_CursorUp: item 0 wraps to the last move
        elif b == "DOWN":
            self.item = 1 if self.item == self.moves else self.item + 1
        elif b == "A":
            self.screen, self.chosen = "done", self.item - 1

    def _party(self, b: str) -> None:
        if b in ("UP", "DOWN"):  # HandlePartyMenuInput: wrapping enabled
            self.item = (self.item + (1 if b == "DOWN" else -1)) % self.party
        elif b == "A":
            self.screen, self.slot, self.item = "switch", self.item, 0

    def _switch(self, b: str) -> None:
        if b == "A" and self.item == 0:
            self.screen, self.chosen = "done", self.slot


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("row", [0, 1])
@pytest.mark.parametrize("last_move", [0, 1, 2])
def test_reds_choose_move_ends_on_the_named_move_from_any_cursor(right, row, last_move):
    memory = _red_memory([0x21, 0x2D, 0x16, 0], [0x99])  # TACKLE, GROWL, VINE WHIP
    read = lambda a, n: [memory.get(a + i, 0) for i in range(n)]  # noqa: E731
    shortcuts = Shortcuts(RED, ("choose_move",), BUTTONS)
    for index, name in enumerate(["TACKLE", "GROWL", "VINE WHIP"]):
        model = RedBattle(right, row, last_move, moves=3, party=1, saved_slot=0)
        call = shortcuts.plan({"name": "choose_move", "argument": name}, model.sample(), read)
        _run(shortcuts, call, model)
        assert (model.screen, model.chosen) == ("done", index)


@pytest.mark.parametrize("saved_slot", [0, 2])
def test_reds_switch_to_ends_on_the_named_member(saved_slot):
    memory = _red_memory([0x21], [0x99, 0x24, 0xA5])  # BULBASAUR, PIDGEY, RATTATA
    read = lambda a, n: [memory.get(a + i, 0) for i in range(n)]  # noqa: E731
    shortcuts = Shortcuts(RED, ("switch_to",), BUTTONS)
    for slot in (1, 2, 3):
        model = RedBattle(False, 1, 0, moves=1, party=3, saved_slot=saved_slot)
        call = shortcuts.plan({"name": "switch_to", "argument": slot}, model.sample(), read)
        assert _run(shortcuts, call, model)[:3] == ["RIGHT", "UP", "A"]  # PKMN from ITEM
        assert (model.screen, model.chosen) == ("done", slot - 1)


def test_reds_advance_dialogue_presses_a_until_a_choice_box_and_only_on_a_message_box():
    pages = iter([0x01, 0x01, 0x01, 0x14])  # three pages of text, then a YES/NO box (TWO_OPTION_MENU $14)
    state = {"text_box_id": next(pages), "box_corner": 0x79}

    class Model:
        sample = staticmethod(lambda: dict(state))

        @staticmethod
        def press(button):
            assert button == "A"
            state["text_box_id"] = next(pages)

    shortcuts = Shortcuts(RED, ("advance_dialogue",), BUTTONS)
    call = shortcuts.plan({"name": "advance_dialogue"}, dict(state), lambda a, n: [0] * n)
    assert _run(shortcuts, call, Model) == ["A", "A", "A"] and state["text_box_id"] == 0x14
    for refused in ({"text_box_id": 0x01, "box_corner": 0x00}, {"text_box_id": 0x0B, "box_corner": 0x79}):
        with pytest.raises(ShortcutRefused):  # no box on screen; the battle menu's choice
            shortcuts.plan({"name": "advance_dialogue"}, refused, lambda a, n: [0] * n)


def test_red_defines_no_use_item_and_firered_no_advance_dialogue_or_use_item():
    assert set(RED.shortcuts) == {"advance_dialogue", "choose_move", "switch_to"}
    assert set(FIRERED.shortcuts) == {"choose_move", "switch_to"}
    assert RED.tracks.gameplay.inventory is None  # the bag holds the parcel rungs M6 and M7 read


# -- FireRed ----------------------------------------------------------------------------------------------

class FireRedBattle:
    """The action grid and the move grid as HandleInputChooseAction / HandleInputChooseMove move them (bit 0
    the column, bit 1 the row; RIGHT and DOWN only onto an existing move), the party menu in
    gBattlePartyCurrentOrder's order (GetPartyIdFromBattleSlot), then SHIFT."""

    def __init__(self, action: int, move: int, moves: int, order: tuple[int, int, int]):
        self.screen, self.action, self.move, self.moves, self.order = "action", action, move, moves, order
        self.slot, self.chosen = 0, None

    def sample(self) -> dict:
        return {"in_battle": 1, "battle_menu": 1 if self.screen == "action" else 2, "battle_exec": 1,
                "action_cursor": self.action, "move_cursor": self.move,
                **{f"party_order_{i}": o for i, o in enumerate(self.order)}}

    def press(self, b: str) -> None:
        if self.screen == "action":
            bit = {"LEFT": 1, "RIGHT": 1, "UP": 2, "DOWN": 2}.get(b)
            if bit and bool(self.action & bit) == (b in ("LEFT", "UP")):
                self.action ^= bit
            elif b == "A":
                self.screen = {0: "moves", 2: "party"}.get(self.action, "other")
        elif self.screen == "moves":
            bit = {"LEFT": 1, "RIGHT": 1, "UP": 2, "DOWN": 2}.get(b)
            if bit and (self.move & bit if b in ("LEFT", "UP") else not self.move & bit
                        and (self.move ^ bit) < self.moves):
                self.move ^= bit
            elif b == "A":
                self.screen, self.chosen = "done", self.move
        elif self.screen == "party":
            if b == "DOWN":
                self.slot += 1
            elif b == "A":
                self.screen = "shift"
        elif self.screen == "shift" and b == "A":
            byte = self.order[self.slot // 2]
            self.screen, self.chosen = "done", byte & 0xF if self.slot & 1 else byte >> 4


def _firered_party(moves: tuple[int, int, int, int], count: int) -> list[int]:
    mons = [Gen3Mon(personality=0x1000 + i, ot_id=0xBEEF_0001, growth=Growth(species=4 if i == 0 else 16),
                    attacks=Attacks(moves=moves, pp=(35, 40, 25, 35)), level=7, stats=Stats(hp=19, max_hp=24))
            for i in range(count)]
    memory = bytearray(600)
    for i, mon in enumerate(mons):
        memory[i * 100:(i + 1) * 100] = encode(mon)
    return list(memory)


@pytest.mark.parametrize("moves", [2, 3, 4])
@pytest.mark.parametrize("action", [0, 1, 2, 3])
def test_fireds_choose_move_reaches_every_move_from_every_cursor(moves, action):
    ids = (10, 45, 52, 108)[:moves] + (0,) * (4 - moves)  # SCRATCH, GROWL, EMBER, SMOKESCREEN
    memory = _firered_party(ids, 1)
    base = FIRERED.tracks.gameplay.party.records
    read = lambda a, n: memory[a - base:a - base + n]  # noqa: E731
    shortcuts = Shortcuts(FIRERED, ("choose_move",), BUTTONS)
    names = ["SCRATCH", "GROWL", "EMBER", "#108"][:moves]
    for start in range(moves):
        for index, name in enumerate(names):
            model = FireRedBattle(action, start, moves, (0x01, 0x23, 0x45))
            call = shortcuts.plan({"name": "choose_move", "argument": name}, model.sample(), read)
            _run(shortcuts, call, model)
            assert (model.screen, model.chosen) == ("done", index), (start, name)


@pytest.mark.parametrize("order", [(0x01, 0x23, 0x45), (0x10, 0x23, 0x45), (0x20, 0x13, 0x45)])
def test_fireds_switch_to_finds_the_member_in_the_battle_order(order):
    memory = _firered_party((10, 0, 0, 0), 3)
    base = FIRERED.tracks.gameplay.party.records
    read = lambda a, n: memory[a - base:a - base + n]  # noqa: E731
    shortcuts = Shortcuts(FIRERED, ("switch_to",), BUTTONS)
    for slot in (1, 2, 3):
        model = FireRedBattle(3, 0, 1, order)
        call = shortcuts.plan({"name": "switch_to", "argument": slot}, model.sample(), read)
        _run(shortcuts, call, model)
        assert (model.screen, model.chosen) == ("done", slot - 1)
    with pytest.raises(ShortcutRefused):  # not at the action menu
        shortcuts.plan({"name": "switch_to", "argument": 1}, {**model.sample(), "battle_menu": 2}, read)


def test_a_red_shortcut_reading_wisinbattle_is_refused():
    """wIsInBattle is rung M4's: the battle menu's `when` may not read it (the loader's check)."""
    import yaml

    from sessions.preflight.gamedefs import GameDefinitionError, parse_game_definition

    data = yaml.safe_load((ASSETS / "games" / "pokemon-red-blue-en.yaml").read_text(encoding="utf-8"))
    data["shortcuts"]["choose_move"]["when"] = [{"field": "battle", "eq": 2}]
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(yaml.safe_dump(data, allow_unicode=True), "red.yaml")
    assert "shortcuts.choose_move: 'battle' reads the memory of ladder field 'battle'" in str(info.value)
