"""FireRed's 100-byte party record (engine.battle.gen3_record): round trips, the checksum, the writer."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.battle.gen3_record import (
    NATURES,
    POSITIONS,
    RECORD_SIZE,
    Attacks,
    Build,
    Condition,
    Gen3Mon,
    Growth,
    Misc,
    Stats,
    build,
    calc_stats,
    decode,
    encode,
    experience_at,
    nature_effect,
    personality_with_nature,
)

u8, u16, u32 = st.integers(0, 0xFF), st.integers(0, 0xFFFF), st.integers(0, 0xFFFFFFFF)


def six(s):
    return st.tuples(s, s, s, s, s, s)


mons = st.builds(
    Gen3Mon, personality=u32, ot_id=u32, nickname=st.binary(min_size=10, max_size=10), language=u8, flags=u8,
    ot_name=st.binary(min_size=7, max_size=7), markings=u8, unknown=u16,
    growth=st.builds(Growth, u16, u16, u32, u8, u8, u16),
    attacks=st.builds(Attacks, st.tuples(u16, u16, u16, u16), st.tuples(u8, u8, u8, u8)),
    condition=st.builds(Condition, six(u8), six(u8)),
    misc=st.builds(Misc, u8, u8, st.integers(0, 127), st.integers(0, 15), st.integers(0, 15), st.integers(0, 1),
                   six(st.integers(0, 31)), st.integers(0, 1), st.integers(0, 1), u32),
    status=u32, level=u8, mail=u8, stats=st.builds(Stats, u16, u16, u16, u16, u16, u16, u16))


@settings(max_examples=300, deadline=None)
@given(mons)
def test_decode_of_encode_is_the_record(mon):
    data = encode(mon)
    assert len(data) == RECORD_SIZE
    got = decode(data)
    assert got.mon == mon and got.checksum_ok


@settings(max_examples=50, deadline=None)
@given(mons, st.integers(0, 23))
def test_every_substructure_order_round_trips(mon, order):
    # the same record with a personality of each residue mod 24: the order GetSubstruct picks
    from dataclasses import replace
    mon = replace(mon, personality=(mon.personality - mon.personality % 24 + order) & 0xFFFFFFFF)
    if mon.personality % 24 != order:  # wrapped past 2^32
        mon = replace(mon, personality=order)
    assert decode(encode(mon)).mon == mon


def test_the_order_table_is_every_permutation_once():
    assert len(set(POSITIONS)) == 24 and all(sorted(p) == [0, 1, 2, 3] for p in POSITIONS)


def test_a_known_layout_byte_for_byte():
    """personality 0 (order Growth, Attacks, EVs, Misc) and otId 0: nothing is XORed, so the offsets show."""
    mon = Gen3Mon(personality=0, ot_id=0, growth=Growth(species=0x0102, held_item=0x0304, experience=0x05060708),
                  attacks=Attacks((0x21, 0x22, 0x23, 0x24), (5, 6, 7, 8)), level=42,
                  stats=Stats(hp=300, max_hp=301))
    data = encode(mon)
    assert data[0x20:0x24] == bytes([0x02, 0x01, 0x04, 0x03])  # species, heldItem (u16 little endian)
    assert data[0x24:0x28] == bytes([0x08, 0x07, 0x06, 0x05])  # experience
    assert data[0x2C:0x2E] == bytes([0x21, 0])  # Attacks at position 1: moves[0]
    assert data[0x34:0x38] == bytes([5, 6, 7, 8])  # pp
    assert data[0x54] == 42 and struct.unpack_from("<HH", data, 0x56) == (300, 301)
    halfwords = struct.unpack_from("<24H", data, 0x20)
    assert struct.unpack_from("<H", data, 0x1C)[0] == sum(halfwords) & 0xFFFF


def test_the_secure_block_is_xored_with_personality_xor_ot_id():
    mon = Gen3Mon(personality=0x12345678, ot_id=0x9ABCDEF0, growth=Growth(species=1))
    data = encode(mon)
    key = 0x12345678 ^ 0x9ABCDEF0
    plain = b"".join(struct.pack("<I", w ^ key) for w in struct.unpack_from("<12I", data, 0x20))
    at = POSITIONS[0x12345678 % 24][0] * 12  # Growth's position
    assert struct.unpack_from("<H", plain, at)[0] == 1


@settings(max_examples=100, deadline=None)
@given(mons, st.integers(0, RECORD_SIZE - 1), st.integers(1, 255))
def test_a_flipped_byte_in_the_checksummed_part_is_detected(mon, at, flip):
    data = bytearray(encode(mon))
    data[at] ^= flip
    got = decode(bytes(data))
    # the checksum covers the secure block (and is itself at 0x1C); personality/otId change the key
    if 0x1C <= at < 0x1E or 0x20 <= at < 0x50:
        assert not got.checksum_ok
    elif at >= 0x50 or 0x08 <= at < 0x1C or 0x1E <= at < 0x20:
        assert got.checksum_ok  # the unencrypted names and tail are outside the checksum, as in the game


def test_a_wrong_length_is_refused():
    with pytest.raises(ValueError, match="100 bytes"):
        decode(bytes(99))


# -- the writer --------------------------------------------------------------------------------------

BULBASAUR = {"hp": 45, "attack": 49, "defense": 49, "speed": 45, "sp_attack": 65, "sp_defense": 65}
builds = st.builds(
    Build, species=st.integers(1, 411), level=st.integers(1, 100),
    moves=st.lists(st.integers(1, 354), min_size=1, max_size=4, unique=True).map(tuple),
    move_pp=st.just(()), base=st.just(BULBASAUR),
    growth_rate=st.sampled_from(["medium_fast", "erratic", "fluctuating", "medium_slow", "fast", "slow"]),
    held_item=st.integers(0, 376), evs=six(st.integers(0, 85)), ivs=six(st.integers(0, 31)),
    nature=st.none() | st.integers(0, 24), ability_num=st.integers(0, 1))


@settings(max_examples=300, deadline=None)
@given(builds, st.none() | mons)
def test_the_writer_never_leaves_a_bad_egg(b, template):
    from dataclasses import replace
    b = replace(b, move_pp=tuple(10 + m % 30 for m in b.moves))
    mon = build(b, template)
    got = decode(encode(mon))
    assert got.checksum_ok and not got.mon.is_bad_egg and got.mon.misc.is_egg == 0
    assert got.mon.flags & 0b111 == 0b010  # hasSpecies
    assert got.mon.growth.species == b.species and got.mon.level == b.level
    assert got.mon.attacks.moves[:len(b.moves)] == b.moves and got.mon.attacks.pp[:len(b.moves)] == b.move_pp
    assert got.mon.condition.evs == b.evs and got.mon.misc.ivs == b.ivs
    assert got.mon.misc.ability_num == b.ability_num and got.mon.growth.held_item == b.held_item
    if b.nature is not None:
        assert got.mon.nature == b.nature
    if template is not None:  # the personality keeps its low byte (gender, ability bit) and shininess
        p, q = template.personality, got.mon.personality
        # (the halves' XOR changes only in its low 3 bits: shiny, < 8 against any otId, stays so)
        assert p & 0xFF == q & 0xFF and (p >> 16 ^ p & 0xFFFF) >> 3 == (q >> 16 ^ q & 0xFFFF) >> 3
        assert got.mon.ot_id == template.ot_id and got.mon.nickname == template.nickname
    assert got.mon.stats.hp == got.mon.stats.max_hp
    assert experience_at(b.growth_rate, b.level) <= got.mon.growth.experience < experience_at(b.growth_rate,
                                                                                              b.level + 1)


@settings(max_examples=500, deadline=None)
@given(u32, st.integers(0, 24))
def test_every_nature_is_reachable_from_any_personality(p, nature):
    assert personality_with_nature(p, nature) % 25 == nature


# sNatureStatTable (pret/pokefirered src/pokemon.c), transcribed as facts: Attack Defense Speed SpAtk SpDef
TABLE = {"LONELY": (1, -1, 0, 0, 0), "BRAVE": (1, 0, -1, 0, 0), "ADAMANT": (1, 0, 0, -1, 0),
         "NAUGHTY": (1, 0, 0, 0, -1), "BOLD": (-1, 1, 0, 0, 0), "RELAXED": (0, 1, -1, 0, 0),
         "IMPISH": (0, 1, 0, -1, 0), "LAX": (0, 1, 0, 0, -1), "TIMID": (-1, 0, 1, 0, 0), "HASTY": (0, -1, 1, 0, 0),
         "JOLLY": (0, 0, 1, -1, 0), "NAIVE": (0, 0, 1, 0, -1), "MODEST": (-1, 0, 0, 1, 0), "MILD": (0, -1, 0, 1, 0),
         "QUIET": (0, 0, -1, 1, 0), "RASH": (0, 0, 0, 1, -1), "CALM": (-1, 0, 0, 0, 1), "GENTLE": (0, -1, 0, 0, 1),
         "SASSY": (0, 0, -1, 0, 1), "CAREFUL": (0, 0, 0, -1, 1)}


def test_the_nature_rule_matches_the_games_table():
    for i, name in enumerate(NATURES):
        got = tuple(nature_effect(i, s) for s in ("attack", "defense", "speed", "sp_attack", "sp_defense"))
        assert got == TABLE.get(name, (0, 0, 0, 0, 0)), name


def test_stats_of_a_known_pokemon():
    """A level-50 Bulbasaur, IVs 31, 252 Sp.Atk EVs, Modest (+SpAtk -Atk), worked by hand from
    CalculateMonStats: HP (90+31)*50/100+60 = 120; SpAtk ((130+31+63)*50/100+5)=117 *110/100 = 128;
    Attack (98+31)*50/100+5 = 69 *90/100 = 62."""
    s = calc_stats(BULBASAUR, 50, (31,) * 6, (0, 0, 0, 0, 252, 0), NATURES.index("MODEST"))
    assert (s.max_hp, s.attack, s.sp_attack, s.defense) == (120, 62, 128, 69)


def test_experience_tables_at_known_levels():
    # worked from the formulas of src/data/pokemon/experience_tables.h
    assert experience_at("medium_slow", 5) == 135 and experience_at("medium_fast", 100) == 1_000_000
    assert experience_at("erratic", 100) == 600_000 and experience_at("fluctuating", 100) == 1_640_000
    assert experience_at("slow", 100) == 1_250_000 and experience_at("fast", 100) == 800_000


def test_the_writer_refuses_what_the_record_cannot_hold():
    base = dict(species=1, level=5, moves=(33,), move_pp=(35,), base=BULBASAUR, growth_rate="medium_slow")
    for bad, why in (({"level": 101}, "level"), ({"evs": (255, 255, 1, 0, 0, 0)}, "510"),
                     ({"ivs": (32, 0, 0, 0, 0, 0)}, "IVs"), ({"moves": (33, 33), "move_pp": (35, 35)}, "distinct"),
                     ({"ability_num": 2}, "ability")):
        with pytest.raises(ValueError, match=why):
            build(Build(**{**base, **bad}))
