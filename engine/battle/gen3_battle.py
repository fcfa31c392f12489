"""Seed 004's battle rules on a Gen-3 game (FireRed's RAM layout): the adapter and its judge.

A game definition declares its party records Gen-3 encrypted with `battle.party.records: gen3`; the
adapter then says where FireRed keeps the party (gPlayerParty, 100-byte `struct Pokemon`), the player's
trainer id and name (the records' owner: a record with another owner is a traded Pokémon, which
disobeys), the battle's RAM (gBattleMons, gBattleOutcome, the action-selection state and cursors), the
menus as presses, and the species, move and item tables the writer needs (base stats, growth rate,
abilities, PP). engine.battle.gen3_record encodes the records; this module turns the battle tools into RAM
writes and presses, as engine.battle.battle does for the byte-per-field GB cartridge, with the same Plan (the
writes go into the trace line, so replay re-applies them) and the same rules (BattleSettings).

Addresses are data (the bundled FireRed definition cites pret/pokefirered's symbols for each); the
offsets inside `struct BattlePokemon` are facts of the layout, cited here: pret/pokefirered
include/pokemon.h (struct BattlePokemon, 0x58 bytes).
"""

from dataclasses import replace
from typing import Annotated, Literal

from pydantic import Field, model_validator

from engine.battle.battle import (
    Address,
    BattleRefused,
    BattleSettings,
    EpisodeJudge,
    Flag,
    Key,
    Member,
    Name,
    Plan,
    ReadFn,
    Writes,
    _overlay,
    _Strict,
    action_kind,
    check_team_size,
    is_slot,
    min_level_problem,
)
from engine.battle.gen3_record import (
    NATURES,
    RECORD_SIZE,
    STATS,
    Build,
    Gen3Mon,
    build,
    decode,
    encode,
)

U16 = Annotated[int, Field(ge=1, le=0xFFFF)]
Press = Literal["UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP"]  # NOOP: frames pass
Presses = Annotated[list[Press], Field(max_length=64)]
GrowthRate = Literal["medium_fast", "erratic", "fluctuating", "medium_slow", "fast", "slow"]

# struct BattlePokemon (pret/pokefirered include/pokemon.h): /*0x00*/ u16 species, /*0x0C*/ u16 moves[4],
# /*0x24*/ u8 pp[4], /*0x28*/ u16 hp, /*0x2A*/ u8 level, /*0x2C*/ u16 maxHP; sizeof 0x58
BM_SPECIES, BM_MOVES, BM_PP, BM_HP, BM_LEVEL, BM_MAX_HP, BM_SIZE = 0x00, 0x0C, 0x24, 0x28, 0x2A, 0x2C, 0x58
# struct Pokemon's unencrypted hp (include/pokemon.h: after the 80-byte box, u32 status, u8 level, u8 mail)
REC_HP = 0x56
STATE_WAIT_ACTION_CHOSEN, STATE_WAIT_ACTION_CASE_CHOSEN = 1, 2  # src/battle_main.c, the anonymous enum
# whose move it is, by phase (observe's `turn`); a decided battle's phase has none
_TURN = {"before-battle": "yours", "choose-action": "yours", "choose-move": "yours", "send": "yours",
         "turn": "playing"}


class BaseStats(_Strict):
    hp: Annotated[int, Field(ge=1, le=255)]
    attack: Annotated[int, Field(ge=1, le=255)]
    defense: Annotated[int, Field(ge=1, le=255)]
    speed: Annotated[int, Field(ge=1, le=255)]
    sp_attack: Annotated[int, Field(ge=1, le=255)]
    sp_defense: Annotated[int, Field(ge=1, le=255)]


class Gen3Species(_Strict):
    """gSpeciesInfo[id] as far as a record needs it (src/data/pokemon/species_info.h), and the moves it may
    learn (the game's learnsets; what a task's pool may narrow)."""

    id: U16
    name: Name
    types: Annotated[list[Name], Field(min_length=1, max_length=2)]
    base: BaseStats
    growth_rate: GrowthRate
    abilities: Annotated[list[Name], Field(min_length=1, max_length=2)]  # SpeciesInfo.abilities[abilityNum]
    moves: Annotated[list[Name], Field(min_length=1, max_length=256)]
    friendship: Annotated[int, Field(ge=0, le=255)] = 70


