"""Information tracks (seed 003): what an agent is shown besides the screen.

`visual`: the screen only (an Observation's `structured` is None, the prompt is what it always was).
`gameplay`: the structured track's kind of fields and dialogue, and the terrain, party, inventory and
action results (engine.games.gameplay).
`structured`: also the game definition's allowlisted probe fields (engine.games.gamedef.StructuredTrack;
the loader refuses a field any milestone rung reads) and the dialogue box's text, decoded through the
game's character map from the tilemap (`kind: tilemap`: the cartridge, Red's wTileMap) or from the
game's string buffer (`kind: string`: FireRed's gStringVar4). Nothing else of a probe sample is copied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from engine.games.gamedef import Dialogue, GameDefinition, Sample, StringDialogue, StructuredTrack

Track = Literal["visual", "structured", "gameplay"]
TRACKS: tuple[Track, ...] = ("visual", "structured", "gameplay")
ReadRange = Callable[[int, int], Sequence[int]]


def charmap(dialogue: Dialogue | StringDialogue) -> dict[int, str]:
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


def decode_string(dialogue: StringDialogue, read_range: ReadRange, table: dict[int, str] | None = None) -> str | None:
    """The string buffer's text up to its terminator: line-break bytes as new lines, control bytes and
    their arguments dropped, trailing blanks of each line and empty last lines cut; None while the
    `shown` byte says no box is on screen."""
    table = table if table is not None else charmap(dialogue)
    if dialogue.shown is not None and read_range(dialogue.shown.address, 1)[0] == dialogue.shown.hidden:
        return None
    data = read_range(dialogue.address, dialogue.length)
    breaks = set(dialogue.line_breaks)
    out: list[str] = []
    i = 0
    while i < len(data) and data[i] != dialogue.terminator:
        skip = _control_length(dialogue, data, i)
        if skip:
            i += skip
            continue
        b = data[i]
        out.append("\n" if b in breaks else table.get(b, dialogue.unmapped))
        i += 1
    lines = [line.rstrip() for line in "".join(out).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _control_length(dialogue: StringDialogue, data: Sequence[int], i: int) -> int:
    """How many bytes the control at `i` takes with its arguments (0: not a control byte): an extended
    control's as the game's StripExtCtrlCodes counts them, another's from the definition's `controls`."""
    b, ext = data[i], dialogue.ext_control
    if ext is not None and b == ext.byte:
        code = data[i + 1] if i + 1 < len(data) else 0
        return 1 + (ext.lengths[code] if code < len(ext.lengths) else 0)
    return next((1 + c.count for c in dialogue.controls if c.byte == b), 0)


class StructuredView:
    """Builds the structured track's dict for one decision: only allowlisted names, in a fixed order."""

    def __init__(self, track: StructuredTrack):
        self.fields = tuple(track.fields)
        self.dialogue = track.dialogue
        self._table = charmap(track.dialogue) if track.dialogue else None
        self._decode = decode_string if isinstance(track.dialogue, StringDialogue) else decode_dialogue

    def __call__(self, sample: Sample, read_range: ReadRange) -> dict:
        view: dict = {name: _plain(sample.get(name)) for name in self.fields}
        if self.dialogue is not None:
            view["dialogue"] = self._decode(self.dialogue, read_range, self._table)
        return view


def _plain(value):
    return list(value) if isinstance(value, list | tuple) else value


def structured_view(game: GameDefinition, track: Track):
    """The view for a trial on `track` (a StructuredView, or engine.games.gameplay.GameplayView), or None
    on the visual track. Raises ValueError when a track is asked of a definition that declares none."""
    if track == "visual":
        return None
    if track == "gameplay":
        from engine.games.gameplay import GameplayView

        if game.tracks.gameplay is None:
            raise ValueError(f"game definition {game.id!r} declares no gameplay track (tracks.gameplay)")
        return GameplayView(game)
    if game.tracks.structured is None:
        raise ValueError(f"game definition {game.id!r} declares no structured track (tracks.structured)")
    return StructuredView(game.tracks.structured)
