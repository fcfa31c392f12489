"""Declarative game definitions: the RAM a probe reads and the milestone ladder.

A definition is data (YAML under assets/games/); this module is its schema and the
condition evaluator. Conditions are structured, never evaluated as code.

What a probe can read (format v2; the agreed spec is repeated here in brief):

  pointers:  name -> {address, source}: a little-endian pointer (32-bit on gba, 16-bit on gb/gbc)
             read afresh at every sample; its value is in the sample under its own name.
  arrays:    name -> one of
             {kind: flags, [base], address, bytes}        flag i = bit i%8 of byte address + i//8
             {kind: vars, [base], address, start, count}  var v = u16le at address + 2*(v - start)
             {kind: items, [base], address, slots, stride, id: u8|u16le, quantity: u8|u16le,
              [terminator], [key]}                        (id, quantity) pairs, one per `stride` bytes
             {kind: records, [base], address, slots, stride, [count]}  `slots` records of `stride`
                                                          bytes (a party); `count` a field: how many are in use
  fields:    name -> {address, [base], kind, [length]}    a value in memory (kind u8, u16le, u32le,
             s8, s16le, s32le or bytes; with `base` the address is an offset from that pointer's value)
             name -> {flag|var|item: ARRAY, index: N}     a value derived from an array
             name -> {highest: RECORDS, index: OFFSET}    the highest u8 at OFFSET in the records in use
                                                          (the party's highest level; 0 with none)

A milestone is `required` (the default) or optional (`required: false`); see engine.games.ladder for
what that changes.

controls:    starter | text_speed | battle_style -> {field, [mask], values: {NAME: N}}: where the
             start state holds a control the manifest fixes (seed 000), so the preflight can check it
             (engine.games.controls). The value is (field & mask) >> (the mask's lowest set bit).
start_fields: fields that must read the same after every trial's restore as in the preflight's probe
             (default: the position, progress and control fields).
instruction: what the agent is told to do when the ladder decides (each goal has its own): the objective
             as the player sees it, sent alike to every condition; one naming a probe field is refused.
"""

import re
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from engine.battle.battle import BattleAdapter
from engine.battle.gen3_battle import Gen3BattleAdapter

Sample = dict[str, "int | list[int]"]


def _record_kind(value) -> str:
    """A battle section's record kind: `party.records` (gen3), or byte fields when it names none."""
    party = value.get("party") if isinstance(value, dict) else getattr(value, "party", None)
    kind = party.get("records") if isinstance(party, dict) else getattr(party, "records", None)
    return "gen3" if kind == "gen3" else "bytes"


Name = Annotated[str, Field(min_length=1, max_length=64)]
Text = Annotated[str, Field(max_length=500)]


def _one_paragraph(value: str) -> str:
    # The instruction is sent verbatim to every agent (TASK_LINE): plain text on one line.
    if value != value.strip() or any(not ch.isprintable() for ch in value):
        raise ValueError("must be one line of printable text, without leading or trailing spaces")
    return value


# What the agent is told to do (the objective, in the game's own words; never a hidden-state fact).
Instruction = Annotated[str, Field(min_length=1, max_length=1000), AfterValidator(_one_paragraph)]
# How it is told: the same line opens a model's system prompt and the MCP server's instructions.
TASK_LINE = "Your task in this game: {instruction}\n\n"
Address = Annotated[int, Field(ge=0, le=0xFFFFFFFF)]
Value = Annotated[int, Field(ge=-(2**31), le=0xFFFFFFFF)]  # what a probed field can hold (s32le .. u32le)
ADDRESS_SPACE = {"gb": 0x10000, "gbc": 0x10000, "gba": 0x1_0000_0000}
POINTER_WIDTH = {"gb": 2, "gbc": 2, "gba": 4}
WIDTHS = {"u8": 1, "s8": 1, "u16le": 2, "s16le": 2, "u32le": 4, "s32le": 4}
Presses = Annotated[int, Field(ge=1, le=10_000_000)]
SIGNED = frozenset({"s8", "s16le", "s32le"})


class _Strict(BaseModel):
    # strict: `true` is not a number and "12" is not 12
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Pointer(_Strict):
    address: Address
    source: Text | None = None


class FlagArray(_Strict):
    kind: Literal["flags"]
    base: Name | None = None  # a pointer name: then `address` is an offset from its value
    address: Address
    bytes: Annotated[int, Field(ge=1, le=65536)]
    source: Text | None = None

    @property
    def size(self) -> int:
        return self.bytes


class VarArray(_Strict):
    kind: Literal["vars"]
    base: Name | None = None
    address: Address
    start: Annotated[int, Field(ge=0, le=0xFFFF)] = 0
    count: Annotated[int, Field(ge=1, le=65536)]
    source: Text | None = None

    @property
    def size(self) -> int:
        return 2 * self.count


class ItemArray(_Strict):
    kind: Literal["items"]
    base: Name | None = None
    address: Address
    slots: Annotated[int, Field(ge=1, le=4096)]
    stride: Annotated[int, Field(ge=2, le=256)]
    id: Literal["u8", "u16le"] = "u8"
    quantity: Literal["u8", "u16le"] = "u8"  # right after the id
    terminator: Annotated[int, Field(ge=0, le=0xFFFF)] | None = None  # an id that ends the list
    key: Name | None = None  # a numeric field XORed (masked to the quantity's width) into each quantity
    source: Text | None = None

    @property
    def size(self) -> int:
        return self.slots * self.stride

    @model_validator(mode="after")
    def _fits(self) -> "ItemArray":
        if WIDTHS[self.id] + WIDTHS[self.quantity] > self.stride:
            raise ValueError(f"stride {self.stride} is smaller than an id ({self.id}) and a quantity "
                             f"({self.quantity})")
        if self.terminator is not None and self.terminator > (0xFF if self.id == "u8" else 0xFFFF):
            raise ValueError(f"terminator 0x{self.terminator:X} does not fit an id of kind {self.id}")
        return self


class RecordArray(_Strict):
    """Fixed-size records (a party's Pokémon structs); only the first `count` (a field) are in use."""

    kind: Literal["records"]
    base: Name | None = None
    address: Address
    slots: Annotated[int, Field(ge=1, le=256)]
    stride: Annotated[int, Field(ge=1, le=4096)]
    count: Name | None = None  # a number field holding how many records are in use; absent: all
    source: Text | None = None

    @property
    def size(self) -> int:
        return self.slots * self.stride


Array = Annotated[FlagArray | VarArray | ItemArray | RecordArray, Field(discriminator="kind")]
DERIVED = ("flag", "var", "item", "highest")
ARRAY_KIND = {"flag": "flags", "var": "vars", "item": "items", "highest": "records"}


class RamField(_Strict):
    """A value in memory (address, with base: an offset from a pointer) or one derived from an
    array (flag, var or item, with index)."""

    address: Address | None = None
    base: Name | None = None
    kind: Literal["u8", "u16le", "u32le", "s8", "s16le", "s32le", "bytes"] = "u8"
    length: Annotated[int, Field(ge=1, le=256)] = 1
    flag: Name | None = None  # a flags array: the value is 0 or 1
    var: Name | None = None  # a vars array: the u16 value
    item: Name | None = None  # an items array: the quantity held (decrypted), 0 when absent
    highest: Name | None = None  # a records array: the highest u8 at `index` among the records in use
    index: Annotated[int, Field(ge=0, le=0xFFFF)] | None = None  # flag number, var number, item id or offset
    source: Text | None = None  # where the address comes from (disassembly symbol, our RAM.md)

    @property
    def width(self) -> int:
        return WIDTHS.get(self.kind, self.length)

    @property
    def derived_from(self) -> tuple[str, str] | None:
        """(flag|var|item|highest, array name) for a derived field, None for one read at an address."""
        for how in DERIVED:
            if (array := getattr(self, how)) is not None:
                return how, array
        return None

    @property
    def is_bytes(self) -> bool:
        return self.kind == "bytes" and self.derived_from is None

    @model_validator(mode="after")
    def _one_source(self) -> "RamField":
        derived = [k for k in DERIVED if getattr(self, k) is not None]
        if len(derived) > 1:
            raise ValueError(f"a field is one of flag, var, item or highest, not {' and '.join(derived)}")
        if derived:
            # Judged by value, not by which keys were given: a full dump of a derived field carries
            # every default (address None, kind u8, length 1), and must validate again (round-trip).
            mixed = sorted(k for k in ("address", "base", "kind", "length")
                           if getattr(self, k) != type(self).model_fields[k].default)
            if mixed:
                raise ValueError(f"a {derived[0]} field takes an array and an index; it cannot also have "
                                 f"{', '.join(mixed)}")
            if self.index is None:
                raise ValueError(f"a {derived[0]} field needs an index")
            return self
        if self.address is None:
            raise ValueError("a field needs an address (a value in memory) or one of flag, var, item, highest "
                             "(with index)")
        if self.index is not None:
            raise ValueError("index applies only to flag, var, item and highest fields")
        if self.kind != "bytes" and self.length != 1:
            raise ValueError("length applies only to kind 'bytes'")
        return self