class Gen3Move(_Strict):
    """gBattleMoves[id] (src/data/battle_moves.h): PP for the record; type, power and accuracy for the agent."""

    id: U16
    name: Name
    pp: Annotated[int, Field(ge=1, le=64)]
    type: Name | None = None
    power: Annotated[int, Field(ge=0, le=255)] | None = None
    accuracy: Annotated[int, Field(ge=0, le=100)] | None = None


class Gen3Item(_Strict):
    id: U16
    name: Name
    effect: Annotated[str, Field(max_length=200)] | None = None  # what it does in battle (the agent's data)


class Gen3Ability(_Strict):
    """An ability a species may have (Gen3Species.abilities names it) and what it does, for the agent's data."""

    name: Name
    effect: Annotated[str, Field(max_length=200)]


class Owner(_Strict):
    """The player: gSaveBlock2Ptr -> SaveBlock2.playerName (u8[8]) and playerTrainerId (u8[4])."""

    pointer: Address
    name: int
    trainer_id: int


class Gen3Party(_Strict):
    """The record kind: `records: gen3`, FireRed's 100-byte encrypted `struct Pokemon` per slot."""

    records: Literal["gen3"]
    count: Address
    address: Address
    slots: Annotated[int, Field(ge=1, le=6)]
    stride: Literal[100] = RECORD_SIZE
    owner: Owner


class Gen3Screen(_Strict):
    """The battle's RAM: what the battle screen shows is read from here."""

    battle_mons: Address  # struct BattlePokemon[4]; battler 0 is ours, 1 the opponent's (a single battle)
    party_indexes: Address  # u16 per battler: the party slot in battle
    outcome: Address  # 0 while the battle is undecided
    outcome_names: Annotated[dict[Key, Name], Field(max_length=16)] = {}
    in_battle: Flag
    action_state: Address  # the player battler's action-selection state
    exec_flags: Address  # u32; bit 0 set while the player's controller runs (its menu waits for input)
    action_cursor: Address
    move_cursor: Address
    party_order: Address  # u8[3]: the battle party menu's order, party ids packed in nibbles (high first)


class Gen3Menus(_Strict):
    """The battle menus as presses. The action and move menus are 2x2 grids whose cursor byte is row*2 +
    column; the party menu opens on its first entry and `party[k]` picks its k-th (in the menu's order)."""

    fight: int = 0
    pokemon: int = 2
    choose: Presses = ["A"]
    back: Presses = ["B"]  # from the move menu to the action menu
    party: Annotated[list[Presses], Field(min_length=1, max_length=6)]
    to_menu: Presses = []  # while the turn plays out: what reaches the action menu (frames passing)
    settle: Presses = []  # after an action: the turn playing out
    before: Presses = []  # at the moment before the battle: what starts it and reaches the action menu
    before_cursor: int = 0  # the action and move cursors once the battle's first menu opens
    before_move_cursor: int = 0


