"""Red / Blue's gameplay terrain (pret/pokered facts; no commercial ROM ships, so a synthetic RAM image): the
screen's cells judged by their lower-left tile under the current tileset's tables, the sprites drawn over
them, and the loader's refusal of a terrain that reads a rung's memory. The same code path runs on the
cartridge in PyBoy (tests/engine/games/test_gameplay_track.py, the tileset-keyed test)."""

from __future__ import annotations

import pytest
import yaml

from engine.games.gameplay import read_terrain
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition, parse_game_definition

RED = ASSETS / "games" / "pokemon-red-blue-en.yaml"
TILEMAP, TILESET, SPRITES, SPRITES_ENABLED = 0xC3A0, 0xD367, 0xC100, 0xCFCB  # pret/pokered pokered.sym


def _screen(tileset: int, sprites_enabled: int = 1) -> dict[int, int]:
    """wTileMap full of a wall tile ($0F: no tileset's passable list holds it), a few cells' lower-left
    tiles set, and four sprites (the player, a person, one off screen, one over the text box)."""
    memory = {TILEMAP + i: 0x0F for i in range(20 * 18)}

    def cell(row: int, column: int, tile: int) -> None:  # the cell's lower-left tile: tile row 2r+1, column 2c
        memory[TILEMAP + (2 * row + 1) * 20 + 2 * column] = tile

    for column, tile in enumerate([0x00, 0x1B, 0x52, 0x37, 0x0F, 0x1A, 0x11]):
        cell(0, column, tile)
    memory[TILEMAP + 0 * 20 + 8] = 0x00  # cell (0, 4)'s upper-left tile is ground; its lower-left is not
    cell(6, 0, 0x79)  # the text box's corner
    cell(6, 1, 0x80)  # "A"
    memory[TILESET] = tileset
    memory[SPRITES_ENABLED] = sprites_enabled
    for slot, (picture, image, y, x) in enumerate([(1, 0, 0x3C, 0x40), (5, 0, 0x0C, 0x20), (3, 0xFF, 0x2C, 0x10),
                                                   (4, 0, 92, 0)]):
        memory.update({SPRITES + slot * 16 + 0: picture, SPRITES + slot * 16 + 2: image,
                       SPRITES + slot * 16 + 4: y, SPRITES + slot * 16 + 6: x})
    return memory


def _terrain(memory: dict[int, int]) -> dict:
    game = load_game_definition(RED)
    return read_terrain(game.tracks.gameplay, lambda a, n: [memory.get(a + i, 0) for i in range(n)])


def test_overworld_cells_are_judged_by_their_lower_left_tile_with_people_drawn_over():
    view = _terrain(_screen(tileset=0))  # OVERWORLD
    rows = view["rows"]
    assert len(rows) == 9 and {len(r) for r in rows} == {10}  # 20 x 18 tiles, 2 x 2 a cell
    # ground, door, tall grass, ledge, wall, then $1A and $11: not in Overworld_Coll
    assert rows[0] == '.D"v######'
    assert rows[1][2] == "P" and rows[4][4] == "@"  # a person at pixel (32, 12+4); the player at (64, 60+4)
    assert rows[6][:2] == "_a"  # the text box: no sprite drawn over it (slot 3 stands there)
    assert rows[3][1] == "#"  # slot 2 (pixel (16, 44+4)) has image index $ff: off screen, not drawn
    assert sum(r.count("P") for r in rows) == 1
    assert view["legend"]["D"] == "door" and view["legend"]['"'] == "tall grass" and view["legend"]["@"] == "you"


def test_the_same_tiles_mean_what_the_current_tileset_says():
    house = _terrain(_screen(tileset=1))["rows"][0]  # REDS_HOUSE_1: $1A a warp, $11 floor, $00 and $1B not passable
    assert house == "#####=.###"
    lab = _terrain(_screen(tileset=5))["rows"][0]  # DOJO (Oak's lab): $11 floor, $1A not passable
    assert lab == "######.###"
    cave = _terrain(_screen(tileset=17))  # CAVERN: no table declared, only the text box and font are known
    assert cave["rows"][0] == "?" * 10 and cave["rows"][6][:2] == "_a" and "#" not in cave["legend"]


def test_no_map_classes_or_people_are_drawn_while_the_game_hides_its_sprites():
    view = _terrain(_screen(tileset=0, sprites_enabled=0xFF))  # wUpdateSpritesEnabled $ff: a battle's screen
    assert not any("@" in r or "P" in r for r in view["rows"])
    assert view["rows"][0] == "?" * 10 and view["rows"][6][:2] == "_a" and "." not in view["legend"]


@pytest.mark.parametrize(("key", "value", "why"), [
    ("tileset", 0xD163, "ladder field 'party_count'"),  # wPartyCount
    ("sprites", {"table": 0xD050, "slots": 1, "stride": 16, "picture": 0, "y": 4, "x": 6}, "ladder field 'battle'"),
])
def test_a_terrain_reading_a_rungs_memory_is_refused(key, value, why):
    data = yaml.safe_load(RED.read_text(encoding="utf-8"))
    data["tracks"]["gameplay"]["terrain"][key] = value
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(yaml.safe_dump(data, allow_unicode=True), "red.yaml")
    assert why in str(info.value) and "tracks.gameplay.terrain" in str(info.value)


@pytest.mark.parametrize(("change", "why"), [
    (lambda t: t.pop("tileset"), "tileset (the byte naming it) and tilesets"),
    (lambda t: t["tilesets"][1]["tilesets"].append(0), "a tileset is in two tilesets entries"),
    (lambda t: t["tilesets"][0]["classes"].append({"name": "x", "glyph": "_", "tiles": [0x01]}), "its own glyph"),
    (lambda t: t["tilesets"][0]["classes"].append({"name": "x", "glyph": "x", "tiles": [0x00]}), "two classes"),
    (lambda t: t.update(cell={"width": 3, "height": 2}), "whole cells"),
])
def test_an_inconsistent_tileset_terrain_is_refused(change, why):
    data = yaml.safe_load(RED.read_text(encoding="utf-8"))
    change(data["tracks"]["gameplay"]["terrain"])
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(yaml.safe_dump(data, allow_unicode=True), "red.yaml")
    assert why in str(info.value)