def every(tests: list[Callable]) -> Callable:
    """`lambda x: all(t(x) for t in tests)` for tests that return bools, without a generator per call
    (the ladder runs these after every action)."""
    tests = list(tests)
    if not tests:
        return lambda x: True
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:
        first, second = tests
        return lambda x: first(x) and second(x)

    def all_of(x) -> bool:
        for test in tests:
            if not test(x):
                return False
        return True

    return all_of


def _bit_set(f: str, b: int) -> Callable[[Sample], bool]:
    m = 1 << b
    return lambda s: bool(s[f] & m)


def _bit_clear(f: str, b: int) -> Callable[[Sample], bool]:
    m = 1 << b
    return lambda s: not s[f] & m


# A condition's value tests, each made into one closure on the sample with its operand bound
# (Condition.compile): the ladder runs them after every action.
_SAMPLE_TESTS: dict[str, Callable[[str, object], Callable[[Sample], bool]]] = {
    "eq": lambda f, x: lambda s: s[f] == x,
    "ne": lambda f, x: lambda s: s[f] != x,
    "ge": lambda f, x: lambda s: s[f] >= x,
    "le": lambda f, x: lambda s: s[f] <= x,
    "bit_set": _bit_set,
    "bit_clear": _bit_clear,
}


class Condition(_Strict):
    """One test on one probed field; every key given must hold."""

    field: Name
    eq: Value | None = None
    ne: Value | None = None
    ge: Value | None = None
    le: Value | None = None
    bit_set: Annotated[int, Field(ge=0, le=31)] | None = None
    bit_clear: Annotated[int, Field(ge=0, le=31)] | None = None
    contains: Annotated[int, Field(ge=0, le=255)] | None = None  # a byte of a `bytes` field
    lacks: Annotated[int, Field(ge=0, le=255)] | None = None

    @model_validator(mode="after")
    def _has_test(self) -> "Condition":
        tests = self.model_dump(exclude={"field"}, exclude_none=True)
        if not tests:
            raise ValueError(f"condition on {self.field!r} names no test (eq, ne, ge, le, bit_set, ...)")
        return self

    def compile(self) -> Callable[[Sample], bool]:
        """The same test as `holds`, as one closure with the dispatch decided once."""
        f = self.field
        if self.contains is not None or self.lacks is not None:
            contains, lacks = self.contains, self.lacks
            return lambda s: (contains is None or contains in s[f]) and (lacks is None or lacks not in s[f])
        return every([make(f, value) for key, make in _SAMPLE_TESTS.items()
                      if (value := getattr(self, key)) is not None])

    def holds(self, sample: Sample) -> bool:
        value = sample[self.field]
        if isinstance(value, list):
            return self._bytes_hold(value)
        return self._number_holds(value)

    def _bytes_hold(self, value: list[int]) -> bool:
        if self.contains is not None and self.contains not in value:
            return False
        return not (self.lacks is not None and self.lacks in value)

    def _number_holds(self, value: int) -> bool:
        if self.eq is not None and value != self.eq:
            return False
        if self.ne is not None and value == self.ne:
            return False
        if self.ge is not None and value < self.ge:
            return False
        if self.le is not None and value > self.le:
            return False
        if self.bit_set is not None and not (value >> self.bit_set) & 1:
            return False
        return not (self.bit_clear is not None and (value >> self.bit_clear) & 1)


class MilestoneDef(_Strict):
    id: Name
    name: Annotated[str, Field(max_length=200)]
    points: Annotated[int, Field(ge=0, le=1_000_000)]
    required: bool = True  # false: an optional rung (success does not need it; see engine.games.ladder)
    all: Annotated[list[Condition], Field(min_length=1, max_length=64)]

    def holds(self, sample: Sample) -> bool:
        return all(c.holds(sample) for c in self.all)

    def compile(self) -> Callable[[Sample], bool]:
        return every([c.compile() for c in self.all])


class GoalDef(_Strict):
    """A goal a run may choose instead of the ladder's final rung (engine.games.goals: the rules)."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    instruction: Instruction  # what the agent is told when a run chooses this goal (`--goal ID`)
    counts: Annotated[list[Name], Field(min_length=1, max_length=16)]  # numeric: their sum must rise
    owned: Name  # a bytes field: the owned bitfield; a flag newly set names the species
    # how `owned` names species: bits of a bitfield (bit i of byte j: 8j+i+1, Pokédex flags), or the
    # ids it lists (a species list such as a party's; 0 is an empty slot)
    owned_kind: Literal["bitfield", "ids"] = "bitfield"
    all: Annotated[list[Condition], Field(max_length=64)] = []  # must hold too
    room: Annotated[list[Condition], Field(max_length=64)] = []  # must hold at the start
    source: Text | None = None


CONTROL_NAMES = ("starter", "text_speed", "battle_style")  # the manifest's game.<name>
ControlName = Literal["starter", "text_speed", "battle_style"]


class ControlDef(_Strict):
    """Where the start state keeps a control the manifest fixes, and how its values are encoded."""

    field: Name
    mask: Annotated[int, Field(ge=1, le=0xFFFFFFFF)] | None = None  # the bits holding it (a bitfield)
    values: Annotated[dict[Annotated[str, Field(min_length=1, max_length=64)], Value],
                      Field(min_length=1, max_length=256)]
    source: Text | None = None

    def decode(self, raw: int) -> int:
        if self.mask is None:
            return raw
        return (raw & self.mask) >> ((self.mask & -self.mask).bit_length() - 1)

    def value_for(self, name: str) -> int | None:
        """The encoding of a manifest value (names compare without case), None when unknown."""
        return next((v for k, v in self.values.items() if k.casefold() == name.casefold()), None)

    def name_of(self, value: int) -> str | None:
        return next((k for k, v in self.values.items() if v == value), None)


class Position(_Strict):
    map: Name
    x: Name
    y: Name


class RomIdentity(_Strict):
    """One ROM dump a definition is for, as its header and public dump databases identify it."""

    name: Annotated[str, Field(min_length=1, max_length=200)]  # a human label
    title: Annotated[str, Field(max_length=16)]  # the header title as stored, trailing NULs trimmed
    code: Annotated[str, Field(min_length=1, max_length=4)] | None = None  # GBA game code (or a CGB code)
    revision: Annotated[int, Field(ge=0, le=255)]  # GB 0x14C mask ROM version; GBA 0xBC software version
    header_checksum: Annotated[int, Field(ge=0, le=255)]  # GB 0x14D; GBA complement check 0xBD
    sha1: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]  # of the whole file
    source: Annotated[str, Field(min_length=1, max_length=500)]  # where the SHA-1 comes from


class ConformanceBuild(_Strict):
    """An open cartridge build that ran this definition unchanged (issue 29's conformance record).

    It says where the definition's mechanisms (pointers, arrays, the XOR-keyed bag, party records,
    the ladder) have run on a real ROM in a real emulator: a ROM written from scratch that keeps its
    state where the commercial game does, at the addresses the definition cites. It is NOT a check
    on the commercial game: `verified` stays false until a real dump has passed the real-ROM test.
    The ROM check accepts this exact ROM (by SHA-256) and labels it as a conformance build."""

    build: Annotated[str, Field(min_length=1, max_length=200)]  # e.g. "Parcel Quest Advance (FireRed layout)"
    rom: Annotated[str, Field(min_length=1, max_length=200)]  # where it lives, e.g. bundled:parcel-quest-advance.gba
    rom_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{7,40}$")]  # the git commit of the source it was built from
    ran: Annotated[str, Field(min_length=1, max_length=500)]  # what ran through the definition, and which test


class RequiredBacktrack(_Strict):
    """A return the task requires (seed 000: Viridian back to Pallet): transitions whose maps before and
    after all lie in {from_map, to_map, *via} are never repetition while the ladder is inside the window
    (`after` reached, `until` not yet; either may be omitted)."""

    from_map: Value
    to_map: Value
    via: Annotated[list[Value], Field(max_length=256)] = []
    after: Name | None = None
    until: Name | None = None

    @property
    def maps(self) -> frozenset[int]:
        return frozenset({self.from_map, self.to_map, *self.via})

    def applies(self, reached) -> bool:
        return (self.after is None or self.after in reached) and (self.until is None or self.until not in reached)


class LongHorizon(_Strict):
    """Seed 002's long-horizon scorer, with its constants from the definition (sessions.scoring):
    progress = 70 m / required_milestones, speed = 40 log2(1 + reference_hours / t),
    discipline = 10 clamp((level_zero - L) / (level_zero - level_full), 0, 1), and F = 1 only when
    `final_milestone` is reached within budget_hours of active play."""

    required_milestones: Annotated[int, Field(ge=1, le=100_000)] | None = None  # default: the required rungs
    reference_hours: Annotated[float, Field(gt=0, le=100_000)] = 20.0
    budget_hours: Annotated[float, Field(gt=0, le=100_000)] = 40.0
    level_field: Name | None = None  # the highest party level, probed (discipline is null without it)
    level_full: Annotated[int, Field(ge=0, le=1_000_000)] = 60  # at or below: all 10 discipline points
    level_zero: Annotated[int, Field(ge=1, le=1_000_000)] = 100  # at or above: none
    final_milestone: Name | None = None  # default: the ladder's final rung

    @model_validator(mode="after")
    def _levels(self) -> "LongHorizon":
        if self.level_zero <= self.level_full:
            raise ValueError("long_horizon: level_zero must be above level_full")
        return self


class Glyphs(_Strict):
    """A run of the game's character map: tile `first` shows chars[0], first + 1 chars[1], ... (a
    string, one character a tile, or a list, for tiles that show more than one: Red's 'd, 's, ...)"""

    first: Annotated[int, Field(ge=0, le=0xFFFF)]
    chars: Annotated[str, Field(min_length=1, max_length=256)] | Annotated[
        list[Annotated[str, Field(min_length=1, max_length=8)]], Field(min_length=1, max_length=256)]


