"""Parcel Quest's data tables: the fixed ROM area that holds everything a variant may change.

The cartridge's code never changes between variants; it reads maps, warps, actors, signs, the
start, the professor's stop, the ball order, the creatures' names and every dialogue page from one
block at TABLE_ADDR (layout in assets/cartridge/TABLES.md, constants below). This module is that
layout's single definition: `encode` writes a block, `decode` reads one back, and the build
(tools/gen_data.py) and `oakwatch cartridge variant` both go through it, so seed 0 is the bundled
ROM byte for byte.
"""

import re
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field

TABLE_ADDR = 0x4000
TABLE_SIZE = 0x2400
MAGIC = b"PQT1"
MAP_W, MAP_H, NUM_MAPS = 20, 18, 7
MAP_CELLS = MAP_W * MAP_H

# offsets inside the block (TABLES.md)
OFF_MAGIC = 0x000
OFF_START = 0x010  # map, x, y, facing
OFF_STOP = 0x014  # map, row, to.map, to.x, to.y, to.facing
OFF_BALLS = 0x01A  # 3 species ids
OFF_ACTORS = 0x020  # NUM_ACTORS x (map, x, y, 0)
OFF_SIGNS = 0x060  # count, then MAX_SIGNS x (map, x, y, text id)
OFF_WARPS = 0x0A0  # count, then MAX_WARPS x (map, x, y, to.map, to.x, to.y, to.facing)
OFF_SPECIES = 0x180  # 4 slots of NAME_SLOT bytes (slot 0 unused), NUL-terminated
OFF_TEXT_PTRS = 0x200  # MAX_TEXTS x u16le absolute address of each page
OFF_TEXT_POOL = 0x280  # NUL-terminated pages, up to OFF_TILES
OFF_TILES = 0x1000  # NUM_MAPS x MAP_CELLS tile indices, row-major
OFF_KINDS = 0x1A00  # NUM_MAPS x MAP_CELLS cell kinds: 0 walk, 1 solid, 2 reach

NUM_ACTORS, MAX_SIGNS, MAX_WARPS, MAX_TEXTS, NAME_SLOT = 9, 15, 31, 64, 9
KIND_WALK, KIND_SOLID, KIND_REACH = 0, 1, 2
ACTOR_NAMES = ("MOM", "PROF", "RIVAL", "BALL1", "BALL2", "BALL3", "GIRL", "MAN", "CLERK")

# Dialogue pages in their fixed id order (the C code names them TX_<ID>).
TEXT_IDS = (
    "mom1", "mom2", "tv", "town_sign", "lab_sign", "rival_house", "route_sign", "city_sign", "locked",
    "girl", "man", "stop1", "stop2", "stop3", "prof_pick", "prof_go", "prof_done", "parcel1", "handed",
    "parcel2", "got_dex", "parcel3", "rival_wait", "rival_first", "ball_no", "ball_last", "ball_pick",
    "got_me", "rival_take", "rival_dare", "rival_lost", "rival_won", "rival_bye", "rested", "clerk_give",
    "got_parcel", "clerk_hi", "sent_out", "my_move", "rival_move", "rival_fainted", "my_fainted", "no_run",
    "battle_ask", "battle_label",
)
# run-time placeholders: the game substitutes the creatures' names (game.h P_*)
RUNTIME = {"me": "\x01", "rv": "\x02", "ball": "\x03", "type": "\x04", "mymove": "\x05", "rvmove": "\x06"}
RUNTIME_LONGEST = {"\x01": 8, "\x02": 8, "\x03": 8, "\x04": 5, "\x05": 10, "\x06": 10}
PAGE_LINES, PAGE_COLUMNS = 4, 18
NAME_CHARS = re.compile(r"^[A-Z0-9 .'!?-]+$")

WORLD_YAML = Path(__file__).resolve().parents[2] / "assets" / "cartridge" / "art" / "world.yaml"


