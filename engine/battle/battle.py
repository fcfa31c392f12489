"""Seed 004's battle rules: a game's battle adapter, a task's battle settings, and the judge of each call.

The adapter (a game definition's `battle:` section) says where the party lives in RAM, the species
table, what the battle screen shows (HP, enemy, phase), and each battle action as the button presses
that perform it. The task's settings (`battle:` in a task file, passed on in the manifest) are the rules:
a party limit, a level cap, a pool of species/moves/items, difficulty settings recorded verbatim, and
the team the task starts with.

`BattleJudge` keeps one episode's battle state (team applied, lead, the active slot) and turns each tool
call into a Plan: RAM writes (apply_team, lead) and presses (action), or a BattleRefused with the reason,
which the loop charges as an invalid output. Writes happen when the decision is pressed
(engine.loop.trial) and are recorded in its trace line, so replay re-applies them at the same point.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, model_serializer, model_validator

Address = Annotated[int, Field(ge=0, le=0xFFFFFFFF)]
Byte = Annotated[int, Field(ge=0, le=255)]
# a byte value as a mapping key: JSON (a derived definition, a manifest) writes it as a string
Key = Annotated[int, Strict(False), Field(ge=0, le=255)]
Name = Annotated[str, Field(min_length=1, max_length=64)]
Button = Literal["UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT"]
Presses = Annotated[list[Button], Field(max_length=32)]
BATTLE_TOOLS = ("apply_team", "lead", "action")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


# -- the game's side: the adapter -------------------------------------------------------------------

class SpeciesDef(_Strict):
    id: Byte
    name: Name
    type: Name | None = None
    moves: Annotated[list[Name], Field(min_length=1, max_length=16)]  # the moves it can know


class ItemDef(_Strict):
    id: Byte
    name: Name


MoveSlots = Annotated[list[Address], Field(min_length=1, max_length=4)]
Writes = list[tuple[int, list[int]]]


class PartyLayout(_Strict):
    """Where the party lives: the count byte and, per slot, the species byte (and where a game has
    them, the level, held item and move bytes). The number of slots is the game's party size."""

    count: Address
    species: Annotated[list[Address], Field(min_length=1, max_length=6)]
    levels: Annotated[list[Address], Field(max_length=6)] | None = None
    items: Annotated[list[Address], Field(max_length=6)] | None = None
    moves: Annotated[list[MoveSlots], Field(max_length=6)] | None = None

    @model_validator(mode="after")
    def _per_slot(self) -> "PartyLayout":
        for name in ("levels", "items", "moves"):
            v = getattr(self, name)
            if v is not None and len(v) != len(self.species):
                raise ValueError(f"battle.party.{name}: one entry per slot ({len(self.species)})")
        return self


class Phase(_Strict):
    """The battle's phase byte: what each value is called, the value while the action menu waits, how many
    `advance` presses lead from each other value to the menu, and the values once the battle is decided."""

    address: Address
    names: Annotated[dict[Key, Name], Field(min_length=1, max_length=64)]
    menu: int
    to_menu: Annotated[dict[Key, Annotated[int, Field(ge=1, le=16)]], Field(max_length=64)] = {}
    over: Annotated[list[int], Field(max_length=64)] = []


class Flag(_Strict):
    address: Address
    bit: Annotated[int, Field(ge=0, le=7)]


class Before(_Strict):
    """The moment before the battle starts (a task that opens on the challenge text): the battle-state byte
    reads `state`, the text byte `text` is nonzero and the flag `done` (set once a battle is over, to tell
    the moment after one from the moment before) is clear. `to_menu` `advance` presses start the battle and
    lead to the action menu, whose cursor opens on row `cursor`. Nothing of the battle is on screen yet:
    `observe` reports phase `name` and no HP."""

    state: int
    text: Address
    done: Flag | None = None
    name: Name = "before-battle"
    to_menu: Annotated[int, Field(ge=1, le=16)]
    cursor: int


