"""Held-out Parcel Quest variants: a new but equivalent world for every seed, as data tables.

`make_variant(seed)` draws, from a hash stream of the seed (the same bytes on every platform and
Python version), new layouts for ACORN TOWN, NORTH PATH and MAPLE CITY inside the fixed 20x18
bounds (border thickness, buildings, doors, exits, ponds and tree lines with one gap), the
positions of the player's start and of every NPC but the clerk, smaller rooms with a few obstacles,
the ball order, the names of the towns, the route, the professor, the rival and the three creatures,
and one wording per dialogue page from the pool in art/world.yaml. The story, its eight rungs and
the WRAM layout never change. Seed 0 is the bundled cartridge itself. A draw the solver cannot
finish is retried (the attempt number is part of the stream), so every seed yields one fixed,
solvable variant.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.games import cartridge_tables as ct
from engine.games.cartridge_tables import MAP_H, MAP_W, Place, Pos, Sign, Tables, Warp
from sessions.variants.variant_solver import Solution, Unsolvable, solve

CART = Path(__file__).resolve().parents[2] / "assets" / "cartridge"
MAX_SEED = (1 << 256) - 1
ATTEMPTS = 64

TOWNS = ["ACORN TOWN", "PEBBLE TOWN", "FERN TOWN", "MOSS TOWN", "BRAMBLE TOWN", "DEW TOWN", "WREN TOWN",
         "THISTLE DEN", "CLOVER TOWN", "HEATH TOWN"]
CITIES = ["MAPLE CITY", "CLAY CITY", "DUNE CITY", "ORE CITY", "TIDE CITY", "SLATE CITY", "FLINT CITY",
          "QUARTZ CITY", "AMBER CITY"]
ROUTES = ["NORTH PATH", "HILL TRAIL", "OLD ROAD", "RIVER LANE", "PINE WAY", "MILL ROAD", "FOX TRAIL",
          "LONG LANE"]
PROFS = ["HAZEL", "LINDEN", "ASPEN", "ALDER", "LARCH", "SORREL", "TANSY", "MYRTLE"]
RIVALS = ["KIT", "JAX", "REN", "OLA", "TAM", "BIX", "NED", "ZIA", "PIP", "DOV"]
SPECIES = {  # by species id: grass, fire, water
    1: ["SPROUTLE", "BUDLING", "LEAFLET", "MOSSKIN", "SEEDLET"],
    2: ["EMBERPUP", "CINDRAT", "ASHPAW", "FLICKIT", "SCORCHY"],
    3: ["DRIPLET", "PUDDLER", "SPLASHY", "TIDELET", "BRINEY"],
}
HOUSE_1F_DOOR = Place(map=1, x=14, y=12, facing=1)  # where the house door puts you
LAB_DOOR = Place(map=3, x=9, y=12, facing=1)
SHOP_DOOR = Place(map=6, x=10, y=8, facing=1)
HOUSE_MATS, LAB_MATS, SHOP_MATS = [(1, 14, 13), (1, 15, 13)], [(3, 9, 13), (3, 10, 13)], [(6, 10, 9), (6, 11, 9)]
TOWN, ROUTE, CITY = 2, 4, 5


class VariantError(ValueError):
    """The seed is out of range or its variant cannot be made; one line."""


class Stream:
    """Deterministic draws from SHA-256(seed, attempt, counter): no dependence on `random`'s internals."""

    def __init__(self, seed: int, attempt: int) -> None:
        self.key = b"parcel-quest-variant\0" + seed.to_bytes(32, "big") + attempt.to_bytes(4, "big")
        self.n = 0

    def below(self, n: int) -> int:
        if n <= 0:
            raise ValueError("empty range")
        limit = (1 << 64) - (1 << 64) % n  # rejection keeps every value equally likely
        while True:
            self.n += 1
            v = int.from_bytes(hashlib.sha256(self.key + self.n.to_bytes(8, "big")).digest()[:8], "big")
            if v < limit:
                return v % n

    def between(self, lo: int, hi: int) -> int:
        return lo + self.below(hi - lo + 1)

    def choice(self, items: Sequence):
        return items[self.below(len(items))]

    def shuffled(self, items: Sequence) -> list:
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.below(i + 1)
            out[i], out[j] = out[j], out[i]
        return out


