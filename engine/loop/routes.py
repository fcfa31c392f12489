"""Route tracking: transitions between tiles, repeated segments, unrecoverable loops.

A transition is (map, x, y, action, map', x', y') for an action that moved the player.
A segment is SEGMENT consecutive transitions; it repeats when the same ordered segment
occurs again with no progress event (milestone, inventory, battle...) in between.

Two optional keys of the game definition refine this (used by sessions.analysis.metrics; the live loop
passes neither and behaves as before): `required_backtracking` (a segment whose transitions all
lie on the maps of an entry whose milestone window holds is never repetition) and
`recovery_events` (fields whose change resets counting, like `progress_fields`; the caller
calls `progress()` for them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

SEGMENT = 4

Transition = tuple[int, int, int, str, int, int, int]


@dataclass
class RouteTracker:
    loop_repeats: int | None = 3  # None: never end a trial for looping
    transitions: list[Transition] = field(default_factory=list)  # the last SEGMENT since progress
    segments: Counter = field(default_factory=Counter)
    repeated_actions: int = 0  # accepted actions that completed an already-seen segment
    loops_detected: int = 0
    backtracking: Sequence = ()  # engine.games.gamedef.RequiredBacktrack entries
    excused_actions: int = 0  # repeated segments that were required backtracking (not counted)

    @classmethod
    def for_game(cls, game, loop_repeats: int | None) -> RouteTracker:
        """The tracker for a game definition: its required backtracking excused (needs positions)."""
        return cls(loop_repeats, backtracking=tuple(game.required_backtracking) if game.position else ())

    def _excused(self, segment: tuple, reached: Collection[str]) -> bool:
        for entry in self.backtracking:
            if entry.applies(reached) and all(t[0] in entry.maps and t[4] in entry.maps for t in segment):
                return True
        return False

    def progress(self) -> None:
        """A progress event: repetition before it is not repetition after it."""
        self.transitions.clear()
        self.segments.clear()

    def record(self, before: tuple[int, int, int], action: str, after: tuple[int, int, int],
               reached: Collection[str] = ()) -> bool:
        """Record one action's effect; True when the trial has entered an unrecoverable loop.
        `reached`: the milestones held, for the required-backtracking windows."""
        if before == after:
            return False
        self.transitions.append((*before, action, *after))
        if len(self.transitions) > SEGMENT:  # only the last SEGMENT make a segment: memory flat in a long trial
            del self.transitions[0]
        if len(self.transitions) < SEGMENT:
            return False
        segment = tuple(self.transitions[-SEGMENT:])
        if self.backtracking and self._excused(segment, reached):
            self.excused_actions += 1
            return False
        self.segments[segment] += 1
        count = self.segments[segment]
        if count >= 2:
            self.repeated_actions += 1
        if self.loop_repeats is not None and count >= self.loop_repeats:
            self.loops_detected += 1
            return True
        return False
