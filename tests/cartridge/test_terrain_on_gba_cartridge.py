"""The FireRed definition's grid terrain on the GBA cartridge (which keeps FireRed's VMap, gBackupMapData and
gObjectEvents: assets/gba-cartridge/src/fieldmap.c), on real mGBA: the 15x10 cells around the player read through
the definition are the cartridge's own map (assets/gba-cartridge/art/maps.txt: walls where it has walls) with the
player at the probe's position, in every room the walkthrough enters and after every step; the people stand where
the game puts them; and a direction into a wall or a person is blocked while one onto open ground moves.
Conformant on our open cartridge only: nothing here is checked on the commercial game."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.games.gameplay import GameplayView
from engine.games.probe import Probe
from engine.loop.script import parse_script

REPO = Path(__file__).resolve().parents[2]
CART = REPO / "assets" / "gba-cartridge"

pytest.importorskip("mgba.core", reason="mGBA's binding is not installed")
if not (CART / "parcel-quest-advance.gba").is_file():
    pytest.skip("the GBA cartridge is not built", allow_module_level=True)

from tests.cartridge.test_gba_cartridge import TIMING, emulator, firered  # noqa: E402

# RAM.md "Cartridge map": the definition's `map` value (mapGroup + 256 * mapNum) of each art map
MAP_NAMES = {0x0104: "HOUSE_2F", 0x0004: "HOUSE_1F", 0x0003: "ACORN_TOWN", 0x0304: "LAB", 0x1303: "NORTH_PATH",
             0x0103: "MAPLE_CITY", 0x0305: "SHOP"}
# src/main.c `actors`: where each one stands (map name, x, y) -> what the terrain draws
PEOPLE = {("HOUSE_1F", 11, 7): "P", ("LAB", 9, 4): "P", ("LAB", 6, 6): "P", ("LAB", 10, 5): "o",
          ("LAB", 11, 5): "o", ("LAB", 12, 5): "o", ("ACORN_TOWN", 12, 14): "P", ("MAPLE_CITY", 8, 7): "P",
          ("SHOP", 8, 4): "P"}
COLUMNS, ROWS, PLAYER_COLUMN, PLAYER_ROW = 15, 10, 7, 4
STEP = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}


def art_maps() -> dict[str, list[str]]:
    """Each art map's rows as '.' (a cell the walk rule enters: kinds walk and tall) or '#' (solid, reach, and
    the letters on buildings), read from the art file the ROM's maps are generated from."""
    kinds: dict[str, str] = {}
    maps: dict[str, list[str]] = {}
    name = None
    for line in (CART / "art" / "maps.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("legend "):
            _, ch, _tile, kind = line.split()
            kinds[ch] = "." if kind in ("walk", "tall") else "#"
        elif line.startswith("map "):
            name = line.split()[1]
            maps[name] = []
        elif name and line.strip():
            maps[name].append("".join(kinds.get(ch, "#") for ch in line))
        else:
            name = None
    assert set(maps) == set(MAP_NAMES.values()) and all(len(rows) == 18 for rows in maps.values())
    return maps


def expected(rows: list[str], x: int, y: int) -> list[list[str]]:
    """The window around (x, y): the map's cells, ' ' beyond its edges, '@' at the player."""
    out = []
    for r in range(ROWS):
        my = y - PLAYER_ROW + r
        line = []
        for c in range(COLUMNS):
            mx = x - PLAYER_COLUMN + c
            line.append(rows[my][mx] if 0 <= my < len(rows) and 0 <= mx < len(rows[0]) else " ")
        out.append(line)
    out[PLAYER_ROW][PLAYER_COLUMN] = "@"
    return out


def objects_in(name: str, x: int, y: int, terrain: list[str]) -> dict[tuple[int, int], str]:
    """The people and balls the terrain draws, by their map cell."""
    return {(x - PLAYER_COLUMN + c, y - PLAYER_ROW + r): g for r, row in enumerate(terrain)
            for c, g in enumerate(row) if g in "Po"}


def in_view(x: int, y: int, mx: int, my: int) -> bool:
    """Whether map cell (mx, my) is in the window around the player at (x, y)."""
    return 0 <= mx - x + PLAYER_COLUMN < COLUMNS and 0 <= my - y + PLAYER_ROW < ROWS


def walk():
    """(action, sample before, terrain before, dialogue before, sample after, terrain after) along the
    walkthrough, power-on to the DEX."""
    game = firered()
    probe, view, emu = Probe(game), GameplayView(game), emulator()
    actions = parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8"))
    out = []
    try:
        sample = probe(emu.read_range)
        terrain, said = view(sample, emu.read_range, [])["terrain"], view.dialogue(emu.read_range)
        out.append((None, None, None, None, sample, terrain))
        for action in actions:
            after = emu.step(action, TIMING, probe).ram_last
            now = view(after, emu.read_range, [])["terrain"]
            out.append((action, sample, terrain, said, after, now))
            sample, terrain, said = after, now, view.dialogue(emu.read_range)
    finally:
        emu.close()
    return out


@pytest.fixture(scope="module")
def walked():
    return walk()


def test_the_terrain_is_the_cartridges_map_around_the_player(walked):
    maps, rooms = art_maps(), set()
    for *_, sample, terrain in walked:
        if sample["in_battle"]:
            continue  # the field's grid stays behind the battle screen
        name = MAP_NAMES[sample["map"]]
        rows, want = terrain["rows"], expected(maps[name], sample["x"], sample["y"])
        assert len(rows) == ROWS and all(len(r) == COLUMNS for r in rows)
        seen = objects_in(name, sample["x"], sample["y"], rows)
        for (mx, my), glyph in seen.items():
            assert PEOPLE.get((name, mx, my)) == glyph, (name, mx, my, glyph)
            want[my - sample["y"] + PLAYER_ROW][mx - sample["x"] + PLAYER_COLUMN] = glyph
        assert rows == ["".join(r) for r in want], (name, sample["x"], sample["y"])
        rooms.add(name)
    assert rooms == set(MAP_NAMES.values())
    assert set(terrain["legend"]) == {".", "#", " ", "@", "P", "o"}


def test_the_people_stand_where_the_story_puts_them(walked):
    """Mom downstairs; in the lab the professor, the rival and three balls, then one ball fewer for each
    starter taken; the rival gone once beaten."""
    seen: dict[str, list[dict]] = {}
    for *_, sample, terrain in walked:
        name, x, y = MAP_NAMES[sample["map"]], sample["x"], sample["y"]
        lab_in_view = all(in_view(x, y, mx, my) for mx, my in ((6, 6), (9, 4), (10, 5), (12, 5)))
        if not sample["in_battle"] and (name != "LAB" or lab_in_view):
            seen.setdefault(name, []).append(objects_in(name, x, y, terrain["rows"]))
    assert {(11, 7): "P"} in seen["HOUSE_1F"]
    lab = seen["LAB"]
    assert lab[0] == {(9, 4): "P", (6, 6): "P", (10, 5): "o", (11, 5): "o", (12, 5): "o"}
    balls = [sum(g == "o" for g in v.values()) for v in lab]
    assert balls[0] == 3 and 1 in balls and balls == sorted(balls, reverse=True)
    assert any((6, 6) not in v for v in lab[1:]), "the rival never left the lab"


def test_a_direction_into_a_wall_or_a_person_is_blocked_and_onto_open_ground_moves(walked):
    """The cartridge's own walk rule agrees with the terrain the definition reads: the cell ahead in the
    terrain before the press says whether the press moved the player."""
    checked = {"blocked": 0, "moved": 0}
    for action, before, terrain, said, after, _ in walked:
        if action not in STEP or before is None or before["in_battle"] or said is not None:
            continue
        dx, dy = STEP[action]
        ahead = terrain["rows"][PLAYER_ROW + dy][PLAYER_COLUMN + dx]
        moved = (after["map"], after["x"], after["y"]) != (before["map"], before["x"], before["y"])
        if ahead in "#Po":
            assert not moved, (action, before["map"], before["x"], before["y"])
            checked["blocked"] += 1
        elif ahead == ".":
            assert moved, (action, before["map"], before["x"], before["y"])
            checked["moved"] += 1
    assert checked["moved"] > 50
    assert checked["blocked"] >= 1


def test_a_step_into_the_bedroom_wall_is_blocked_as_the_terrain_says():
    """At power-on in the bedroom (10, 7): UP walks up to row 4, below the wall the terrain draws as '#',
    and the next UPs stay put."""
    game = firered()
    probe, view, emu = Probe(game), GameplayView(game), emulator()
    try:
        sample = probe(emu.read_range)
        for _ in range(6):
            rows = view(sample, emu.read_range, [])["terrain"]["rows"]
            after = emu.step("UP", TIMING, probe).ram_last
            assert (after["y"] == sample["y"]) == (rows[PLAYER_ROW - 1][PLAYER_COLUMN] == "#")
            sample = after
    finally:
        emu.close()
    assert sample["y"] == 4 and rows[PLAYER_ROW - 1][PLAYER_COLUMN] == "#"
