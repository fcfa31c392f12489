"""Information tracks (seed 003): what an agent is shown besides the screen.

`visual`: the screen only (an Observation's `structured` is None, the prompt is what it always was).
`structured`: also the game definition's allowlisted probe fields (engine.gamedef.StructuredTrack;
the loader refuses a field any milestone rung reads) and the dialogue box's text, decoded from the
background tilemap through the game's character map. Nothing else of a probe sample is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from engine.gamedef import Dialogue, GameDefinition, Sample, StructuredTrack

Track = Literal["visual", "structured"]
TRACKS: tuple[Track, ...] = ("visual", "structured")
ReadRange = Callable[[int, int], Sequence[int]]


def charmap(dialogue: Dialogue) -> dict[int, str]:
    table: dict[int, str] = {}
    for run in dialogue.charmap:
        for i, ch in enumerate(run.chars):
            table[run.first + i] = ch
    return table


def decode_dialogue(dialogue: Dialogue, read_range: ReadRange, table: dict[int, str] | None = None) -> str | None:
    """The dialogue window's text, one line per text row (trailing blanks and empty last lines cut),
    or None while the window is not on screen."""
    table = table if table is not None else charmap(dialogue)
    shown = dialogue.shown_tile
    if shown is not None:
        at = dialogue.tilemap + shown.row * dialogue.stride + shown.column
        if read_range(at, 1)[0] != shown.tile:
            return None
    width = dialogue.last_column - dialogue.first_column + 1
    lines = []
    for row in dialogue.rows:
        tiles = read_range(dialogue.tilemap + row * dialogue.stride + dialogue.first_column, width)
        lines.append("".join(table.get(t, dialogue.unmapped) for t in tiles).rstrip())
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


class StructuredView:
    """Builds the structured track's dict for one decision: only allowlisted names, in a fixed order."""

    def __init__(self, track: StructuredTrack):
        self.fields = tuple(track.fields)
        self.dialogue = track.dialogue
        self._table = charmap(track.dialogue) if track.dialogue else None

    def __call__(self, sample: Sample, read_range: ReadRange) -> dict:
        view: dict = {name: _plain(sample.get(name)) for name in self.fields}
        if self.dialogue is not None:
            view["dialogue"] = decode_dialogue(self.dialogue, read_range, self._table)
        return view


def _plain(value):
    return list(value) if isinstance(value, list | tuple) else value


def structured_view(game: GameDefinition, track: Track) -> StructuredView | None:
    """The view for a trial on `track`, or None on the visual track. Raises ValueError when the
    structured track is asked of a definition that declares none."""
    if track == "visual":
        return None
    if game.tracks.structured is None:
        raise ValueError(f"game definition {game.id!r} declares no structured track (tracks.structured)")
    return StructuredView(game.tracks.structured)