class Cursor(_Strict):
    """The action menu's cursor byte: FIGHT's row, and the press that moves the cursor toward it."""

    address: Address
    fight: int
    press: Button


class BattleAdapter(_Strict):
    source: Annotated[str, Field(max_length=500)]  # where the addresses come from (the game's RAM map)
    party: PartyLayout
    own_hp: Address
    enemy_species: Address
    enemy_hp: Address
    state: Address  # the battle-state byte (shown raw beside its name, when named)
    state_names: Annotated[dict[Key, Name], Field(max_length=64)] = {}
    phase: Phase
    before: Before | None = None  # None: a battle task starts with its battle on screen
    cursor: Cursor
    advance: Button = "A"  # dismisses a text box
    # FIGHT once the cursor is on it: the presses that choose FIGHT, then (per move slot, for a game with
    # a move menu) the presses that pick the move, then those that play the turn out.
    fight: Presses
    move_select: Annotated[list[Presses], Field(max_length=4)] | None = None  # None: one move, no menu
    switch: Annotated[list[Presses], Field(max_length=6)] | None = None  # per slot; None: no switch menu
    send: Annotated[list[Presses], Field(max_length=6)] | None = None  # per slot; None: no send menu
    species: Annotated[list[SpeciesDef], Field(min_length=1, max_length=1024)]
    items: Annotated[list[ItemDef], Field(max_length=1024)] = []
    # a game that keeps moves in RAM (party.moves): each move's id; absent, a move's id is its place in
    # its species' list, from 1
    move_ids: Annotated[dict[Name, Byte], Field(max_length=4096)] = {}

    def move_id(self, species: SpeciesDef, move: str) -> int:
        return self.move_ids.get(move, species.moves.index(move) + 1)

    def move_named(self, species: SpeciesDef, mid: int) -> str | None:
        named = [m for m in species.moves if self.move_id(species, m) == mid]
        return named[0] if named else None

    @property
    def slots(self) -> int:
        return len(self.party.species)

    def species_named(self, name: str) -> SpeciesDef | None:
        return next((s for s in self.species if s.name == name), None)

    def species_of(self, sid: int) -> SpeciesDef | None:
        return next((s for s in self.species if s.id == sid), None)

    def moment(self, read: "ReadFn") -> Literal["battle", "before", "none"]:
        """Whether a battle is on: `before` is the moment just before it starts (the adapter's `before`),
        `none` any other moment its battle-state byte reads `before.state` (the phase byte then means nothing)."""
        b = self.before
        if b is None or int(read(self.state, 1)[0]) != b.state:
            return "battle"
        if int(read(b.text, 1)[0]) and (b.done is None or not int(read(b.done.address, 1)[0]) >> b.done.bit & 1):
            return "before"
        return "none"


# -- the task's side: the rules ---------------------------------------------------------------------

StatValues = Annotated[dict[Name, Annotated[int, Field(ge=0, le=255)]], Field(max_length=6)]
GEN3_FIELDS = ("nature", "ability", "evs", "ivs")


class Member(_Strict):
    """One creature of a team. Unknown values are null: a game without levels or items takes none. Nature,
    ability, EVs and IVs are for a game whose records hold them (engine.battle.gen3_battle); null elsewhere, and
    left out of the member's dump when null (a GB team's record reads as before they existed)."""

    species: Name
    level: Annotated[int, Field(ge=1, le=255)] | None = None
    moves: Annotated[list[Name], Field(max_length=4)] = []  # empty: the species' first moves
    item: Name | None = None
    nature: Name | None = None
    ability: Name | None = None
    evs: StatValues | None = None  # by stat (hp, attack, defense, speed, sp_attack, sp_defense); absent 0
    ivs: StatValues | None = None  # absent: the adapter's default (31)

    @model_serializer(mode="wrap")
    def _without_unset_gen3(self, handler):
        data = handler(self)
        for key in GEN3_FIELDS:
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _null_moves(cls, data):
        """`moves: null` (a client that sends every optional field, null where unset) is `moves` left out."""
        if isinstance(data, dict) and "moves" in data and data["moves"] is None:
            return {k: v for k, v in data.items() if k != "moves"}
        return data


