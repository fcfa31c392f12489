"""The gameplay track (seed 003) on the real cartridge in PyBoy: every part of the view checked against
the probe (the cartridge's RAM.md fields) and the screen's own tiles along the walkthrough, and the
loader's refusal of a part that reads a ladder field's memory."""

from __future__ import annotations

import pytest
import yaml

from engine.emulators.emulator import Timing
from engine.emulators.pyboy_backend import PyBoyEmulator
from engine.games.gameplay import GameplayView
from engine.games.probe import Probe
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition, parse_game_definition
from tests.cartridge.conftest import BOOT, PRESS, ROM, SETTLE, walkthrough

GAME_PATH = ASSETS / "games" / "parcel-quest.yaml"
GAME_TEXT = GAME_PATH.read_text(encoding="utf-8")
SPECIES = {1: "SPROUTLE", 2: "EMBERPUP", 3: "DRIPLET"}
MOVES = {1: "LEAF JAB", 2: "FLARE NIP", 3: "BUBBLE POP"}
PLAYER_TILES = range(0x7F, 0x83)  # src/data.h T_PLAYER_D..T_PLAYER_R


@pytest.fixture(scope="module")
def game():
    return load_game_definition(GAME_PATH)


@pytest.fixture(scope="module")
def played(game):
    """The walkthrough on the harness's PyBoy backend: each step's view, probe sample and tiles."""
    emu = PyBoyEmulator(ROM)
    emu.boot(BOOT)
    probe, view, timing = Probe(game), GameplayView(game), Timing(PRESS, SETTLE)
    steps = []
    try:
        sample = probe(emu.read_range)
        dialogue = view.dialogue(emu.read_range)
        for action in walkthrough():
            step = emu.step(action, timing, probe)
            now = view.dialogue(emu.read_range)
            result = view.outcome(action, sample, step.ram_last, dialogue, now)
            tiles = [emu.read_range(0x9800 + r * 32, 20) for r in range(18)]
            steps.append((action, sample, step.ram_last, result, view(step.ram_last, emu.read_range,
                                                                      [{"action": action, "result": result}]), tiles))
            sample, dialogue = step.ram_last, now
    finally:
        emu.close()
    return steps


def test_every_field_of_the_view_agrees_with_the_probe(played):
    for action, _, sample, _, view, _ in played:
        assert (view["map_id"], view["x"], view["y"], view["facing"]) == (
            sample["map_id"], sample["x"], sample["y"], sample["facing"])
        species = sample["party"][0]
        if species == 0:
            assert view["party"] == []
        else:
            assert view["party"] == [{"slot": 1, "species": SPECIES[species], "hp": sample["player_hp"],
                                      "max_hp": 20, "moves": [{"name": MOVES[species]}]}]
        assert view["action_results"][0]["action"] == action
        for hidden in ("flags0", "party_count", "battle_state", "bag"):
            assert hidden not in view


def test_the_party_hp_follows_the_battle(played):
    """In the rival battle the party's HP falls with the probe's player_hp (RAM.md 0xD015)."""
    hps = [view["party"][0]["hp"] for _, _, sample, _, view, _ in played if sample["battle_state"] == 1]
    assert hps and min(hps) < 20


def test_the_terrain_grid_is_the_screens_tiles_by_class(game, played):
    classes = {t: c.glyph for c in game.tracks.gameplay.terrain.classes for t in c.all_tiles}
    for *_, sample, _, view, tiles in played:
        rows = view["terrain"]["rows"]
        assert rows == ["".join(classes.get(t, "?") for t in row) for row in tiles]
        on_map = sample["text_state"] == 0 and sample["menu_id"] == 0 and sample["battle_state"] == 0
        if on_map and tiles[sample["y"]][sample["x"]] in PLAYER_TILES:
            assert rows[sample["y"]][sample["x"]] == "@"  # the player is drawn where the probe says
    seen = set("".join(r for *_, view, _ in played for r in view["terrain"]["rows"]))
    assert {"@", "P", "D", "W", "T", "!"} <= seen  # the walkthrough passes walls, doors, people, signs


def test_each_press_result_says_what_the_probe_saw(played):
    kinds = set()
    for action, before, after, result, _, _ in played:
        if after["map_id"] != before["map_id"]:
            assert result.startswith(f"entered map {after['map_id']}")
            kinds.add("entered")
        elif (after["x"], after["y"]) != (before["x"], before["y"]):
            assert result.startswith(f"moved to ({after['x']},{after['y']})")
            kinds.add("moved")
        if after["menu_id"] and after["menu_id"] != before["menu_id"]:
            assert "opened the" in result
            kinds.add("menu")
        if result == "blocked":
            assert (after["map_id"], after["x"], after["y"]) == (before["map_id"], before["x"], before["y"])
            assert action in {"UP", "DOWN", "LEFT", "RIGHT"}
            kinds.add("blocked")
        if "dialogue" in result:
            kinds.add("dialogue")
    assert {"entered", "moved", "menu", "dialogue"} <= kinds


