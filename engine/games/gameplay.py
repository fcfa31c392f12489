"""The gameplay information track (seed 003): besides the screen and the structured track's fields and
dialogue, the terrain and objects on screen as a grid of glyphs, the party (species, HP, status, level,
moves), the inventory and what each of the last decision's presses did.

Every part is read as the game definition's `tracks.gameplay` says (engine.games.gamedef.GameplayTrack),
and the loader has refused any part that reads the memory of a field a milestone rung reads. Nothing
else of the probe sample is copied.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.games.gamedef import (
    GameDefinition,
    GameplayTrack,
    GridTerrain,
    ItemArray,
    Party,
    PartyMoves,
    Position,
    Sample,
    Terrain,
    TilesetTerrain,
    Word,
    name_table,
)
from engine.games.tracks import ReadRange, StructuredView

DIRECTIONS = frozenset({"UP", "DOWN", "LEFT", "RIGHT"})


def _word(word: Word, read_range: ReadRange, record: int) -> int:
    if word.value is not None:
        return word.value
    at = record + word.offset if word.offset is not None else word.address
    data = read_range(at, word.width)
    if word.kind == "u8":
        return data[0]
    return data[0] << 8 | data[1] if word.kind == "u16be" else data[0] | data[1] << 8


def read_terrain(track: GameplayTrack, read_range: ReadRange, sample: Sample | None = None,
                 position: Position | None = None) -> dict | None:
    """The visible tiles (or cells) as rows of glyphs, with the sprites drawn over them, and the legend of the
    glyphs in force: the terrain's classes, the current tileset's (when the definition keys classes to the
    tileset byte) and the sprites'. A grid terrain (`kind: grid`) is read around the player at `sample`'s
    position (null while it cannot be read)."""
    t = track.terrain
    if isinstance(t, GridTerrain):
        where = None if sample is None or position is None else (sample.get(position.x), sample.get(position.y))
        return read_grid_terrain(t, read_range, where)
    glyph, legend = _glyphs(t, t.current_table(read_range))
    grid = _cells(t, [read_range(t.tilemap + r * t.stride, t.columns) for r in range(t.rows)])
    rows = [[glyph.get(tile, t.unknown) for tile in row] for row in grid]
    if t.sprites is not None:
        _draw_sprites(t, grid, rows, read_range)
        legend.update({t.sprites.glyph: t.sprites.name, t.sprites.you_glyph: "you"})
    return {"rows": ["".join(row) for row in rows], "legend": {**legend, t.unknown: "other"}}


def _glyphs(t: Terrain, table: TilesetTerrain | None) -> tuple[dict[int, str], dict[str, str]]:
    """Each tile's glyph and each glyph's class name: the terrain's classes, and the tileset entry's in force
    (its `otherwise` taking the tiles the others leave)."""
    classes = [*t.classes, *(table.classes if table else [])]
    glyph = {tile: c.glyph for c in classes for tile in c.all_tiles}
    legend = {c.glyph: c.name for c in classes}
    if table is not None and table.otherwise is not None:
        glyph.update({tile: table.otherwise.glyph for tile in table.otherwise.all_tiles if tile not in glyph})
        legend[table.otherwise.glyph] = table.otherwise.name
    return glyph, legend


def _cells(t: Terrain, tiles: list[Sequence[int]]) -> list[list[int]]:
    """Each cell's judged tile (with no cells declared, every tile is its own cell)."""
    if t.cell is None:
        return [list(row) for row in tiles]
    c = t.cell
    return [[tiles[r * c.height + c.row][k * c.width + c.column] for k in range(t.columns // c.width)]
            for r in range(t.rows // c.height)]


TILE_PIXELS = 8  # a Game Boy (Advance) background tile is 8x8 pixels


def _draw_sprites(t: Terrain, grid: list[list[int]], rows: list[list[str]], read_range: ReadRange) -> None:
    """Each sprite in use, on screen, over the cell of its pixel position (only while `shown` holds, and
    only over a map cell when `map_tiles_below` says which tiles are the map's)."""
    s = t.sprites
    if s.shown is not None and read_range(s.shown.address, 1)[0] != s.shown.value:
        return
    height, width = (t.cell.height, t.cell.width) if t.cell else (1, 1)
    data = read_range(s.table, s.slots * s.stride)
    for slot in range(s.slots):
        record = data[slot * s.stride:(slot + 1) * s.stride]
        if record[s.picture] == 0 or (s.image is not None and record[s.image] == s.off_screen):
            continue
        row = (record[s.y] + s.y_add) // TILE_PIXELS // height
        column = (record[s.x] + s.x_add) // TILE_PIXELS // width
        if not (0 <= row < len(rows) and 0 <= column < len(rows[row])):
            continue
        if s.map_tiles_below is None or grid[row][column] < s.map_tiles_below:
            rows[row][column] = s.you_glyph if slot == s.you else s.glyph


def read_grid_terrain(t: GridTerrain, read_range: ReadRange, where: tuple | None) -> dict | None:
    """The `columns` x `rows` cells around the player from the game's map grid (FireRed's VMap), read
    through its pointer as it is now: blocked where an entry's collision bits are set, outside where it is
    undefined or beyond the grid, the objects and the player drawn over it. Null when the position is
    unknown or the layout does not describe a grid inside its buffer (no map loaded yet)."""
    if where is None or None in where:
        return None
    head = bytes(read_range(t.layout, 12))
    width, height = int.from_bytes(head[0:4], "little", signed=True), int.from_bytes(head[4:8], "little", signed=True)
    grid = int.from_bytes(head[8:12], "little")
    r = t.region
    if width <= 0 or height <= 0 or not r.address <= grid <= r.address + r.size - 2 * width * height:
        return None
    left, top = int(where[0]) + t.offset - t.player_column, int(where[1]) + t.offset - t.player_row
    cells = [_grid_row(t, read_range, grid, width, left, top + row) if 0 <= top + row < height
             else [t.glyphs.outside] * t.columns for row in range(t.rows)]
    for gx, gy, glyph in _grid_objects(t, read_range):
        if 0 <= gy - top < t.rows and 0 <= gx - left < t.columns:
            cells[gy - top][gx - left] = glyph
    cells[t.player_row][t.player_column] = t.glyphs.you
    return {"rows": ["".join(c) for c in cells], "legend": _grid_legend(t)}


def _grid_row(t: GridTerrain, read_range: ReadRange, grid: int, width: int, left: int, gy: int) -> list[str]:
    """One row of the window (grid row `gy`, from grid column `left`), each entry by its collision bits."""
    g = t.glyphs
    row = [g.outside] * t.columns
    first, last = max(0, left), min(width, left + t.columns)
    if first >= last:
        return row
    data = bytes(read_range(grid + 2 * (gy * width + first), 2 * (last - first)))
    for i in range(last - first):
        entry = data[2 * i] | data[2 * i + 1] << 8
        row[first - left + i] = (g.outside if entry == t.undefined
                                 else g.blocked if entry & t.collision_mask else g.passable)
    return row


def _grid_legend(t: GridTerrain) -> dict[str, str]:
    g = t.glyphs
    legend = {g.passable: "passable", g.blocked: "blocked", g.outside: "outside the map", g.you: "you"}
    if t.objects is not None:
        legend[g.person] = "person"
        if t.objects.balls:
            legend[g.ball] = "ball"
    return legend


def _grid_objects(t: GridTerrain, read_range: ReadRange) -> list[tuple[int, int, str]]:
    """(grid x, grid y, glyph) of each active object that is not the player."""
    o = t.objects
    if o is None:
        return []
    data = bytes(read_range(o.address, o.count * o.stride))
    found = []
    for at in range(0, o.count * o.stride, o.stride):
        bits = int.from_bytes(data[at:at + 4], "little")
        if not bits >> o.active_bit & 1 or (o.player_bit is not None and bits >> o.player_bit & 1):
            continue
        gx = int.from_bytes(data[at + o.x:at + o.x + 2], "little", signed=True)
        gy = int.from_bytes(data[at + o.x + 2:at + o.x + 4], "little", signed=True)
        ball = o.graphics is not None and data[at + o.graphics] in o.balls
        found.append((gx, gy, t.glyphs.ball if ball else t.glyphs.person))
    return found


def _status(party: Party, raw: int) -> str:
    names = [s.name for s in party.status_names if raw & s.mask]
    return "/".join(names) if names else ("OK" if raw == 0 else f"#{raw}")


def read_gen3_party(party: Party, read_range: ReadRange) -> list[dict]:
    """FireRed's party: each 100-byte record decrypted (engine.battle.gen3_record); a record whose checksum
    fails (the game's bad egg) reads as such, never as a Pokémon."""
    from engine.battle.gen3_record import decode

    species_names = name_table(party.species)
    move_names = name_table(party.moves.names) if party.moves else {}
    members = []
    for slot in range(party.slots):
        decoded = decode(bytes(read_range(party.records + slot * party.stride, party.stride)))
        mon = decoded.mon
        if not decoded.checksum_ok:
            members.append({"slot": slot + 1, "species": "BAD EGG"})
            continue
        if mon.growth.species == 0:  # an empty slot (all zeros): the party ends
            break
        member: dict = {"slot": slot + 1, "species": species_names.get(mon.growth.species, f"#{mon.growth.species}"),
                        "hp": mon.stats.hp, "max_hp": mon.stats.max_hp, "level": mon.level,
                        "status": _status(party, mon.status)}
        if party.moves is not None:
            member["moves"] = [{"name": move_names.get(m, f"#{m}"), "pp": pp}
                               for m, pp in zip(mon.attacks.moves, mon.attacks.pp, strict=True) if m]
        members.append(member)
    return members


def read_party(party: Party, read_range: ReadRange) -> list[dict]:
    """The members in use, in slot order: species, HP (and max), level, status, moves (with PP)."""
    if party.encoding == "gen3":
        return read_gen3_party(party, read_range)
    species_names = name_table(party.species)
    by_species = {e.id: e.moves for e in party.species}
    move_names = name_table(party.moves.names) if party.moves else {}
    ids = read_range(party.species_list, party.slots)
    members = []
    for slot, sid in enumerate(ids):
        if sid in party.end:
            break
        if slot > 0 and any(w.address is not None for w in party.words()):
            break  # the game keeps these numbers for its first member only (a party of one)
        member = _byte_member(party, read_range, slot, sid, species_names)
        m = party.moves
        if m is not None and m.by_species:
            member["moves"] = [{"name": name} for name in by_species.get(sid, [])]
        elif m is not None:
            member["moves"] = _read_moves(m, move_names, read_range, party.records + slot * party.stride)
        members.append(member)
    return members


def _byte_member(party: Party, read_range: ReadRange, slot: int, sid: int, species_names: dict[int, str]) -> dict:
    """One member's species, HP and the max HP, level and status the definition keeps (moves apart)."""
    record = party.records + slot * party.stride
    member: dict = {"slot": slot + 1, "species": species_names.get(sid, f"#{sid}"),
                    "hp": _word(party.hp, read_range, record)}
    if party.max_hp is not None:
        member["max_hp"] = _word(party.max_hp, read_range, record)
    if party.level is not None:
        member["level"] = _word(party.level, read_range, record)
    if party.status is not None:
        member["status"] = _status(party, _word(party.status, read_range, record))
    return member


def _read_moves(m: PartyMoves, move_names: dict[int, str], read_range: ReadRange, record: int) -> list[dict]:
    """A member's moves read from its record (an empty slot, id 0, is skipped), each with its PP if kept."""
    moves = []
    for i, offset in enumerate(m.offsets):
        mid = read_range(record + offset, 1)[0]
        if mid == 0:
            continue
        move: dict = {"name": move_names.get(mid, f"#{mid}")}
        if m.pp_offsets:
            move["pp"] = read_range(record + m.pp_offsets[i], 1)[0] & m.pp_mask
        moves.append(move)
    return moves


def read_inventory(game: GameDefinition, track: GameplayTrack, read_range: ReadRange,
                   sample: Sample | None = None) -> list[dict]:
    """The bag's (item, quantity) pairs in order, up to the list's terminator. An array based on a pointer
    is read at the pointer's sampled value, and a keyed one's quantities XORed with its key field (FireRed's
    bag: src/item.c GetBagItemQuantity), both from `sample`, the probe's reading of this moment."""
    array = game.arrays[track.inventory.items]
    assert isinstance(array, ItemArray)  # the loader checked it
    names = name_table(track.inventory.names)
    wid, wq = (1 if array.id == "u8" else 2), (1 if array.quantity == "u8" else 2)
    origin = 0 if array.base is None else int((sample or {})[array.base])
    key = 0 if array.key is None else int((sample or {})[array.key]) & (0xFF if wq == 1 else 0xFFFF)
    data = read_range(origin + array.address, array.size)
    items = []
    for slot in range(array.slots):
        at = slot * array.stride
        iid = int.from_bytes(bytes(data[at:at + wid]), "little")
        if array.terminator is not None and iid == array.terminator:
            break
        if iid == 0:
            continue
        quantity = int.from_bytes(bytes(data[at + wid:at + wid + wq]), "little") ^ key
        items.append({"item": names.get(iid, f"#{iid}"), "quantity": quantity})
    return items


class GameplayView:
    """Builds the gameplay track's dict for one decision; `outcome` words one press's result."""

    def __init__(self, game: GameDefinition):
        track = game.tracks.gameplay
        assert track is not None
        self.game, self.track = game, track
        self._base = StructuredView(track)

    def dialogue(self, read_range: ReadRange) -> str | None:
        if self.track.dialogue is None:
            return None
        return self._base._decode(self.track.dialogue, read_range, self._base._table)

    def __call__(self, sample: Sample, read_range: ReadRange, results: Sequence[dict] = ()) -> dict:
        view = self._base(sample, read_range)
        t = self.track
        if t.terrain is not None:
            view["terrain"] = read_terrain(t, read_range, sample, self.game.position)
        if t.party is not None:
            view["party"] = read_party(t.party, read_range)
        if t.inventory is not None:
            view["inventory"] = read_inventory(self.game, t, read_range, sample)
        if t.outcomes is not None:
            view["action_results"] = list(results)
        return view

    def outcome(self, action: str, before: Sample, after: Sample, dialogue_before: str | None,
                dialogue_after: str | None) -> str:
        """What one press did, as seen in the definition's position, facing and menu fields and the
        dialogue box: moved, entered another map, turned, a menu or the dialogue opened, closed or
        advanced; a direction that changed none of it was blocked."""
        o, pos = self.track.outcomes, self.game.position
        where_before = (before.get(pos.map), before.get(pos.x), before.get(pos.y))
        where_after = (after.get(pos.map), after.get(pos.x), after.get(pos.y))
        said = _moves_said(where_before, where_after)
        if o.facing is not None and before.get(o.facing) != after.get(o.facing) and where_after == where_before:
            said.append("turned")
        if o.menu is not None and before.get(o.menu) != after.get(o.menu):
            names = name_table(o.menu_names)
            was, now = before.get(o.menu), after.get(o.menu)
            said.append(f"closed the {names.get(was, f'menu {was}')}" if not now
                        else f"opened the {names.get(now, f'menu {now}')}")
        if dialogue_before != dialogue_after:
            said.append("dialogue opened" if dialogue_before is None else
                        "dialogue closed" if dialogue_after is None else "dialogue advanced")
        in_menu = o.menu is not None and bool(after.get(o.menu))
        if not said:
            free = not in_menu and dialogue_after is None  # a direction in a menu or a box moves no one
            said.append("blocked" if action in DIRECTIONS and free else "no change")
        return "; ".join(said)


def _moves_said(where_before: tuple, where_after: tuple) -> list[str]:
    """Another map entered, or a move within one (empty: the position held)."""
    if where_after[0] != where_before[0]:
        return [f"entered map {where_after[0]} at ({where_after[1]},{where_after[2]})"]
    if where_after != where_before:
        return [f"moved to ({where_after[1]},{where_after[2]})"]
    return []
