"""The game-definition format v2 (engine.games.gamedef) and its probe (engine.games.probe), against memory
images built here: pointers read afresh (the block moves between samples), 8/16/32-bit and signed
reads, flag and var arithmetic, item lists (stride, 16-bit ids, terminator, XOR key), reads clipped
to the address space, and validation errors that name the problem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.games.gamedef import GameDefinition
from engine.games.probe import Probe
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition, parse_game_definition

ROOT = Path(__file__).resolve().parents[3]
GBA_SPACE = 1 << 32

PTR1, PTR2 = 0x03005008, 0x0300500C  # gSaveBlock1Ptr, gSaveBlock2Ptr (a FireRed-like layout)
OLD_SB1, NEW_SB1 = 0x0202552C, 0x02026A00
SB2 = 0x02024588


class Memory:
    """A sparse byte image with the read_range of an emulator; every read is logged and checked
    to lie inside the address space (the probe must clip, never ask beyond it)."""

    def __init__(self, space: int = GBA_SPACE):
        self.space = space
        self.bytes: dict[int, int] = {}
        self.reads: list[tuple[int, int]] = []

    def put(self, address: int, data: bytes | list[int]) -> None:
        for i, b in enumerate(data):
            self.bytes[address + i] = b

    def u16(self, address: int, value: int) -> None:
        self.put(address, value.to_bytes(2, "little"))

    def u32(self, address: int, value: int) -> None:
        self.put(address, value.to_bytes(4, "little"))

    def read_range(self, address: int, length: int) -> list[int]:
        assert 0 <= address and length >= 0 and address + length <= self.space, (hex(address), length)
        self.reads.append((address, length))
        return [self.bytes.get(address + i, 0) for i in range(length)]


def gba(**parts) -> GameDefinition:
    data = {"id": "t", "title": "t", "platform": "gba",
            "milestones": [{"id": "M1", "name": "one", "points": 1, "all": [{"field": "a", "ge": 0}]}]}
    data.update(parts)
    data.setdefault("fields", {"a": {"address": 0x03000000}})
    return GameDefinition.model_validate(data)


SAVE_GAME = {
    "pointers": {"sb1": {"address": PTR1, "source": "gSaveBlock1Ptr"},
                 "sb2": {"address": PTR2, "source": "gSaveBlock2Ptr"}},
    "arrays": {
        "event_flags": {"kind": "flags", "base": "sb1", "address": 0xEE0, "bytes": 288},
        "vars": {"kind": "vars", "base": "sb1", "address": 0x1000, "start": 0x4000, "count": 256},
        "key_items": {"kind": "items", "base": "sb1", "address": 0x3B8, "slots": 30, "stride": 4,
                      "id": "u16le", "quantity": "u16le", "terminator": 0, "key": "qty_key"},
    },
    "fields": {
        "a": {"address": 0x03000000},
        "x": {"address": 0x0, "base": "sb1", "kind": "s16le"},
        "y": {"address": 0x2, "base": "sb1", "kind": "s16le"},
        "map_id": {"address": 0x4, "base": "sb1", "kind": "u16le"},
        "qty_key": {"address": 0xF20, "base": "sb2", "kind": "u32le"},
        "beat_rival": {"flag": "event_flags", "index": 0x258},
        "lab_scene": {"var": "vars", "index": 0x4055},
        "parcel": {"item": "key_items", "index": 0x15D},
    },
    "ready": [{"field": "sb1", "ge": 0x02000000}, {"field": "sb1", "le": 0x0203FFFF}],
}


def fill_save_block(mem: Memory, sb1: int, *, x: int, y: int, rival: bool, scene: int, parcel: int | None,
                    key: int) -> None:
    mem.u32(PTR1, sb1)
    mem.u32(PTR2, SB2)
    mem.u32(SB2 + 0xF20, key)
    mem.put(sb1, x.to_bytes(2, "little", signed=True) + y.to_bytes(2, "little", signed=True))
    mem.u16(sb1 + 4, 0x0304)
    flag_byte = sb1 + 0xEE0 + 0x258 // 8
    mem.put(flag_byte, [(1 << (0x258 % 8)) if rival else 0])
    mem.u16(sb1 + 0x1000 + 2 * (0x4055 - 0x4000), scene)
    items = [(0x16D, 1), (0x15D, parcel)] if parcel is not None else [(0x16D, 1)]
    slot = sb1 + 0x3B8
    for item_id, qty in items:
        mem.u16(slot, item_id)
        mem.u16(slot + 2, qty ^ (key & 0xFFFF))
        slot += 4
    mem.u16(slot, 0)  # the terminator


def test_a_moved_save_block_is_followed_at_the_next_sample():
    game = gba(**SAVE_GAME)
    probe = Probe(game)
    mem = Memory()
    fill_save_block(mem, OLD_SB1, x=-3, y=7, rival=False, scene=1, parcel=None, key=0xA1B2C3D4)
    first = probe(mem.read_range)
    assert first["sb1"] == OLD_SB1 and first["sb2"] == SB2 and game.is_ready(first)
    assert (first["x"], first["y"], first["map_id"]) == (-3, 7, 0x0304)
    assert (first["beat_rival"], first["lab_scene"], first["parcel"]) == (0, 1, 0)
    # The game moves the block (a map load): new values at the new place, stale ones left at the old.
    fill_save_block(mem, NEW_SB1, x=12, y=-1, rival=True, scene=3, parcel=1, key=0xA1B2C3D4)
    second = probe(mem.read_range)
    assert second["sb1"] == NEW_SB1
    assert (second["x"], second["y"], second["beat_rival"], second["lab_scene"], second["parcel"]) == \
        (12, -1, 1, 3, 1)
    # ...and back: the old block's stale contents are read again, so nothing was cached.
    mem.u32(PTR1, OLD_SB1)
    third = probe(mem.read_range)
    assert (third["x"], third["beat_rival"], third["lab_scene"], third["parcel"]) == (-3, 0, 1, 0)


def test_pointers_are_read_before_anything_based_on_them_and_once_per_sample():
    probe = Probe(gba(**SAVE_GAME))
    mem = Memory()
    fill_save_block(mem, OLD_SB1, x=0, y=0, rival=False, scene=0, parcel=None, key=0)
    probe(mem.read_range)
    pointer_reads = [i for i, (a, _) in enumerate(mem.reads) if a <= PTR1 < a + 8]
    based_reads = [i for i, (a, _) in enumerate(mem.reads)
                   if OLD_SB1 <= a < OLD_SB1 + 0x4000 or SB2 <= a < SB2 + 0x1000]
    assert len(pointer_reads) == 1 and pointer_reads[0] < min(based_reads)  # both pointers in one read
    assert len(mem.reads) <= 6  # spans: pointers, absolute, sb1 (two spans), sb2


def test_a_pointer_to_garbage_never_raises_and_reads_past_the_space_as_zero():
    probe = Probe(gba(**SAVE_GAME))
    mem = Memory()
    mem.u32(PTR1, 0xFFFFFFF0)  # the whole block lies past 0xFFFFFFFF but its first bytes
    mem.u32(PTR2, 0xFFFFF000)
    mem.put(0xFFFFFFF0, [0xFE, 0xFF, 0x05, 0x00])  # x = -2, y = 5, still inside
    sample = probe(mem.read_range)
    assert (sample["x"], sample["y"], sample["map_id"]) == (-2, 5, 0)
    assert (sample["beat_rival"], sample["lab_scene"], sample["parcel"], sample["qty_key"]) == (0, 0, 0, 0)
    assert all(a + n <= GBA_SPACE for a, n in mem.reads)


def test_a_gb_pointer_is_16_bit_and_reads_stop_at_0x10000():
    game = GameDefinition.model_validate({
        "id": "t", "title": "t", "platform": "gb",
        "pointers": {"p": {"address": 0xC000}},
        "fields": {"v": {"address": 0x2, "base": "p", "kind": "u16le"}, "w": {"address": 0xC010, "kind": "s8"}},
        "milestones": [{"id": "M1", "name": "one", "points": 1, "all": [{"field": "v", "eq": 1}]}],
    })
    mem = Memory(space=0x10000)
    mem.put(0xC000, [0x00, 0xD1, 0xAA, 0xBB])  # p = 0xD100 (the bytes after it are not part of it)
    mem.u16(0xD102, 0x1234)
    mem.put(0xC010, [0x80])
    sample = Probe(game)(mem.read_range)
    assert (sample["p"], sample["v"], sample["w"]) == (0xD100, 0x1234, -128)
    mem.put(0xC000, [0xFF, 0xFF])  # p = 0xFFFF: v straddles the end of the space
    mem.put(0xFFFF + 2, [0x77])  # beyond the space: never read
    assert Probe(game)(mem.read_range)["v"] == 0


KINDS = {"u8": (1, False), "s8": (1, True), "u16le": (2, False), "s16le": (2, True), "u32le": (4, False),
         "s32le": (4, True)}


@pytest.mark.parametrize(("kind", "raw", "value"), [
    ("u8", [0xFF], 255), ("s8", [0xFF], -1), ("s8", [0x7F], 127), ("s8", [0x80], -128),
    ("u16le", [0x34, 0x12], 0x1234), ("s16le", [0x00, 0x80], -32768), ("s16le", [0xFF, 0x7F], 32767),
    ("u32le", [0xFF] * 4, 0xFFFFFFFF), ("s32le", [0xFF] * 4, -1), ("s32le", [0, 0, 0, 0x80], -(2**31)),
])
def test_widths_and_signed_reads(kind, raw, value):
    for based in (False, True):
        fields = {"a": {"address": 0x03000000}, "v": {"address": 0x10, "kind": kind}}
        mem = Memory()
        if based:
            fields["v"]["base"] = "p"
            mem.u32(0x03000100, 0x02000000)
            mem.put(0x02000010, raw)
        else:
            fields["v"]["address"] = 0x03000010
            mem.put(0x03000010, raw)
        game = gba(fields=fields, pointers={"p": {"address": 0x03000100}})
        assert Probe(game)(mem.read_range)["v"] == value


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), data=st.data())
def test_any_value_reads_back_as_written(kind, data):
    width, signed = KINDS[kind]
    lo, hi = (-(1 << (8 * width - 1)), (1 << (8 * width - 1)) - 1) if signed else (0, (1 << (8 * width)) - 1)
    value = data.draw(st.integers(lo, hi))
    mem = Memory()
    mem.u32(0x03000100, 0x02010000)
    mem.put(0x02010006, value.to_bytes(width, "little", signed=signed))
    game = gba(fields={"a": {"address": 0x03000000}, "v": {"address": 6, "base": "p", "kind": kind}},
               pointers={"p": {"address": 0x03000100}})
    assert Probe(game)(mem.read_range)["v"] == value
    # a condition can test it, negative values included
    c = {"field": "v", "eq": value}
    game = gba(fields=game.model_dump()["fields"], pointers={"p": {"address": 0x03000100}},
               milestones=[{"id": "M1", "name": "v", "points": 1, "all": [c]}])
    assert game.milestones[0].holds(Probe(game)(mem.read_range))


@settings(max_examples=80, deadline=None)
@given(size=st.integers(1, 40), data=st.data(), based=st.booleans())
def test_flag_i_is_bit_i_mod_8_of_byte_i_div_8(size, data, based):
    content = data.draw(st.binary(min_size=size, max_size=size))
    index = data.draw(st.integers(0, size * 8 - 1))
    array = {"kind": "flags", "address": 0x100 if based else 0x03000100, "bytes": size}
    if based:
        array["base"] = "p"
    game = gba(pointers={"p": {"address": 0x03007000}}, arrays={"f": array},
               fields={"a": {"address": 0x03000000}, "flag": {"flag": "f", "index": index}})
    mem = Memory()
    mem.u32(0x03007000, 0x02000000)
    mem.put((0x02000000 + 0x100) if based else 0x03000100, content)
    assert Probe(game)(mem.read_range)["flag"] == (content[index // 8] >> (index % 8)) & 1


def test_flags_next_to_each_other_are_independent():
    fields = {"a": {"address": 0x03000000}}
    fields |= {f"f{i}": {"flag": "f", "index": i} for i in range(16)}
    game = gba(arrays={"f": {"kind": "flags", "address": 0x03000100, "bytes": 2}}, fields=fields)
    mem = Memory()
    mem.put(0x03000100, [0b1000_0001, 0b0100_0000])  # flags 0, 7 and 14
    sample = Probe(game)(mem.read_range)
    assert [i for i in range(16) if sample[f"f{i}"]] == [0, 7, 14]


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, 0x8000), count=st.integers(1, 300), data=st.data())
def test_var_v_is_the_u16_at_base_plus_2_times_v_minus_start(start, count, data):
    v = data.draw(st.integers(start, start + count - 1))
    value = data.draw(st.integers(0, 0xFFFF))
    game = gba(pointers={"p": {"address": 0x03007000}},
               arrays={"vars": {"kind": "vars", "base": "p", "address": 0x1000, "start": start, "count": count}},
               fields={"a": {"address": 0x03000000}, "v": {"var": "vars", "index": v}})
    mem = Memory()
    mem.u32(0x03007000, 0x02001000)
    mem.u16(0x02001000 + 0x1000 + 2 * (v - start), value)
    mem.u16(0x02001000 + 0x1000 + 2 * (v - start) + 2, 0xBEEF)  # the next var does not leak in
    assert Probe(game)(mem.read_range)["v"] == value


def items_game(**array) -> GameDefinition:
    spec = {"kind": "items", "address": 0x03000200, "slots": 6, "stride": 2, "id": "u8", "quantity": "u8"}
    spec.update(array)
    fields = {"a": {"address": 0x03000000}, "key": {"address": 0x03000010, "kind": "u32le"},
              "potion": {"item": "bag", "index": 0x14}, "parcel": {"item": "bag", "index": 0x46}}
    return gba(arrays={"bag": spec}, fields=fields)


def test_a_quantity_equal_to_an_item_id_never_matches():
    mem = Memory()
    # (id, quantity) pairs: potions x 0x46 (= the parcel's id), then 0x46 only as a quantity again.
    mem.put(0x03000200, [0x14, 0x46, 0x04, 0x46, 0xFF])
    sample = Probe(items_game(terminator=0xFF))(mem.read_range)
    assert (sample["potion"], sample["parcel"]) == (0x46, 0)
    mem.put(0x03000204, [0x46, 0x01, 0xFF])  # now the parcel itself, one of it
    sample = Probe(items_game(terminator=0xFF))(mem.read_range)
    assert (sample["potion"], sample["parcel"]) == (0x46, 1)


def test_an_odd_stride_compares_only_id_positions():
    mem = Memory()
    # stride 3: id, quantity, a pad byte; the parcel's id sits in a pad and in a quantity, never at an id.
    mem.put(0x03000200, [0x14, 0x46, 0x46, 0x05, 0x46, 0x46])
    sample = Probe(items_game(stride=3))(mem.read_range)
    assert (sample["potion"], sample["parcel"]) == (0x46, 0)


def test_the_terminator_ends_the_scan():
    mem = Memory()
    mem.put(0x03000200, [0x14, 0x02, 0xFF, 0x00, 0x46, 0x01])  # a stale parcel after the terminator
    assert Probe(items_game(terminator=0xFF))(mem.read_range)["parcel"] == 0
    assert Probe(items_game())(mem.read_range)["parcel"] == 1  # without a terminator every slot is scanned


def test_16_bit_ids_and_encrypted_quantities():
    game = items_game(id="u16le", quantity="u16le", stride=4, terminator=0, key="key")
    mem = Memory()
    key = 0xDEAD1234
    # 0x4614 has the potion's id as its low byte and the parcel's as its high: neither matches.
    slots = [(0x4614, 9), (0x0014, 3), (0x0046, 1), (0, 0), (0x0046, 50)]
    for i, (item_id, qty) in enumerate(slots):
        mem.u16(0x03000200 + 4 * i, item_id)
        mem.u16(0x03000202 + 4 * i, qty ^ (key & 0xFFFF))
    mem.u32(0x03000010, key)
    sample = Probe(game)(mem.read_range)
    assert (sample["potion"], sample["parcel"], sample["key"]) == (3, 1, key)


def test_an_8_bit_quantity_is_decrypted_with_the_key_masked_to_8_bits():
    game = items_game(key="key")
    mem = Memory()
    mem.u32(0x03000010, 0x12345678)
    mem.put(0x03000200, [0x14, 5 ^ 0x78])
    assert Probe(game)(mem.read_range)["potion"] == 5


def _quantity_slot_by_slot(mem: bytes, item_id: int, wide_id: bool, wide_qty: bool, stride: int, slots: int,
                           terminator: int | None, key: int) -> int:
    """The definition format's reading of an items array, slot by slot (the oracle for the probe's scan)."""
    for s in range(0, slots * stride, stride):
        got = int.from_bytes(mem[s:s + (2 if wide_id else 1)], "little")
        if got == terminator:
            return 0
        if got == item_id:
            q_at = s + (2 if wide_id else 1)
            q = int.from_bytes(mem[q_at:q_at + (2 if wide_qty else 1)], "little")
            return q ^ (key & (0xFFFF if wide_qty else 0xFF))
    return 0


@settings(max_examples=300, deadline=None)
@given(wide_id=st.booleans(), wide_qty=st.booleans(), extra=st.integers(0, 3), slots=st.integers(1, 12),
       terminator=st.sampled_from([None, 0x00, 0x01, 0x02]), key=st.integers(0, 0xFFFFFFFF), data=st.data())
def test_an_items_scan_reads_as_the_slot_by_slot_definition(wide_id, wide_qty, extra, slots, terminator, key, data):
    # ids drawn from a small alphabet so ids, quantities, pads and the terminator collide often
    stride = (2 if wide_id else 1) + (2 if wide_qty else 1) + extra
    image = bytes(data.draw(st.lists(st.sampled_from([0x00, 0x01, 0x02, 0x14, 0x46]), min_size=stride * slots,
                                     max_size=stride * slots)))
    game = items_game(id="u16le" if wide_id else "u8", quantity="u16le" if wide_qty else "u8", stride=stride,
                      slots=slots, terminator=terminator, key="key")
    mem = Memory()
    mem.put(0x03000200, image)
    mem.u32(0x03000010, key)
    sample = Probe(game)(mem.read_range)
    for name, item_id in (("potion", 0x14), ("parcel", 0x46)):
        assert sample[name] == _quantity_slot_by_slot(image, item_id, wide_id, wide_qty, stride, slots, terminator,
                                                      key), name


def test_the_bundled_cartridge_probe_is_unchanged():
    game = load_game_definition(ROOT / "assets" / "games" / "parcel-quest.yaml")
    assert not game.pointers and not game.arrays and game.roms == []
    assert all(m.required for m in game.milestones)
    probe = Probe(game)
    assert type(probe) is Probe  # the one-pass path, no pointer or array machinery
    mem = Memory(space=0x10000)
    mem.put(0xD000, list(range(0x4F, 0x4F + 0x20)))
    mem.u32(0xD01C, 0xFFFFFFFF)
    sample = probe(mem.read_range)
    assert set(sample) == set(game.fields)  # no pointer names, nothing private
    assert (sample["magic"], sample["steps"], sample["frames"], sample["party"]) == \
        (0x4F, 0x4F + 0x1A | (0x4F + 0x1B) << 8, 0xFFFFFFFF, [0x4F + 0x11, 0x4F + 0x12, 0x4F + 0x13])
    assert mem.reads == [(0xD000, 0x20)]


# -- validation -------------------------------------------------------------------------------

PARTY = {"party": {"kind": "records", "address": 0x02024284, "slots": 6, "stride": 100}}


def with_field(name: str, spec: dict, **extra) -> dict:
    data = {k: v for k, v in SAVE_GAME.items()}
    data["fields"] = {**SAVE_GAME["fields"], name: spec}
    data.update(extra)
    return data


@pytest.mark.parametrize(("parts", "message"), [
    (with_field("z", {"address": 0, "base": "sb9"}), "field 'z' is based on unknown pointer 'sb9'"),
    ({**SAVE_GAME, "arrays": {**SAVE_GAME["arrays"], "f2": {"kind": "flags", "base": "nope", "address": 0,
                                                            "bytes": 1}}},
     "array 'f2' is based on unknown pointer 'nope'"),
    (with_field("z", {"flag": "flagz", "index": 1}), "field 'z' names unknown array 'flagz'"),
    (with_field("z", {"flag": "vars", "index": 0x4000}), "flag needs an array of kind flags"),
    (with_field("z", {"flag": "event_flags", "index": 288 * 8}), "flag 0x900 is outside array 'event_flags'"),
    (with_field("z", {"var": "vars", "index": 0x3FFF}), "var 0x3FFF is outside array 'vars'"),
    (with_field("z", {"var": "vars", "index": 0x4100}), "var 0x4100 is outside array 'vars'"),
    (with_field("z", {"item": "key_items", "index": 0}), "is array 'key_items''s terminator"),
    (with_field("z", {"address": 4, "flag": "event_flags", "index": 1}), "cannot also have address"),
    (with_field("z", {"flag": "event_flags", "index": 1, "kind": "u16le"}), "cannot also have kind"),
    (with_field("z", {"flag": "event_flags", "var": "vars", "index": 1}), "not flag and var"),
    (with_field("z", {"flag": "event_flags"}), "a flag field needs an index"),
    (with_field("z", {"address": 0x03000000, "index": 3}), "index applies only to flag, var, item and highest"),
    (with_field("z", {"kind": "u8"}), "needs an address"),
    (with_field("z", {"address": 0xFFFFFFFF, "kind": "u16le"}), "field 'z' lies outside the gba address space"),
    (with_field("z", {"address": 0xFFFFFFFF, "base": "sb1", "kind": "u32le"}), "offset 0xFFFFFFFF + 4 bytes"),
    (with_field("z", {"address": 0, "kind": "s64le"}), "kind"),
    (with_field("sb1", {"address": 0x03000000}), "a field cannot share one: sb1"),
    ({**SAVE_GAME, "pointers": {"sb1": {"address": 0xFFFFFFFE}, "sb2": {"address": PTR2}}},
     "pointers outside the gba address space"),
    ({**SAVE_GAME, "arrays": {**SAVE_GAME["arrays"], "key_items": {**SAVE_GAME["arrays"]["key_items"],
                                                                   "key": "nope"}}},
     "key 'nope' is not a field"),
    ({**SAVE_GAME, "arrays": {**SAVE_GAME["arrays"], "key_items": {**SAVE_GAME["arrays"]["key_items"],
                                                                   "key": "beat_rival"}}},
     "key 'beat_rival' must be a number read at an address"),
    ({**SAVE_GAME, "arrays": {**SAVE_GAME["arrays"], "bag": {"kind": "items", "address": 0x03000000, "slots": 2,
                                                             "stride": 3, "id": "u16le", "quantity": "u16le"}}},
     "stride 3 is smaller than an id"),
    ({**SAVE_GAME, "arrays": {**SAVE_GAME["arrays"], "bag": {"kind": "items", "address": 0x03000000, "slots": 2,
                                                             "stride": 2, "terminator": 0x100}}},
     "does not fit an id of kind u8"),
    ({**SAVE_GAME, "arrays": {**SAVE_GAME["arrays"], "bag": {"kind": "bag", "address": 0, "slots": 2}}},
     "kind"),
    ({**SAVE_GAME, "milestones": [{"id": "M1", "name": "x", "points": 1, "all": [{"field": "beat_rival",
                                                                                   "contains": 1}]}]},
     "field 'beat_rival' holds a number"),
    ({**SAVE_GAME, "milestones": [{"id": "M1", "name": "x", "points": 1, "all": [{"field": "sb3", "eq": 1}]}]},
     "undefined fields: sb3"),
    ({**SAVE_GAME, "milestones": [{"id": "M1", "name": "x", "points": 1, "required": False,
                                   "all": [{"field": "x", "eq": 1}]}]},
     "the final milestone 'M1' must be required"),
    ({**SAVE_GAME, "milestones": [{"id": "M1", "name": "x", "points": 1, "required": "yes",
                                   "all": [{"field": "x", "eq": 1}]}]},
     "valid boolean"),
    ({**SAVE_GAME, "milestones": [{"id": "M1", "name": "x", "points": 1, "all": [{"field": "x",
                                                                                   "ge": -(2**31) - 1}]}]},
     "greater than or equal to -2147483648"),
    ({**SAVE_GAME, "verified": 1}, "valid boolean"),
    # records (a party) and the highest byte at an offset of those in use
    (with_field("z", {"highest": "party", "index": 100}, arrays={**SAVE_GAME["arrays"], **PARTY}),
     "field 'z': offset 100 is outside array 'party''s 100-byte records"),
    (with_field("z", {"highest": "event_flags", "index": 1}), "highest needs an array of kind records"),
    (with_field("z", {"flag": "party", "index": 1}, arrays={**SAVE_GAME["arrays"], **PARTY}),
     "flag needs an array of kind flags, and 'party' is of kind records"),
    (with_field("z", {"highest": "party", "index": 1},
                arrays={**SAVE_GAME["arrays"], "party": {**PARTY["party"], "count": "nope"}}),
     "array 'party': count 'nope' is not a field"),
    (with_field("z", {"highest": "party", "index": 1},
                arrays={**SAVE_GAME["arrays"], "party": {**PARTY["party"], "count": "beat_rival"}}),
     "count 'beat_rival' must be a number read at an address (u8 .. s32le), not flag"),
])
def test_validation_names_the_problem(parts, message):
    data = {"id": "t", "title": "t", "platform": "gba",
            "milestones": [{"id": "M1", "name": "one", "points": 1, "all": [{"field": "x", "ge": 0}]}]}
    data.update(parts)
    with pytest.raises(ValueError, match=None) as info:
        GameDefinition.model_validate(data)
    assert message in str(info.value), str(info.value)


def test_the_full_save_game_definition_is_valid_and_pointers_can_be_tested():
    game = gba(**SAVE_GAME)
    assert not game.is_ready({"sb1": 0, "a": 0}) and game.is_ready({"sb1": 0x02025000, "a": 0})
    assert not game.is_bytes("sb1") and not game.is_bytes("parcel")


ROM = {"name": "Pokemon FireRed Version (USA)", "title": "POKEMON FIRE", "code": "BPRE", "revision": 0,
       "header_checksum": 0x68, "sha1": "41cb23d8dccc8ebd7c649cd8fbb58eeace6e2fdc", "source": "No-Intro"}


def test_rom_identities():
    game = gba(roms=[ROM, {**ROM, "revision": 1, "sha1": "dd5945db9b930750cb39d00c84da8571feebf417"}],
               verified=True)
    assert game.verified and [r.revision for r in game.roms] == [0, 1] and game.roms[0].code == "BPRE"
    assert gba(roms=[{**ROM, "code": None}]).roms[0].code is None
    for bad, message in [({"sha1": ROM["sha1"].upper()}, "pattern"), ({"sha1": "abc"}, "pattern"),
                         ({"header_checksum": 256}, "less than or equal to 255"), ({"title": "X" * 17}, "16"),
                         ({"code": "BPREX"}, "4"), ({"source": None}, "source")]:
        with pytest.raises(ValueError) as info:
            gba(roms=[{**ROM, **bad}])
        assert message in str(info.value), (bad, str(info.value))
    with pytest.raises(ValueError, match="the same sha1 is listed twice"):
        gba(roms=[ROM, {**ROM, "name": "again"}])


def test_a_yaml_definition_error_names_the_file_line_and_field(tmp_path):
    text = yaml.safe_dump({"id": "t", "title": "t", "platform": "gba", **SAVE_GAME,
                           "milestones": [{"id": "M1", "name": "x", "points": 1, "all": [{"field": "x", "ge": 0}]}]},
                          sort_keys=False)
    assert parse_game_definition(text, "ok.yaml").fields["parcel"].item == "key_items"
    bad = text.replace("index: 600", "index: 2304")  # beat_rival: flag 0x900, outside 288 bytes
    assert bad != text
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(bad, "defs/fr.yaml")
    message = str(info.value)
    assert message.startswith("defs/fr.yaml:") and "flag 0x900 is outside array 'event_flags'" in message
    assert "\n" not in message


def test_the_spec_example_parses(tmp_path):
    text = """
