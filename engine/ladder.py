"""The milestone ladder: verified, once-only awards with evidence.

Rules (seed 000 and the reference notes): a milestone is awarded once; only after two
consecutive qualifying frames; never if it already held at the start of the trial.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.gamedef import GameDefinition, Sample
from engine.records import MilestoneAward as Award
from engine.records import build


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
        self._ready = lambda s: all(t(s) for t in ready_tests)
        self._pending = [(m, m.compile()) for m in self.game.milestones if m.id not in self.pre_satisfied]
        self._reached: list[str] = []

    def update(self, previous: Sample, current: Sample, *, decision_id: int, frame_index: int,
               frame_sha256: str) -> list[Award]:
        """Check two consecutive frames' samples; return milestones newly verified."""
        if not self._pending or not (self._ready(current) and self._ready(previous)):
            return []
        new: list[Award] = []
        for m, holds in self._pending:
            if holds(current) and holds(previous):
                award = build(Award, id=m.id, name=m.name, points=m.points, decision_id=decision_id,
                                              frame_index=frame_index, frame_sha256=frame_sha256, probe=current)
                self.awards[m.id] = award
                new.append(award)
        if new:
            self._pending = [(m, h) for m, h in self._pending if m.id not in self.awards]
            self._reached = [m.id for m in self.game.milestones if m.id in self.awards]
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
        """The deepest milestone reached with every earlier rung reached too."""
        deepest = None
        for m in self.game.milestones:
            if m.id not in self.awards:
                break
            deepest = m.id
        return deepest

    @property
    def final_reached(self) -> bool:
        return self.game.final_id in self.awards