class Gen3BattleAdapter(_Strict):
    source: Annotated[str, Field(max_length=1000)]
    party: Gen3Party
    screen: Gen3Screen
    menus: Gen3Menus
    species: Annotated[list[Gen3Species], Field(min_length=1, max_length=4096)]
    moves: Annotated[list[Gen3Move], Field(min_length=1, max_length=4096)]
    items: Annotated[list[Gen3Item], Field(max_length=4096)] = []
    abilities: Annotated[list[Gen3Ability], Field(max_length=1024)] = []  # optional: their effects
    default_ivs: Annotated[int, Field(ge=0, le=31)] = 31  # a member that gives no IVs

    @model_validator(mode="after")
    def _tables(self) -> "Gen3BattleAdapter":
        known = {m.name for m in self.moves}
        for s in self.species:
            if missing := sorted(set(s.moves) - known):
                raise ValueError(f"battle.species {s.name}: moves {', '.join(missing)} not in battle.moves")
        for what, rows in (("species", self.species), ("moves", self.moves), ("items", self.items)):
            for key in ("id", "name"):
                values = [getattr(r, key) for r in rows]
                if len(set(values)) != len(values):
                    raise ValueError(f"battle.{what}: a {key} listed twice")
        if len(self.menus.party) < self.party.slots:
            raise ValueError("battle.menus.party: one entry per party slot")
        return self

    @property
    def slots(self) -> int:
        return self.party.slots

    def species_named(self, name: str) -> Gen3Species | None:
        return next((s for s in self.species if s.name == name), None)

    def species_of(self, sid: int) -> Gen3Species | None:
        return next((s for s in self.species if s.id == sid), None)

    def move_named(self, name: str) -> Gen3Move | None:
        return next((m for m in self.moves if m.name == name), None)

    def move_of(self, mid: int) -> Gen3Move | None:
        return next((m for m in self.moves if m.id == mid), None)

    def record_at(self, slot: int) -> int:
        return self.party.address + slot * self.party.stride


# -- reading RAM ----------------------------------------------------------------------------------

def _u8(read: ReadFn, a: int) -> int:
    return int(read(a, 1)[0])


def _u16(read: ReadFn, a: int) -> int:
    return int.from_bytes(bytes(read(a, 2)), "little")


def _u32(read: ReadFn, a: int) -> int:
    return int.from_bytes(bytes(read(a, 4)), "little")


def in_battle(a: Gen3BattleAdapter, read: ReadFn) -> bool:
    f = a.screen.in_battle
    return bool(_u8(read, f.address) >> f.bit & 1)


def check_team_settings(settings: BattleSettings, adapter: Gen3BattleAdapter) -> None:
    """engine.battle.check_settings for a Gen-3 adapter: the limit, the pool's names, the default team."""
    if settings.party_limit > adapter.slots:
        raise BattleRefused(f"party_limit {settings.party_limit} is more than the game's {adapter.slots} party slots")
    pool = settings.pool
    for what, names, known in (("species", pool.species, {s.name for s in adapter.species}),
                               ("moves", pool.moves, {m.name for m in adapter.moves}),
                               ("items", pool.items, {i.name for i in adapter.items})):
        if unknown := sorted(set(names or ()) - known):
            raise BattleRefused(f"pool.{what}: {', '.join(unknown)} not in the game's table")
    if settings.team is not None:
        try:
            member_builds(settings.team, settings, adapter)
        except BattleRefused as exc:
            raise BattleRefused(f"team: {exc}") from None


def _stat_values(given: dict[str, int] | None, default: int, what: str, at: str) -> tuple[int, ...]:
    given = given or {}
    if unknown := sorted(set(given) - set(STATS)):
        raise BattleRefused(f"{at}: {what} has no stat {', '.join(unknown)} (stats: {', '.join(STATS)})")
    return tuple(given.get(s, default) for s in STATS)


def member_builds(team: list[Member], settings: BattleSettings, adapter: Gen3BattleAdapter) -> list[Build]:
    """Each member as the writer's Build, after checking it against the rules and the game's tables."""
    check_team_size(team, settings)
    return [_member_build(f"member {i}", m, settings, adapter) for i, m in enumerate(team)]


def _member_build(at: str, m: Member, settings: BattleSettings, adapter: Gen3BattleAdapter) -> Build:
    """One member's Build: each field checked in turn (the first refusal is the one reported)."""
    sp = _member_species(at, m, settings, adapter)
    level = _member_level(at, m, settings)
    chosen = _member_moves(at, m, sp, settings)
    item_id = _member_item(at, m, settings, adapter)
    nature = _member_nature(at, m)
    ability_num = _member_ability(at, m, sp)
    evs, ivs = _member_stats(at, m, adapter)
    moves = [adapter.move_named(n) for n in chosen]
    return Build(species=sp.id, level=level, moves=tuple(mv.id for mv in moves),
                 move_pp=tuple(mv.pp for mv in moves), base=sp.base.model_dump(),
                 growth_rate=sp.growth_rate, held_item=item_id, evs=evs, ivs=ivs, nature=nature,
                 ability_num=ability_num, friendship=sp.friendship, shedinja=sp.name.upper() == "SHEDINJA")