class ShownTile(_Strict):
    column: Annotated[int, Field(ge=0, le=255)]
    row: Annotated[int, Field(ge=0, le=255)]
    tile: Annotated[int, Field(ge=0, le=0xFFFF)]


class Dialogue(_Strict):
    """Where on-screen dialogue text is, and how to read it: the dialogue window's text rows in the
    background tilemap (VRAM, or a game's own copy of the screen's tiles in RAM), each tile index
    turned into a character by the game's character map."""

    kind: Literal["tilemap"] = "tilemap"
    tilemap: Address  # the background map's first byte (gb: 0x9800)
    stride: Annotated[int, Field(ge=1, le=1024)] = 32  # tile indices per tilemap row
    rows: Annotated[list[Annotated[int, Field(ge=0, le=255)]], Field(min_length=1, max_length=32)]
    first_column: Annotated[int, Field(ge=0, le=255)]
    last_column: Annotated[int, Field(ge=0, le=255)]
    # the window is on screen only while this tile is at that place (its frame's corner): else the
    # dialogue is null
    shown_tile: ShownTile | None = None
    charmap: Annotated[list[Glyphs], Field(min_length=1, max_length=64)]
    unmapped: Annotated[str, Field(max_length=1)] = "?"  # what a tile outside the charmap reads as

    @model_validator(mode="after")
    def _fits(self) -> "Dialogue":
        if self.last_column < self.first_column:
            raise ValueError("dialogue: last_column comes before first_column")
        if max(self.last_column, self.shown_tile.column if self.shown_tile else 0) >= self.stride:
            raise ValueError("dialogue: a column lies beyond the tilemap's stride")
        return self


class ShownByte(_Strict):
    """A byte that says whether the dialogue box is on screen: it is while the byte is not `hidden`."""

    address: Address
    hidden: Annotated[int, Field(ge=0, le=255)] = 0


class ControlArgs(_Strict):
    """A control byte of the game's text that takes `count` argument bytes (all dropped)."""

    byte: Annotated[int, Field(ge=0, le=255)]
    count: Annotated[int, Field(ge=0, le=16)]


class ExtControl(_Strict):
    """An escape byte followed by a code and arguments: `lengths[code]` bytes (the code included)
    are dropped after it (pret/pokefirered src/string_util.c GetExtCtrlCodeLength); a code beyond
    the table drops nothing but itself."""

    byte: Annotated[int, Field(ge=0, le=255)]
    lengths: Annotated[list[Annotated[int, Field(ge=0, le=16)]], Field(max_length=256)]


class StringDialogue(_Strict):
    """Dialogue text read from the game's string buffer (`kind: string`): bytes from `address` up to
    the terminator (at most `length`), through the character map; line-break bytes become new lines
    and control bytes with their arguments are dropped. Null while `shown` says no box is on screen."""

    kind: Literal["string"]
    address: Address
    length: Annotated[int, Field(ge=1, le=4096)]
    terminator: Annotated[int, Field(ge=0, le=255)]
    line_breaks: Annotated[list[Annotated[int, Field(ge=0, le=255)]], Field(max_length=16)] = []
    controls: Annotated[list[ControlArgs], Field(max_length=64)] = []
    ext_control: ExtControl | None = None
    shown: ShownByte | None = None
    charmap: Annotated[list[Glyphs], Field(min_length=1, max_length=64)]
    unmapped: Annotated[str, Field(max_length=1)] = "?"

    def memory(self) -> list[tuple[int, int]]:
        """(address, size) of what it reads."""
        return [(self.address, self.length), *([(self.shown.address, 1)] if self.shown else [])]


def _dialogue_kind(value) -> str:
    return (value.get("kind", "tilemap") if isinstance(value, dict) else getattr(value, "kind", "tilemap"))


AnyDialogue = Annotated[Annotated[Dialogue, Tag("tilemap")] | Annotated[StringDialogue, Tag("string")],
                        Discriminator(_dialogue_kind)]


class StructuredTrack(_Strict):
    """The structured information track (seed 003): besides the screen, the agent is shown these probe
    fields (an allowlist; never one a milestone rung reads) and, if given, the decoded dialogue text."""

    fields: Annotated[list[Name], Field(max_length=64)] = []
    dialogue: AnyDialogue | None = None  # kind tilemap (the default) or string

    @property
    def allowlist(self) -> list[str]:
        """What a structured-track observation holds: the fields, then `dialogue` when declared."""
        return [*self.fields, *(["dialogue"] if self.dialogue is not None else [])]


class Named(_Strict):
    """One entry of a definition's name table (a species, move, item or menu id and its name)."""

    id: Annotated[int, Field(ge=0, le=0xFFFF)]
    name: Annotated[str, Field(min_length=1, max_length=64)]
    moves: Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=8)] = []


def name_table(entries: list[Named]) -> dict[int, str]:
    return {e.id: e.name for e in entries}


class TileClass(_Strict):
    """Tiles of one kind of terrain or object (wall, door, person, sign, ...), drawn as `glyph`."""

    name: Annotated[str, Field(min_length=1, max_length=32)]
    glyph: Annotated[str, Field(min_length=1, max_length=1)]
    tiles: Annotated[list[Annotated[int, Field(ge=0, le=0xFFFF)]], Field(max_length=256)] = []
    # runs of consecutive tiles, [first, last] each (a font's glyphs)
    runs: Annotated[list[Annotated[list[Annotated[int, Field(ge=0, le=0xFFFF)]], Field(min_length=2, max_length=2)]],
                    Field(max_length=64)] = []

    @model_validator(mode="after")
    def _some(self) -> "TileClass":
        if not self.tiles and not self.runs:
            raise ValueError(f"terrain class {self.name!r} lists no tiles or runs")
        if any(first > last for first, last in self.runs):
            raise ValueError(f"terrain class {self.name!r}: a run's first tile is after its last")
        return self

    @property
    def all_tiles(self) -> list[int]:
        return [*self.tiles, *(t for first, last in self.runs for t in range(first, last + 1))]


Byte = Annotated[int, Field(ge=0, le=0xFF)]
Offset = Annotated[int, Field(ge=0, le=255)]


class TilesetTerrain(_Strict):
    """The classes of a game whose map tiles mean what the current tileset says (Red's wTileMap under
    wCurMapTileset): added to the terrain's own classes while its tileset byte reads one of `tilesets`.
    `otherwise`: a class for the tiles of its tiles or runs that no other class lists (the tileset's
    tiles the game does not let you walk onto)."""

    tilesets: Annotated[list[Byte], Field(min_length=1, max_length=64)]
    classes: Annotated[list[TileClass], Field(max_length=64)] = []
    otherwise: TileClass | None = None
    source: Text | None = None


