#!/usr/bin/env python3
"""Generate src/gfx.c and src/gfx.h (tiles, palettes, maps, font) from art/.

Run from anywhere:  uv run python assets/gba-cartridge/tools/gen_gfx.py [OUTDIR]
The art is the GB cartridge's (assets/cartridge/art, our own drawings) plus a tall-grass tile and
tall-grass patches. Map cells become 16x16 blocks (each 8x8 drawing scaled 2x, four 4bpp tiles); the
font stays 8x8 and is indexed by FireRed's character codes (pret/pokefirered charmap.txt), the
encoding the game writes its text in. The output is deterministic and committed, so building the
ROM needs only gcc-arm-none-eabi.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHADES = {".": 1, ":": 2, "o": 3, "#": 4}
MAP_W, MAP_H = 20, 18
KINDS = {"walk": 0, "solid": 1, "reach": 2, "tall": 3}

# palette banks: 4 shades each (index 1 lightest .. 4 darkest), BGR555 from 8-bit RGB
BANKS = {
    "GREY": [(248, 248, 248), (176, 176, 176), (96, 96, 96), (16, 16, 16)],
    "GREEN": [(216, 248, 184), (128, 200, 96), (48, 120, 48), (16, 40, 16)],
    "BLUE": [(200, 232, 248), (104, 168, 232), (40, 88, 184), (16, 24, 72)],
    "RED": [(248, 216, 200), (224, 112, 88), (160, 48, 40), (56, 16, 16)],
    "WOOD": [(248, 232, 200), (216, 176, 120), (144, 96, 48), (56, 32, 16)],
    "PLAYER": [(248, 240, 224), (240, 184, 152), (216, 48, 48), (24, 24, 40)],
    "PROF": [(248, 248, 248), (208, 200, 184), (120, 112, 104), (32, 32, 32)],
    "RIVAL": [(248, 240, 224), (240, 184, 152), (112, 72, 192), (24, 16, 48)],
    "SPROUTLE": [(248, 248, 240), (144, 216, 152), (56, 152, 96), (16, 48, 32)],
    "EMBERPUP": [(248, 248, 240), (248, 176, 96), (224, 88, 40), (64, 24, 8)],
    "DRIPLET": [(248, 248, 240), (136, 200, 248), (48, 112, 216), (16, 32, 80)],
    "PIPWING": [(248, 248, 240), (216, 192, 144), (152, 112, 64), (48, 32, 16)],
    "NIBBLET": [(248, 248, 240), (232, 216, 120), (184, 144, 40), (64, 48, 8)],
    "FLOWER": [(248, 248, 248), (248, 176, 200), (208, 72, 120), (48, 96, 48)],
    "WALL": [(248, 240, 216), (216, 200, 168), (152, 136, 104), (64, 56, 40)],
    "TEXT": [(248, 248, 248), (200, 200, 208), (104, 104, 120), (40, 40, 56)],
}
BANK_IDS = {name: i for i, name in enumerate(BANKS)}
TILE_BANK = {
    "GRASS": "GREEN", "TREE": "GREEN", "TALLGRASS": "GREEN", "PLANT": "GREEN",
    "WATER": "BLUE", "FLOWER": "FLOWER",
    "ROOF_T": "RED", "ROOF_M": "RED", "ROOF_TL": "RED", "ROOF_TR": "RED", "ROOF_L": "RED", "ROOF_R": "RED",
    "WALL": "WALL", "WINDOW": "BLUE", "WALLPAPER": "WALL", "WALLBASE": "WALL",
    "DOOR": "WOOD", "FLOOR": "WOOD", "BOOKSHELF": "WOOD", "BED_T": "BLUE", "BED_B": "BLUE",
    "TABLE_TOP": "WOOD", "TABLE_FRONT": "WOOD", "STAIRS": "WOOD", "MAT": "RED", "COUNTER": "WOOD",
    "SHELF": "WOOD", "FENCE": "WOOD", "SIGN": "WOOD", "BALL": "RED",
    "PLAYER_D": "PLAYER", "PLAYER_U": "PLAYER", "PLAYER_L": "PLAYER", "PLAYER_R": "PLAYER",
    "PROF": "PROF", "RIVAL": "RIVAL", "MOM": "RED", "CLERK": "BLUE", "MAN": "WOOD", "GIRL": "FLOWER",
}
# the sprites main.c draws over the map (named metatiles in gfx.h)
SPRITES = ["PLAYER_D", "PLAYER_U", "PLAYER_L", "PLAYER_R", "PROF", "RIVAL", "MOM", "CLERK", "MAN", "GIRL",
           "BALL", "BLANK"]
# FireRed character codes of the font's glyphs (pret/pokefirered charmap.txt); lower-case letters
# (0xD5..0xEE) are drawn with the upper-case glyphs
CODES = {" ": 0x00, "!": 0xAB, "?": 0xAC, ".": 0xAD, "-": 0xAE, ",": 0xB8, "'": 0xB4, ":": 0xF0,
         "/": 0xBA, "(": 0x5C, ")": 0x5D, "+": 0x2E, "&": 0x2D, ">": 0xEF}
for i in range(10):
    CODES[str(i)] = 0xA1 + i
for i in range(26):
    CODES[chr(65 + i)] = 0xBB + i


def blocks(path: Path) -> list[tuple[str, str, list[str]]]:
    """Split an art file into (keyword, name, rows) blocks."""
    out: list[tuple[str, str, list[str]]] = []
    cur = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.rstrip()
        if line.startswith("#") and cur is None:
            continue
        if not line:
            cur = None
            continue
        head = line.split(" ", 1)
        if cur is None:
            if head[0] in ("tile", "image", "char", "full", "map"):
                cur = (head[0], head[1], [])
                out.append(cur)
            elif head[0] == "legend":
                out.append(("legend", line, []))
            else:
                raise SystemExit(f"{path.name}: unexpected line {line!r}")
        else:
            cur[2].append(line)
    return out


class Tiles:
    def __init__(self) -> None:
        self.data: list[bytes] = [bytes(32)]  # tile 0: transparent
        self.index: dict[bytes, int] = {bytes(32): 0}

    def add(self, pixels: list[list[int]]) -> int:
        """An 8x8 block of palette indices -> tile number (identical tiles shared)."""
        raw = bytearray()
        for row in pixels:
            for x in range(0, 8, 2):
                raw.append(row[x] | (row[x + 1] << 4))
        key = bytes(raw)
        if key not in self.index:
            self.index[key] = len(self.data)
            self.data.append(key)
        return self.index[key]


def shade_rows(rows: list[str]) -> list[list[int]]:
    return [[SHADES[c] for c in r] for r in rows]


def scaled_quads(px: list[list[int]]) -> list[list[list[int]]]:
    """An 8x8 drawing scaled 2x -> its four 8x8 quarters (TL, TR, BL, BR)."""
    big = [[px[y // 2][x // 2] for x in range(16)] for y in range(16)]
    return [[row[qx:qx + 8] for row in big[qy:qy + 8]] for qy in (0, 8) for qx in (0, 8)]


def glyph_rows(kw: str, rows: list[str]) -> list[str]:
    if kw == "char":
        assert len(rows) == 7 and all(len(r) == 5 for r in rows), rows
        return ["." + r + ".." for r in rows] + ["........"]
    return rows


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "src"
    tiles = Tiles()
    art = {name: shade_rows(rows) for kw, name, rows in blocks(ROOT / "art" / "tiles.txt") if kw == "tile"}
    art["BLANK"] = [[1] * 8 for _ in range(8)]
    images = {name: rows for kw, name, rows in blocks(ROOT / "art" / "tiles.txt") if kw == "image"}
    glyphs = {name: shade_rows(glyph_rows(kw, rows)) for kw, name, rows in blocks(ROOT / "art" / "font.txt")}

    # metatiles: one per art tile (16x16), one per map letter
    meta: list[tuple[list[int], int, int]] = []  # (4 tiles, bank, kind)
    meta_of: dict[str, int] = {}

    def metatile(key: str, px: list[list[int]], bank: str, kind: int) -> int:
        if key not in meta_of:
            meta_of[key] = len(meta)
            meta.append(([tiles.add(q) for q in scaled_quads(px)], BANK_IDS[bank], kind))
        return meta_of[key]

    for name in SPRITES:
        metatile(name, art[name], TILE_BANK.get(name, "GREY"), 1)

    legend: dict[str, tuple[str, int]] = {}
    maps: list[tuple[str, list[int]]] = []
    for kw, name, rows in blocks(ROOT / "art" / "maps.txt"):
        if kw == "legend":
            _, ch, tile, kind = name.split()
            legend[ch] = (tile, KINDS[kind])
            continue
        assert len(rows) == MAP_H and all(len(r) == MAP_W for r in rows), name
        cells = []
        for r in rows:
            for ch in r:
                if ch in legend:
                    tile, kind = legend[ch]
                    cells.append(metatile(f"{tile}/{kind}", art[tile], TILE_BANK.get(tile, "GREY"), kind))
                else:  # a letter on a building: its glyph, solid, in the wall's colours
                    cells.append(metatile(f"glyph {ch}", glyphs[ch], "WALL", 1))
        maps.append((name, cells))

    # the 8x8 font (bank TEXT) and the text box frame
    font = [0] * 256
    glyphs[" "] = [[1] * 8 for _ in range(8)]
    for ch, code in CODES.items():
        font[code] = tiles.add(glyphs[ch])
    for i in range(26):
        font[0xD5 + i] = font[0xBB + i]
    more = tiles.add(glyphs["^"])
    box = {n: tiles.add(art[n]) for n in ("BOX_TL", "BOX_T", "BOX_TR", "BOX_L", "BOX_R", "BOX_BL", "BOX_B", "BOX_BR")}
    paper = tiles.add([[1] * 8 for _ in range(8)])
    hp = [tiles.add(art[f"HP_{i}"]) for i in range(9)] + [tiles.add(art["HP_L"]), tiles.add(art["HP_R"])]

    # the sprites again as OBJ tiles (1D mapping: TL, TR, BL, BR), white ('.') transparent
    obj_tiles: list[bytes] = []
    obj_of: dict[str, int] = {}
    for name in SPRITES[:-1]:
        obj_of[name] = len(obj_tiles)
        px = [[0 if v == 1 else v for v in row] for row in art[name]]
        for q in scaled_quads(px):
            obj_tiles.append(bytes(b for row in q for b in (row[x] | (row[x + 1] << 4) for x in range(0, 8, 2))))

    # creature pictures: 32x32 scaled 2x -> 8x8 tiles, row-major
    pictures: dict[str, int] = {}
    for name, rows in images.items():
        px = shade_rows(rows)
        big = [[px[y // 2][x // 2] for x in range(64)] for y in range(64)]
        first = None
        for ty in range(8):
            for tx in range(8):
                block = [row[tx * 8:tx * 8 + 8] for row in big[ty * 8:ty * 8 + 8]]
                # pictures keep their own tiles (not shared) so a picture is 64 consecutive tiles
                tiles.data.append(bytes(b for row in block for b in
                                        (row[x] | (row[x + 1] << 4) for x in range(0, 8, 2))))
                first = len(tiles.data) - 1 if first is None else first
        pictures[name] = first
    assert len(tiles.data) <= 1024, len(tiles.data)

    c = ["/* generated by tools/gen_gfx.py from art/: do not edit */", '#include "gfx.h"', ""]
    pal = []
    for shades in BANKS.values():
        pal += [0] + [(r >> 3) | ((g >> 3) << 5) | ((b >> 3) << 10) for r, g, b in shades] + [0] * 11
    c.append(f"const u16 gfx_palette[{len(pal)}] = {{")
    c += ["    " + ", ".join(f"0x{v:04X}" for v in pal[i:i + 16]) + "," for i in range(0, len(pal), 16)]
    c.append("};")
    words = []
    for t in tiles.data:
        words += [int.from_bytes(t[i:i + 4], "little") for i in range(0, 32, 4)]
    c.append(f"const u32 gfx_tiles[{len(words)}] = {{")
    c += ["    " + ", ".join(f"0x{w:08X}" for w in words[i:i + 8]) + "," for i in range(0, len(words), 8)]
    c.append("};")
    ow = []
    for tt in obj_tiles:
        ow += [int.from_bytes(tt[i:i + 4], "little") for i in range(0, 32, 4)]
    c.append(f"const u32 gfx_obj_tiles[{len(ow)}] = {{")
    c += ["    " + ", ".join(f"0x{w:08X}" for w in ow[i:i + 8]) + "," for i in range(0, len(ow), 8)]
    c.append("};")
    c.append(f"const u16 gfx_meta[{len(meta)}][4] = {{")
    c += [f"    {{{', '.join(f'0x{t | (b << 12):04X}' for t in ts)}}}," for ts, b, _ in meta]
    c.append("};")
    c.append(f"const u8 gfx_meta_kind[{len(meta)}] = {{{', '.join(str(k) for _, _, k in meta)}}};")
    c.append(f"const u8 gfx_maps[{len(maps)}][{MAP_W * MAP_H}] = {{")
    for name, cells in maps:
        c.append(f"    /* {name} */ {{")
        c += ["        " + ", ".join(str(v) for v in cells[i:i + MAP_W]) + "," for i in range(0, len(cells), MAP_W)]
        c.append("    },")
    c.append("};")
    text_bank = BANK_IDS["TEXT"] << 12
    c.append("const u16 gfx_font[256] = {")
    entries = [(t | text_bank) if t else 0 for t in font]
    c += ["    " + ", ".join(f"0x{v:04X}" for v in entries[i:i + 16]) + "," for i in range(0, 256, 16)]
    c.append("};")
    c.append("")

    h = ["/* generated by tools/gen_gfx.py from art/: do not edit */", "#ifndef GFX_H", "#define GFX_H",
         '#include "gba.h"', "",
         f"#define GFX_TILE_COUNT {len(tiles.data)}", f"#define GFX_PALETTE_LEN {len(pal)}",
         f"#define MAP_W {MAP_W}", f"#define MAP_H {MAP_H}", f"#define MAP_COUNT {len(maps)}",
         "#define KIND_WALK 0", "#define KIND_SOLID 1", "#define KIND_REACH 2", "#define KIND_TALL 3", ""]
    h += [f"#define META_{n} {meta_of[n]}" for n in SPRITES]
    h += [f"#define OBJ_{n} {v}" for n, v in obj_of.items()]
    h += [f"#define GFX_OBJ_TILE_COUNT {len(obj_tiles)}"]
    h += [f"#define MAP_{name} {i}" for i, (name, _) in enumerate(maps)]
    h += [f"#define TILE_BOX_{k[4:]} (0x{v:03X} | 0x{text_bank:04X})" for k, v in box.items()]
    h += [f"#define TILE_PAPER (0x{paper:03X} | 0x{text_bank:04X})",
          f"#define TILE_MORE (0x{more:03X} | 0x{text_bank:04X})"]
    h += [f"#define TILE_HP_{i} (0x{t:03X} | 0x{text_bank:04X})" for i, t in enumerate(hp[:9])]
    h += [f"#define TILE_HP_L (0x{hp[9]:03X} | 0x{text_bank:04X})",
          f"#define TILE_HP_R (0x{hp[10]:03X} | 0x{text_bank:04X})"]
    h += [f"#define PIC_{n} {t}" for n, t in pictures.items()]
    h += [f"#define BANK_{n} {i}" for n, i in BANK_IDS.items()]
    h += ["", "extern const u16 gfx_palette[GFX_PALETTE_LEN];", "extern const u32 gfx_tiles[GFX_TILE_COUNT * 8];",
          "extern const u32 gfx_obj_tiles[GFX_OBJ_TILE_COUNT * 8];",
          f"extern const u16 gfx_meta[{len(meta)}][4];", f"extern const u8 gfx_meta_kind[{len(meta)}];",
          "extern const u8 gfx_maps[MAP_COUNT][MAP_W * MAP_H];", "extern const u16 gfx_font[256];", "", "#endif", ""]
    # the Emerald build's course map: the same blocks (none may be new: gfx.c stays as it is)
    course = []
    for kw, name, rows in blocks(ROOT / "art" / "course.txt"):
        assert kw == "map" and len(rows) == MAP_H and all(len(r) == MAP_W for r in rows), name
        cells = []
        for r in rows:
            for ch in r:
                tile, kind = legend[ch]
                key = f"{tile}/{kind}"
                if key not in meta_of:
                    raise SystemExit(f"course.txt: block {key} is not used by maps.txt")
                cells.append(meta_of[key])
        course.append((name, cells))
    k = ["/* generated by tools/gen_gfx.py from art/course.txt: do not edit */", '#include "gfx.h"', "",
         f"const u8 gfx_course[{MAP_W * MAP_H}] = {{"]
    k += ["    " + ", ".join(str(v) for v in course[0][1][i:i + MAP_W]) + "," for i in range(0, MAP_W * MAP_H, MAP_W)]
    k += ["};", ""]
    out.mkdir(parents=True, exist_ok=True)
    (out / "course_gfx.c").write_text("\n".join(k), encoding="utf-8")
    (out / "gfx.c").write_text("\n".join(c), encoding="utf-8")
    (out / "gfx.h").write_text("\n".join(h), encoding="utf-8")
    print(f"{len(tiles.data)} tiles, {len(meta)} blocks, {len(maps)} maps -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