class TableError(ValueError):
    """The tables are malformed or do not fit their fixed area; one line."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Place(_Strict):
    map: Annotated[int, Field(ge=0, lt=NUM_MAPS)]
    x: Annotated[int, Field(ge=0, lt=MAP_W)]
    y: Annotated[int, Field(ge=0, lt=MAP_H)]
    facing: Annotated[int, Field(ge=0, le=3)] = 0


class Pos(_Strict):
    map: Annotated[int, Field(ge=0, lt=NUM_MAPS)]
    x: Annotated[int, Field(ge=0, lt=MAP_W)]
    y: Annotated[int, Field(ge=0, lt=MAP_H)]


class Stop(_Strict):
    map: Annotated[int, Field(ge=0, lt=NUM_MAPS)]
    row: Annotated[int, Field(ge=0, lt=MAP_H)]
    to: Place


class Sign(_Strict):
    map: Annotated[int, Field(ge=0, lt=NUM_MAPS)]
    x: Annotated[int, Field(ge=0, lt=MAP_W)]
    y: Annotated[int, Field(ge=0, lt=MAP_H)]
    text: str


class Warp(_Strict):
    map: Annotated[int, Field(ge=0, lt=NUM_MAPS)]
    x: Annotated[int, Field(ge=0, lt=MAP_W)]
    y: Annotated[int, Field(ge=0, lt=MAP_H)]
    to: Place


class Names(_Strict):
    town: Annotated[str, Field(min_length=1, max_length=12)]
    route: Annotated[str, Field(min_length=1, max_length=12)]
    city: Annotated[str, Field(min_length=1, max_length=12)]
    prof: Annotated[str, Field(min_length=1, max_length=12)]
    rival: Annotated[str, Field(min_length=1, max_length=8)]
    species: Annotated[list[Annotated[str, Field(min_length=1, max_length=NAME_SLOT - 1)]],
                       Field(min_length=3, max_length=3)]


class WorldSpec(_Strict):
    """assets/cartridge/art/world.yaml: the bundled world and the wording pool."""

    start: Place
    stop: Stop
    balls: Annotated[list[Annotated[int, Field(ge=1, le=3)]], Field(min_length=3, max_length=3)]
    actors: Annotated[list[Pos], Field(min_length=NUM_ACTORS, max_length=NUM_ACTORS)]
    signs: Annotated[list[Sign], Field(max_length=MAX_SIGNS)]
    warps: Annotated[list[Warp], Field(max_length=MAX_WARPS)]
    names: Names
    texts: dict[str, Annotated[list[str], Field(min_length=1)]]


class Tables(_Strict):
    """The decoded content of a table block (texts are rendered pages, run-time codes kept)."""

    start: Place
    stop: Stop
    balls: tuple[int, int, int]
    actors: tuple[Pos, ...]
    signs: tuple[tuple[Pos, int], ...]
    warps: tuple[Warp, ...]
    species: tuple[str, str, str]
    texts: tuple[str, ...]
    tiles: tuple[bytes, ...]
    kinds: tuple[bytes, ...]

    def text(self, text_id: str) -> str:
        return self.texts[TEXT_IDS.index(text_id)]


def load_world(path: Path = WORLD_YAML) -> WorldSpec:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = WorldSpec.model_validate(data)
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise TableError(f"{path.name}: {str(exc).splitlines()[0]}") from exc
    missing = [t for t in TEXT_IDS if t not in spec.texts]
    extra = [t for t in spec.texts if t not in TEXT_IDS]
    if missing or extra:
        raise TableError(f"{path.name}: texts missing {missing} or unknown {extra}")
    return spec


def render_page(template: str, names: Names) -> str:
    """Fill the world's names in; keep run-time placeholders as the game's control codes."""
    fixed = {"town": names.town, "route": names.route, "city": names.city, "prof": names.prof,
             "rival": names.rival}

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in fixed:
            return fixed[key]
        if key in RUNTIME:
            return RUNTIME[key]
        raise TableError(f"unknown placeholder {{{key}}} in {template!r}")

    return re.sub(r"\{(\w+)\}", sub, template)


def page_fits(page: str) -> bool:
    """At most 4 lines of at most 18 characters, with the longest creature names substituted."""
    lines = "".join("#" * RUNTIME_LONGEST.get(c, 1) if c in RUNTIME_LONGEST else c for c in page).split("\n")
    return len(lines) <= PAGE_LINES and all(len(line) <= PAGE_COLUMNS for line in lines)


def build_tables(spec: WorldSpec, tiles: list[bytes], kinds: list[bytes],
                 wording: dict[str, int] | None = None) -> Tables:
    """Tables from a world spec and its maps; `wording` picks a pool entry per message (default 0)."""
    wording = wording or {}
    texts = tuple(render_page(spec.texts[t][wording.get(t, 0)], spec.names) for t in TEXT_IDS)
    return Tables(
        start=spec.start, stop=spec.stop, balls=tuple(spec.balls),  # type: ignore[arg-type]
        actors=tuple(spec.actors),
        signs=tuple((Pos(map=s.map, x=s.x, y=s.y), TEXT_IDS.index(s.text)) for s in spec.signs),
        warps=tuple(spec.warps), species=tuple(spec.names.species),  # type: ignore[arg-type]
        texts=texts, tiles=tuple(tiles), kinds=tuple(kinds))


def check(t: Tables) -> None:
    """Raise TableError when the tables break a rule the game relies on."""
    _check_maps(t)
    if sorted(t.balls) != [1, 2, 3]:
        raise TableError("the three balls must hold the three species")
    if len(t.actors) != NUM_ACTORS or len(t.signs) > MAX_SIGNS or len(t.warps) > MAX_WARPS:
        raise TableError("too many actors, signs or warps")
    if len(t.texts) != len(TEXT_IDS):
        raise TableError(f"need {len(TEXT_IDS)} texts")
    for name in t.species:
        if not (1 <= len(name) < NAME_SLOT and NAME_CHARS.match(name)):
            raise TableError(f"bad creature name {name!r}")
    _check_texts(t)


def _check_maps(t: Tables) -> None:
    if len(t.tiles) != NUM_MAPS or len(t.kinds) != NUM_MAPS:
        raise TableError(f"need {NUM_MAPS} maps")
    for m in range(NUM_MAPS):
        if len(t.tiles[m]) != MAP_CELLS or len(t.kinds[m]) != MAP_CELLS:
            raise TableError(f"map {m} is not {MAP_W}x{MAP_H}")
        if any(k > KIND_REACH for k in t.kinds[m]):
            raise TableError(f"map {m} has an unknown cell kind")


def _check_texts(t: Tables) -> None:
    """Each text fits the dialogue box and uses only characters the font has."""
    for i, page in enumerate(t.texts):
        if not page_fits(page):
            raise TableError(f"text {TEXT_IDS[i]} does not fit the dialogue box: {page!r}")
        if any(not (c == "\n" or c in RUNTIME_LONGEST or 0x20 <= ord(c) < 0x60) for c in page):
            raise TableError(f"text {TEXT_IDS[i]} has a character the font lacks")


def encode(t: Tables) -> bytes:
    """The TABLE_SIZE-byte block for the ROM at TABLE_ADDR."""
    check(t)
    b = bytearray(TABLE_SIZE)
    b[OFF_MAGIC:OFF_MAGIC + 4] = MAGIC
    b[OFF_MAGIC + 4] = 1  # format version
    s = t.start
    b[OFF_START:OFF_START + 4] = bytes((s.map, s.x, s.y, s.facing))
    p = t.stop
    b[OFF_STOP:OFF_STOP + 6] = bytes((p.map, p.row, p.to.map, p.to.x, p.to.y, p.to.facing))
    b[OFF_BALLS:OFF_BALLS + 3] = bytes(t.balls)
    for i, a in enumerate(t.actors):
        b[OFF_ACTORS + 4 * i:OFF_ACTORS + 4 * i + 3] = bytes((a.map, a.x, a.y))
    b[OFF_SIGNS] = len(t.signs)
    for i, (pos, text) in enumerate(t.signs):
        o = OFF_SIGNS + 1 + 4 * i
        b[o:o + 4] = bytes((pos.map, pos.x, pos.y, text))
    b[OFF_WARPS] = len(t.warps)
    for i, w in enumerate(t.warps):
        o = OFF_WARPS + 1 + 7 * i
        b[o:o + 7] = bytes((w.map, w.x, w.y, w.to.map, w.to.x, w.to.y, w.to.facing))
    for i, name in enumerate(t.species, start=1):
        o = OFF_SPECIES + NAME_SLOT * i
        b[o:o + len(name)] = name.encode("ascii")
    pool = OFF_TEXT_POOL
    for i, page in enumerate(t.texts):
        raw = page.encode("ascii") + b"\0"
        if pool + len(raw) > OFF_TILES:
            raise TableError(f"the dialogue does not fit its {OFF_TILES - OFF_TEXT_POOL} bytes")
        b[OFF_TEXT_PTRS + 2 * i:OFF_TEXT_PTRS + 2 * i + 2] = (TABLE_ADDR + pool).to_bytes(2, "little")
        b[pool:pool + len(raw)] = raw
        pool += len(raw)
    for m in range(NUM_MAPS):
        b[OFF_TILES + MAP_CELLS * m:OFF_TILES + MAP_CELLS * (m + 1)] = t.tiles[m]
        b[OFF_KINDS + MAP_CELLS * m:OFF_KINDS + MAP_CELLS * (m + 1)] = t.kinds[m]
    return bytes(b)


def _cstr(b: bytes, o: int, limit: int) -> str:
    end = b.index(0, o, limit)
    return b[o:end].decode("ascii")


def decode(block: bytes) -> Tables:
    """Read a block written by `encode` (from a ROM: `decode(rom_block(rom))`)."""
    if len(block) != TABLE_SIZE or block[:4] != MAGIC or block[4] != 1:
        raise TableError("not a Parcel Quest table block (magic PQT1, version 1)")
    try:
        b = block
        start = Place(map=b[OFF_START], x=b[OFF_START + 1], y=b[OFF_START + 2], facing=b[OFF_START + 3])
        o = OFF_STOP
        stop = Stop(map=b[o], row=b[o + 1], to=Place(map=b[o + 2], x=b[o + 3], y=b[o + 4], facing=b[o + 5]))
        actors = tuple(Pos(map=b[OFF_ACTORS + 4 * i], x=b[OFF_ACTORS + 4 * i + 1], y=b[OFF_ACTORS + 4 * i + 2])
                       for i in range(NUM_ACTORS))
        signs = []
        for i in range(min(b[OFF_SIGNS], MAX_SIGNS)):
            o = OFF_SIGNS + 1 + 4 * i
            signs.append((Pos(map=b[o], x=b[o + 1], y=b[o + 2]), b[o + 3]))
        warps = []
        for i in range(min(b[OFF_WARPS], MAX_WARPS)):
            o = OFF_WARPS + 1 + 7 * i
            warps.append(Warp(map=b[o], x=b[o + 1], y=b[o + 2],
                              to=Place(map=b[o + 3], x=b[o + 4], y=b[o + 5], facing=b[o + 6])))
        species = tuple(_cstr(b, OFF_SPECIES + NAME_SLOT * i, OFF_SPECIES + NAME_SLOT * (i + 1)) for i in (1, 2, 3))
        texts = []
        for i in range(len(TEXT_IDS)):
            addr = int.from_bytes(b[OFF_TEXT_PTRS + 2 * i:OFF_TEXT_PTRS + 2 * i + 2], "little") - TABLE_ADDR
            if not OFF_TEXT_POOL <= addr < OFF_TILES:
                raise TableError(f"text {TEXT_IDS[i]} points outside the text pool")
            texts.append(_cstr(b, addr, OFF_TILES))
        tiles = tuple(bytes(b[OFF_TILES + MAP_CELLS * m:OFF_TILES + MAP_CELLS * (m + 1)]) for m in range(NUM_MAPS))
        kinds = tuple(bytes(b[OFF_KINDS + MAP_CELLS * m:OFF_KINDS + MAP_CELLS * (m + 1)]) for m in range(NUM_MAPS))
        t = Tables(start=start, stop=stop, balls=(b[OFF_BALLS], b[OFF_BALLS + 1], b[OFF_BALLS + 2]),
                   actors=actors, signs=tuple(signs), warps=tuple(warps), species=species,  # type: ignore[arg-type]
                   texts=tuple(texts), tiles=tiles, kinds=kinds)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TableError(f"malformed table block: {str(exc).splitlines()[0]}") from exc
    check(t)
    return t


def rom_block(rom: bytes) -> bytes:
    if len(rom) < TABLE_ADDR + TABLE_SIZE:
        raise TableError("ROM too small to hold the tables")
    return rom[TABLE_ADDR:TABLE_ADDR + TABLE_SIZE]


def with_block(rom: bytes, block: bytes) -> bytes:
    """A copy of `rom` with the tables replaced and both header checksums fixed."""
    from engine.emulators.romheader import gb_header_checksum

    if len(block) != TABLE_SIZE:
        raise TableError("table block has the wrong size")
    out = bytearray(rom)
    out[TABLE_ADDR:TABLE_ADDR + TABLE_SIZE] = block
    out[0x14D] = gb_header_checksum(bytes(out))
    total = (sum(out) - out[0x14E] - out[0x14F]) & 0xFFFF
    out[0x14E:0x150] = total.to_bytes(2, "big")
    return bytes(out)
