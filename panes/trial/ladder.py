"""Milestone ladder pane: each rung with its points, the decision that reached it and the
evidence frame hash; the deepest milestone and the points so far beneath. Rungs that held at
the start, optional rungs, and required rungs passed over (a later rung reached first) are
marked as such, by the rules of engine.games.ladder.

Every rung is shown while it fits: short of rows (the layout sets `columns`), the rungs run down two
or more columns, each rung's name cut to the column's width (the full line: `m` maximises the pane).
A ladder longer than the rows and columns can hold (a full game's 68 rungs on a small terminal) shows
a window of consecutive rungs around the next one to reach, its last cell saying how many rungs lie
above and below; maximised (`m`), the pane shows them all."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from textual.content import Content
from textual.message import Message
from textual.widgets import Static

from panes.pulling import start_pulling


class LadderLike(Protocol):
    milestones: tuple[tuple[str, str, int], ...]
    pre_satisfied: tuple[str, ...]
    awards: dict[str, dict]
    version: int
    optional: tuple[str, ...]


def deepest(snap: LadderLike) -> str | None:
    """engine.games.ladder.deepest on a snapshot: held-at-start rungs pass, unreached optional ones are stepped over."""
    found = None
    for mid, _, _ in snap.milestones:
        if mid in snap.awards or mid in snap.pre_satisfied:
            found = mid
        elif mid not in snap.optional:
            break
    return found


def passed_over(snap: LadderLike) -> set[str]:
    """Required rungs neither reached nor held at the start, with a later rung reached."""
    ids = [mid for mid, _, _ in snap.milestones]
    last = max((i for i, mid in enumerate(ids) if mid in snap.awards), default=-1)
    return {mid for mid in ids[:max(last, 0)]
            if mid not in snap.awards and mid not in snap.pre_satisfied and mid not in snap.optional}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else (text[: width - 1] + "…" if width > 1 else "")


def rung_cell(snap: LadderLike, mid: str, name: str, points: int, width: int, skipped: set[str]) -> Content:
    """One rung in `width` cells (the ladder in columns): mark, id, points and the decision that
    reached it kept whole, the name cut to what is left (the decision gives way to a short name)."""
    award = snap.awards.get(mid)
    id_w = max(len(m) for m, _, _ in snap.milestones)
    if award is not None:
        mark, style, pts, tail = ("✓ ", "$success bold"), "", (f" +{points}", "$success"), f" d{award['decision_id']}"
    elif mid in snap.pre_satisfied:
        mark, style, pts, tail = ("= ", "$foreground-muted"), "$foreground-muted", (f"  {points}", ""), " held"
    elif mid in skipped:
        mark, style, pts, tail = ("✗ ", "$error bold"), "$error", (f"  {points}", "$error"), " skipped"
    else:
        mark, style = ("· ", "$foreground-muted"), "$foreground-muted"
        pts, tail = (f"  {points}", "$foreground-muted"), " opt" if mid in snap.optional else ""
    room = width - 2 - id_w - 1 - len(pts[0])
    if room - len(tail) < min(12, len(name)):
        tail = ""  # a name to read comes first
    name_w = max(0, room - len(tail))
    return Content.assemble(mark, (f"{mid:<{id_w}} ", "bold" if award else style),
                            (f"{_cut(name, name_w):<{name_w}}", style), pts, (tail, style or "$foreground-muted"))


class LadderPane(Static):
    DEFAULT_CSS = """
    LadderPane { height: auto; }
    """
    ALLOW_MAXIMIZE = True
    can_focus = True  # tab to it, then m maximises it (the whole ladder)

    class RungsChanged(Message):
        """The ladder's number of rungs changed (a layout planned for them needs planning again)."""

    def __init__(self, source: Callable[[], LadderLike] | None = None, *, interval: float | None = 0.25,
                 id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes)
        self.source = source
        self.interval = interval
        self._version = -1
        self._lines = -1
        self._width = 0
        self._maximized = False
        self.columns = 1  # set by the layout: rungs run down each column in turn
        self.rows: int | None = None  # set by the layout: the rows it gave (None: as many as the rungs need)
        self.rungs = 0  # the rungs of the ladder shown
        self.border_title = "Milestones"

    def on_mount(self) -> None:
        start_pulling(self, self.interval)

    def on_resize(self) -> None:
        snap = getattr(self, "_snap", None)
        # (maximised or restored: the window of rungs changes with it)
        if snap is not None and (self.size.width != self._width or self.is_maximized != self._maximized):
            self.show(snap)

    def set_columns(self, columns: int, rows: int | None = None) -> None:
        if (columns, rows) != (self.columns, self.rows):
            self.columns, self.rows = columns, rows
            snap = getattr(self, "_snap", None)
            if snap is not None:
                self.show(snap)

    def pull(self) -> None:
        snap = self.source() if self.source else None
        if snap is None or snap.version == self._version:
            return
        self.show(snap)

    def show(self, snap: LadderLike) -> None:
        self._version = snap.version
        self._snap = snap
        self._width = self.size.width
        self._maximized = self.is_maximized
        if len(snap.milestones) != self.rungs:
            self.rungs = len(snap.milestones)
            self.post_message(self.RungsChanged())
        if not snap.milestones:
            self.update(Content.styled("no trial yet", "$foreground-muted"))
            self._lines = 1
            self.border_subtitle = ""
            return
        inner = self.content_region.width or 76
        skipped = passed_over(snap)
        rungs, note = self._window(snap)
        if self.columns > 1:
            lines = self._columns(snap, rungs, inner, skipped, note)
        else:
            lines = self._rows(snap, rungs, inner, skipped, note)
        total = sum(p for _, _, p in snap.milestones)
        got = sum(a["points"] for a in snap.awards.values())
        deep = deepest(snap) or "none"
        self.update(Content("\n").join(lines), layout=len(lines) != self._lines)
        self._lines = len(lines)
        self.border_subtitle = (f"deepest {deep} · {got}/{total} points · "
                                f"{len(snap.awards)}/{len(snap.milestones)} reached")

    def _window(self, snap: LadderLike) -> tuple[tuple[tuple[str, str, int], ...], Content | None]:
        """The rungs to draw and, when they are not all, the note on those left out. All of them while
        they fit the rows the layout gave (or the pane is maximised); else a window of consecutive
        rungs starting a quarter of it before the first rung neither reached nor held (the next to
        reach), the last cell kept for the note."""
        rungs = snap.milestones
        capacity = None if self.rows is None or self.is_maximized else self.rows * self.columns
        if capacity is None or len(rungs) <= capacity:
            return rungs, None
        shown = max(1, capacity - 1)
        ids = [mid for mid, _, _ in rungs]
        nxt = next((i for i, mid in enumerate(ids) if mid not in snap.awards and mid not in snap.pre_satisfied),
                   len(ids) - 1)
        start = min(max(0, nxt - shown // 4), len(ids) - shown)
        above, below = start, len(ids) - start - shown
        parts = [f"↑{above}" if above else "", f"↓{below}" if below else ""]
        note = Content.styled(f"⋯ {' '.join(p for p in parts if p)} more (m: all)", "$foreground-muted")
        return rungs[start:start + shown], note

    def _columns(self, snap: LadderLike, rungs, inner: int, skipped: set[str],
                 note: Content | None = None) -> list[Content]:
        """The rungs down `columns` columns, each as wide as the pane allows (the note in the last cell)."""
        gap = 2
        cell_w = max(8, (inner - gap * (self.columns - 1)) // self.columns)
        cells = [rung_cell(snap, mid, name, points, cell_w, skipped) for mid, name, points in rungs]
        if note is not None:
            cells.append(note.truncate(cell_w))
        height = math.ceil(len(cells) / self.columns)
        lines = []
        for row in range(height):
            parts = [cells[i] for i in range(row, len(cells), height)]
            lines.append(Content(" " * gap).join(parts))
        return lines

    def _rows(self, snap: LadderLike, rungs, inner: int, skipped: set[str],
              note: Content | None = None) -> list[Content]:
        """One line a rung: mark, id, name, points, then the decision and evidence hash reaching it."""
        name_w = max(len(name) for _, name, _ in rungs)
        room = inner - 2 - 4 - name_w - 1 - 3 - 8  # what the hash has
        hash_w = 12 if room >= 12 else max(0, room)
        lines = []
        for mid, name, points in rungs:
            award = snap.awards.get(mid)
            if award is not None:
                lines.append(Content.assemble(
                    ("✓ ", "$success bold"), (f"{mid:<4}", "bold"), f"{name:<{name_w}} ",
                    (f"+{points:<2}", "$success"),
                    f" d{award['decision_id']:<5} ", (award["frame_sha256"][:hash_w], "$foreground-muted")))
            elif mid in snap.pre_satisfied:
                lines.append(Content.assemble(
                    ("= ", "$foreground-muted"), (f"{mid:<4}", "$foreground-muted"),
                    (f"{name:<{name_w}} ", "$foreground-muted"), (f" {points:<2}", "$foreground-muted"),
                    (" held at start", "$foreground-muted")))
            elif mid in skipped:
                lines.append(Content.assemble(
                    ("✗ ", "$error bold"), (f"{mid:<4}", "$error"), (f"{name:<{name_w}} ", "$error"),
                    (f" {points:<2}", "$error"), (" skipped", "$error")))
            else:
                lines.append(Content.assemble(
                    ("· ", "$foreground-muted"), (f"{mid:<4}", ""), (f"{name:<{name_w}} ", "$foreground-muted"),
                    (f" {points:<2}", "$foreground-muted"),
                    (" optional" if mid in snap.optional else "", "$foreground-muted")))
        if note is not None:
            lines.append(note)
        return lines