class Pool(_Strict):
    """What a team may use, by name; an absent list allows everything the game has. `min_levels`: a species
    the task allows only from a level (an evolved form, as a Radical Red task's pool has them)."""

    species: Annotated[list[Name], Field(max_length=2048)] | None = None
    moves: Annotated[list[Name], Field(max_length=4096)] | None = None
    items: Annotated[list[Name], Field(max_length=2048)] | None = None
    min_levels: Annotated[dict[Name, Annotated[int, Field(ge=1, le=255)]], Field(max_length=2048)] | None = None

    @model_serializer(mode="wrap")
    def _without_unset_min_levels(self, handler):
        data = handler(self)
        if data.get("min_levels") is None:
            data.pop("min_levels", None)  # a pool without them dumps (and hashes) as before they existed
        return data


Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Exclude(_Strict):
    species: Annotated[list[Name], Field(max_length=2048)] = []
    moves: Annotated[list[Name], Field(max_length=4096)] = []
    items: Annotated[list[Name], Field(max_length=2048)] = []


class Knobs(_Strict):
    """Seed 004's difficulty knobs: scale the level cap down by a percentage, shrink the party limit,
    exclude named species, moves or items (sessions.tasks.task_knobs derives a task file with them)."""

    level_cap_down_percent: Annotated[int, Field(ge=0, le=99)] | None = None
    party_limit: Annotated[int, Field(ge=1, le=6)] | None = None
    exclude: Exclude = Exclude()


class Derived(_Strict):
    """Where a derived task's rules come from: the base task file (its id and sha256) and the knobs."""

    base_task: Name
    base_sha256: Sha256
    knobs: Knobs


DifficultyValue = Annotated[str, Field(max_length=64)] | int | bool


class BattleSettings(_Strict):
    """A task's battle rules (seed 004), recorded verbatim in every result of the task."""

    party_limit: Annotated[int, Field(ge=1, le=6)]
    level_cap: Annotated[int, Field(ge=1, le=255)] | None = None
    pool: Pool = Pool()
    difficulty: Annotated[dict[Name, DifficultyValue], Field(max_length=16)] = {}
    team: Annotated[list[Member], Field(min_length=1, max_length=6)] | None = None  # when the agent applies none
    derived: Derived | None = None  # a task derived by difficulty knobs (sessions.tasks.task_knobs)
    # the task file these rules were compiled from (sessions.tasks.task_manifest sets it): every result
    # carries the rules, so every result names the task file's sha256
    task_sha256: Sha256 | None = None

    @model_serializer(mode="wrap")
    def _without_unset_derived(self, handler):
        data = handler(self)
        for key in ("derived", "task_sha256"):
            if data.get(key) is None:
                data.pop(key, None)  # rules without them dump (and hash) as before they existed
        return data


class BattleRefused(ValueError):
    """A call the rules refuse: the message says why (charged as an invalid output)."""


def pool_problem(settings: BattleSettings) -> str | None:
    """Why no team can be built under these rules, whatever the game: an empty species (or move) pool, or a
    level cap below every pool species' minimum level."""
    pool = settings.pool
    if pool.species is not None and not pool.species:
        return "pool.species is empty: no team can be built"
    if pool.moves is not None and not pool.moves:
        return "pool.moves is empty: no team can be built"
    if pool.min_levels:
        if unknown := sorted(set(pool.min_levels) - set(pool.species or pool.min_levels)):
            return f"pool.min_levels: {', '.join(unknown)} not in pool.species"
        cap = settings.level_cap
        species = pool.species if pool.species is not None else None
        if cap is not None and species is not None and all(pool.min_levels.get(s, 1) > cap for s in species):
            lowest = min(pool.min_levels.get(s, 1) for s in species)
            return f"level_cap {cap} is below every pool species' minimum level (the lowest is {lowest})"
    return None