def tile_ids() -> dict[str, int]:
    """Tile names from the generated src/data.h (T_GRASS -> 0x60, ...)."""
    text = (CART / "src" / "data.h").read_text(encoding="utf-8")
    return {m[1]: int(m[2], 16) for m in re.finditer(r"#define T_(\w+) 0x([0-9A-F]+)", text)}


class Grid:
    """A 20x18 map being drawn: tile and kind per cell."""

    def __init__(self, tiles: dict[str, int]) -> None:
        self.T = tiles
        self.tile = [[tiles["GRASS"]] * MAP_W for _ in range(MAP_H)]
        self.kind = [[ct.KIND_WALK] * MAP_W for _ in range(MAP_H)]
        self.used = [[False] * MAP_W for _ in range(MAP_H)]  # kept free of buildings and NPCs

    def put(self, x: int, y: int, name: str, kind: int) -> None:
        self.tile[y][x] = ord(name) if len(name) == 1 else self.T[name]
        self.kind[y][x] = kind
        self.used[y][x] = True

    def free(self, x0: int, y0: int, w: int, h: int) -> bool:
        return all(0 <= x < MAP_W and 0 <= y < MAP_H and not self.used[y][x]
                   for y in range(y0, y0 + h) for x in range(x0, x0 + w))

    def reserve(self, x0: int, y0: int, w: int, h: int) -> None:
        for y in range(max(0, y0), min(MAP_H, y0 + h)):
            for x in range(max(0, x0), min(MAP_W, x0 + w)):
                self.used[y][x] = True

    def encode(self) -> tuple[bytes, bytes]:
        return bytes(t for row in self.tile for t in row), bytes(k for row in self.kind for k in row)


S, W = ct.KIND_SOLID, ct.KIND_WALK
ROW_ROOF = [("ROOF_TL", S), ("ROOF_T", S), ("ROOF_T", S), ("ROOF_TR", S)]
ROW_EAVE = [("ROOF_L", S), ("ROOF_M", S), ("ROOF_M", S), ("ROOF_R", S)]


def building(g: Grid, x: int, y: int, front: list[tuple[str, int]]) -> None:
    """A roof row, an eave row and `front` (its width) from (x, y)."""
    n = len(front)
    roof = [("ROOF_TL", S)] + [("ROOF_T", S)] * (n - 2) + [("ROOF_TR", S)]
    eave = [("ROOF_L", S)] + [("ROOF_M", S)] * (n - 2) + [("ROOF_R", S)]
    for row, cells in enumerate((roof, eave, front)):
        for i, (name, kind) in enumerate(cells):
            g.put(x + i, y + row, name, kind)


def outdoor(s: Stream, tiles: dict[str, int], top: int, top_exit: int | None, bottom_exit: int | None,
            side: int) -> tuple[Grid, int, int, int]:
    """Trees around a grass field: `top` tree rows, one or two at the bottom, `side` or one more
    column at each side; 2-wide exits through the top and/or bottom rows. Returns the grid and the
    field's bounds: first and last column, first tree row at the bottom."""
    g = Grid(tiles)
    left = side + s.below(2)
    right = MAP_W - 1 - side - s.below(2)
    bottom = MAP_H - 1 - s.below(2)
    for y in range(MAP_H):
        for x in range(MAP_W):
            if x < left or x > right or y < top or y >= bottom:
                g.put(x, y, "TREE", S)
    for ex, rows in ((top_exit, range(0, top)), (bottom_exit, range(bottom, MAP_H))):
        if ex is None:
            continue
        for y in rows:
            for x in (ex, ex + 1):
                g.put(x, y, "BLANK", W)
    return g, left, right, bottom


def place(s: Stream, g: Grid, w: int, h: int, left: int, right: int, top: int, bottom: int) -> tuple[int, int]:
    """A spot for a w x h building whose front row stays clear, inside the field and not touching
    another building or reserved cells (trees may touch); reserved."""
    spots = [(x, y) for y in range(top, bottom - h) for x in range(left, right - w + 2)
             if g.free(x, y, w, h + 1) and _margin_ok(g, x, y, w, h)]
    if not spots:
        raise Unsolvable("no room for a building")
    x, y = s.choice(spots)
    g.reserve(x, y, w, h + 1)
    return x, y