id: example
title: Example
platform: gba
verified: false
roms:
  - name: "Pokemon FireRed Version (USA) rev 0"
    title: "POKEMON FIRE"
    code: "BPRE"
    revision: 0
    header_checksum: 0x68
    sha1: "41cb23d8dccc8ebd7c649cd8fbb58eeace6e2fdc"
    source: "No-Intro"
pointers:
  sb1: {address: 0x03005008, source: "pret/pokefirered pokefirered.sym gSaveBlock1Ptr"}
  sb2: {address: 0x0300500C, source: "gSaveBlock2Ptr"}
arrays:
  event_flags: {kind: flags, base: sb1, address: 0xEE0, bytes: 288, source: s}
  vars: {kind: vars, base: sb1, address: 0x1000, start: 0x4000, count: 256, source: s}
  bag_key_items: {kind: items, base: sb1, address: 0x3B8, slots: 30, stride: 4,
                  id: u16le, quantity: u16le, terminator: 0, key: qty_key, source: s}
fields:
  x:          {address: 0x0, base: sb1, kind: s16le, source: s}
  map_id:     {address: 0x0300500F, source: s}
  qty_key:    {address: 0xF20, base: sb2, kind: u32le, source: s}
  beat_rival: {flag: event_flags, index: 0x258, source: s}
  lab_scene:  {var: vars, index: 0x4055, source: s}
  parcel:     {item: bag_key_items, index: 0x15D, source: s}
