"""The hidden-state probe: reads a game definition's RAM fields for the evaluator only.

Its samples go to the ladder, route tracker and evidence; never into an observation.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.gamedef import GameDefinition, Sample


class Probe:
    def __init__(self, game: GameDefinition):
        # Precompute (name, address, kind, length) once: the probe runs twice per action.
        self._plan = [(name, f.address, f.kind, f.length) for name, f in game.fields.items()]

    def __call__(self, read: Callable[[int], int]) -> Sample:
        sample: Sample = {}
        for name, addr, kind, length in self._plan:
            if kind == "u8":
                sample[name] = read(addr)
            elif kind == "u16le":
                sample[name] = read(addr) | read(addr + 1) << 8
            elif kind == "u32le":
                sample[name] = (read(addr) | read(addr + 1) << 8 | read(addr + 2) << 16
                                | read(addr + 3) << 24)
            else:
                sample[name] = [read(addr + i) for i in range(length)]
        return sample