def min_level_problem(settings: BattleSettings, species: str, level: int | None) -> str | None:
    need = (settings.pool.min_levels or {}).get(species)
    if need is not None and (level is None or level < need):
        return f"{species} is in the task's pool from level {need}"
    return None


def settings_problem(settings: BattleSettings, adapter: BattleAdapter | None, game: str) -> str | None:
    """Why a task's battle rules cannot be played on `game` (named so in the message), or None."""
    if problem := pool_problem(settings):
        return problem
    if adapter is None:
        return f"{game} has no battle adapter (its game definition's battle: section)"
    try:
        if isinstance(adapter, BattleAdapter):
            check_settings(settings, adapter)
        else:  # a Gen-3 adapter (engine.battle.gen3_battle)
            from engine.battle.gen3_battle import check_team_settings
            check_team_settings(settings, adapter)
    except BattleRefused as exc:
        return str(exc)
    return None


def check_settings(settings: BattleSettings, adapter: BattleAdapter) -> None:
    """The settings fit the game (BattleRefused otherwise): the limit, the pool's names, the default team."""
    if settings.party_limit > adapter.slots:
        raise BattleRefused(f"party_limit {settings.party_limit} is more than the game's {adapter.slots} party "
                            f"slot{'s' if adapter.slots > 1 else ''}")
    pool = settings.pool
    known_moves = {m for s in adapter.species for m in s.moves}
    known_items = {i.name for i in adapter.items}
    for what, names, known in (("species", pool.species, {s.name for s in adapter.species}),
                               ("moves", pool.moves, known_moves), ("items", pool.items, known_items)):
        unknown = sorted(set(names or ()) - known)
        if unknown:
            raise BattleRefused(f"pool.{what}: {', '.join(unknown)} not in the game's table")
    if settings.team is not None:
        try:
            team_writes(settings.team, settings, adapter)
        except BattleRefused as exc:
            raise BattleRefused(f"team: {exc}") from None


def team_writes(team: Sequence[Member], settings: BattleSettings, adapter: BattleAdapter) -> Writes:
    """The RAM writes that make `team` the party, after checking it against the rules and the game."""
    check_team_size(team, settings)
    layout = adapter.party
    writes: list[tuple[int, list[int]]] = [(layout.count, [len(team)])]
    for i, m in enumerate(team):
        at = f"member {i}"
        sp = _member_species(at, m, settings, adapter)
        chosen = _member_moves(at, i, m, sp, settings, layout)
        writes.append((layout.species[i], [sp.id]))
        for field_writes in _FIELD_WRITERS:
            writes += field_writes(at, i, m, sp, chosen, adapter)
    # the slots beyond the team are emptied
    writes += [(layout.species[i], [0]) for i in range(len(team), adapter.slots)]
    return writes


def check_team_size(team: Sequence[Member], settings: BattleSettings) -> None:
    """A team has one member or more, and no more than the task's party limit (every game's first check)."""
    if not team:
        raise BattleRefused("a team needs at least one member")
    if len(team) > settings.party_limit:
        raise BattleRefused(f"{len(team)} members is over the task's party limit of {settings.party_limit}")


def _member_species(at: str, m: Member, settings: BattleSettings, adapter: BattleAdapter) -> SpeciesDef:
    """The member's species, once its fields, species, level and item fit the game and the task's rules."""
    if given := [k for k in GEN3_FIELDS if getattr(m, k) is not None]:
        raise BattleRefused(f"{at}: this game's creatures have no {', '.join(given)}: leave them null")
    sp = adapter.species_named(m.species)
    if sp is None:
        raise BattleRefused(f"{at}: no species {m.species!r} in this game")
    pool = settings.pool
    if pool.species is not None and m.species not in pool.species:
        raise BattleRefused(f"{at}: species {m.species} is not in the task's pool")
    if m.level is not None and settings.level_cap is not None and m.level > settings.level_cap:
        raise BattleRefused(f"{at}: level {m.level} is over the task's level cap of {settings.level_cap}")
    if why := min_level_problem(settings, m.species, m.level):
        raise BattleRefused(f"{at}: {why}")
    return sp


