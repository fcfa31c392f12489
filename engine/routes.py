"""Route tracking: transitions between tiles, repeated segments, unrecoverable loops.

A transition is (map, x, y, action, map', x', y') for an action that moved the player.
A segment is SEGMENT consecutive transitions; it repeats when the same ordered segment
occurs again with no progress event (milestone, inventory, battle...) in between.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

SEGMENT = 4

Transition = tuple[int, int, int, str, int, int, int]


@dataclass
class RouteTracker:
    loop_repeats: int | None = 3  # None: never end a trial for looping
    transitions: list[Transition] = field(default_factory=list)
    segments: Counter = field(default_factory=Counter)
    repeated_actions: int = 0  # accepted actions that completed an already-seen segment
    loops_detected: int = 0

    def progress(self) -> None:
        """A progress event: repetition before it is not repetition after it."""
        self.transitions.clear()
        self.segments.clear()

    def record(self, before: tuple[int, int, int], action: str, after: tuple[int, int, int]) -> bool:
        """Record one action's effect; True when the trial has entered an unrecoverable loop."""
        if before == after:
            return False
        self.transitions.append((*before, action, *after))
        if len(self.transitions) < SEGMENT:
            return False
        segment = tuple(self.transitions[-SEGMENT:])
        self.segments[segment] += 1
        count = self.segments[segment]
        if count >= 2:
            self.repeated_actions += 1
        if self.loop_repeats is not None and count >= self.loop_repeats:
            self.loops_detected += 1
            return True
        return False
