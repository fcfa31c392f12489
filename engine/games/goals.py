"""Goals (seed 001's goal benchmark): a predicate over a game definition's probed fields that,
chosen for a run (`game.goal` in the manifest, `oakwatch run --goal ID`), ends a trial as a success
(`goal-met`) the moment it holds, instead of the milestone ladder's final rung.

A goal is relative to the trial's start: seed 001's strict catch evaluator accepts a catch only
when one exact species correlates across independent sources, never from the agent's prose or a
screen. Here the sources are the definition's fields:

  counts  numeric fields a catch adds to (party count, and the box count where the game keeps one):
          their sum must rise above its value at the start;
  owned   a `bytes` field holding the Pokédex's owned ("caught") bitfield (bit i of byte j: species
          8j + i + 1, the pret layout): a flag clear at the start must be set, which names the species
          (with `owned_kind: ids`, a species list such as a party's: an id absent at the start);
  all     absolute conditions that must hold as well (e.g. a battle outcome "caught");
  room    conditions the start state must satisfy (seed 001: an empty party slot, so that a catch
          leaves independent party evidence): a start state without room is refused in preflight.

Like a rung, a goal is met only when it holds (and the game is ready) on two consecutive frames:
the state right after the event and the live state after it. A catch of a species already owned
at the start names no new species, so it is not a verified catch (the evaluator is strict).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.games.gamedef import GameDefinition, GoalDef, Sample
from engine.loop.records import GoalResult, build

GOAL_MET = "goal-met"  # the termination reason: a success


def new_flags(before: list[int], after: list[int]) -> list[int]:
    """Species (bit numbers from 1) whose flag is set in `after` and clear in `before`."""
    out = []
    for j, (b, a) in enumerate(zip(before, after, strict=False)):
        gained = a & ~b
        out += [8 * j + i + 1 for i in range(8) if gained >> i & 1]
    return out


def new_ids(before: list[int], after: list[int]) -> list[int]:
    """Ids (nonzero) listed in `after` and not in `before`, in order, once each."""
    return list(dict.fromkeys(i for i in after if i and i not in before))


def goal_fields(goal: GoalDef) -> list[str]:
    """Every field the goal reads, in a fixed order (what its evidence records)."""
    names = [*goal.counts, goal.owned, *(c.field for c in goal.all), *(c.field for c in goal.room)]
    return list(dict.fromkeys(names))


def room_problems(goal: GoalDef, start: Sample) -> list[str]:
    """Why the start state leaves the goal no room (empty: it has room)."""
    return [f"{c.field} is {start.get(c.field)}, the goal needs {c.model_dump(exclude={'field'}, exclude_none=True)}"
            for c in goal.room if not c.holds(start)]


def evidence(goal: GoalDef, start: Sample, sample: Sample) -> dict | None:
    """The goal's evidence in one sample against the start (None: it does not hold there)."""
    before = sum(int(start[f]) for f in goal.counts)
    now = sum(int(sample[f]) for f in goal.counts)
    if now <= before:
        return None
    before_owned, owned = list(start[goal.owned]), list(sample[goal.owned])
    species = new_flags(before_owned, owned) if goal.owned_kind == "bitfield" else new_ids(before_owned, owned)
    if not species or not all(c.holds(sample) for c in goal.all):
        return None
    return {"species": species, "counts_start": before, "counts": now}


def met_at(goal: GoalDef, game: GameDefinition, start: Sample, previous: Sample, current: Sample) -> dict | None:
    """Evidence when the goal holds on both consecutive samples (and the game is ready on both)."""
    if not (game.is_ready(previous) and game.is_ready(current)):
        return None
    if evidence(goal, start, previous) is None:
        return None
    return evidence(goal, start, current)


@dataclass
class GoalCheck:
    """The loop's (and replay's) running check of the run's goal."""

    goal_id: str
    game: GameDefinition
    start_sample: Sample
    result: GoalResult | None = None  # set once met

    def __post_init__(self) -> None:
        self.goal = self.game.goals[self.goal_id]
        self._fields = goal_fields(self.goal)

    def _pick(self, sample: Sample) -> dict[str, Any]:
        return {f: sample[f] for f in self._fields if f in sample}

    def update(self, previous: Sample, current: Sample, *, decision_id: int, frame_index: int,
               frame_sha256: str) -> GoalResult | None:
        """The goal's result the first time it is met on these two frames; None otherwise."""
        if self.result is not None:
            return None
        found = met_at(self.goal, self.game, self.start_sample, previous, current)
        if found is None:
            return None
        self.result = self.record(met=True, decision_id=decision_id, frame_index=frame_index,
                                  frame_sha256=frame_sha256, probe=self._pick(current), species=found["species"])
        return self.result

    def record(self, *, met: bool = False, decision_id: int | None = None, frame_index: int | None = None,
               frame_sha256: str | None = None, probe: dict | None = None, species: list[int] | None = None
               ) -> GoalResult:
        return build(GoalResult, id=self.goal_id, name=self.goal.name, met=met, decision_id=decision_id,
                     frame_index=frame_index, frame_sha256=frame_sha256, species=species or [],
                     start=self._pick(self.start_sample), probe=probe)

    @property
    def final(self) -> GoalResult:
        """What the result records: the met goal, or the goal not met with its start evidence."""
        return self.result if self.result is not None else self.record()


def recheck(goal: GoalDef, game: GameDefinition, result: GoalResult) -> list[str]:
    """verify's check of a recorded goal against the definition: a met goal's probe must satisfy the
    predicate against its recorded start, naming the same species."""
    if not result.met:
        return [] if result.probe is None and not result.species else ["the goal is not met, yet names evidence"]
    missing = [f for f in goal_fields(goal) if f not in (result.probe or {}) or f not in result.start]
    if missing:
        return [f"the goal's evidence lacks {', '.join(missing)}"]
    found = evidence(goal, result.start, result.probe)
    if found is None:
        return ["the goal's recorded probe does not meet the goal against its recorded start"]
    if found["species"] != result.species:
        return [f"the goal names species {result.species}, its probe shows {found['species']}"]
    return []

