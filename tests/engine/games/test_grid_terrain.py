"""A gameplay track's grid terrain (`kind: grid`, FireRed's VMap): read around the player from a RAM image laid
out as the definition says, null while there is no grid or position, and refused by the loader where it would
show what a rung reads; a task whose goal reads the position drops it. The same reading on the real cartridge
in mGBA: tests/cartridge/test_terrain_on_gba_cartridge.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.games.gamedef import GameDefinition, GridTerrain
from engine.games.gameplay import read_grid_terrain

REPO = Path(__file__).resolve().parents[3]
FIRERED = REPO / "assets" / "games" / "pokemon-firered-leafgreen-en.yaml"


def firered_data() -> dict:
    return yaml.safe_load(FIRERED.read_text(encoding="utf-8"))


def terrain() -> GridTerrain:
    t = GameDefinition.model_validate(firered_data()).tracks.gameplay.terrain
    assert isinstance(t, GridTerrain)
    return t


class Ram:
    """A sparse byte image: unwritten bytes read 0."""

    def __init__(self) -> None:
        self.bytes: dict[int, int] = {}

    def write(self, address: int, data: bytes) -> None:
        for i, b in enumerate(data):
            self.bytes[address + i] = b

    def read_range(self, address: int, size: int) -> list[int]:
        return [self.bytes.get(address + i, 0) for i in range(size)]


def a_map(t: GridTerrain, cells: list[str], grid_at: int | None = None) -> Ram:
    """`cells` ('.' open, '#' wall) as FireRed lays a map out: undefined fill, a MAP_OFFSET margin."""
    ram = Ram()
    width, height = len(cells[0]) + 2 * t.offset + 1, len(cells) + 2 * t.offset
    grid = t.region.address if grid_at is None else grid_at
    ram.write(t.layout, width.to_bytes(4, "little") + height.to_bytes(4, "little") + grid.to_bytes(4, "little"))
    entries = [t.undefined] * (width * height)
    for y, row in enumerate(cells):
        for x, ch in enumerate(row):
            entries[(y + t.offset) * width + x + t.offset] = 0x001 | (0x400 if ch == "#" else 0) | 0x3000
    ram.write(grid, b"".join(e.to_bytes(2, "little") for e in entries))
    return ram


def an_object(ram: Ram, t: GridTerrain, slot: int, x: int, y: int, graphics: int, player: bool = False) -> None:
    """An active struct ObjectEvent at map cell (x, y)."""
    o = t.objects
    record = bytearray(o.stride)
    record[0], record[2], record[o.graphics] = 1, 1 if player else 0, graphics
    record[o.x:o.x + 4] = (x + t.offset).to_bytes(2, "little") + (y + t.offset).to_bytes(2, "little")
    ram.write(o.address + slot * o.stride, bytes(record))


ROOM = ["#####",
        "#...#",
        "#.#.#",
        "#...#",
        "#####"]


def test_the_cells_around_the_player_by_collision_with_people_balls_and_the_player():
    t = terrain()
    ram = a_map(t, ROOM)
    an_object(ram, t, 0, 1, 1, 0, player=True)  # the player's own object is drawn from the position
    an_object(ram, t, 1, 3, 1, 71)               # OBJ_EVENT_GFX_PROF_OAK
    an_object(ram, t, 2, 3, 3, 92)               # OBJ_EVENT_GFX_ITEM_BALL
    out = read_grid_terrain(t, ram.read_range, (1, 1))
    rows = out["rows"]
    assert len(rows) == 10 and all(len(r) == 15 for r in rows)
    # the map's top-left corner (0, 0) is 7 columns left of and 4 rows above the player's (1, 1)
    assert [r[6:11] for r in rows[3:8]] == ["#####", "#@.P#", "#.#.#", "#..o#", "#####"]
    assert rows[0] == " " * 15 and rows[4][:6] == " " * 6  # beyond the map: outside
    assert out["legend"]["#"] == "blocked" and out["legend"]["o"] == "ball"


def test_no_grid_or_no_position_reads_null():
    t = terrain()
    assert read_grid_terrain(t, Ram().read_range, (1, 1)) is None  # no map loaded: width 0
    outside = a_map(t, ROOM, grid_at=t.region.address + t.region.size)  # the pointer is not into the buffer
    assert read_grid_terrain(t, outside.read_range, (1, 1)) is None
    assert read_grid_terrain(t, a_map(t, ROOM).read_range, (None, 1)) is None


@pytest.mark.parametrize(("change", "why"), [
    (lambda g: g["objects"].update(address=0x02024000), "tracks.gameplay.terrain reads the memory of ladder "
                                                        "field 'party_count'"),
    (lambda g: g.update(region={"address": 0x02024020, "size": 0x20}), "ladder field 'party_count'"),
    (lambda g: g.update(player_row=10), "the player's cell lies outside the window"),
    (lambda g: g["glyphs"].update(person="#") if "glyphs" in g else g.update(glyphs={"person": "#"}),
     "each kind needs its own glyph"),
])
def test_a_grid_terrain_that_would_leak_or_does_not_fit_is_refused(change, why):
    data = firered_data()
    change(data["tracks"]["gameplay"]["terrain"])
    with pytest.raises(ValueError, match=why):
        GameDefinition.model_validate(data)


def test_a_grid_terrain_needs_the_position_and_never_shows_a_ladder_position():
    data = firered_data()
    data["tracks"]["gameplay"]["outcomes"] = None
    data.pop("position")
    data.pop("required_backtracking", None)
    with pytest.raises(ValueError, match="a grid terrain centres on the position"):
        GameDefinition.model_validate(data)
    data = firered_data()
    data["milestones"][0]["all"].append({"field": "x", "ge": 0})
    for track in data["tracks"].values():  # shown by nothing else: the terrain tells it
        track["fields"] = [f for f in track["fields"] if f not in ("x", "y")]
    data["tracks"]["gameplay"]["outcomes"] = None
    with pytest.raises(ValueError, match="tracks.gameplay.terrain: 'x' is read by a milestone rung"):
        GameDefinition.model_validate(data)


def test_a_task_whose_goal_reads_the_position_drops_the_grid_terrain(tmp_path):
    from sessions.tasks.tasks import TASKS_DIR, derived_game, load_task

    data = yaml.safe_load((TASKS_DIR / "pqa-leave-house.yaml").read_text(encoding="utf-8"))
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    task = load_task(path)
    assert isinstance(derived_game(task.file, task.game).tracks.gameplay.terrain, GridTerrain)
    data["goal"] = {"probe": [{"field": "y", "le": 3}]}
    path.write_text(yaml.safe_dump(data))
    task = load_task(path)
    assert derived_game(task.file, task.game).tracks.gameplay.terrain is None