def test_a_blocked_step_into_a_wall_reads_blocked(game):
    """At the canonical start (the bedroom, RAM.md), UP four times walks into the top wall."""
    emu = PyBoyEmulator(ROM)
    emu.boot(BOOT)
    probe, view, timing = Probe(game), GameplayView(game), Timing(PRESS, SETTLE)
    try:
        sample, results = probe(emu.read_range), []
        for _ in range(8):
            step = emu.step("UP", timing, probe)
            results.append(view.outcome("UP", sample, step.ram_last, None, view.dialogue(emu.read_range)))
            sample = step.ram_last
    finally:
        emu.close()
    assert results[-1] == "blocked" and any(r.startswith("moved to") for r in results)


@pytest.mark.parametrize(("part", "value", "why"), [
    ("inventory", {"items": "bag"}, "'bag' is not an items array"),
    ("party", {"slots": 1, "species_list": 0xD010, "records": 0xD015, "stride": 1, "hp": {"offset": 0}},
     "tracks.gameplay.party reads the memory of ladder field 'party_count'"),
    ("terrain", {"tilemap": 0xD000, "stride": 8, "rows": 1, "columns": 8,
                 "classes": [{"name": "x", "glyph": "x", "tiles": [1]}]},
     "tracks.gameplay.terrain reads the memory of ladder field 'flags0'"),
    ("outcomes", {"menu": "flags0"}, "'flags0' is read by a milestone rung"),
])
def test_a_part_reading_a_ladder_fields_memory_is_refused(part, value, why):
    data = yaml.safe_load(GAME_TEXT)
    data["tracks"]["gameplay"][part] = value
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(yaml.safe_dump(data), "parcel-quest.yaml")
    assert why in str(info.value)


def test_party_updates_within_a_segment_are_changes_and_each_segment_starts_whole():
    from engine.loop.context import ContextRules, Conversation

    conv = Conversation(ContextRules(segment_turns=2, notebook_chars=10))
    full = {"x": 1, "party": [{"slot": 1, "species": "SPROUTLE", "hp": 20, "max_hp": 20,
                               "moves": [{"name": "LEAF JAB"}]}]}
    hurt = {"x": 1, "party": [{**full["party"][0], "hp": 13}]}
    assert conv.party_view(full) == full  # the segment's first request: the full state
    conv.after("u1", "{}")
    assert conv.party_view(hurt) == {"x": 1, "party_changes": [{"slot": 1, "hp": 13}]}
    conv.after("u2", "{}")  # the segment's last turn: the next request starts a new one
    assert conv.segment == 1
    assert conv.party_view(hurt) == hurt
    conv.after("u3", "{}")
    assert conv.party_view(hurt) == {"x": 1, "party_changes": []}  # nothing changed
    swapped = {"x": 1, "party": [{**full["party"][0], "species": "DRIPLET"}]}
    assert conv.party_view(swapped) == swapped  # another member: the full state again


def test_reds_party_reads_pret_pokereds_party_struct_from_synthetic_memory():
    """No commercial ROM: Red's party written into a RAM image as pret/pokered's party_struct lays it out
    (macros/ram.asm; 2-byte numbers high byte first), read back through the definition."""
    from engine.games.gameplay import read_party

    game = load_game_definition(ASSETS / "games" / "pokemon-red-blue-en.yaml")
    memory: dict[int, int] = {}

    def put(address, data):
        memory.update({address + i: b for i, b in enumerate(data)})

    put(0xD164, [0xB0, 0x24, 0xFF])  # wPartySpecies: CHARMANDER, PIDGEY, end
    record = [0] * 44
    record[0], record[1:3], record[4] = 0xB0, [0x01, 0x2C], 0x08  # species, HP 300 (high byte first), PSN
    record[8:12], record[29:33] = [0x0A, 0x2D, 0, 0], [0xE3, 0x28, 0, 0]  # SCRATCH, GROWL; PP 35 (+3 PP Ups), 40
    record[33], record[34:36] = 12, [0x01, 0x40]  # level 12, max HP 320
    put(0xD16B, record)
    second = [0] * 44
    second[0], second[1:3], second[8], second[29], second[33], second[34:36] = 0x24, [0, 0], 0x21, 35, 3, [0, 15]
    put(0xD16B + 44, second)
    party = read_party(game.tracks.gameplay.party, lambda a, n: [memory.get(a + i, 0) for i in range(n)])
    assert party == [
        {"slot": 1, "species": "CHARMANDER", "hp": 300, "max_hp": 320, "level": 12, "status": "PSN",
         "moves": [{"name": "SCRATCH", "pp": 35}, {"name": "GROWL", "pp": 40}]},
        {"slot": 2, "species": "PIDGEY", "hp": 0, "max_hp": 15, "level": 3, "status": "OK",
         "moves": [{"name": "TACKLE", "pp": 35}]}]
    assert "party_count" not in game.tracks.gameplay.allowlist