class TerrainCell(_Strict):
    """Cells of `width` x `height` tiles, each drawn as one glyph: the class of its tile at (`column`, `row`)
    in the cell, the one the game judges a step by (Red: 2x2 tiles, the lower-left one)."""

    width: Annotated[int, Field(ge=1, le=8)]
    height: Annotated[int, Field(ge=1, le=8)]
    column: Annotated[int, Field(ge=0, le=7)] = 0
    row: Annotated[int, Field(ge=0, le=7)] = 0

    @model_validator(mode="after")
    def _inside(self) -> "TerrainCell":
        if self.column >= self.width or self.row >= self.height:
            raise ValueError("terrain.cell: the judged tile lies outside the cell")
        return self


class ShownWhen(_Strict):
    """A byte that must read `value` (else the part is not drawn)."""

    address: Address
    value: Byte


class TerrainSprites(_Strict):
    """The people and objects a game draws as sprites over its tiles, from its sprite table: `slots`
    records of `stride` bytes at `table`; a slot is drawn while its `picture` byte is not 0 (and its `image`
    byte is not `off_screen`), at the tile of its pixel position (`y` + `y_add`, `x` + `x_add`; 8 pixels a
    tile), as `you_glyph` for slot `you`, else `glyph`; only while `shown` holds, and only over a cell whose
    judged tile is below `map_tiles_below` (a map tile, not a text box drawn over the map)."""

    table: Address
    slots: Annotated[int, Field(ge=1, le=64)]
    stride: Annotated[int, Field(ge=1, le=256)]
    picture: Offset
    image: Offset | None = None
    off_screen: Byte = 0xFF
    y: Offset
    x: Offset
    y_add: Annotated[int, Field(ge=-32, le=32)] = 0
    x_add: Annotated[int, Field(ge=-32, le=32)] = 0
    you: Annotated[int, Field(ge=0, le=63)] | None = None
    name: Annotated[str, Field(min_length=1, max_length=32)] = "person or object"
    glyph: Annotated[str, Field(min_length=1, max_length=1)] = "P"
    you_glyph: Annotated[str, Field(min_length=1, max_length=1)] = "@"
    shown: ShownWhen | None = None
    map_tiles_below: Annotated[int, Field(ge=1, le=0x10000)] | None = None
    source: Text | None = None

    @model_validator(mode="after")
    def _fits(self) -> "TerrainSprites":
        if max(self.picture, self.y, self.x, self.image or 0) >= self.stride:
            raise ValueError("terrain.sprites: an offset lies beyond the record's stride")
        if self.glyph == self.you_glyph:
            raise ValueError("terrain.sprites: glyph and you_glyph must differ")
        return self


class Terrain(_Strict):
    """The screen's terrain and objects as a grid of glyphs: the visible background tiles (a tilemap of
    tile indices, `rows` x `columns` from `tilemap`, `stride` a row), each tile by its class. Optional:
    classes that depend on the current tileset (`tileset`: the byte that names it; `tilesets`: the classes
    per tileset), `cell`s of several tiles judged by one, and the `sprites` drawn over them."""

    kind: Literal["tilemap"] = "tilemap"
    tilemap: Address
    stride: Annotated[int, Field(ge=1, le=1024)] = 32
    rows: Annotated[int, Field(ge=1, le=64)]
    columns: Annotated[int, Field(ge=1, le=64)]
    classes: Annotated[list[TileClass], Field(min_length=1, max_length=64)]
    unknown: Annotated[str, Field(min_length=1, max_length=1)] = "?"  # a tile of no class
    tileset: Address | None = None
    tilesets: Annotated[list[TilesetTerrain], Field(max_length=64)] = []
    # the tileset's classes apply only while this byte reads its value (Red: the map is on screen, not a battle)
    tileset_when: ShownWhen | None = None
    cell: TerrainCell | None = None
    sprites: TerrainSprites | None = None
    source: Text | None = None

    @model_validator(mode="after")
    def _fits(self) -> "Terrain":
        if self.columns > self.stride:
            raise ValueError("terrain: columns exceed the tilemap's stride")
        if (self.tileset is None) != (not self.tilesets):
            raise ValueError("terrain: tileset (the byte naming it) and tilesets (the classes per tileset) go together")
        ids = [i for table in self.tilesets for i in table.tilesets]
        if len(set(ids)) != len(ids):
            raise ValueError("terrain: a tileset is in two tilesets entries")
        if self.cell is not None and (self.rows % self.cell.height or self.columns % self.cell.width):
            raise ValueError("terrain: rows and columns must be whole cells")
        for table in [None, *self.tilesets]:
            self._check_classes(table)
        return self

    def _check_classes(self, table: TilesetTerrain | None) -> None:
        """The classes in force together (the terrain's, one tileset's and the sprites') have their own glyphs
        and no tile in two of them (`otherwise` takes only what the others leave)."""
        classes = [*self.classes, *(table.classes if table else [])]
        extra = [table.otherwise] if table and table.otherwise else []
        glyphs = [c.glyph for c in [*classes, *extra]]
        glyphs += [self.sprites.glyph, self.sprites.you_glyph] if self.sprites else []
        if len(set(glyphs)) != len(glyphs) or self.unknown in glyphs:
            raise ValueError("terrain: each class needs its own glyph, apart from `unknown`")
        tiles = [t for c in classes for t in c.all_tiles]
        if len(set(tiles)) != len(tiles):
            raise ValueError("terrain: a tile is in two classes")

    def table_for(self, tileset: int | None) -> TilesetTerrain | None:
        return next((t for t in self.tilesets if tileset in t.tilesets), None)

    def current_table(self, read_range: Callable[[int, int], list[int]]) -> TilesetTerrain | None:
        """The tileset entry in force now: none without a tileset byte, or while `tileset_when` does not hold."""
        if self.tileset is None:
            return None
        if self.tileset_when is not None and read_range(self.tileset_when.address, 1)[0] != self.tileset_when.value:
            return None
        return self.table_for(read_range(self.tileset, 1)[0])

    def memory(self) -> list[tuple[int, int]]:
        out = [(self.tilemap, self.stride * (self.rows - 1) + self.columns)]
        out += [(self.tileset, 1)] if self.tileset is not None else []
        out += [(self.tileset_when.address, 1)] if self.tileset_when is not None else []
        if self.sprites is not None:
            out.append((self.sprites.table, self.sprites.slots * self.sprites.stride))
            out += [(self.sprites.shown.address, 1)] if self.sprites.shown else []
        return out


class GridRegion(_Strict):
    """Memory a grid's pointer may point into (the game's buffer for it): a pointer outside, or a grid
    that does not fit, reads no terrain."""

    address: Address
    size: Annotated[int, Field(ge=2, le=0x100000)]


class GridObjects(_Strict):
    """The objects on the map (people, item balls): `count` records of `stride` bytes from `address`; a
    record is on the map while bit `active_bit` of its first word is set, the player's has `player_bit`
    set (drawn from the position instead); its cell in the grid is the s16 pair at `x` and `x` + 2, and
    its graphics id the byte at `graphics`: one of `balls` is drawn as the ball glyph, any other as a person."""

    address: Address
    count: Annotated[int, Field(ge=1, le=64)]
    stride: Annotated[int, Field(ge=4, le=256)]
    active_bit: Annotated[int, Field(ge=0, le=31)] = 0
    player_bit: Annotated[int, Field(ge=0, le=31)] | None = None
    x: Annotated[int, Field(ge=0, le=252)]
    graphics: Annotated[int, Field(ge=0, le=255)] | None = None
    balls: Annotated[list[Annotated[int, Field(ge=0, le=255)]], Field(max_length=16)] = []

    @model_validator(mode="after")
    def _fits(self) -> "GridObjects":
        if self.x + 4 > self.stride or (self.graphics is not None and self.graphics >= self.stride):
            raise ValueError("terrain.objects: x, y and graphics lie inside a record (stride)")
        if self.balls and self.graphics is None:
            raise ValueError("terrain.objects: balls are told by their graphics byte (graphics)")
        return self


class GridGlyphs(_Strict):
    passable: Annotated[str, Field(min_length=1, max_length=1)] = "."
    blocked: Annotated[str, Field(min_length=1, max_length=1)] = "#"
    outside: Annotated[str, Field(min_length=1, max_length=1)] = " "
    you: Annotated[str, Field(min_length=1, max_length=1)] = "@"
    person: Annotated[str, Field(min_length=1, max_length=1)] = "P"
    ball: Annotated[str, Field(min_length=1, max_length=1)] = "o"

    @model_validator(mode="after")
    def _apart(self) -> "GridGlyphs":
        if len(set(self.model_dump().values())) != len(self.model_dump()):
            raise ValueError("terrain.glyphs: each kind needs its own glyph")
        return self


