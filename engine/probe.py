"""The hidden-state probe: reads a game definition's RAM fields for the evaluator only.

Its samples go to the ladder, route tracker and evidence; never into an observation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from engine.gamedef import GameDefinition, Sample

ReadRange = Callable[[int, int], Sequence[int]]
MAX_SPAN = 1024  # fields closer together than this are read in one call


def _width(kind: str, length: int) -> int:
    return {"u8": 1, "u16le": 2, "u32le": 4}.get(kind, length)


class Probe:
    def __init__(self, game: GameDefinition):
        # Group fields into spans read in one call each: the probe runs twice per action.
        fields = sorted(((f.address, name, f.kind, f.length) for name, f in game.fields.items()))
        self._spans: list[tuple[int, int, list[tuple[str, int, str, int]]]] = []
        for addr, name, kind, length in fields:
            end = addr + _width(kind, length)
            if self._spans and end - self._spans[-1][0] <= MAX_SPAN:
                start, old_end, members = self._spans[-1]
                self._spans[-1] = (start, max(old_end, end), members)
            else:
                self._spans.append((addr, end, []))
                start = addr
            self._spans[-1][2].append((name, addr - self._spans[-1][0], kind, length))

        # Runs twice per action: byte fields (most of them) are split out for one dict comprehension.
        self._plan = [(start, end - start, [(n, o) for n, o, k, _ in members if k == "u8"],
                       [(n, o, k, ln) for n, o, k, ln in members if k != "u8"])
                      for start, end, members in self._spans]

    def __call__(self, read_range: ReadRange) -> Sample:
        sample: Sample = {}
        for start, size, u8, others in self._plan:
            data = read_range(start, size)
            sample.update({name: data[off] for name, off in u8})
            for name, off, kind, length in others:
                if kind == "u16le":
                    sample[name] = data[off] | data[off + 1] << 8
                elif kind == "u32le":
                    sample[name] = data[off] | data[off + 1] << 8 | data[off + 2] << 16 | data[off + 3] << 24
                else:
                    sample[name] = list(data[off:off + length])
        return sample