def _member_moves(at: str, i: int, m: Member, sp: SpeciesDef, settings: BattleSettings,
                  layout: PartyLayout) -> list[str]:
    """The member's moves (none given: the species' first; a one-move game: its move), each one the species
    learns and the pool allows; then its item against the pool."""
    pool = settings.pool
    chosen = m.moves or sp.moves[:len(layout.moves[i]) if layout.moves is not None else 1]
    for move in chosen:
        if move not in sp.moves:
            raise BattleRefused(f"{at}: {m.species} cannot learn {move} (it knows {', '.join(sp.moves)})")
        if pool.moves is not None and move not in pool.moves:
            raise BattleRefused(f"{at}: move {move} is not in the task's pool")
    if len(set(m.moves)) != len(m.moves):
        raise BattleRefused(f"{at}: a move listed twice")
    if m.item is not None and pool.items is not None and m.item not in pool.items:
        raise BattleRefused(f"{at}: item {m.item} is not in the task's pool")
    return chosen


# per-field writers: (at, slot, member, species, chosen moves, adapter) -> the field's writes, in this order
def _level_writes(at: str, i: int, m: Member, sp: SpeciesDef, chosen: list[str], adapter: BattleAdapter) -> Writes:
    if m.level is None:
        return []
    if adapter.party.levels is None:
        raise BattleRefused(f"{at}: this game's creatures have no level in RAM: leave level null")
    return [(adapter.party.levels[i], [m.level])]


def _item_writes(at: str, i: int, m: Member, sp: SpeciesDef, chosen: list[str], adapter: BattleAdapter) -> Writes:
    if m.item is None:
        return []
    item = next((it for it in adapter.items if it.name == m.item), None)
    if adapter.party.items is None or item is None:
        raise BattleRefused(f"{at}: this game's creatures hold no items: leave item null")
    return [(adapter.party.items[i], [item.id])]


def _move_writes(at: str, i: int, m: Member, sp: SpeciesDef, chosen: list[str], adapter: BattleAdapter) -> Writes:
    slots = adapter.party.moves
    if slots is None:
        if len(m.moves) > 1:
            raise BattleRefused(f"{at}: this game's creatures know one move each ({sp.moves[0]})")
        return []
    if len(chosen) > len(slots[i]):
        raise BattleRefused(f"{at}: at most {len(slots[i])} moves")
    ids = [adapter.move_id(sp, n) for n in chosen]
    return [(a, [ids[k] if k < len(ids) else 0]) for k, a in enumerate(slots[i])]


_FIELD_WRITERS = (_level_writes, _item_writes, _move_writes)


# -- one trial's judge ------------------------------------------------------------------------------

def make_judge(adapter, settings: BattleSettings):
    """The judge for a game's adapter: BattleJudge for byte fields, Gen3BattleJudge for Gen-3 records."""
    if isinstance(adapter, BattleAdapter):
        return BattleJudge(adapter, settings)
    from engine.battle.gen3_battle import Gen3BattleJudge
    return Gen3BattleJudge(adapter, settings)


ReadFn = Callable[[int, int], Sequence[int]]


@dataclass
class Plan:
    """What an accepted call does: RAM writes, then presses. `record` goes into the trace line."""

    tool: str
    arguments: dict
    writes: list[tuple[int, list[int]]] = field(default_factory=list)
    presses: list[str] = field(default_factory=list)
    team: list[dict] | None = None  # the team this call made the party (apply_team, or the default at lead)
    lead: int | None = None

    def record(self) -> dict:
        return {"tool": self.tool, "arguments": self.arguments,
                "writes": [{"address": a, "bytes": b} for a, b in self.writes], "team": self.team,
                "lead": self.lead}