class GridTerrain(_Strict):
    """The map around the player from the game's own map grid (`kind: grid`; FireRed's VMap): at `layout`
    the grid's s32 width, s32 height and a pointer to its u16 entries, read afresh each time (the game
    points it at its buffer on every map load); the player's cell is the definition's position plus
    `offset` (the grid's border margin). An entry whose `collision_mask` bits are set is blocked, one equal
    to `undefined` (or beyond the grid) is outside the map; `objects` are drawn over it, the player as `you`
    at (`player_column`, `player_row`) of the `columns` x `rows` window."""

    kind: Literal["grid"]
    layout: Address
    region: GridRegion
    offset: Annotated[int, Field(ge=0, le=64)] = 0
    columns: Annotated[int, Field(ge=1, le=64)]
    rows: Annotated[int, Field(ge=1, le=64)]
    player_column: Annotated[int, Field(ge=0, le=63)]
    player_row: Annotated[int, Field(ge=0, le=63)]
    collision_mask: Annotated[int, Field(ge=1, le=0xFFFF)]
    undefined: Annotated[int, Field(ge=0, le=0xFFFF)] | None = None
    objects: GridObjects | None = None
    glyphs: GridGlyphs = GridGlyphs()
    source: Text | None = None

    @model_validator(mode="after")
    def _inside(self) -> "GridTerrain":
        if self.player_column >= self.columns or self.player_row >= self.rows:
            raise ValueError("terrain: the player's cell lies outside the window (player_column, player_row)")
        return self

    def memory(self) -> list[tuple[int, int]]:
        """The layout's three words, the buffer the grid may lie in and the object records."""
        out = [(self.layout, 12), (self.region.address, self.region.size)]
        if self.objects is not None:
            out.append((self.objects.address, self.objects.count * self.objects.stride))
        return out


def _terrain_kind(value) -> str:
    return (value.get("kind", "tilemap") if isinstance(value, dict) else getattr(value, "kind", "tilemap"))


class Word(_Strict):
    """A number of a party member: at `offset` in its record, or at a fixed `address` (slot 0's, for a
    game that keeps it outside a record), or a constant `value` the game's documentation gives."""

    offset: Annotated[int, Field(ge=0, le=4095)] | None = None
    address: Address | None = None
    value: Annotated[int, Field(ge=0, le=0xFFFF)] | None = None
    kind: Literal["u8", "u16le", "u16be"] = "u8"

    @model_validator(mode="after")
    def _one(self) -> "Word":
        if sum(x is not None for x in (self.offset, self.address, self.value)) != 1:
            raise ValueError("a party number is one of offset, address or value")
        return self

    @property
    def width(self) -> int:
        return 1 if self.kind == "u8" else 2


class StatusBit(_Strict):
    mask: Annotated[int, Field(ge=1, le=0xFF)]
    name: Annotated[str, Field(min_length=1, max_length=16)]


class PartyMoves(_Strict):
    """Each member's moves: move ids at `offsets` of its record (0: no move) named by `names`, with
    their PP at `pp_offsets` (masked), or, for a game whose moves follow from the species
    (`by_species: true`), the species table's `moves`; a gen3 party reads its records' own (neither)."""

    by_species: bool = False
    offsets: Annotated[list[Annotated[int, Field(ge=0, le=4095)]], Field(max_length=8)] = []
    pp_offsets: Annotated[list[Annotated[int, Field(ge=0, le=4095)]], Field(max_length=8)] = []
    pp_mask: Annotated[int, Field(ge=1, le=0xFF)] = 0xFF
    names: Annotated[list[Named], Field(max_length=1024)] = []

    @model_validator(mode="after")
    def _how(self) -> "PartyMoves":
        if self.by_species and self.offsets:
            raise ValueError("party.moves: give offsets (move ids in the record) or by_species: true, not both")
        if self.pp_offsets and len(self.pp_offsets) != len(self.offsets):
            raise ValueError("party.moves: pp_offsets must pair with offsets")
        return self


class Party(_Strict):
    """The party as the game keeps it: which slots are in use (the species list up to its first `end`
    byte), each member's record, and where in it HP, status, level and moves are."""

    slots: Annotated[int, Field(ge=1, le=6)]
    # `bytes`: numbers at offsets of plain records (below); `gen3`: FireRed's encrypted 100-byte struct
    # Pokemon, decoded by engine.battle.gen3_record (species, moves and PP from its substructures, status,
    # level and HP from its tail); a slot is in use while its species is not 0, the list ends at the first not
    encoding: Literal["bytes", "gen3"] = "bytes"
    species_list: Address | None = None  # bytes: one species id a slot; the list ends at the first `end` byte
    end: Annotated[list[Annotated[int, Field(ge=0, le=0xFF)]], Field(min_length=1, max_length=4)] = [0]
    records: Address  # slot i's record starts at records + i * stride
    stride: Annotated[int, Field(ge=1, le=4096)]
    hp: Word | None = None
    max_hp: Word | None = None
    level: Word | None = None
    status: Word | None = None
    status_names: Annotated[list[StatusBit], Field(max_length=8)] = []  # value & mask != 0: the status
    moves: PartyMoves | None = None
    species: Annotated[list[Named], Field(max_length=1024)] = []
    source: Text | None = None

    @model_validator(mode="after")
    def _encoding(self) -> "Party":
        if self.encoding == "gen3" and self.stride != 100:
            raise ValueError("party: a gen3 record is 100 bytes (stride 100)")
        if self.encoding == "bytes" and (self.species_list is None or self.hp is None):
            raise ValueError("party: plain records need species_list and hp")
        if self.encoding == "bytes" and self.moves and not (self.moves.offsets or self.moves.by_species):
            raise ValueError("party.moves: give offsets (move ids in the record) or by_species: true")
        return self

    def words(self) -> list[Word]:
        return [w for w in (self.hp, self.max_hp, self.level, self.status) if w is not None]

    def memory(self) -> list[tuple[int, int]]:
        if self.encoding == "gen3":
            return [(self.records, self.stride * self.slots)]
        out = [(self.species_list, self.slots)]
        offsets = [w.offset + w.width for w in self.words() if w.offset is not None]
        offsets += [o + 1 for o in (*(self.moves.offsets if self.moves else ()),
                                     *(self.moves.pp_offsets if self.moves else ()))]
        if offsets:
            out.append((self.records, self.stride * (self.slots - 1) + max(offsets)))
        out += [(w.address, w.width) for w in self.words() if w.address is not None]
        return out


class Inventory(_Strict):
    """The bag: an items array of the definition, its ids named by `names`."""

    items: Name
    names: Annotated[list[Named], Field(max_length=1024)] = []
    source: Text | None = None


class Outcomes(_Strict):
    """What the harness reads to say what each press did (moved, turned, blocked, a menu or the
    dialogue opened): the definition's position, and these fields."""

    facing: Name | None = None
    menu: Name | None = None  # nonzero while a menu is open
    menu_names: Annotated[list[Named], Field(max_length=256)] = []
    source: Text | None = None

    @property
    def fields(self) -> list[str]:
        return [f for f in (self.facing, self.menu) if f is not None]


class GameplayTrack(StructuredTrack):
    """Seed 003's gameplay track: the structured track's fields and dialogue, and the terrain and
    objects on screen, the party (HP, status, moves), the inventory and what the recent presses did.
    Everything comes from the definition, and the loader refuses any of it that reads the memory of a
    field a milestone rung reads."""

    terrain: Annotated[Annotated[Terrain, Tag("tilemap")] | Annotated[GridTerrain, Tag("grid")],
                       Discriminator(_terrain_kind)] | None = None
    party: Party | None = None
    inventory: Inventory | None = None
    outcomes: Outcomes | None = None

    @property
    def allowlist(self) -> list[str]:
        parts = [n for n in ("terrain", "party", "inventory") if getattr(self, n) is not None]
        return [*super().allowlist, *parts, *(["action_results"] if self.outcomes is not None else [])]


class Tracks(_Strict):
    structured: StructuredTrack | None = None
    gameplay: GameplayTrack | None = None


SHORTCUT_NAMES = ("advance_dialogue", "choose_move", "use_item", "switch_to")
ShortcutName = Literal["advance_dialogue", "choose_move", "use_item", "switch_to"]