def _margin_ok(g: Grid, x: int, y: int, w: int, h: int) -> bool:
    for yy in range(y - 1, y + h + 2):
        for xx in range(x - 1, x + w + 1):
            if 0 <= xx < MAP_W and 0 <= yy < MAP_H and g.used[yy][xx] and g.tile[yy][xx] != g.T["TREE"]:
                return False
    return True


def scatter(s: Stream, g: Grid, name: str, count: int, x_lo: int, x_hi: int, y_lo: int, y_hi: int) -> None:
    for _ in range(count):
        x, y = s.between(x_lo, x_hi), s.between(y_lo, y_hi)
        if not g.used[y][x]:
            g.put(x, y, name, W if name == "FLOWER" else S)
            g.used[y][x] = name != "FLOWER"


def free_cell(s: Stream, g: Grid, x_lo: int, x_hi: int, y_lo: int, y_hi: int) -> tuple[int, int]:
    cells = [(x, y) for y in range(y_lo, y_hi + 1) for x in range(x_lo, x_hi + 1)
             if not g.used[y][x] and g.kind[y][x] == W]
    if not cells:
        raise Unsolvable("no free cell")
    x, y = s.choice(cells)
    g.used[y][x] = True
    return x, y


@dataclass
class Drawn:
    tiles: dict[int, tuple[bytes, bytes]]
    warps: list[Warp]
    signs: list[Sign]
    actors: dict[int, Pos]


def draw_world(s: Stream, base: Tables) -> Drawn:
    T = tile_ids()
    exit_town = s.between(3, 15)   # town north exit = route south exit (columns x, x+1)
    exit_city = s.between(4, 14)   # route north exit = city south exit
    drawn = Drawn({}, [], [], {})
    _draw_town(s, T, exit_town, drawn)
    _draw_route(s, T, exit_town, exit_city, drawn)
    _draw_city(s, T, exit_city, drawn)
    return drawn


def _water(g, px: int, py: int, width: int, height: int) -> None:
    for yy in range(py, py + height):
        for xx in range(px, px + width):
            g.put(xx, yy, "WATER", S)


def _draw_town(s: Stream, T, exit_town: int, drawn: Drawn) -> None:
    """ACORN TOWN: the house, the rival's house, the lab, a pond, signs, flowers."""
    g, left, right, bottom = outdoor(s, T, 2, exit_town, None, 1)
    g.reserve(exit_town - 1, 0, 4, 4)  # arrival from the route stays open
    hx, hy = place(s, g, 4, 3, left, right, 3, bottom)
    building(g, hx, hy, [("WALL", S), ("DOOR", W), ("WINDOW", S), ("WALL", S)])
    rx, ry = place(s, g, 4, 3, left, right, 3, bottom)
    building(g, rx, ry, [("WALL", S), ("DOOR", S), ("WINDOW", S), ("WALL", S)])
    lx, ly = place(s, g, 8, 3, left, right, 3, bottom)
    building(g, lx, ly, [("WALL", S), ("L", S), ("A", S), ("B", S), ("WALL", S), ("DOOR", W), ("WALL", S)])
    g.put(lx + 7, ly + 2, "SIGN", S)
    if s.below(2):
        px, py = place(s, g, 4, 3, left, right, 3, bottom)
        _water(g, px, py, 4, 3)
    sx, sy = free_cell(s, g, left, right, 3, bottom - 1)
    g.put(sx, sy, "SIGN", S)
    scatter(s, g, "FLOWER", s.between(2, 6), left, right, 3, bottom - 1)
    drawn.signs += [Sign(map=TOWN, x=sx, y=sy, text="town_sign"), Sign(map=TOWN, x=lx + 7, y=ly + 2, text="lab_sign"),
                    Sign(map=TOWN, x=rx + 1, y=ry + 2, text="rival_house")]
    gx, gy = free_cell(s, g, left, right, 3, bottom - 1)
    drawn.actors[6] = Pos(map=TOWN, x=gx, y=gy)
    drawn.tiles[TOWN] = g.encode()
    drawn.warps += [Warp(map=TOWN, x=hx + 1, y=hy + 2, to=HOUSE_1F_DOOR),
                    Warp(map=TOWN, x=lx + 5, y=ly + 2, to=LAB_DOOR)]
    drawn.warps += [Warp(map=m, x=x, y=y, to=Place(map=TOWN, x=hx + 1, y=hy + 3, facing=0)) for m, x, y in HOUSE_MATS]
    drawn.warps += [Warp(map=m, x=x, y=y, to=Place(map=TOWN, x=lx + 5, y=ly + 3, facing=0)) for m, x, y in LAB_MATS]


