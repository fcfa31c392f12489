"""Gen-3 party records: FireRed's 100-byte `struct Pokemon`, read and written byte for byte.

Facts from pret/pokefirered (master df4449a27cd78dd747ce269e47d3ab4a0149d8f4), cited beside each use:
include/pokemon.h (struct BoxPokemon, struct Pokemon, struct PokemonSubstruct0-3) and src/pokemon.c
(GetSubstruct, EncryptBoxMon/DecryptBoxMon, CalculateBoxMonChecksum, CalculateMonStats,
ModifyStatByNature, sNatureStatTable, GetNatureFromPersonality). Bit-fields are packed from the least
significant bit (GCC on a little-endian ARM), so `u16 metLevel:7` is bits 0-6 of the u16 at Misc+0x02.

The record: an 80-byte BoxPokemon (personality, otId, nickname, ..., a checksum and 48 encrypted bytes:
four 12-byte substructures, Growth / Attacks / EVs & Condition / Misc, in the order personality % 24
picks, every u32 XORed with personality ^ otId), then the unencrypted status, level, HP and stats. A
checksum that is not the sum of the decrypted u16 halfwords makes the game mark the record a bad egg
(GetBoxMonData: isBadEgg, isEgg set) — `encode` always writes the right one.

This module knows nothing of RAM or of a game's tables: engine.battle.gen3_battle feeds it species' base
stats, growth rates and moves' PP from the game definition.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

RECORD_SIZE = 100  # sizeof(struct Pokemon): 80-byte BoxPokemon + 20-byte tail (include/pokemon.h)
BOX_SIZE = 80  # sizeof(struct BoxPokemon)
SECURE_AT = 0x20  # BoxPokemon.secure: after personality 4, otId 4, nickname 10, language 1, flags 1,
#                   otName 7, markings 1, checksum 2, unknown 2 (include/pokemon.h)
SUBSTRUCT_SIZE = 12  # NUM_SUBSTRUCT_BYTES (include/pokemon.h)
NICKNAME_LENGTH = 10  # POKEMON_NAME_LENGTH (include/constants/global.h)
OT_NAME_LENGTH = 7  # PLAYER_NAME_LENGTH (include/constants/global.h)
LANGUAGE_ENGLISH = 2  # include/constants/global.h
NUM_NATURES = 25  # include/constants/pokemon.h
MAX_IV = 31  # MAX_PER_STAT_IVS (include/constants/pokemon.h)
MAX_EV = 255  # MAX_PER_STAT_EVS
MAX_TOTAL_EVS = 510  # MAX_TOTAL_EVS
MAX_LEVEL = 100
ITEM_POKE_BALL = 4  # include/constants/items.h; CreateBoxMon gives every new Pokémon this ball (src/pokemon.c)
MAIL_NONE = 0xFF  # include/constants/items.h; CreateMon sets MON_DATA_MAIL to it (src/pokemon.c)

# src/pokemon.c GetSubstruct: SUBSTRUCT_CASE(n, v1, v2, v3, v4) puts substructure 0 (Growth) at position
# v1 of secure.substructs, 1 (Attacks) at v2, 2 (EVs & Condition) at v3, 3 (Misc) at v4.
POSITIONS: tuple[tuple[int, int, int, int], ...] = (
    (0, 1, 2, 3), (0, 1, 3, 2), (0, 2, 1, 3), (0, 3, 1, 2), (0, 2, 3, 1), (0, 3, 2, 1),
    (1, 0, 2, 3), (1, 0, 3, 2), (2, 0, 1, 3), (3, 0, 1, 2), (2, 0, 3, 1), (3, 0, 2, 1),
    (1, 2, 0, 3), (1, 3, 0, 2), (2, 1, 0, 3), (3, 1, 0, 2), (2, 3, 0, 1), (3, 2, 0, 1),
    (1, 2, 3, 0), (1, 3, 2, 0), (2, 1, 3, 0), (3, 1, 2, 0), (2, 3, 1, 0), (3, 2, 1, 0),
)

# The stats in IV/EV order (struct PokemonSubstruct2 hpEV, attackEV, defenseEV, speedEV, spAttackEV,
# spDefenseEV; struct PokemonSubstruct3 hpIV .. spDefenseIV) — speed before the special stats.
STATS = ("hp", "attack", "defense", "speed", "sp_attack", "sp_defense")

NATURES = ("HARDY", "LONELY", "BRAVE", "ADAMANT", "NAUGHTY", "BOLD", "DOCILE", "RELAXED", "IMPISH", "LAX",
           "TIMID", "HASTY", "SERIOUS", "JOLLY", "NAIVE", "MODEST", "MILD", "QUIET", "BASHFUL", "RASH",
           "CALM", "GENTLE", "SASSY", "CAREFUL", "QUIRKY")  # NATURE_HARDY 0 .. NATURE_QUIRKY 24 (constants/pokemon.h)


def nature_effect(nature: int, stat: str) -> int:
    """+1, -1 or 0: src/pokemon.c sNatureStatTable[nature] over (Attack, Defense, Speed, Sp.Atk, Sp.Def).
    Rows of the table follow one rule: nature // 5 is the raised stat, nature % 5 the lowered, and the
    five where they coincide (Hardy, Docile, Serious, Bashful, Quirky) are neutral."""
    order = ("attack", "defense", "speed", "sp_attack", "sp_defense")
    if stat not in order:
        return 0  # HP is never modified (ModifyStatByNature: statIndex <= STAT_HP)
    up, down = divmod(nature, 5)
    if up == down:
        return 0
    i = order.index(stat)
    return 1 if i == up else -1 if i == down else 0


# -- the four substructures -------------------------------------------------------------------------

@dataclass(frozen=True)
class Growth:
    """struct PokemonSubstruct0 (include/pokemon.h): u16 species, u16 heldItem, u32 experience,
    u8 ppBonuses, u8 friendship, u16 filler."""

    species: int = 0
    held_item: int = 0
    experience: int = 0
    pp_bonuses: int = 0
    friendship: int = 0
    filler: int = 0

    def pack(self) -> bytes:
        return struct.pack("<HHIBBH", self.species, self.held_item, self.experience, self.pp_bonuses,
                           self.friendship, self.filler)

    @classmethod
    def unpack(cls, b: bytes) -> Growth:
        return cls(*struct.unpack("<HHIBBH", b))


@dataclass(frozen=True)
class Attacks:
    """struct PokemonSubstruct1: u16 moves[MAX_MON_MOVES], u8 pp[MAX_MON_MOVES] (4 each)."""

    moves: tuple[int, int, int, int] = (0, 0, 0, 0)
    pp: tuple[int, int, int, int] = (0, 0, 0, 0)

    def pack(self) -> bytes:
        return struct.pack("<4H4B", *self.moves, *self.pp)

    @classmethod
    def unpack(cls, b: bytes) -> Attacks:
        v = struct.unpack("<4H4B", b)
        return cls(tuple(v[:4]), tuple(v[4:]))


@dataclass(frozen=True)
class Condition:
    """struct PokemonSubstruct2: u8 hpEV, attackEV, defenseEV, speedEV, spAttackEV, spDefenseEV, then the
    contest condition u8 cool, beauty, cute, smart, tough, sheen."""

    evs: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)  # STATS order
    contest: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)

    def pack(self) -> bytes:
        return bytes(self.evs) + bytes(self.contest)

    @classmethod
    def unpack(cls, b: bytes) -> Condition:
        return cls(tuple(b[:6]), tuple(b[6:12]))


@dataclass(frozen=True)
class Misc:
    """struct PokemonSubstruct3: u8 pokerus (+0x00), u8 metLocation (+0x01); the u16 at +0x02 holds
    metLevel:7, metGame:4, pokeball:4, otGender:1; the u32 at +0x04 holds hpIV:5 .. spDefenseIV:5 (STATS
    order), isEgg:1, abilityNum:1; the u32 at +0x08 the ribbons and modernFatefulEncounter, kept raw."""

    pokerus: int = 0
    met_location: int = 0
    met_level: int = 0
    met_game: int = 0
    pokeball: int = 0
    ot_gender: int = 0
    ivs: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)
    is_egg: int = 0
    ability_num: int = 0  # which of the species' two abilities (SpeciesInfo.abilities[abilityNum])
    ribbons: int = 0

    def pack(self) -> bytes:
        origin = self.met_level | self.met_game << 7 | self.pokeball << 11 | self.ot_gender << 15
        words = sum(iv << (5 * i) for i, iv in enumerate(self.ivs)) | self.is_egg << 30 | self.ability_num << 31
        return struct.pack("<BBHII", self.pokerus, self.met_location, origin, words, self.ribbons)

    @classmethod
    def unpack(cls, b: bytes) -> Misc:
        pokerus, loc, origin, words, ribbons = struct.unpack("<BBHII", b)
        return cls(pokerus, loc, origin & 0x7F, origin >> 7 & 0xF, origin >> 11 & 0xF, origin >> 15,
                   tuple(words >> (5 * i) & 0x1F for i in range(6)), words >> 30 & 1, words >> 31 & 1, ribbons)


# -- the record --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stats:
    """struct Pokemon's tail after `u32 status; u8 level; u8 mail;`: u16 hp, maxHP, attack, defense, speed,
    spAttack, spDefense (include/pokemon.h; at +0x56 .. +0x62)."""

    hp: int = 0
    max_hp: int = 0
    attack: int = 0
    defense: int = 0
    speed: int = 0
    sp_attack: int = 0
    sp_defense: int = 0


@dataclass(frozen=True)
class Gen3Mon:
    """One decoded record. `checksum` is not a field: encode computes it, decode reports whether it held."""

    personality: int = 0  # +0x00 u32
    ot_id: int = 0  # +0x04 u32 (trainer id in the low half, secret id in the high half)
    nickname: bytes = bytes([0xFF]) * NICKNAME_LENGTH  # +0x08 u8[10], game charset, EOS 0xFF
    language: int = LANGUAGE_ENGLISH  # +0x12
    flags: int = 0  # +0x13: isBadEgg:1, hasSpecies:1, isEgg:1, blockBoxRS:1, unused:4
    ot_name: bytes = bytes([0xFF]) * OT_NAME_LENGTH  # +0x14 u8[7]
    markings: int = 0  # +0x1B
    unknown: int = 0  # +0x1E u16 (after the u16 checksum at +0x1C)
    growth: Growth = field(default_factory=Growth)
    attacks: Attacks = field(default_factory=Attacks)
    condition: Condition = field(default_factory=Condition)
    misc: Misc = field(default_factory=Misc)
    status: int = 0  # +0x50 u32
    level: int = 0  # +0x54 u8
    mail: int = 0  # +0x55 u8
    stats: Stats = field(default_factory=Stats)

    @property
    def nature(self) -> int:
        return self.personality % NUM_NATURES  # src/pokemon.c GetNatureFromPersonality

    @property
    def order(self) -> tuple[int, int, int, int]:
        return POSITIONS[self.personality % 24]  # src/pokemon.c GetSubstruct

    @property
    def is_bad_egg(self) -> bool:
        return bool(self.flags & 1)


def _key(personality: int, ot_id: int) -> int:
    return (personality ^ ot_id) & 0xFFFFFFFF  # src/pokemon.c EncryptBoxMon: raw[i] ^= personality, ^= otId


def _xor(data: bytes, key: int) -> bytes:
    words = struct.unpack("<12I", data)
    return struct.pack("<12I", *(w ^ key for w in words))


def checksum_of(plain: bytes) -> int:
    """src/pokemon.c CalculateBoxMonChecksum: the u16 sum of the decrypted substructures' halfwords."""
    return sum(struct.unpack("<24H", plain)) & 0xFFFF