class ShortcutStep(_Strict):
    """One step of a shortcut's expansion into controller presses (engine.loop.shortcuts):
    `press`: one press; `cursor`: press `up` or `down` until the field reads `to` (a number, or
    `argument`: the argument's index in its list); `repeat`: press it while any of `while_any`'s
    condition lists holds (each test of one list), at most `most` times. A `press` with `times` is
    pressed that many times (`argument`: the argument's index, so none for the first): a list whose
    cursor the game keeps nowhere in fixed memory but always opens on its first row."""

    press: Annotated[str, Field(min_length=1, max_length=16)] | None = None
    times: Annotated[int, Field(ge=1, le=255)] | Literal["argument"] | None = None
    # With `times: argument`: the list shows the argument's items in this order (number fields of two ids
    # each, high nibble first: FireRed's gBattlePartyCurrentOrder), so the presses are its row there.
    order: Annotated[list[Name], Field(max_length=8)] = []
    cursor: Name | None = None
    to: Annotated[int, Field(ge=0, le=255)] | Literal["argument"] | None = None
    up: Annotated[str, Field(min_length=1, max_length=16)] = "UP"
    down: Annotated[str, Field(min_length=1, max_length=16)] = "DOWN"
    # A grid cursor (FireRed's 2x2 move menu): the field reads row * columns + column; `up`/`down` change the
    # row first, then `left`/`right` the column.
    columns: Annotated[int, Field(ge=2, le=16)] | None = None
    left: Annotated[str, Field(min_length=1, max_length=16)] = "LEFT"
    right: Annotated[str, Field(min_length=1, max_length=16)] = "RIGHT"
    repeat: Annotated[str, Field(min_length=1, max_length=16)] | None = None
    while_any: Annotated[list[Annotated[list[Condition], Field(min_length=1, max_length=16)]],
                         Field(max_length=16)] = []
    most: Annotated[int, Field(ge=1, le=1000)] = 64

    @model_validator(mode="after")
    def _one(self) -> "ShortcutStep":
        kinds = [k for k in ("press", "cursor", "repeat") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError("a shortcut step is one of press, cursor or repeat")
        if self.cursor is not None and self.to is None:
            raise ValueError("a cursor step needs `to` (a number or argument)")
        if self.repeat is not None and not self.while_any:
            raise ValueError("a repeat step needs while_any (when to keep pressing)")
        if self.times is not None and self.press is None:
            raise ValueError("`times` goes with a press step")
        if self.order and self.times != "argument":
            raise ValueError("`order` goes with `times: argument`")
        if self.columns is not None and self.cursor is None:
            raise ValueError("`columns` goes with a cursor step")
        return self

    def fields(self) -> list[str]:
        return [*([self.cursor] if self.cursor else []), *(c.field for group in self.while_any for c in group),
                *self.order]

    def buttons(self) -> list[str]:
        if self.press is not None:
            return [self.press]
        if self.cursor is not None:
            return [self.up, self.down, *([self.left, self.right] if self.columns else [])]
        return [self.repeat]


class ShortcutDef(_Strict):
    """A mechanical shortcut as the real presses it stands for: offered only while every `when` test
    holds; its argument (a move, an item, a party slot) is checked against the gameplay track's party or
    inventory; then its steps are pressed, each press read back before the next is chosen."""

    when: Annotated[list[Condition], Field(max_length=16)] = []
    steps: Annotated[list[ShortcutStep], Field(min_length=1, max_length=32)]
    source: Text | None = None

    def fields(self) -> list[str]:
        return [*(c.field for c in self.when), *(f for step in self.steps for f in step.fields())]


def _names(names) -> str:
    return ", ".join(sorted(names)) or "none"


class GameDefinition(_Strict):
    id: Name
    title: Annotated[str, Field(max_length=200)]
    platform: Literal["gb", "gbc", "gba"]
    # What the agent is told to do when the ladder decides (no goal, no task): its final rung's objective.
    # Absent: a manifest using this definition must say (agent.instruction).
    instruction: Instruction | None = None
    rom_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    verified: bool = False  # true only once an opt-in real-ROM test has passed on this definition
    roms: Annotated[list[RomIdentity], Field(max_length=64)] = []
    # open cartridge builds that ran this definition unchanged: never a check on the game in `roms`
    conformance: Annotated[list[ConformanceBuild], Field(max_length=16)] = []
    pointers: Annotated[dict[Name, Pointer], Field(max_length=64)] = {}
    arrays: Annotated[dict[Name, Array], Field(max_length=256)] = {}
    fields: Annotated[dict[Name, RamField], Field(min_length=1, max_length=1024)]
    # probe results mean nothing until these hold (e.g. an init magic byte, a pointer into RAM)
    ready: Annotated[list[Condition], Field(max_length=64)] = []
    position: Position | None = None  # for route tracking
    # a change in any of these resets route-repetition tracking
    progress_fields: Annotated[list[Name], Field(max_length=1024)] = []
    milestones: Annotated[list[MilestoneDef], Field(min_length=1, max_length=256)]
    final_milestone: Name | None = None  # defaults to the last rung
    # Optional, for the metrics (sessions.analysis.metrics, docs/metrics.md): returns the task requires are
    # never repeated-route penalties; a change in a recovery-event field (a justified recovery, e.g.
    # a blackout's return to the last heal point) resets repetition counting like a progress field.
    required_backtracking: Annotated[list[RequiredBacktrack], Field(max_length=256)] = []
    recovery_events: Annotated[list[Name], Field(max_length=1024)] = []
    battle_field: Name | None = None  # nonzero while a battle is on: battle actions are counted apart
    # The party's highest level, probed (a `highest` field over the party records): the long-horizon
    # scorer's L (its discipline term) when long_horizon names no level_field of its own.
    level_field: Name | None = None
    long_horizon: LongHorizon | None = None  # seed 002's scorer; absent: that scorer reports null
    controls: Annotated[dict[ControlName, ControlDef], Field(max_length=len(CONTROL_NAMES))] = {}
    start_fields: Annotated[list[Name], Field(max_length=1024)] = []  # default: see stable_at_start
    # Fewest presses from the start state to each rung under the manifest's input timing (a solver's
    # plan, e.g. `oakwatch cartridge variant`): the yardstick of path efficiency. Absent: null.
    optimal_presses: Annotated[dict[Name, Presses], Field(max_length=256)] | None = None
    # The ROM those presses were solved on: another ROM played with this definition (a patched dump, a
    # variant) gets no yardstick (null), never a wrong one. Absent: any ROM.
    optimal_presses_for: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    # The information tracks beyond the screen (engine.games.tracks): what a structured-track agent may see.
    tracks: Tracks = Tracks()
    # Goals a run may choose (`game.goal`; engine.games.goals), e.g. catch: any Pokémon caught.
    goals: Annotated[dict[Name, GoalDef], Field(max_length=16)] = {}
    # Seed 004's battle adapter (engine.battle.battle): the party in RAM, the species table, the battle screen's
    # facts and each battle action as presses. Absent: the battle ruleset cannot serve this game.
    # The party's record kind picks the adapter: `party.records: gen3` (engine.battle.gen3_battle, FireRed's
    # encrypted struct Pokemon) or byte fields (engine.battle).
    battle: Annotated[Annotated[BattleAdapter, Tag("bytes")] | Annotated[Gen3BattleAdapter, Tag("gen3")],
                      Discriminator(_record_kind)] | None = None
    # Mechanical shortcuts (seed 003; engine.loop.shortcuts): the ones this game defines, as the presses they
    # stand for. A manifest or task may permit only these.
    shortcuts: Annotated[dict[ShortcutName, ShortcutDef], Field(max_length=len(SHORTCUT_NAMES))] = {}

    @model_validator(mode="after")
    def _references_exist(self) -> "GameDefinition":
        self._check_memory()
        self._check_goals()
        self._check_fields_defined()
        self._check_condition_kinds()
        self._check_milestone_ids()
        self._check_tracks()
        self._check_shortcuts()
        self._check_unique_builds()
        return self

    def _field_refs(self) -> list[str]:
        """Every field name a condition, control, start or position of this definition reads."""
        refs = [c.field for c in self.ready] + list(self.progress_fields) + list(self.recovery_events)
        refs += [self.battle_field] if self.battle_field else []
        refs += [self.level_field] if self.level_field else []
        refs += [c.field for c in self.controls.values()] + list(self.start_fields)
        if self.long_horizon and self.long_horizon.level_field:
            refs.append(self.long_horizon.level_field)
        refs += [c.field for m in self.milestones for c in m.all]
        if self.position:
            refs += [self.position.map, self.position.x, self.position.y]
        return refs

    def _check_fields_defined(self) -> None:
        missing = sorted(set(self._field_refs()) - (set(self.fields) | set(self.pointers)))
        if missing:
            raise ValueError(f"conditions refer to undefined fields: {', '.join(missing)}")

    def _check_condition_kinds(self) -> None:
        # A test that does not fit its field's kind would fail mid-trial (`in` on a number), so refuse it here.
        for c in [*self.ready, *(c for m in self.milestones for c in m.all)]:
            is_bytes = self.is_bytes(c.field)
            if is_bytes and c.model_dump(include={"eq", "ne", "ge", "le", "bit_set", "bit_clear"}, exclude_none=True):
                raise ValueError(f"field {c.field!r} holds bytes: test it with contains or lacks")
            if not is_bytes and (c.contains is not None or c.lacks is not None):
                raise ValueError(f"field {c.field!r} holds a number: contains and lacks apply to kind 'bytes'")
        for name, c in self.controls.items():
            if self.is_bytes(c.field):
                raise ValueError(f"controls.{name}: field {c.field!r} holds bytes, a control needs a number")
        if self.position and any(self.is_bytes(f) for f in self.position.model_dump().values()):
            raise ValueError("position fields must hold numbers, not bytes")

    def _check_milestone_ids(self) -> None:
        ids = [m.id for m in self.milestones]
        if len(set(ids)) != len(ids):
            raise ValueError("milestone ids must be unique")
        named = [("required_backtracking", b.after) for b in self.required_backtracking]
        named += [("required_backtracking", b.until) for b in self.required_backtracking]
        named += [("long_horizon", self.long_horizon.final_milestone)] if self.long_horizon else []
        for where, mid in named:
            if mid is not None and mid not in ids:
                raise ValueError(f"{where}: {mid!r} is not a milestone id")
        unknown = sorted(set(self.optimal_presses or {}) - set(ids))
        if unknown:
            raise ValueError(f"optimal_presses: {', '.join(unknown)} is not a milestone id")
        if self.final_milestone is not None and self.final_milestone not in ids:
            raise ValueError(f"final_milestone {self.final_milestone!r} is not a milestone id")
        if not self.milestones[ids.index(self.final_id)].required:
            raise ValueError(f"the final milestone {self.final_id!r} must be required (reaching it ends the trial)")

    def _check_unique_builds(self) -> None:
        shas = [r.sha1 for r in self.roms]
        if len(set(shas)) != len(shas):
            raise ValueError("roms: the same sha1 is listed twice")
        builds = [c.rom_sha256 for c in self.conformance]
        if len(set(builds)) != len(builds):
            raise ValueError("conformance: the same rom_sha256 is listed twice")

    def hidden_in(self, instruction: str) -> list[str]:
        """The hidden-state names an instruction gives away (empty: none): a field, pointer or array of the
        probe named as written in the definition (one with an underscore or a digit, so plain words like
        `party` stay usable), or a number written in hex."""
        words = set(re.findall(r"[A-Za-z0-9_]+", instruction))
        names = {n for n in [*self.fields, *self.pointers, *self.arrays] if "_" in n or any(c.isdigit() for c in n)}
        return sorted(words & names) + sorted(set(re.findall(r"\b0[xX][0-9A-Fa-f]+\b|\$[0-9A-Fa-f]{2,}", instruction)))

    def _check_goals(self) -> None:
        told = [("instruction", self.instruction)] + [(f"goals.{g}.instruction", d.instruction)
                                                      for g, d in self.goals.items()]
        for where, text in told:
            if text is not None and (hidden := self.hidden_in(text)):
                raise ValueError(f"{where} names hidden state ({', '.join(hidden)}): say the objective as the "
                                 f"player sees it")
        for gid, goal in self.goals.items():
            tests = [*goal.all, *goal.room]
            names = [*goal.counts, goal.owned, *(c.field for c in tests)]
            missing = sorted(set(names) - set(self.fields))
            if missing:
                raise ValueError(f"goals.{gid}: {', '.join(missing)} is not a field")
            if not self.is_bytes(goal.owned):
                raise ValueError(f"goals.{gid}: owned field {goal.owned!r} must hold bytes (the owned bitfield)")
            for name in [*goal.counts, *(c.field for c in tests)]:
                if self.is_bytes(name):
                    raise ValueError(f"goals.{gid}: field {name!r} holds bytes; counts and conditions need numbers")

    def _check_memory(self) -> None:
        """Every pointer, array and field names what exists and lies inside the platform's address space."""
        self._check_pointers()
        for name, a in self.arrays.items():
            self._check_placed(f"array {name!r}", a.base, a.address, a.size)
        for name, f in self.fields.items():
            if f.derived_from is None:
                self._check_placed(f"field {name!r}", f.base, f.address, f.width)
            else:
                self._check_derived(name, f)
        for name, a in self.arrays.items():
            self._check_array_ref(name, a)

    def _check_pointers(self) -> None:
        space, plat = ADDRESS_SPACE[self.platform], self.platform
        clash = sorted(set(self.pointers) & set(self.fields))
        if clash:
            raise ValueError(f"pointer values appear in the sample under their own names, so a field cannot "
                             f"share one: {', '.join(clash)}")
        width = POINTER_WIDTH[plat]
        outside = sorted(n for n, p in self.pointers.items() if p.address + width > space)
        if outside:
            raise ValueError(f"pointers outside the {plat} address space (0x0-0x{space - 1:X}): {', '.join(outside)}")

    def _check_placed(self, what: str, base: str | None, address: int, size: int) -> None:
        space, plat = ADDRESS_SPACE[self.platform], self.platform
        if base is not None and base not in self.pointers:
            raise ValueError(f"{what} is based on unknown pointer {base!r} (pointers: {_names(self.pointers)})")
        # Absolute: the whole range must be in the space. Based: only the offset can be checked
        # (the pointer's value is known at sample time), and an offset beyond the space never fits.
        if address + size > space:
            where = "offset" if base is not None else "address"
            raise ValueError(f"{what} lies outside the {plat} address space (0x0-0x{space - 1:X}): "
                             f"{where} 0x{address:X} + {size} bytes")

    def _check_derived(self, name: str, f: RamField) -> None:
        """A field derived from an array names an array of the right kind and an index inside it."""
        how, array_name = f.derived_from
        array = self.arrays.get(array_name)
        if array is None:
            raise ValueError(f"field {name!r} names unknown array {array_name!r} (arrays: {_names(self.arrays)})")
        want = ARRAY_KIND[how]
        if array.kind != want:
            raise ValueError(f"field {name!r}: {how} needs an array of kind {want}, and {array_name!r} is "
                             f"of kind {array.kind}")
        i = f.index
        if isinstance(array, FlagArray) and i >= array.bytes * 8:
            raise ValueError(f"field {name!r}: flag 0x{i:X} is outside array {array_name!r} "
                             f"(flags 0x0-0x{array.bytes * 8 - 1:X}, {array.bytes} bytes)")
        if isinstance(array, VarArray) and not array.start <= i < array.start + array.count:
            raise ValueError(f"field {name!r}: var 0x{i:X} is outside array {array_name!r} "
                             f"(vars 0x{array.start:X}-0x{array.start + array.count - 1:X})")
        if isinstance(array, RecordArray) and i >= array.stride:
            raise ValueError(f"field {name!r}: offset {i} is outside array {array_name!r}'s "
                             f"{array.stride}-byte records")
        if isinstance(array, ItemArray):
            if array.id == "u8" and i > 0xFF:
                raise ValueError(f"field {name!r}: item id 0x{i:X} does not fit array {array_name!r}'s "
                                 f"u8 ids")
            if array.terminator is not None and i == array.terminator:
                raise ValueError(f"field {name!r}: item id 0x{i:X} is array {array_name!r}'s terminator")

    def _check_array_ref(self, name: str, a: Array) -> None:
        """An items array's key or a records array's count is a number field read at an address."""
        ref = a.key if isinstance(a, ItemArray) else a.count if isinstance(a, RecordArray) else None
        if ref is None:
            return
        what = "key" if isinstance(a, ItemArray) else "count"
        key = self.fields.get(ref)
        if key is None:
            raise ValueError(f"array {name!r}: {what} {ref!r} is not a field (fields: {_names(self.fields)})")
        if key.derived_from is not None or key.kind == "bytes":
            raise ValueError(f"array {name!r}: {what} {ref!r} must be a number read at an address "
                             f"(u8 .. s32le), not {key.derived_from[0] if key.derived_from else 'bytes'}")

    def _check_tracks(self) -> None:
        """A track shows only defined fields, and none that decides a rung: not a ladder field, not
        one reading the same memory, not one derived from the same array (the evaluator's hidden
        completion flags stay hidden)."""
        for key in ("structured", "gameplay"):
            track = getattr(self.tracks, key)
            if track is not None:
                self._check_track(f"tracks.{key}", track)

    def _check_track(self, at: str, track: StructuredTrack) -> None:
        unknown = sorted(set(track.fields) - set(self.fields))
        if unknown:
            raise ValueError(f"{at}.fields: {', '.join(unknown)} is not a field")
        d = track.dialogue
        space = ADDRESS_SPACE[self.platform]
        if isinstance(d, Dialogue) and d.tilemap + d.stride * (max(d.rows) + 1) > space:
            raise ValueError(f"{at}.dialogue lies outside the {self.platform} address space")
        ranges: list[tuple[str, int, int]] = []
        if isinstance(d, StringDialogue):
            ranges += [(f"{at}.dialogue", a, n) for a, n in d.memory()]
        shown = [(f"{at}.fields", name) for name in track.fields]
        if isinstance(track, GameplayTrack):
            ranges += self._gameplay_ranges(at, track)
            shown += self._outcome_fields(at, track) + self._terrain_fields(at, track)
        self._check_hidden_ranges(ranges)
        self._check_hidden_shown(shown)

    def _gameplay_ranges(self, at: str, track: GameplayTrack) -> list[tuple[str, int, int]]:
        """The memory a gameplay track's terrain, party and inventory read, each named by where it is set."""
        ranges: list[tuple[str, int, int]] = []
        if track.terrain is not None:
            ranges += [(f"{at}.terrain", a, n) for a, n in track.terrain.memory()]
        if track.party is not None:
            ranges += [(f"{at}.party", a, n) for a, n in track.party.memory()]
        if track.inventory is not None:
            array = self.arrays.get(track.inventory.items)
            if not isinstance(array, ItemArray):
                raise ValueError(f"{at}.inventory.items: {track.inventory.items!r} is not an items array")
            if array.base is None:
                ranges.append((f"{at}.inventory", array.address, array.size))
            else:
                self._check_hidden_based(f"{at}.inventory", array)
        return ranges

    def _check_hidden_based(self, where: str, array: ItemArray) -> None:
        """An array read through a pointer (FireRed's bag in its moving save block) overlaps no ladder field
        read through the same pointer, and its key is no ladder field."""
        for lf in sorted(self.ladder_fields):
            m = self._memory_of(lf)
            if lf == array.key or (m and m[0] == array.base and m[1] < array.address + array.size
                                   and array.address < m[1] + m[2]):
                raise ValueError(f"{where} reads the memory of ladder field {lf!r}, which must stay hidden")

    def _outcome_fields(self, at: str, track: GameplayTrack) -> list[tuple[str, str]]:
        """The fields a gameplay track's outcomes show (its own and the position's)."""
        if track.outcomes is None:
            return []
        missing = sorted(set(track.outcomes.fields) - set(self.fields))
        if missing:
            raise ValueError(f"{at}.outcomes: {', '.join(missing)} is not a field")
        if self.position is None:
            raise ValueError(f"{at}.outcomes: the definition has no position to tell a move from a block")
        return [(f"{at}.outcomes", name) for name in [*track.outcomes.fields, *self.position.model_dump().values()]]

    def _terrain_fields(self, at: str, track: GameplayTrack) -> list[tuple[str, str]]:
        """A grid terrain centres on the player: the position's x and y are shown through it."""
        if not isinstance(track.terrain, GridTerrain):
            return []
        if self.position is None:
            raise ValueError(f"{at}.terrain: a grid terrain centres on the position, and the definition has none")
        return [(f"{at}.terrain", self.position.x), (f"{at}.terrain", self.position.y)]

    def _check_hidden_ranges(self, ranges: list[tuple[str, int, int]]) -> None:
        """Each range lies in the address space and overlaps no absolute ladder field's memory."""
        space, ladder = ADDRESS_SPACE[self.platform], self.ladder_fields
        for where, address, size in ranges:
            if address + size > space:
                raise ValueError(f"{where} lies outside the {self.platform} address space")
            clash = next((lf for lf in sorted(ladder) if (m := self._memory_of(lf)) and m[0] is None
                          and m[1] < address + size and address < m[1] + m[2]), None)
            if clash is not None:
                raise ValueError(f"{where} reads the memory of ladder field {clash!r}, which must stay hidden")

    def _check_hidden_shown(self, shown: list[tuple[str, str]]) -> None:
        """No shown field is a ladder field or reads one's memory."""
        ladder = self.ladder_fields
        for where, name in shown:
            if name in ladder:
                raise ValueError(f"{where}: {name!r} is read by a milestone rung and must "
                                 f"stay hidden (ladder fields: {_names(ladder)})")
            clash = next((lf for lf in sorted(ladder) if self._shares_memory(name, lf)), None)
            if clash is not None:
                raise ValueError(f"{where}: {name!r} reads the memory of ladder field "
                                 f"{clash!r}, which must stay hidden")

    def _check_shortcuts(self) -> None:
        """A shortcut reads defined number fields and never one a rung reads (its presses would tell the
        agent about hidden state); an argument's list comes from the gameplay track."""
        ladder = self.ladder_fields
        gameplay = self.tracks.gameplay
        for name, sc in self.shortcuts.items():
            for field in sc.fields():
                if field not in self.fields:
                    raise ValueError(f"shortcuts.{name}: {field!r} is not a field")
                if self.is_bytes(field):
                    raise ValueError(f"shortcuts.{name}: field {field!r} holds bytes; a shortcut reads numbers")
                clash = field if field in ladder else next(
                    (lf for lf in sorted(ladder) if self._shares_memory(field, lf)), None)
                if clash is not None:
                    raise ValueError(f"shortcuts.{name}: {field!r} reads the memory of ladder field {clash!r}, "
                                     f"which must stay hidden")
            needs = {"choose_move": "party", "switch_to": "party", "use_item": "inventory"}.get(name)
            if needs and (gameplay is None or getattr(gameplay, needs) is None):
                raise ValueError(f"shortcuts.{name}: its argument is checked against tracks.gameplay.{needs}, "
                                 f"which this definition lacks")

    @property
    def ladder_fields(self) -> frozenset[str]:
        """Every field a milestone rung reads."""
        return frozenset(c.field for m in self.milestones for c in m.all)

    def _memory_of(self, name: str) -> tuple[str | None, int, int] | None:
        """(base pointer, address, size) a field reads: its own bytes, or its whole array's."""
        f = self.fields.get(name)
        if f is None:
            return None
        if f.derived_from:
            a = self.arrays[f.derived_from[1]]
            return a.base, a.address, a.size
        return f.base, f.address, f.width

    def _shares_memory(self, a: str, b: str) -> bool:
        ma, mb = self._memory_of(a), self._memory_of(b)
        if ma is None or mb is None:
            return False
        return ma[0] == mb[0] and ma[1] < mb[1] + mb[2] and mb[1] < ma[1] + ma[2]

    def is_bytes(self, name: str) -> bool:
        """Whether a sample name (a field or a pointer) holds a list of bytes rather than a number."""
        f = self.fields.get(name)
        return f is not None and f.is_bytes

    @property
    def party_level_field(self) -> str | None:
        """The field the long-horizon scorer reads L from: long_horizon.level_field, else level_field."""
        own = self.long_horizon.level_field if self.long_horizon else None
        return own or self.level_field

    @property
    def final_id(self) -> str:
        return self.final_milestone or self.milestones[-1].id

    @property
    def total_points(self) -> int:
        return sum(m.points for m in self.milestones)

    @property
    def stable_at_start(self) -> list[str]:
        """Fields every restore of the start state must reproduce: `start_fields`, or else the
        position, progress and control fields."""
        if self.start_fields:
            return list(dict.fromkeys(self.start_fields))
        names = list(self.position.model_dump().values()) if self.position else []
        names += [*self.progress_fields, *(c.field for c in self.controls.values())]
        return list(dict.fromkeys(names))

    @property
    def route_resets(self) -> list[str]:
        """Fields whose change ends route repetition: progress, and justified recovery events."""
        return [*self.progress_fields, *self.recovery_events]

    def is_ready(self, sample: Sample) -> bool:
        return all(c.holds(sample) for c in self.ready)