def _member_species(at: str, m: Member, settings: BattleSettings, adapter: Gen3BattleAdapter) -> Gen3Species:
    sp = adapter.species_named(m.species)
    if sp is None:
        raise BattleRefused(f"{at}: no species {m.species!r} in this game")
    if settings.pool.species is not None and m.species not in settings.pool.species:
        raise BattleRefused(f"{at}: species {m.species} is not in the task's pool")
    return sp


def _member_level(at: str, m: Member, settings: BattleSettings) -> int:
    """The member's level (none given: the task's cap), within the cap, 100 and the pool's minimum."""
    level = m.level if m.level is not None else settings.level_cap
    if level is None:
        raise BattleRefused(f"{at}: level is needed (this game's records have levels and the task has no cap)")
    if settings.level_cap is not None and level > settings.level_cap:
        raise BattleRefused(f"{at}: level {level} is over the task's level cap of {settings.level_cap}")
    if level > 100:
        raise BattleRefused(f"{at}: level {level} is over 100")
    if why := min_level_problem(settings, m.species, level):
        raise BattleRefused(f"{at}: {why}")
    return level


def _member_moves(at: str, m: Member, sp: Gen3Species, settings: BattleSettings) -> list[str]:
    """The member's moves (none given: the species' first four the pool allows), each learnable and allowed."""
    pool = settings.pool
    chosen = m.moves or [n for n in sp.moves if pool.moves is None or n in pool.moves][:4]
    if len(set(chosen)) != len(chosen):
        raise BattleRefused(f"{at}: a move listed twice")
    for move in chosen:
        if move not in sp.moves:
            raise BattleRefused(f"{at}: {m.species} cannot learn {move}")
        if pool.moves is not None and move not in pool.moves:
            raise BattleRefused(f"{at}: move {move} is not in the task's pool")
    if not chosen:
        raise BattleRefused(f"{at}: no move of {m.species} is in the task's pool")
    return chosen


def _member_item(at: str, m: Member, settings: BattleSettings, adapter: Gen3BattleAdapter) -> int:
    """The held item's id (0: none)."""
    if m.item is None:
        return 0
    item = next((it for it in adapter.items if it.name == m.item), None)
    if item is None:
        raise BattleRefused(f"{at}: no item {m.item!r} in this game")
    if settings.pool.items is not None and m.item not in settings.pool.items:
        raise BattleRefused(f"{at}: item {m.item} is not in the task's pool")
    return item.id


def _member_nature(at: str, m: Member) -> int | None:
    """The nature's index in NATURES (None: the template's personality decides)."""
    if m.nature is None:
        return None
    if m.nature.upper() not in NATURES:
        raise BattleRefused(f"{at}: no nature {m.nature!r} (natures: {', '.join(NATURES)})")
    return NATURES.index(m.nature.upper())


def _member_ability(at: str, m: Member, sp: Gen3Species) -> int:
    """The ability's number among the species' abilities (none given: the first)."""
    if m.ability is None:
        return 0
    if m.ability not in sp.abilities:
        raise BattleRefused(f"{at}: {m.species}'s abilities are {', '.join(sp.abilities)}, not {m.ability}")
    return sp.abilities.index(m.ability)


def _member_stats(at: str, m: Member, adapter: Gen3BattleAdapter) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(EVs, IVs) in STATS order, within the game's limits."""
    evs = _stat_values(m.evs, 0, "evs", at)
    ivs = _stat_values(m.ivs, adapter.default_ivs, "ivs", at)
    if any(not 0 <= e <= 255 for e in evs) or sum(evs) > 510:
        raise BattleRefused(f"{at}: EVs are 0-255 each and at most 510 in all")
    if any(not 0 <= v <= 31 for v in ivs):
        raise BattleRefused(f"{at}: IVs are 0-31")
    return evs, ivs