ready:
  - {field: sb1, ge: 0x02000000}
milestones:
  - {id: M1, name: Rival beaten, points: 1, all: [{field: beat_rival, eq: 1}]}
  - {id: M2, name: Scene, points: 1, required: false, all: [{field: lab_scene, ge: 3}]}
  - {id: M3, name: Parcel, points: 1, required: true, all: [{field: parcel, ge: 1}, {field: x, ge: -5}]}
"""
    game = parse_game_definition(text, "example.yaml")
    assert [m.required for m in game.milestones] == [True, False, True]
    assert game.pointers["sb2"].address == 0x0300500C and game.arrays["vars"].start == 0x4000


@settings(max_examples=60, deadline=None)
@given(levels=st.lists(st.integers(0, 255), min_size=4, max_size=4), count=st.integers(0, 255),
       base=st.integers(0, 31).map(lambda i: 0x02025000 + 4 * i))
def test_highest_reads_the_records_in_use_through_a_pointer(levels, count, base):
    """{highest: records, index: offset}: the highest byte at `offset` of the first `count` records
    (all four when count exceeds them, 0 with none), the records placed through a pointer."""
    game = gba(pointers={"sb1": {"address": PTR1}},
               arrays={"mons": {"kind": "records", "base": "sb1", "address": 0x10, "slots": 4, "stride": 12,
                                "count": "n"}},
               fields={"a": {"address": 0x03000004}, "n": {"address": 0x03000000},
                       "top": {"highest": "mons", "index": 9}})
    mem = Memory()
    mem.u32(PTR1, base)
    mem.put(0x03000000, [count])
    for i, level in enumerate(levels):
        mem.put(base + 0x10 + 12 * i, [0xEE] * 9 + [level] + [0xEE] * 2)  # only byte 9 is a level
    assert Probe(game)(mem.read_range)["top"] == max(levels[:count], default=0)