def _plain(mon: Gen3Mon) -> bytes:
    """The 48 secure bytes, decrypted, in the order the personality picks."""
    parts = (mon.growth.pack(), mon.attacks.pack(), mon.condition.pack(), mon.misc.pack())
    slots: list[bytes] = [b""] * 4
    for kind, position in enumerate(mon.order):
        slots[position] = parts[kind]
    return b"".join(slots)


def encode(mon: Gen3Mon) -> bytes:
    """The 100 bytes of `mon`, with the right checksum and the secure block encrypted."""
    plain = _plain(mon)
    head = struct.pack("<II10sBB7sBHH", mon.personality, mon.ot_id, mon.nickname, mon.language, mon.flags,
                       mon.ot_name, mon.markings, checksum_of(plain), mon.unknown)
    s = mon.stats
    tail = struct.pack("<IBB7H", mon.status, mon.level, mon.mail, s.hp, s.max_hp, s.attack, s.defense, s.speed,
                       s.sp_attack, s.sp_defense)
    out = head + _xor(plain, _key(mon.personality, mon.ot_id)) + tail
    assert len(out) == RECORD_SIZE
    return out


@dataclass(frozen=True)
class Decoded:
    mon: Gen3Mon
    stored_checksum: int
    computed_checksum: int

    @property
    def checksum_ok(self) -> bool:
        """False: the game would show this record as a bad egg (src/pokemon.c GetBoxMonData)."""
        return self.stored_checksum == self.computed_checksum


