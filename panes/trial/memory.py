"""Memory pane: the agent's episodic store as a table keyed by fact id.

Rows are added, updated and removed by key (never clear()), so the cursor and scroll
position survive updates. Superseded facts are dim and struck through, completed facts
dim; active facts in a contradiction are highlighted; facts read by the last decision are
marked in the first column. New facts come in at the bottom and the pane follows them, unless the
operator has scrolled up. Focused, enter posts MemoryPane.Selected with the whole fact.

The columns are laid out by the width the pane has: the fact (subject / predicate / object) takes
what the others leave, up to its longest; under FACT_MIN cells the kind gives way, then the status
(its ⚠ moves to the first column; superseded and completed facts keep their styles).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.message import Message
from textual.reactive import Reactive
from textual.widgets import DataTable

from panes.pulling import start_pulling

COLUMNS = (("", "read"), ("id", "id"), ("kind", "kind"), ("subject / predicate / object", "fact"),
           ("status", "status"), ("conf", "conf"), ("last", "confirmed"))
LABELS = {key: label for label, key in COLUMNS}
FACT_LABELS = ("subject / predicate / object", "subject/predicate/object", "fact")  # the first that fits
FACT_MIN = 24  # cells the fact keeps before another column gives way
# The narrowest each column is drawn (its usual longest cell), so that a new fact rarely changes them.
NATURAL = {"read": 1, "id": 9, "kind": 9, "fact": 0, "status": 10, "conf": 4, "confirmed": 4}
GIVE_WAY = ((), ("kind",), ("kind", "status"))  # what is dropped, in turn, for the fact's room


def column_plan(width: int, natural: dict[str, int], padding: int = 1) -> tuple[tuple[str, int], ...]:
    """(column key, width) for a table `width` cells across whose cells are at most `natural` wide:
    every column as wide as its widest cell, the fact taking the rest, up to its longest."""
    for drop in GIVE_WAY:
        keys = [key for _, key in COLUMNS if key not in drop]
        natural = {**natural, "read": 2 if "status" in drop else 1}  # ▶ and the status's ⚠
        fixed = sum(natural[key] + 2 * padding for key in keys if key != "fact")
        room = width - fixed - 2 * padding
        if room >= FACT_MIN or drop == GIVE_WAY[-1]:
            fact = max(8, min(room, natural["fact"]))
            return tuple((key, fact if key == "fact" else natural[key]) for key in keys)
    raise AssertionError("unreachable")


class MemoryLike(Protocol):
    facts: tuple[dict, ...]
    contradictions: tuple[tuple[str, ...], ...]
    last_read: tuple[str, ...]
    version: int


FACT_FIELDS = (("fact_id", "fact"), ("kind", "kind"), ("subject", "subject"), ("predicate", "predicate"),
               ("object", "object"), ("status", "status"), ("confidence", "confidence"), ("confirmed", "confirmed"),
               ("first_seen_decision", "first seen at decision"),
               ("last_confirmed_decision", "last confirmed at decision"), ("supersedes", "supersedes"),
               ("evidence_frame_sha256", "evidence frame"), ("evidence", "evidence"))


def fact_text(fact: dict, conflicts: tuple[tuple[str, ...], ...] = (), read: tuple[str, ...] = ()) -> str:
    """One fact whole: every field, what it contradicts, whether the last decision read it."""
    lines = [f"{fact.get('subject')} / {fact.get('predicate')} / {fact.get('object')}", ""]
    known = {key for key, _ in FACT_FIELDS}
    for key, label in FACT_FIELDS:
        if key in fact:
            value = fact[key]
            lines.append(f"{label}: {'—' if value is None or value == '' else value}")
    for key, value in fact.items():
        if key not in known:
            lines.append(f"{key}: {value}")
    fid = fact.get("fact_id")
    others = sorted({i for group in conflicts if fid in group for i in group if i != fid})
    if others:
        lines.append(f"contradicts: {', '.join(others)}")
    if fid in read:
        lines.append("read by the last decision")
    return "\n".join(lines)


class MemoryPane(DataTable):
    DEFAULT_CSS = """
    MemoryPane { height: 1fr; }
    """
    ALLOW_MAXIMIZE = True

    class Selected(Message):
        """Enter on a fact: the fact (a dict) and the text showing it whole."""

        def __init__(self, fact: dict, text: str) -> None:
            super().__init__()
            self.fact = fact
            self.text = text

    # Adding rows grows the virtual size; the pane's own size never depends on it, so skip the
    # whole-screen layout a layout reactive would cause and just update the scrollbars.
    virtual_size = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        if self.is_mounted:
            self._scroll_update(size)

    def __init__(self, source: Callable[[], MemoryLike] | None = None, *, interval: float | None = 0.25,
                 id: str | None = None, classes: str | None = None):
        # The row cursor only while the operator browses the table: a highlighted row must not
        # look like a marked fact.
        super().__init__(id=id, classes=classes, cursor_type="none", zebra_stripes=False)
        self.source = source
        self.interval = interval
        self._version = -1
        self._cells: dict[str, tuple] = {}
        self._facts: dict[str, dict] = {}
        self._snap: MemoryLike | None = None
        self._layout: tuple[tuple[str, int], ...] = ()  # the columns shown and their widths
        self._follow_pending = False  # a scroll to the newest facts is scheduled
        self.border_title = "Memory"

    def on_focus(self) -> None:
        self.cursor_type = "row"

    def on_blur(self) -> None:
        self.cursor_type = "none"

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        fact = self._facts.get(event.row_key.value)
        if fact is not None:
            snap = self._snap
            self.post_message(self.Selected(fact, fact_text(fact, snap.contradictions if snap else (),
                                                            snap.last_read if snap else ())))

    @property
    def following(self) -> bool:
        """At the bottom (or nothing to scroll, or on the way there): new facts scroll into view."""
        return self._follow_pending or self.scroll_y >= self.max_scroll_y

    def on_mount(self) -> None:
        self._lay_out()
        start_pulling(self, self.interval)

    def on_resize(self) -> None:
        self._lay_out()
        self._subtitle()

    @property
    def shown_columns(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self._layout)

    def _natural(self) -> dict[str, int]:
        """The widest cell (or label) of each column, over the facts held."""
        snap = self._snap
        facts = snap.facts if snap else ()
        conflicted = {i for group in snap.contradictions for i in group} if snap else set()
        widths = {key: max(len(label), NATURAL[key]) for label, key in COLUMNS}
        widths["fact"] = len(FACT_LABELS[0])  # the whole label where there is room for it
        for fact in facts:
            for key, text in (("id", fact["fact_id"]), ("kind", fact.get("kind", "")), ("fact", _fact(fact)),
                              ("status", _status(fact, conflicted)), ("confirmed", _last(fact))):
                widths[key] = max(widths[key], len(text))
        return widths

    def _lay_out(self) -> None:
        """Choose the columns for the width there is; rebuild the table when they change."""
        width = self.scrollable_content_region.width  # the scrollbar's cells, when it shows, excluded
        if width <= 0 and self._layout:
            return
        layout = column_plan(max(width, 40), self._natural(), self.cell_padding)
        if layout == self._layout:
            return
        row = self.cursor_row if self.cursor_type == "row" else None
        follow, scroll = self.following, self.scroll_y
        self._layout = layout
        with self.app.batch_update():
            self.clear(columns=True)
            for key, w in layout:
                label = LABELS[key]
                if key == "fact":
                    label = next((text for text in FACT_LABELS if len(text) <= w), FACT_LABELS[-1])
                self.add_column(label, key=key, width=w)
            self._cells = {}
            if self._snap is not None:
                self._put_rows(self._snap)
        if row is not None and self.row_count:
            self.move_cursor(row=min(row, self.row_count - 1), animate=False)
        if follow:
            self._schedule_follow()
        else:
            self.call_after_refresh(self.scroll_to, y=scroll, animate=False, immediate=True)

    def pull(self) -> None:
        snap = self.source() if self.source else None
        if snap is None or snap.version == self._version:
            return
        self.show(snap)

    def _schedule_follow(self) -> None:
        self._follow_pending = True
        self.call_after_refresh(self._follow)

    def _follow(self) -> None:
        self._follow_pending = False
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def _styles(self) -> dict[str, Style]:
        theme = self.app.current_theme
        return {
            "superseded": Style(dim=True, strike=True),
            "completed": Style(dim=True, italic=True),
            "contradiction": Style(color=theme.error, bold=True),
            "read": Style(color=theme.accent or theme.primary, bold=True),
        }

    def _row(self, fact: dict, conflicted: set[str], read: set[str], styles: dict[str, Style]) -> tuple:
        """The fact's cells for the columns shown."""
        fid, status = fact["fact_id"], fact["status"]
        if status == "superseded":
            style = styles["superseded"]
        elif status == "completed":
            style = styles["completed"]
        elif fid in conflicted:
            style = styles["contradiction"]
        else:
            style = Style()
        shown = self.shown_columns
        marker = Text("▶", style=styles["read"]) if fid in read else Text("")
        if "status" not in shown and fid in conflicted and status == "active":
            marker.append("⚠", style=styles["contradiction"])  # the status column gave way
        cells = {"read": marker,
                 "id": Text(fid, style=style),
                 "kind": Text(fact.get("kind", ""), style=style),
                 "fact": Text(_fact(fact), style=style, no_wrap=True, overflow="ellipsis"),
                 "status": Text(_status(fact, conflicted), style=style),
                 "conf": Text(f"{fact.get('confidence', 0):.2f}", style=style),
                 "confirmed": Text(_last(fact), style=style)}
        return tuple(cells[key] for key in shown)

    def show(self, snap: MemoryLike) -> None:
        self._version = snap.version
        follow = self.following
        self._snap = snap
        self._facts = {f["fact_id"]: f for f in snap.facts}
        before = self._layout
        self._lay_out()  # a longer cell can change the columns (the table is then rebuilt)
        added = self._put_rows(snap) if self._layout == before else bool(snap.facts)
        if added and follow:  # the newest facts are at the bottom: keep them in view
            self._schedule_follow()
        self._subtitle()

    def _subtitle(self) -> None:
        """Facts held and active, contradictions, what the last decision read: shorter where narrow."""
        snap = self._snap
        if snap is None:
            return
        active = sum(1 for f in snap.facts if f["status"] == "active")
        held = f"{len(snap.facts)} facts, {active} active"
        conflicts = len(snap.contradictions)
        read = ("read " + ", ".join(snap.last_read[:3]) + ("…" if len(snap.last_read) > 3 else "")
                if snap.last_read else "")
        variants = ([held, f"{conflicts} contradiction(s)" if conflicts else "", read],
                    [held, f"{conflicts} ⚠" if conflicts else "", read],
                    [held, f"{conflicts} ⚠" if conflicts else ""])
        room = self.size.width - 4
        texts = [" · ".join(part for part in parts if part) for parts in variants]
        self.border_subtitle = next((text for text in texts if len(text) <= room), texts[-1])

    def _put_rows(self, snap: MemoryLike) -> bool:
        """Add, update and remove rows by key; whether a row was added."""
        conflicted = {i for group in snap.contradictions for i in group}
        read = set(snap.last_read)
        styles = self._styles()
        seen = set()
        added = False
        keys = self.shown_columns
        with self.app.batch_update():
            for fact in snap.facts:
                fid = fact["fact_id"]
                seen.add(fid)
                cells = self._row(fact, conflicted, read, styles)
                old = self._cells.get(fid)
                if old is None:
                    self.add_row(*cells, key=fid)
                    added = True
                elif old != cells:
                    for col, new, prev in zip(keys, cells, old, strict=True):
                        if new != prev:
                            self.update_cell(fid, col, new)
                self._cells[fid] = cells
            for fid in [f for f in self._cells if f not in seen]:
                self.remove_row(fid)
                del self._cells[fid]
        return added


def _fact(fact: dict) -> str:
    return f"{fact.get('subject')} / {fact.get('predicate')} / {fact.get('object')}"


def _status(fact: dict, conflicted: set[str]) -> str:
    status = fact["status"]
    return status + (" ⚠" if fact["fact_id"] in conflicted and status == "active" else "")


def _last(fact: dict) -> str:
    last = fact.get("last_confirmed_decision")
    return "—" if last is None else f"d{last}"