def _draw_route(s: Stream, T, exit_town: int, exit_city: int, drawn: Drawn) -> None:
    """NORTH PATH: tree lines with one gap each, ponds, flowers, the sign."""
    g, left, right, bottom = outdoor(s, T, 1, exit_city, exit_town, 2)
    lines = sorted({s.between(4, 13) for _ in range(s.between(1, 2))})
    if len(lines) == 2 and lines[1] - lines[0] < 3:
        lines = lines[:1]
    for ly_ in lines:
        gap = s.between(left, right - 1)
        for xx in range(left, right + 1):
            if xx not in (gap, gap + 1):
                g.put(xx, ly_, "TREE", S)
        g.reserve(gap, ly_ - 1, 2, 3)
    g.reserve(exit_city, 0, 2, 3)
    g.reserve(exit_town, bottom - 2, 2, 3)
    for _ in range(s.below(3)):
        px, py = s.between(left, right - 4), s.between(2, bottom - 3)
        if g.free(px, py, 5, 2):
            _water(g, px, py, 5, 2)
    scatter(s, g, "FLOWER", s.between(3, 8), left, right, 1, bottom - 1)
    sx, sy = free_cell(s, g, left, right, 2, bottom - 1)
    g.put(sx, sy, "SIGN", S)
    drawn.signs.append(Sign(map=ROUTE, x=sx, y=sy, text="route_sign"))
    drawn.tiles[ROUTE] = g.encode()
    for x in (exit_town, exit_town + 1):
        drawn.warps += [Warp(map=TOWN, x=x, y=0, to=Place(map=ROUTE, x=x, y=MAP_H - 2, facing=1)),
                        Warp(map=ROUTE, x=x, y=MAP_H - 1, to=Place(map=TOWN, x=x, y=2, facing=0))]
    for x in (exit_city, exit_city + 1):
        drawn.warps += [Warp(map=ROUTE, x=x, y=0, to=Place(map=CITY, x=x, y=MAP_H - 2, facing=1)),
                        Warp(map=CITY, x=x, y=MAP_H - 1, to=Place(map=ROUTE, x=x, y=1, facing=0))]


def _draw_city(s: Stream, T, exit_city: int, drawn: Drawn) -> None:
    """MAPLE CITY: the shop, two locked houses, the sign, flowers."""
    g, left, right, bottom = outdoor(s, T, 1, None, exit_city, 1)
    g.reserve(exit_city - 1, bottom - 3, 4, 4)
    bx, by = place(s, g, 8, 3, left, right, 2, bottom)
    building(g, bx, by, [("WALL", S), ("S", S), ("H", S), ("O", S), ("P", S), ("DOOR", W), ("WALL", S)])
    for _ in range(2):
        qx, qy = place(s, g, 4, 3, left, right, 2, bottom)
        building(g, qx, qy, [("WALL", S), ("DOOR", S), ("WINDOW", S), ("WALL", S)])
        drawn.signs.append(Sign(map=CITY, x=qx + 1, y=qy + 2, text="locked"))
    sx, sy = free_cell(s, g, left, right, 2, bottom - 1)
    g.put(sx, sy, "SIGN", S)
    drawn.signs.append(Sign(map=CITY, x=sx, y=sy, text="city_sign"))
    scatter(s, g, "FLOWER", s.between(2, 6), left, right, 2, bottom - 1)
    mx, my = free_cell(s, g, left, right, 2, bottom - 1)
    drawn.actors[7] = Pos(map=CITY, x=mx, y=my)
    drawn.tiles[CITY] = g.encode()
    drawn.warps.append(Warp(map=CITY, x=bx + 5, y=by + 2, to=SHOP_DOOR))
    drawn.warps += [Warp(map=m, x=x, y=y, to=Place(map=CITY, x=bx + 5, y=by + 3, facing=0)) for m, x, y in SHOP_MATS]