def decode(data: bytes) -> Decoded:
    """Read a 100-byte record (ValueError for another length)."""
    if len(data) != RECORD_SIZE:
        raise ValueError(f"a Gen-3 party record is {RECORD_SIZE} bytes, not {len(data)}")
    data = bytes(data)
    (personality, ot_id, nickname, language, flags, ot_name, markings, stored,
     unknown) = struct.unpack("<II10sBB7sBHH", data[:SECURE_AT])
    plain = _xor(data[SECURE_AT:BOX_SIZE], _key(personality, ot_id))
    order = POSITIONS[personality % 24]
    part = [plain[p * SUBSTRUCT_SIZE:(p + 1) * SUBSTRUCT_SIZE] for p in order]  # by substructure kind
    status, level, mail, *st = struct.unpack("<IBB7H", data[BOX_SIZE:])
    mon = Gen3Mon(personality, ot_id, nickname, language, flags, ot_name, markings, unknown,
                  Growth.unpack(part[0]), Attacks.unpack(part[1]), Condition.unpack(part[2]), Misc.unpack(part[3]),
                  status, level, mail, Stats(*st))
    return Decoded(mon, stored, checksum_of(plain))


# -- the writer --------------------------------------------------------------------------------------

GROWTH_RATES = ("medium_fast", "erratic", "fluctuating", "medium_slow", "fast", "slow")  # GROWTH_MEDIUM_FAST 0 ..