class EpisodeJudge:
    """What every battle judge shares: its adapter and settings, the episode's team, lead and active slot
    (forgotten by `new_episode`), and the dispatch of a battle call to `_apply_team`, `_lead`, `_action`."""

    def __init__(self, adapter, settings: BattleSettings):
        self.adapter = adapter
        self.settings = settings
        self.new_episode()

    def new_episode(self) -> None:
        self.team: list[dict] | None = None
        self.lead: int | None = None
        self.acted = False
        self.active = 0

    def plan(self, tool: str, arguments: dict, read: ReadFn) -> Plan:
        if tool == "apply_team":
            return self._apply_team(arguments, read)
        if tool == "lead":
            return self._lead(arguments, read)
        if tool == "action":
            return self._action(arguments, read)
        raise BattleRefused(f"no battle tool {tool!r}")

    def _team_still_open(self) -> None:
        if self.lead is not None or self.acted:
            raise BattleRefused("apply_team: the lead is chosen (or an action taken) in this episode: a team can "
                                "only be applied before lead; reset to start an episode with a new team")


class BattleJudge(EpisodeJudge):
    """One trial's battle rules; `new_episode` forgets the episode's team, lead and active slot."""

    adapter: BattleAdapter

    # -- what the screen shows ----------------------------------------------------------------------
    def snapshot(self, read: ReadFn) -> dict:
        """observe: the battle screen's facts (party species and the active HP, enemy species and HP,
        phase), read from RAM; no milestone or probe fields."""
        a = self.adapter
        byte = lambda addr: int(read(addr, 1)[0])  # noqa: E731
        count = byte(a.party.count)
        moment = a.moment(read)
        early = moment != "battle"
        party = []
        for i in range(min(count, a.slots)):
            sp = a.species_of(byte(a.party.species[i]))
            party.append({"slot": i, "species": sp.name if sp else None, "type": sp.type if sp else None,
                          "moves": self._moves_at(i, read),
                          "level": byte(a.party.levels[i]) if a.party.levels else None,
                          # only the active's HP is shown, once the battle has set it
                          "hp": byte(a.own_hp) if i == self.active and not early else None})
        enemy = a.species_of(byte(a.enemy_species))
        phase, state = byte(a.phase.address), byte(a.state)
        return {"party": party, "active": self.active,
                "enemy": {"species": enemy.name if enemy else None, "type": enemy.type if enemy else None,
                          "hp": None if early else byte(a.enemy_hp)},
                "phase": self._phase_name(moment, phase),
                "battle_state": a.state_names.get(state),
                "lead_chosen": self.lead is not None, "team_applied": self.team is not None}

    def _phase_name(self, moment: str, phase: int) -> str | None:
        """The phase byte's name in a battle; the `before` moment's name; none (null) with no battle on."""
        a = self.adapter
        if moment == "battle":
            return a.phase.names.get(phase)
        return a.before.name if moment == "before" and a.before is not None else None

    # -- the calls ------------------------------------------------------------------------------------
    def _apply_team(self, arguments: dict, read: ReadFn) -> Plan:
        self._team_still_open()
        raw = arguments.get("team")
        if not isinstance(raw, list):
            raise BattleRefused("apply_team: team must be a list of {species, level, moves, item}")
        team = []
        for i, m in enumerate(raw):
            try:
                team.append(Member.model_validate(m))
            except ValueError as exc:
                raise BattleRefused(f"apply_team: member {i}: {_first_error(exc)}") from None
        writes = team_writes(team, self.settings, self.adapter)
        return Plan("apply_team", arguments, writes=writes, team=[m.model_dump() for m in team])

    def _party_size(self, read: ReadFn) -> int:
        return min(int(read(self.adapter.party.count, 1)[0]), self.adapter.slots)

    def _moves_at(self, slot: int, read: ReadFn) -> list[str]:
        """The moves of the creature in `slot`, in its move-slot order: from RAM where the game keeps them
        (move ids from 1, in its species' list), else its species' one move."""
        a = self.adapter
        sp = a.species_of(int(read(a.party.species[slot], 1)[0]))
        if sp is None:
            return []
        if a.party.moves is None:
            return list(sp.moves[:1])
        named = [a.move_named(sp, int(read(addr, 1)[0])) for addr in a.party.moves[slot]]
        return [m for m in named if m is not None]

    def _lead(self, arguments: dict, read: ReadFn) -> Plan:
        if self.lead is not None or self.acted:
            raise BattleRefused("lead: the lead is chosen once per episode, before its first action")
        slot = arguments.get("slot")
        plan = self._default_team(Plan("lead", arguments))
        size = self._party_size(_overlay(read, plan.writes))
        if not is_slot(slot, size):
            raise BattleRefused(f"lead: slot must be a party slot, 0 to {size - 1}")
        if slot != 0:  # the first slot goes out first: swap the lead into it
            plan.writes += self._swap(0, slot, _overlay(read, plan.writes))
        plan.lead = slot
        return plan

    def _default_team(self, plan: Plan) -> Plan:
        """Before an episode's lead (or first action) with no team applied: the task's own team, if it has one."""
        if self.team is None and self.settings.team is not None:
            plan.writes = team_writes(self.settings.team, self.settings, self.adapter)
            plan.team = [m.model_dump() for m in self.settings.team]
        return plan

    def _swap(self, i: int, j: int, read: ReadFn) -> Writes:
        layout = self.adapter.party
        value = lambda addr: int(read(addr, 1)[0])  # noqa: E731
        out = []
        for addrs in (layout.species, layout.levels, layout.items):
            if addrs is not None:
                out += [(addrs[i], [value(addrs[j])]), (addrs[j], [value(addrs[i])])]
        if layout.moves is not None:
            for a, b in zip(layout.moves[i], layout.moves[j], strict=True):
                out += [(a, [value(b)]), (b, [value(a)])]
        return out

    def _action(self, arguments: dict, read: ReadFn) -> Plan:
        kind = action_kind(arguments)
        early, phase = self._action_phase(read)
        plan = self._first_action(Plan("action", arguments))
        view = _overlay(read, plan.writes)  # RAM as it will be once the plan's writes are made
        size = self._party_size(view)
        to_menu = self._to_menu(early, phase)
        if kind == "FIGHT":
            plan.presses = to_menu + self._fight(arguments.get("move"), view, early)
            return plan
        plan.presses = to_menu + self._send_in(kind, arguments.get("slot"), size, read, early)
        return plan

    def _action_phase(self, read: ReadFn) -> tuple[bool, int]:
        """(early, phase): whether the battle is about to start (the phase byte means nothing yet) and the
        phase byte; refused with no battle on, or one already decided."""
        a = self.adapter
        moment = a.moment(read)
        if moment == "none":
            raise BattleRefused("action: no battle is on (nor about to start)")
        early = moment == "before"
        phase = int(read(a.phase.address, 1)[0])
        if phase in a.phase.over and not early:
            raise BattleRefused(f"action: the battle is decided ({a.phase.names.get(phase, phase)}): reset to "
                                f"battle again")
        return early, phase

    def _first_action(self, plan: Plan) -> Plan:
        """No lead chosen before this action: the first slot leads, with the task's team."""
        if self.lead is None and not self.acted:
            plan = self._default_team(plan)
            plan.lead = 0
        return plan

    def _to_menu(self, early: bool, phase: int) -> list[str]:
        """The `advance` presses that reach the action menu; refused in a phase with no way to it."""
        a = self.adapter
        if early and a.before is not None:  # the challenge text: the battle starts on the way to its menu
            to_menu = [a.advance] * a.before.to_menu
        else:
            to_menu = [a.advance] * (0 if phase == a.phase.menu else a.phase.to_menu.get(phase, 0))
        if phase != a.phase.menu and not to_menu:  # (never before the battle: to_menu is at least 1)
            raise BattleRefused(f"action: the battle is in phase {a.phase.names.get(phase, phase)}, where no "
                                f"action can be chosen")
        return to_menu

    def _send_in(self, kind: str, slot, size: int, read: ReadFn, early: bool) -> list[str]:
        """SWITCH or SEND: the menu's presses that send `slot` in, once the rules allow it."""
        a = self.adapter
        if size <= 1:
            raise BattleRefused(f"action: {kind} needs another creature to send in, and the party has one")
        if not is_slot(slot, size):
            raise BattleRefused(f"action: {kind} needs slot, a party slot 0 to {size - 1}")
        if slot == self.active:
            raise BattleRefused(f"action: slot {slot} is already in battle")
        fainted = not early and int(read(a.own_hp, 1)[0]) == 0  # before the battle its HP byte is not set
        if kind == "SEND" and not fainted:
            raise BattleRefused("action: SEND is for when the active creature has fainted; use SWITCH")
        if kind == "SWITCH" and fainted:
            raise BattleRefused("action: the active creature has fainted: SEND another")
        menus = a.switch if kind == "SWITCH" else a.send
        if menus is None or slot >= len(menus):
            raise BattleRefused(f"action: this game has no {kind} menu for slot {slot}")
        return list(menus[slot])

    def _fight(self, move, read: ReadFn, early: bool = False) -> list[str]:
        a = self.adapter
        known = self._moves_at(self.active, read)
        if a.move_select is not None:
            known = known[:len(a.move_select)]
        if not isinstance(move, str) or move not in known:
            raise BattleRefused(f"action: FIGHT needs move, one the active creature knows ({', '.join(known)})")
        # before the battle the cursor byte is another menu's: the battle's opens on `before.cursor`
        cursor = a.before.cursor if early and a.before is not None else int(read(a.cursor.address, 1)[0])
        presses = [a.cursor.press] if cursor != a.cursor.fight else []
        picks = a.move_select[known.index(move)] if a.move_select is not None else []
        return presses + list(a.fight[:1]) + list(picks) + list(a.fight[1:])

    def accepted(self, plan: Plan) -> None:
        """The call was pressed: the episode's state moves on."""
        if plan.team is not None:
            self.team = plan.team
        if plan.lead is not None:
            self.lead = plan.lead
            self.active = 0  # the lead was swapped into the first slot
        if plan.tool == "action":
            self.acted = True
            if plan.arguments.get("kind") in ("SWITCH", "SEND"):
                self.active = plan.arguments["slot"]


def action_kind(arguments: dict) -> str:
    """The action's kind, one of FIGHT, SWITCH, SEND (refused otherwise)."""
    kind = arguments.get("kind")
    if kind not in ("FIGHT", "SWITCH", "SEND"):
        raise BattleRefused(f"action: unknown kind {kind!r} (FIGHT with a move, SWITCH or SEND with a slot)")
    return kind


def is_slot(slot, size: int) -> bool:
    """`slot` is a party slot (an int, not a bool) of a party of `size`."""
    return isinstance(slot, int) and not isinstance(slot, bool) and 0 <= slot < size


def _overlay(read: ReadFn, writes: Writes) -> ReadFn:
    """`read`, as RAM will read once `writes` are made (single bytes: what the judge looks at)."""
    pending = {a + k: v for a, data in writes for k, v in enumerate(data)}

    def view(address: int, length: int) -> list[int]:
        got = list(read(address, length))
        return [pending.get(address + k, got[k]) for k in range(length)]

    return view


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        e = errors()[0]
        where = ".".join(str(p) for p in e.get("loc", ()))
        return f"{where}: {e.get('msg')}" if where else str(e.get("msg"))
    return str(exc)