# -- encoding names --------------------------------------------------------------------------------

def encode_name(text: str, length: int) -> bytes:
    """A name in the game's charset (pret/pokefirered charmap.txt: A-Z 0xBB.., a-z 0xD5.., 0-9 0xA1..,
    space 0x00, '.' 0xAD, '-' 0xAE), cut to `length`, EOS (0xFF) filled; other characters are dropped."""
    out = []
    for ch in text:
        if "A" <= ch <= "Z":
            out.append(0xBB + ord(ch) - ord("A"))
        elif "a" <= ch <= "z":
            out.append(0xD5 + ord(ch) - ord("a"))
        elif "0" <= ch <= "9":
            out.append(0xA1 + ord(ch) - ord("0"))
        elif ch in " .-":
            out.append({" ": 0x00, ".": 0xAD, "-": 0xAE}[ch])
    return bytes(out[:length]) + bytes([0xFF]) * (length - min(len(out), length))


# -- the judge ---------------------------------------------------------------------------------------

class Gen3BattleJudge(EpisodeJudge):
    """BattleJudge's interface (engine.battle.battle) for a Gen-3 adapter: plan, accepted, snapshot, new_episode."""

    adapter: Gen3BattleAdapter

    def new_episode(self) -> None:
        super().new_episode()
        self._start_outcome: int | None = None  # gBattleOutcome at the episode's first look
        self._saw_battle = False

    def moment(self, read: ReadFn) -> Literal["battle", "before", "none"]:
        """A battle is on while gMain.inBattle is set. Off it, the episode is before its battle until a battle
        has been seen or gBattleOutcome has changed since the episode's first look: the game clears the
        outcome only when a battle starts (src/battle_main.c BattleStartClearSetData), so a start state
        may hold an earlier battle's."""
        if in_battle(self.adapter, read):
            self._saw_battle = True
            return "battle"
        outcome = _u8(read, self.adapter.screen.outcome)
        if self._start_outcome is None:
            self._start_outcome = outcome
        return "before" if not self._saw_battle and outcome == self._start_outcome else "none"

    # -- records ---------------------------------------------------------------------------------------
    def _record(self, slot: int, read: ReadFn):
        return decode(bytes(read(self.adapter.record_at(slot), RECORD_SIZE)))

    def _owner(self, read: ReadFn) -> tuple[int, bytes]:
        o = self.adapter.party.owner
        base = _u32(read, o.pointer)
        return _u32(read, base + o.trainer_id), bytes(read(base + o.name, 7))  # PLAYER_NAME_LENGTH 7

    def team_writes(self, team: list[Member], read: ReadFn) -> Writes:
        """The count byte, one encrypted record per member (the slot's current record the template: its
        personality, changed only for the nature), zeroed records beyond the team (ZeroMonData's empty slot)."""
        builds = member_builds(team, self.settings, self.adapter)
        ot_id, ot_name = self._owner(read)
        writes: Writes = [(self.adapter.party.count, [len(team)])]
        for i, (b, m) in enumerate(zip(builds, team, strict=True)):
            old = self._record(i, read)
            template = old.mon if old.checksum_ok and old.mon.growth.species else Gen3Mon(
                personality=(0x9E3779B1 * (b.species + 1) + i) & 0xFFFFFFFF)  # a fixed, spread-out seed
            template = replace(template, ot_id=ot_id, ot_name=ot_name, nickname=encode_name(m.species, 10))
            writes.append((self.adapter.record_at(i), list(encode(build(b, template)))))
        writes += [(self.adapter.record_at(i), [0] * RECORD_SIZE) for i in range(len(team), self.adapter.slots)]
        return writes

    def _party_size(self, read: ReadFn) -> int:
        return min(_u8(read, self.adapter.party.count), self.adapter.slots)

    # -- what the screen shows -------------------------------------------------------------------------
    def _phase(self, read: ReadFn) -> tuple[str, str | None]:
        """(moment, phase): the phase is what the player is asked for, or the battle's result."""
        s = self.adapter.screen
        now = self.moment(read)
        if now == "before":
            return now, "before-battle"
        if now == "none":
            return now, None
        outcome = _u8(read, s.outcome)
        if outcome:
            return now, s.outcome_names.get(outcome, f"over-{outcome}")
        if _u16(read, s.battle_mons + BM_HP) == 0:
            return now, "send"  # our Pokémon fainted: the party menu asks for the next
        waiting = _u32(read, s.exec_flags) & 1
        state = _u8(read, s.action_state)
        if waiting and state == STATE_WAIT_ACTION_CHOSEN:
            return now, "choose-action"
        if waiting and state == STATE_WAIT_ACTION_CASE_CHOSEN:
            return now, "choose-move"
        return now, "turn"

    def _active(self, now: str, read: ReadFn) -> int:
        if now == "battle":
            return _u16(read, self.adapter.screen.party_indexes)  # gBattlerPartyIndexes[0]
        return self.active

    def snapshot(self, read: ReadFn) -> dict:
        s = self.adapter.screen
        now, phase = self._phase(read)
        active = self._active(now, read)
        party = [self._party_row(i, read) for i in range(self._party_size(read))]
        own = self._own(read) if now == "battle" else None
        enemy = self._enemy(read) if now == "battle" else None
        return {"party": party, "active": active, "own": own, "enemy": enemy, "phase": phase,
                "turn": _TURN.get(phase or ""),
                "battle_state": s.outcome_names.get(_u8(read, s.outcome)) if now != "before" else None,
                "lead_chosen": self.lead is not None, "team_applied": self.team is not None}

    def _party_row(self, i: int, read: ReadFn) -> dict:
        """Party slot `i` as its record reads (nulls for a record whose checksum fails)."""
        a = self.adapter
        rec = self._record(i, read)
        sp = a.species_of(rec.mon.growth.species) if rec.checksum_ok else None
        return {"slot": i, "species": sp.name if sp else None, "types": list(sp.types) if sp else None,
                "level": rec.mon.level if rec.checksum_ok else None,
                "moves": [m.name for mid in rec.mon.attacks.moves if mid and (m := a.move_of(mid))]
                if rec.checksum_ok else []}

    def _battle_mon(self, k: int, offset: int) -> int:
        """The address of field `offset` of battler `k`'s struct BattlePokemon."""
        return self.adapter.screen.battle_mons + k * BM_SIZE + offset

    def _own(self, read: ReadFn) -> dict:
        """Our battler as the battle shows it: species, level, HP and each move's PP."""
        a, mon = self.adapter, self._battle_mon
        own_sp = a.species_of(_u16(read, mon(0, BM_SPECIES)))
        moves = [(_u16(read, mon(0, BM_MOVES + 2 * k)), _u8(read, mon(0, BM_PP + k))) for k in range(4)]
        return {"species": own_sp.name if own_sp else None, "level": _u8(read, mon(0, BM_LEVEL)),
                "hp": _u16(read, mon(0, BM_HP)), "max_hp": _u16(read, mon(0, BM_MAX_HP)),
                "moves": [{"move": mv.name, "pp": pp, "type": mv.type} for mid, pp in moves
                          if mid and (mv := a.move_of(mid))]}

    def _enemy(self, read: ReadFn) -> dict:
        """The opponent's battler: species, types, level and its HP bar (a fraction, not the number)."""
        mon = self._battle_mon
        en_sp = self.adapter.species_of(_u16(read, mon(1, BM_SPECIES)))
        hp, max_hp = _u16(read, mon(1, BM_HP)), _u16(read, mon(1, BM_MAX_HP))
        return {"species": en_sp.name if en_sp else None, "types": list(en_sp.types) if en_sp else None,
                "level": _u8(read, mon(1, BM_LEVEL)),
                "hp_fraction": round(hp / max_hp, 3) if max_hp else None}

    # -- the calls --------------------------------------------------------------------------------------
    def _before_only(self, tool: str, read: ReadFn) -> None:
        if self.moment(read) == "battle":
            raise BattleRefused(f"{tool}: the battle has read the party already (it copies it when it starts): "
                                f"{tool} is for the moment before the battle; reset to start again")

    def _apply_team(self, arguments: dict, read: ReadFn) -> Plan:
        self._team_still_open()
        self._before_only("apply_team", read)
        raw = arguments.get("team")
        if not isinstance(raw, list):
            raise BattleRefused("apply_team: team must be a list of {species, level, moves, item, nature, "
                                "ability, evs, ivs}")
        team = []
        for i, m in enumerate(raw):
            try:
                team.append(Member.model_validate(m))
            except ValueError as exc:
                from engine.battle.battle import _first_error
                raise BattleRefused(f"apply_team: member {i}: {_first_error(exc)}") from None
        return Plan("apply_team", arguments, writes=self.team_writes(team, read),
                    team=[m.model_dump() for m in team])

    def _default_team(self, plan: Plan, read: ReadFn) -> Plan:
        if self.team is None and self.settings.team is not None:
            plan.writes = self.team_writes(list(self.settings.team), read)
            plan.team = [m.model_dump() for m in self.settings.team]
        return plan

    def _lead(self, arguments: dict, read: ReadFn) -> Plan:
        if self.lead is not None or self.acted:
            raise BattleRefused("lead: the lead is chosen once per episode, before its first action")
        self._before_only("lead", read)
        plan = self._default_team(Plan("lead", arguments), read)
        view = _overlay(read, plan.writes)
        size = self._party_size(view)
        slot = arguments.get("slot")
        if not is_slot(slot, size):
            raise BattleRefused(f"lead: slot must be a party slot, 0 to {size - 1}")
        if slot != 0:  # the first record goes out first: the two records change places (each is whole)
            a0, a1 = self.adapter.record_at(0), self.adapter.record_at(slot)
            first, other = list(view(a0, RECORD_SIZE)), list(view(a1, RECORD_SIZE))
            plan.writes += [(a0, other), (a1, first)]
        plan.lead = slot
        return plan

    def _action(self, arguments: dict, read: ReadFn) -> Plan:
        menus = self.adapter.menus
        kind = action_kind(arguments)
        now, phase = self._action_phase(read)
        plan = Plan("action", arguments)
        if self.lead is None and not self.acted:
            plan = self._default_team(plan, read)
            plan.lead = 0
        view = _overlay(read, plan.writes)
        active = self._active(now, view) if self.acted or now == "battle" else 0
        if kind == "SEND":
            if phase != "send":
                raise BattleRefused("action: SEND is for when the active Pokémon has fainted; use SWITCH")
            plan.presses = self._party_pick(arguments.get("slot"), active, now, view) + list(menus.settle)
            return plan
        if phase == "send":
            raise BattleRefused("action: the active Pokémon has fainted: SEND another")
        lead_in, cursor, move_cursor = self._menu_start(phase, view)
        if kind == "FIGHT":
            k = self._move_index(arguments.get("move"), active, now, view)
            presses = (lead_in + grid(cursor, menus.fight) + list(menus.choose) + grid(move_cursor, k)
                       + list(menus.choose))
        else:
            presses = (lead_in + grid(cursor, menus.pokemon) + list(menus.choose)
                       + self._party_pick(arguments.get("slot"), active, now, view))
        plan.presses = presses + list(menus.settle)
        return plan

    def _action_phase(self, read: ReadFn) -> tuple[str, str | None]:
        """(moment, phase) for an action: refused with no battle on, or one already decided."""
        now, phase = self._phase(read)
        if now == "none":
            raise BattleRefused("action: no battle is on (nor about to start)")
        if phase not in ("before-battle", "choose-action", "choose-move", "send", "turn"):
            raise BattleRefused(f"action: the battle is decided ({phase}): reset to battle again")
        return now, phase

    def _menu_start(self, phase: str | None, view: ReadFn) -> tuple[list[str], int, int]:
        """(presses that reach the action menu, its cursor, the move menu's cursor) in this phase."""
        a, menus = self.adapter, self.adapter.menus
        if phase == "before-battle":
            return list(menus.before), menus.before_cursor, menus.before_move_cursor
        lead_in = list(menus.to_menu) if phase == "turn" else list(menus.back) if phase == "choose-move" else []
        return lead_in, _u8(view, a.screen.action_cursor), _u8(view, a.screen.move_cursor)

    def _move_index(self, move, active: int, now: str, read: ReadFn) -> int:
        """FIGHT's move: its place among the active Pokémon's moves, which must have PP left."""
        moves = self._moves(active, now, read)
        names = [n for n, _ in moves]
        if not isinstance(move, str) or move not in names:
            raise BattleRefused(f"action: FIGHT needs move, one the active Pokémon knows ({', '.join(names)})")
        k = names.index(move)
        if moves[k][1] == 0:
            raise BattleRefused(f"action: {move} has no PP left")
        return k

    def _moves(self, slot: int, now: str, read: ReadFn) -> list[tuple[str, int]]:
        """The active Pokémon's moves and PP: the battle's copy once it is on, else its party record."""
        a = self.adapter
        if now == "battle":
            base = a.screen.battle_mons
            pairs = [(_u16(read, base + BM_MOVES + 2 * k), _u8(read, base + BM_PP + k)) for k in range(4)]
        else:
            rec = self._record(slot, read)
            pairs = list(zip(rec.mon.attacks.moves, rec.mon.attacks.pp, strict=True)) if rec.checksum_ok else []
        return [(mv.name, pp) for mid, pp in pairs if mid and (mv := a.move_of(mid))]

    def _party_pick(self, slot, active: int, now: str, read: ReadFn) -> list[str]:
        size = self._party_size(read)
        if size <= 1:
            raise BattleRefused("action: SWITCH and SEND need another Pokémon, and the party has one")
        if not is_slot(slot, size):
            raise BattleRefused(f"action: SWITCH and SEND need slot, a party slot 0 to {size - 1}")
        if slot == active:
            raise BattleRefused(f"action: slot {slot} is already in battle")
        if _u16(read, self.adapter.record_at(slot) + REC_HP) == 0:
            raise BattleRefused(f"action: the Pokémon in slot {slot} has fainted")
        order = self._menu_order(now, active, read)
        return list(self.adapter.menus.party[order.index(slot)])

    def _menu_order(self, now: str, active: int, read: ReadFn) -> list[int]:
        """The battle party menu's order: gBattlePartyCurrentOrder once the battle is on (src/party_menu.c
        GetPartyIdFromBattleSlot: entry i is the high nibble of byte i/2 for even i, the low for odd), else
        the order the battle will set up (the active first, then the rest in party order)."""
        n = self.adapter.slots
        if now == "battle":
            raw = list(read(self.adapter.screen.party_order, 3))
            order = [(raw[i // 2] >> 4 if i % 2 == 0 else raw[i // 2]) & 0xF for i in range(n)]
            if sorted(order) == list(range(n)):
                return order
        return [active] + [i for i in range(n) if i != active]

    def accepted(self, plan: Plan) -> None:
        if plan.team is not None:
            self.team = plan.team
        if plan.lead is not None:
            self.lead = plan.lead
            self.active = 0
        if plan.tool == "action":
            self.acted = True
            if plan.arguments.get("kind") in ("SWITCH", "SEND"):
                self.active = plan.arguments["slot"]


def grid(cursor: int, target: int) -> list[str]:
    """Presses that move a 2x2 menu's cursor (row*2 + column) to `target`: LEFT/UP first, since the game
    refuses RIGHT/DOWN onto an empty move slot (src/battle_controller_player.c HandleInputChooseMove:
    `(cursor ^ 1) < gNumberOfMovesToChoose`), then RIGHT/DOWN."""
    cursor &= 3
    out = []
    if cursor & 1 and not target & 1:
        out.append("LEFT")
    if cursor & 2 and not target & 2:
        out.append("UP")
    if target & 1 and not cursor & 1:
        out.append("RIGHT")
    if target & 2 and not cursor & 2:
        out.append("DOWN")
    return out

