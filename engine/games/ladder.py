"""The milestone ladder: verified, once-only awards with evidence, and the rules of success.

Awards (seed 000 and the reference notes): a milestone is awarded once; only after two
consecutive qualifying frames; never if it already held at the start of the trial.

Rungs are `required` (the default) or optional (`required: false`). The rules (spec: issue 9):
  - A rung already true at the start (and the game ready) is *pre-satisfied*: reported in the
    result's `pre_satisfied`, never awarded, worth 0 points, and it blocks nothing: for success
    and for the deepest rung it counts as satisfied.
  - The rungs that decide success are the required rungs up to and including the final rung
    (`final_milestone`, by default the last; it must be required). Rungs listed after the final
    rung are bonus rungs: they earn their points when reached, never end a trial and never fail it.
  - Success: every deciding rung reached or pre-satisfied. The trial ends at that moment with
    `final-milestone` (success). Since the final rung is required, this is when the final rung is
    reached with every earlier required rung satisfied, or, when the final rung was pre-satisfied,
    when the last required rung still missing is reached (when every deciding rung is pre-satisfied
    the trial ends after its first action, a success worth 0 points).
  - Reaching the final rung with a required rung neither reached nor pre-satisfied still ends the
    trial, as `final-milestone-skipped-required`: a game-failure, however many points it earned.
  - `skipped_required`: the deciding rungs neither reached nor pre-satisfied that lie before the
    last rung reached (in ladder order, up to the final rung): passed over on the way, not merely
    not yet reached.
  - `deepest_milestone`: walk the rungs in order; a reached or pre-satisfied rung passes (and is
    the deepest so far); an optional rung not reached is stepped over; stop at the first required
    rung neither reached nor pre-satisfied.
The functions below state these rules once, over ids; the loop (engine.loop.trial), recover, verify and
replay all use them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from engine.games.gamedef import GameDefinition, Sample, every
from engine.loop.records import MilestoneAward as Award
from engine.loop.records import build

FINAL = "final-milestone"  # success: every deciding rung satisfied
FINAL_SKIPPED = "final-milestone-skipped-required"  # the final rung reached past a required one


def deciding(game: GameDefinition) -> list[str]:
    """The required rungs up to and including the final rung, in ladder order: success needs them all."""
    out = []
    for m in game.milestones:
        if m.required:
            out.append(m.id)
        if m.id == game.final_id:
            break
    return out


def deepest(game: GameDefinition, reached: Collection[str], pre_satisfied: Collection[str] = ()) -> str | None:
    """The deepest rung reached in ladder order (the rule in the module docstring)."""
    out = None
    for m in game.milestones:
        if m.id in reached or m.id in pre_satisfied:
            out = m.id
        elif m.required:
            break
    return out


def skipped_required(game: GameDefinition, reached: Collection[str], pre_satisfied: Collection[str] = ()) -> list[str]:
    """Deciding rungs neither reached nor pre-satisfied that lie before the last rung reached."""
    ids = [m.id for m in game.milestones]
    upto = ids[:ids.index(game.final_id) + 1]
    last = max((i for i, mid in enumerate(upto) if mid in reached), default=0)  # 0: nothing lies before
    need = set(deciding(game))
    return [mid for mid in upto[:last] if mid in need and mid not in reached and mid not in pre_satisfied]


def complete(game: GameDefinition, reached: Collection[str], pre_satisfied: Collection[str] = ()) -> bool:
    """Every deciding rung reached or pre-satisfied: the trial is a success."""
    return all(mid in reached or mid in pre_satisfied for mid in deciding(game))


def final_ending(game: GameDefinition, reached: Collection[str], pre_satisfied: Collection[str] = ()) -> str | None:
    """The termination reason the ladder alone gives (None: play on)."""
    if complete(game, reached, pre_satisfied):
        return FINAL
    if game.final_id in reached:
        return FINAL_SKIPPED
    return None


@dataclass
class Ladder:
    game: GameDefinition
    start_sample: Sample
    awards: dict[str, Award] = field(default_factory=dict)
    pre_satisfied: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        ready = self.game.is_ready(self.start_sample)
        self.pre_satisfied = frozenset(
            m.id for m in self.game.milestones if ready and m.holds(self.start_sample))
        # Compiled once: the ladder runs after every action, in the trial loop and in replay.
        ready_tests = [c.compile() for c in self.game.ready]
        self._ready = every(ready_tests)
        self._pending = [(m, m.compile()) for m in self.game.milestones if m.id not in self.pre_satisfied]
        self._reached: list[str] = []
        self._ending = final_ending(self.game, (), self.pre_satisfied)

    def update(self, previous: Sample, current: Sample, *, decision_id: int, frame_index: int,
               frame_sha256: str, active_seconds: Callable[[], float] | None = None) -> list[Award]:
        """Check two consecutive frames' samples; return milestones newly verified. `active_seconds`
        (the live loop's clock) stamps each award with the active game time; replay has none."""
        if not self._pending or not (self._ready(current) and self._ready(previous)):
            return []
        new: list[Award] = []
        stamp = None
        for m, holds in self._pending:
            if holds(current) and holds(previous):
                if stamp is None and active_seconds is not None:
                    stamp = round(active_seconds(), 3)  # read once: rungs reached on one frame share it
                award = build(Award, id=m.id, name=m.name, points=m.points, decision_id=decision_id,
                              frame_index=frame_index, frame_sha256=frame_sha256, probe=current,
                              active_seconds=stamp)
                self.awards[m.id] = award
                new.append(award)
        if new:
            self._pending = [(m, h) for m, h in self._pending if m.id not in self.awards]
            self._reached = [m.id for m in self.game.milestones if m.id in self.awards]
            self._ending = final_ending(self.game, self.awards, self.pre_satisfied)
        return new

    @property
    def reached(self) -> list[str]:
        """Reached milestone ids in ladder order (a new list each time: callers keep it)."""
        return list(self._reached)

    @property
    def points(self) -> int:
        return sum(a.points for a in self.awards.values())

    @property
    def deepest(self) -> str | None:
        return deepest(self.game, self.awards, self.pre_satisfied)

    @property
    def skipped_required(self) -> list[str]:
        return skipped_required(self.game, self.awards, self.pre_satisfied)

    @property
    def final_reached(self) -> bool:
        return self.game.final_id in self.awards

    @property
    def ending(self) -> str | None:
        """`final-milestone` (success), `final-milestone-skipped-required`, or None: play on."""
        return self._ending