def test_firereds_party_is_decrypted_from_its_100_byte_records():
    """No commercial ROM: two struct Pokemon encoded as the game keeps them (engine.battle.gen3_record,
    pret/pokefirered include/pokemon.h), read back through FireRed's gameplay party."""
    from engine.battle.gen3_record import Attacks, Gen3Mon, Growth, Stats, encode
    from engine.games.gameplay import read_party

    game = load_game_definition(ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml")
    party = game.tracks.gameplay.party
    mons = [Gen3Mon(personality=0x1234_5677, ot_id=0xBEEF_0001, growth=Growth(species=4),
                    attacks=Attacks(moves=(10, 45, 0, 0), pp=(35, 40, 0, 0)), status=0x08, level=7,
                    stats=Stats(hp=19, max_hp=24)),
            Gen3Mon(personality=0x0000_0011, ot_id=0xBEEF_0001, growth=Growth(species=16),
                    attacks=Attacks(moves=(33, 0, 0, 0), pp=(35, 0, 0, 0)), level=3, stats=Stats(hp=13, max_hp=13))]
    memory = bytearray(100 * 6)
    for i, mon in enumerate(mons):
        memory[i * 100:(i + 1) * 100] = encode(mon)

    def read(address, length):
        return list(memory[address - party.records:address - party.records + length])

    assert read_party(party, read) == [
        {"slot": 1, "species": "CHARMANDER", "hp": 19, "max_hp": 24, "level": 7, "status": "PSN",
         "moves": [{"name": "SCRATCH", "pp": 35}, {"name": "GROWL", "pp": 40}]},
        {"slot": 2, "species": "PIDGEY", "hp": 13, "max_hp": 13, "level": 3, "status": "OK",
         "moves": [{"name": "TACKLE", "pp": 35}]}]
    memory[0x20] ^= 0xFF  # one encrypted byte of the first record: its checksum fails, as the game's bad egg
    assert read_party(party, read)[0] == {"slot": 1, "species": "BAD EGG"}


def test_tileset_keyed_classes_follow_the_tileset_byte_on_the_emulator(game):
    """The tileset-dependent path (Red's terrain) on the real cartridge in PyBoy: the same classes, keyed to
    the cartridge's map_id byte as if it named a tileset, with the door drawn `D` on ACORN_TOWN (2) and `E`
    on every other map; each step's grid is the plain definition's with the doors redrawn by the map."""
    data = yaml.safe_load(GAME_TEXT)
    terrain = data["tracks"]["gameplay"]["terrain"]
    door = next(c for c in terrain["classes"] if c["name"] == "door")
    terrain["classes"].remove(door)
    terrain["tileset"] = 0xD001  # RAM.md map_id
    terrain["tilesets"] = [{"tilesets": [2], "classes": [door]},
                           {"tilesets": [0, 1, 3, 4, 5, 6], "classes": [{**door, "name": "a door", "glyph": "E"}]}]
    keyed = GameplayView(parse_game_definition(yaml.safe_dump(data), "keyed.yaml"))
    plain, probe = GameplayView(game), Probe(game)
    emu = PyBoyEmulator(ROM)
    emu.boot(BOOT)
    maps = set()
    try:
        for action in walkthrough():
            sample = emu.step(action, Timing(PRESS, SETTLE), probe).ram_last
            rows = plain(sample, emu.read_range)["terrain"]["rows"]
            view = keyed(sample, emu.read_range)["terrain"]
            expected = rows if sample["map_id"] == 2 else [r.replace("D", "E") for r in rows]
            assert view["rows"] == expected
            assert ("D" in view["legend"]) == (sample["map_id"] == 2) != ("E" in view["legend"])
            maps.add(sample["map_id"])
    finally:
        emu.close()
    assert {2, 3, 5} <= maps  # the walkthrough crosses town, the lab and the city