# Rooms may shrink inside their fixed bounds: columns walled off from the left or right, rows from the
# bottom (never a warp, an arrival, the lab table or where the professor leads you).
ROOM_CUTS: dict[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {
    0: ((3, 4), (), (13, 12, 11)),  # bedroom
    1: ((3, 4), (), ()),  # ground floor
    3: ((2, 3), (17, 16), ()),  # lab
    6: ((), (15, 14), ()),  # shop
}


def shrink_rooms(s: Stream, base: Tables, void: int) -> Tables:
    """The base with each room made 0..2 columns narrower and the bedroom 0..3 rows shorter."""
    tiles, kinds = list(base.tiles), list(base.kinds)
    for m, (lefts, rights, bottoms) in ROOM_CUTS.items():
        cols = set(lefts[:s.below(len(lefts) + 1)]) | set(rights[:s.below(len(rights) + 1)])
        rows = set(bottoms[:s.below(len(bottoms) + 1)])
        t, k = bytearray(tiles[m]), bytearray(kinds[m])
        for y in range(MAP_H):
            for x in range(MAP_W):
                if x in cols or y in rows:
                    t[y * MAP_W + x], k[y * MAP_W + x] = void, ct.KIND_SOLID
        tiles[m], kinds[m] = bytes(t), bytes(k)
    return base.model_copy(update={"tiles": tuple(tiles), "kinds": tuple(kinds)})


def indoor_cell(s: Stream, base: Tables, m: int, avoid: set[tuple[int, int]]) -> tuple[int, int]:
    """A walkable cell of an interior map, away from its warps and `avoid`."""
    kinds = base.kinds[m]
    busy = {(w.x, w.y) for w in base.warps if w.map == m} | {(w.to.x, w.to.y) for w in base.warps if w.to.map == m}
    cells = [(x, y) for y in range(MAP_H) for x in range(MAP_W)
             if kinds[y * MAP_W + x] == ct.KIND_WALK and (x, y) not in busy | avoid]
    return s.choice(cells)


def furnish(s: Stream, base: Tables, m: int, plant: int, floor: int, count: int,
            avoid: set[tuple[int, int]]) -> tuple[bytes, bytes]:
    """An interior with `count` potted plants (solid) on floor cells away from `avoid` and the warps."""
    tiles, kinds = bytearray(base.tiles[m]), bytearray(base.kinds[m])
    around = ((0, 0), (0, 1), (0, -1), (1, 0), (-1, 0))
    near = {(w.x + dx, w.y + dy) for w in base.warps if w.map == m for dx, dy in around}
    near |= {(w.to.x, w.to.y) for w in base.warps if w.to.map == m}
    cells = [(x, y) for y in range(MAP_H) for x in range(MAP_W)
             if tiles[y * MAP_W + x] == floor and kinds[y * MAP_W + x] == ct.KIND_WALK and (x, y) not in near | avoid]
    for _ in range(count):
        x, y = cells.pop(s.below(len(cells)))
        tiles[y * MAP_W + x], kinds[y * MAP_W + x] = plant, ct.KIND_SOLID
    return bytes(tiles), bytes(kinds)


def draw_tables(seed: int, attempt: int, base: Tables, spec: ct.WorldSpec) -> Tables:
    # The stream's draws come in a fixed order (people, names, rooms, balls): the same seed, the same ROM.
    s = Stream(seed, attempt)
    drawn = draw_world(s, base)
    base = shrink_rooms(s, base, tile_ids()["VOID"])
    start, actors = _place_people(s, base, drawn)
    names, texts = _draw_names(s, spec)
    tiles, kinds = _furnish_rooms(s, base, drawn, actors, start)
    signs = [(Pos(map=sg.map, x=sg.x, y=sg.y), ct.TEXT_IDS.index(sg.text))
             for sg in drawn.signs] + [(p, t) for p, t in base.signs if p.map not in drawn.tiles]
    interior_warps = [w for w in base.warps if w.map in (0, 1) and w.to.map in (0, 1)]
    return Tables(start=start, stop=base.stop, balls=tuple(s.shuffled([1, 2, 3])),  # type: ignore[arg-type]
                  actors=tuple(list(actors)), signs=tuple(signs), warps=tuple(interior_warps + drawn.warps),
                  species=tuple(names.species), texts=texts, tiles=tuple(tiles),  # type: ignore[arg-type]
                  kinds=tuple(kinds))


def _place_people(s: Stream, base: Tables, drawn) -> tuple[Place, list[Pos]]:
    """The start in the bedroom; the mother, the professor and the rival indoors; the outdoor people drawn."""
    x, y = indoor_cell(s, base, 0, set())
    start = Place(map=0, x=x, y=y, facing=s.below(4))
    actors = list(base.actors)  # indices are the fixed actor ids (ct.ACTOR_NAMES)
    mom = indoor_cell(s, base, 1, set())
    actors[0] = Pos(map=1, x=mom[0], y=mom[1])
    lab_busy = {(a.x, a.y) for a in base.actors if a.map == 3} | {(base.stop.to.x, base.stop.to.y)}
    prof = indoor_cell(s, base, 3, lab_busy)
    rival = indoor_cell(s, base, 3, lab_busy | {prof})
    actors[1] = Pos(map=3, x=prof[0], y=prof[1])
    actors[2] = Pos(map=3, x=rival[0], y=rival[1])
    for i, p in drawn.actors.items():
        actors[i] = p
    return start, actors


def _draw_names(s: Stream, spec: ct.WorldSpec) -> tuple[ct.Names, tuple]:
    """Names and wording: redrawn until every page fits the box."""
    for _ in range(100):
        names = ct.Names(town=s.choice(TOWNS), route=s.choice(ROUTES), city=s.choice(CITIES),
                         prof=s.choice(PROFS), rival=s.choice(RIVALS),
                         species=[s.choice(SPECIES[k]) for k in (1, 2, 3)])
        wording = {t: s.below(len(spec.texts[t])) for t in ct.TEXT_IDS}
        texts = tuple(ct.render_page(spec.texts[t][wording[t]], names) for t in ct.TEXT_IDS)
        if all(ct.page_fits(p) for p in texts):
            return names, texts
    raise Unsolvable("no names fit the dialogue box")


def _furnish_rooms(s: Stream, base: Tables, drawn, actors: list[Pos], start: Place) -> tuple[list, list]:
    """The drawn outdoor maps, and the rooms with a different set of obstacles: a few plants, never on a
    warp, an arrival or a person."""
    tiles = list(base.tiles)
    kinds = list(base.kinds)
    for m, (tl, kd) in drawn.tiles.items():
        tiles[m], kinds[m] = tl, kd
    T = tile_ids()
    for m in (0, 1, 3, 6):
        avoid = {(a.x, a.y) for a in actors if a.map == m}
        avoid |= {(start.x, start.y)} if start.map == m else set()
        avoid |= {(base.stop.to.x, base.stop.to.y)} if base.stop.to.map == m else set()
        tiles[m], kinds[m] = furnish(s, base, m, T["PLANT"], T["FLOOR"], s.between(1, 3), avoid)
    return tiles, kinds


@dataclass
class Variant:
    seed: int
    rom: bytes
    tables: Tables
    solution: Solution
    attempt: int


def bundled_rom() -> bytes:
    return (CART / "parcel-quest.gb").read_bytes()


def make_variant(seed: int, rom: bytes | None = None) -> Variant:
    """The variant ROM for `seed` and its optimal plan. VariantError if it cannot be made."""
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise VariantError(f"seed must be an integer from 0 to 2**256-1, not {seed!r}")
    rom = bundled_rom() if rom is None else rom
    try:
        base = ct.decode(ct.rom_block(rom))
    except ct.TableError as exc:
        raise VariantError(f"variants are made from Parcel Quest's tables, and this ROM has none ({exc})") from None
    if seed == 0:
        return Variant(0, rom, base, solve(base), 0)
    spec = ct.load_world()
    last = "no attempt"
    for attempt in range(ATTEMPTS):
        try:
            tables = draw_tables(seed, attempt, base, spec)
            block = ct.encode(tables)
            solution = solve(tables)
        except (Unsolvable, ct.TableError) as exc:
            last = str(exc)
            continue
        return Variant(seed, ct.with_block(rom, block), tables, solution, attempt)
    raise VariantError(f"seed {seed}: no solvable variant in {ATTEMPTS} draws (last: {last})")


def parse_seed(text: str) -> int:
    """Decimal or 0x-hex, 0 .. 2**256-1."""
    t = text.strip().replace("_", "")
    try:
        value = int(t, 16) if t.lower().startswith("0x") else int(t, 10)
    except ValueError:
        raise ValueError("the seed must be a non-negative integer (decimal or 0x-hex)") from None
    if not 0 <= value <= MAX_SEED:
        raise ValueError("the seed must be between 0 and 2**256-1")
    return value
