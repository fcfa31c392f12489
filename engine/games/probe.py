"""The hidden-state probe: reads a game definition's RAM fields for the evaluator only.

Its samples go to the ladder, route tracker and evidence; never into an observation.

One sample, in this order (the plan is compiled once; the probe runs twice per action):
  1. pointers, read afresh (a game may move what they point at between any two samples); each
     value is in the sample under the pointer's name;
  2. absolute fields, grouped into spans read in one call each (as before pointers existed);
  3. fields based on a pointer, grouped into spans per pointer, at the pointer's value + offset;
  4. fields derived from arrays: flags (0/1), vars (u16), items (the quantity held, 0 when absent) and
     the highest byte at an offset of the records in use (a party's highest level; 0 with none).
A read is clipped to the platform's address space, what lies beyond it reading as 0, so a pointer
to garbage never raises (a value read through it is garbage, as it would be in the game).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from functools import cache
from operator import itemgetter

from engine.games.gamedef import (
    ADDRESS_SPACE,
    POINTER_WIDTH,
    SIGNED,
    WIDTHS,
    FlagArray,
    GameDefinition,
    ItemArray,
    RamField,
    RecordArray,
    Sample,
    VarArray,
)

ReadRange = Callable[[int, int], Sequence[int]]
MAX_SPAN = 1024  # fields closer together than this are read in one call

# member of a span: (name, offset in the span, kind, length)
Member = tuple[str, int, str, int]


def _width(kind: str, length: int) -> int:
    return WIDTHS.get(kind, length)


def _spans(reads: list[tuple[int, str, str, int]]) -> list[tuple[int, int, list[Member]]]:
    """(start, size, members) spans over (address, name, kind, length) reads, sorted by address."""
    spans: list[tuple[int, int, list[Member]]] = []
    for addr, name, kind, length in sorted(reads):
        end = addr + _width(kind, length)
        if spans and end - spans[-1][0] <= MAX_SPAN:
            start, old_end, members = spans[-1]
            spans[-1] = (start, max(old_end, end), members)
        else:
            spans.append((addr, end, []))
        spans[-1][2].append((name, addr - spans[-1][0], kind, length))
    return [(start, end - start, members) for start, end, members in spans]


def _decode(data: Sequence[int], off: int, kind: str, length: int) -> int | list[int]:
    if kind == "u8":
        return data[off]
    if kind == "bytes":
        return list(data[off:off + length])
    width = WIDTHS[kind]
    value = int.from_bytes(bytes(data[off:off + width]), "little")
    if kind in SIGNED and value >> (8 * width - 1):
        value -= 1 << (8 * width)
    return value


def _raw(data: Sequence[int], off: int, kind: str, length: int) -> int | Sequence[int]:
    """A private read (an array the derived fields index into, a flag's byte, a var): as `_decode`,
    but an array stays the slice it was read as (no list of hundreds of ints built per sample)."""
    return data[off:off + length] if kind == "bytes" else _decode(data, off, kind, length)


def _clipped(read_range: ReadRange, space: int, address: int, length: int) -> Sequence[int]:
    """read_range, with what lies beyond the address space read as zeros."""
    if address + length <= space:
        return read_range(address, length)
    inside = max(0, space - address)
    return [*(read_range(address, inside) if inside else ()), *([0] * (length - inside))]


def _derived_read(game: GameDefinition, name: str, f: RamField, based: dict[str | None, list[tuple[int, str, str, int]]]
                  ) -> tuple[str, str, object]:
    """A derived field's (field, how, detail), its raw read added to `based` (keyed by the array's pointer)."""
    how, array_name = f.derived_from
    a = game.arrays[array_name]
    slot = f"\0array:{array_name}"  # private names for raw reads (never in the sample)
    if isinstance(a, FlagArray):
        raw = f"\0field:{name}"
        based.setdefault(a.base, []).append((a.address + f.index // 8, raw, "u8", 1))
        return name, "flag", (raw, f.index % 8)
    if isinstance(a, VarArray):
        raw = f"\0field:{name}"
        based.setdefault(a.base, []).append((a.address + 2 * (f.index - a.start), raw, "u16le", 1))
        return name, "var", raw
    assert isinstance(a, ItemArray | RecordArray)
    reads = based.setdefault(a.base, [])
    if (a.address, slot, "bytes", a.size) not in reads:
        reads.append((a.address, slot, "bytes", a.size))
    return name, "item" if isinstance(a, ItemArray) else "highest", (slot, f.index, a)


def _byte_picker(u8: list[tuple[str, int]]) -> tuple[tuple[str, ...], Callable]:
    """The names of a span's byte fields and a function from the span's bytes to their values, in order."""
    names = tuple(n for n, _ in u8)
    offsets = [o for _, o in u8]
    if len(offsets) == 1:
        (only,) = offsets
        return names, lambda data: (data[only],)
    return names, itemgetter(*offsets) if offsets else (lambda data: ())


class Probe:
    def __init__(self, game: GameDefinition):
        self._space = ADDRESS_SPACE[game.platform]
        # 2. absolute fields (validated to lie inside the space): byte fields, most of them, are split
        # out for one dict comprehension.
        absolute = [(f.address, name, f.kind, f.length) for name, f in game.fields.items()
                    if f.derived_from is None and f.base is None]
        self._spans = _spans(absolute)
        # per span: the byte fields' names and one itemgetter for their offsets (a C call, not a
        # comprehension: the probe reads twice per action), then the other kinds one by one
        self._plan = [(start, size, *_byte_picker([(n, o) for n, o, k, _ in members if k == "u8"]),
                       [(n, o, k, ln) for n, o, k, ln in members if k != "u8"])
                      for start, size, members in self._spans]

        # 1. pointers, read as fields of their own (little-endian, the platform's pointer width).
        ptr_kind = {2: "u16le", 4: "u32le"}[POINTER_WIDTH[game.platform]]
        self._pointers = _spans([(p.address, name, ptr_kind, 1) for name, p in game.pointers.items()])

        # 3 and 4. What is read relative to a pointer, and what arrays the derived fields need. Flags
        # and vars become one byte or word each; an items array is read whole (it is scanned).
        based: dict[str | None, list[tuple[int, str, str, int]]] = {}
        derived: list[tuple[str, str, object]] = []  # (field, how, detail)
        for name, f in game.fields.items():
            if f.base is not None:
                based.setdefault(f.base, []).append((f.address, name, f.kind, f.length))
        for name, f in game.fields.items():
            if f.derived_from is not None:
                derived.append(_derived_read(game, name, f, based))
        # Absolute reads for derived fields (arrays without a base) have no pointer: key None.
        self._derived_absolute = _spans(based.pop(None, []))
        self._based = [(ptr, _spans(reads)) for ptr, reads in based.items()]
        self._derived = derived

    def __new__(cls, game: GameDefinition):
        # A definition with pointers or arrays gets the subclass that reads them; the bundled
        # cartridge's (absolute fields only) keeps the one-pass __call__ below, no slower for them.
        if cls is Probe and (game.pointers or any(f.base is not None or f.derived_from for f in game.fields.values())):
            cls = _FullProbe
        return super().__new__(cls)

    def __call__(self, read_range: ReadRange) -> Sample:
        sample: Sample = {}
        for start, size, names, pick, others in self._plan:
            data = read_range(start, size)
            if names:
                sample.update(zip(names, pick(data), strict=True))
            for name, off, kind, length in others:
                if kind == "u16le":
                    sample[name] = data[off] | data[off + 1] << 8
                elif kind == "u32le":
                    sample[name] = data[off] | data[off + 1] << 8 | data[off + 2] << 16 | data[off + 3] << 24
                elif kind == "bytes":
                    sample[name] = list(data[off:off + length])
                else:
                    sample[name] = _decode(data, off, kind, length)
        return sample

class _FullProbe(Probe):
    """A probe with pointers, based fields or derived fields (see the module docstring for the order)."""

    def __call__(self, read_range: ReadRange) -> Sample:
        sample: Sample = {}
        self._read_pointers(read_range, sample)
        sample.update(Probe.__call__(self, read_range))
        self._read_rest(read_range, sample)
        return sample

    def _read_pointers(self, read_range: ReadRange, sample: Sample) -> None:
        for start, size, members in self._pointers:
            data = _clipped(read_range, self._space, start, size)
            for name, off, kind, length in members:
                sample[name] = _decode(data, off, kind, length)

    def _read_rest(self, read_range: ReadRange, sample: Sample) -> None:
        space = self._space
        raw: dict[str, int | Sequence[int]] = {}
        for ptr, spans in self._based:
            origin = sample[ptr]
            for start, size, members in spans:
                data = _clipped(read_range, space, origin + start, size)
                for name, off, kind, length in members:
                    if name[0] == "\0":
                        raw[name] = _raw(data, off, kind, length)
                    else:
                        sample[name] = _decode(data, off, kind, length)
        for start, size, members in self._derived_absolute:
            data = _clipped(read_range, space, start, size)
            for name, off, kind, length in members:
                raw[name] = _raw(data, off, kind, length)
        for name, how, detail in self._derived:
            if how == "flag":
                key, bit = detail
                sample[name] = raw[key] >> bit & 1
            elif how == "var":
                sample[name] = raw[detail]
            elif how == "highest":
                key, offset, array = detail
                sample[name] = _highest(raw[key], offset, array, sample)
            else:
                key, item_id, array = detail
                sample[name] = _item_quantity(raw[key], item_id, array, sample)


def _highest(data: Sequence[int], offset: int, a: RecordArray, sample: Sample) -> int:
    """The highest byte at `offset` among the records in use: the first `count` (all when the array
    names no count field; a count beyond the slots reads every slot), 0 when none is."""
    used = a.slots if a.count is None else max(0, min(a.slots, int(sample[a.count])))
    return max((data[i * a.stride + offset] for i in range(used)), default=0)


@cache
def _slot_ids(slots: int, stride: int, wide_id: bool) -> Callable[[bytes], tuple[int, ...]]:
    """An items array's bytes to the id in each slot, in order (one struct unpack: a C call)."""
    pad = stride - (2 if wide_id else 1)
    return struct.Struct("<" + (("H" if wide_id else "B") + (f"{pad}x" if pad else "")) * slots).unpack_from


def _item_quantity(data: Sequence[int], item_id: int, a: ItemArray, sample: Sample) -> int:
    """The quantity of `item_id` held in an items array (the first slot with that id), 0 when
    absent or when the terminator comes first. Only id positions are compared, so a quantity equal
    to the id never matches."""
    wide_id = a.id == "u16le"
    ids = _slot_ids(a.slots, a.stride, wide_id)(data if isinstance(data, bytes | bytearray) else bytes(data))
    if item_id not in ids:
        return 0
    slot = ids.index(item_id)
    if a.terminator is not None and a.terminator in ids[:slot]:  # (an item id is never the terminator)
        return 0
    s = slot * a.stride + (2 if wide_id else 1)
    wide_qty = a.quantity == "u16le"
    q = data[s] | data[s + 1] << 8 if wide_qty else data[s]
    if a.key is not None:
        q ^= sample[a.key] & (0xFFFF if wide_qty else 0xFF)
    return q