def experience_at(growth_rate: str, level: int) -> int:
    """gExperienceTables[growthRate][level] (src/data/pokemon/experience_tables.h): 0 at level 0, 1 at level
    1 in every table, else the table's formula (C integer division; every term is positive here)."""
    n = level
    if n <= 1:
        return n
    cube = n ** 3
    if growth_rate == "medium_fast":
        return cube
    if growth_rate == "erratic":
        if n <= 50:
            return (100 - n) * cube // 50
        if n <= 68:
            return (150 - n) * cube // 100
        if n <= 98:
            return ((1911 - 10 * n) // 3) * cube // 500
        return (160 - n) * cube // 100
    if growth_rate == "fluctuating":
        if n <= 15:
            return ((n + 1) // 3 + 24) * cube // 50
        if n <= 36:
            return (n + 14) * cube // 50
        return ((n // 2) + 32) * cube // 50
    if growth_rate == "medium_slow":
        return 6 * cube // 5 - 15 * n * n + 100 * n - 140
    if growth_rate == "fast":
        return 4 * cube // 5
    if growth_rate == "slow":
        return 5 * cube // 4
    raise ValueError(f"unknown growth rate {growth_rate!r} (one of {', '.join(GROWTH_RATES)})")


def calc_stats(base: dict[str, int], level: int, ivs: tuple[int, ...], evs: tuple[int, ...], nature: int,
               shedinja: bool = False) -> Stats:
    """src/pokemon.c CalculateMonStats: HP = ((2*base + iv + ev/4) * level)/100 + level + 10 (Shedinja 1);
    others ((2*base + iv + ev/4) * level)/100 + 5, then ModifyStatByNature (x110/100 or x90/100, in u16)."""
    def other(i: int, stat: str) -> int:
        n = (2 * base[stat] + ivs[i] + evs[i] // 4) * level // 100 + 5
        effect = nature_effect(nature, stat)
        if effect:
            n = (n * (110 if effect > 0 else 90)) & 0xFFFF  # ModifyStatByNature's u16 retVal (no BUGFIX)
            n //= 100
        return n

    max_hp = 1 if shedinja else (2 * base["hp"] + ivs[0] + evs[0] // 4) * level // 100 + level + 10
    values = {s: other(i, s) for i, s in enumerate(STATS) if s != "hp"}
    return Stats(max_hp, max_hp, values["attack"], values["defense"], values["speed"], values["sp_attack"],
                 values["sp_defense"])


def personality_with_nature(personality: int, nature: int) -> int:
    """A personality whose % 25 is `nature`, keeping what else the personality decides: its low byte (gender
    against the species' ratio; bit 0, the ability a new Pokémon is given) and whether it is shiny
    (src/pokemon.c IsShinyOtIdPersonality: otId's halves XOR the personality's halves < SHINY_ODDS 8).
    XORing the same byte d into bits 8-15 and 24-31 keeps the halves' XOR; XORing s < 8 into bits 16-18
    changes it only below 8, so it stays below 8 or at/above it. Of those 2048 candidates the first with
    the nature is taken (every residue is reached: a property test)."""
    if not 0 <= nature < NUM_NATURES:
        raise ValueError(f"nature {nature} is not 0..24")
    for s in range(8):
        for d in range(256):
            p = personality ^ (d << 8) ^ (d << 24) ^ (s << 16)
            if p % NUM_NATURES == nature:
                return p
    raise ValueError(f"no personality near {personality:#010x} has nature {nature}")  # never seen


@dataclass(frozen=True)
class Build:
    """What a team member asks for, in the game's ids: the writer turns it into a record."""

    species: int
    level: int
    moves: tuple[int, ...]  # 1-4 move ids
    move_pp: tuple[int, ...]  # each move's base PP (gBattleMoves[move].pp)
    base: dict[str, int]  # the species' base stats, by STATS name
    growth_rate: str
    held_item: int = 0
    evs: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)
    ivs: tuple[int, int, int, int, int, int] = (0, 0, 0, 0, 0, 0)
    nature: int | None = None  # None: the personality's own
    ability_num: int = 0
    friendship: int = 70  # the usual base friendship (gSpeciesInfo[].friendship 70 for most species)
    shedinja: bool = False


def check_build(b: Build) -> None:
    """ValueError for a value the record cannot hold or the game would not accept."""
    if not 1 <= b.level <= MAX_LEVEL:
        raise ValueError(f"level {b.level} is not 1..{MAX_LEVEL}")
    if not 1 <= len(b.moves) <= 4 or len(b.moves) != len(b.move_pp):
        raise ValueError("1 to 4 moves, each with its PP")
    if len(set(b.moves)) != len(b.moves) or 0 in b.moves:
        raise ValueError("moves must be distinct, nonzero ids")
    if any(not 0 <= e <= MAX_EV for e in b.evs) or sum(b.evs) > MAX_TOTAL_EVS:
        raise ValueError(f"EVs are 0..{MAX_EV} each and at most {MAX_TOTAL_EVS} in all")
    if any(not 0 <= i <= MAX_IV for i in b.ivs):
        raise ValueError(f"IVs are 0..{MAX_IV}")
    if b.ability_num not in (0, 1):
        raise ValueError("ability_num is 0 or 1 (SpeciesInfo.abilities[2])")
    if not 0 < b.species <= 0xFFFF or not 0 <= b.held_item <= 0xFFFF:
        raise ValueError("species and item ids are u16, species nonzero")


def build(b: Build, template: Gen3Mon | None = None) -> Gen3Mon:
    """A record that is `b`, keeping from `template` (the slot's current record, or a blank) what the build
    does not set: personality (changed only as far as the nature needs), otId, names, met data, ribbons.
    Stats are recomputed, HP full, status clear; the checksum is encode's."""
    check_build(b)
    t = template or Gen3Mon()
    personality = t.personality if b.nature is None else personality_with_nature(t.personality, b.nature)
    nature = personality % NUM_NATURES
    stats = calc_stats(b.base, b.level, b.ivs, b.evs, nature, b.shedinja)
    moves = tuple(b.moves) + (0,) * (4 - len(b.moves))
    pp = tuple(b.move_pp) + (0,) * (4 - len(b.move_pp))
    return replace(
        t, personality=personality,
        flags=(t.flags & ~0b101) | 0b10,  # hasSpecies set, isBadEgg and isEgg clear (SetBoxMonData SPECIES)
        growth=Growth(b.species, b.held_item, experience_at(b.growth_rate, b.level), 0, b.friendship,
                      t.growth.filler),
        attacks=Attacks(moves, pp),  # ppBonuses 0: each move's PP is its base PP
        condition=Condition(tuple(b.evs), t.condition.contest),
        misc=replace(t.misc, ivs=tuple(b.ivs), is_egg=0, ability_num=b.ability_num,
                     met_level=t.misc.met_level or b.level,
                     pokeball=t.misc.pokeball or ITEM_POKE_BALL),
        status=0, level=b.level, mail=t.mail if template is not None else MAIL_NONE,
        stats=stats)
