"""Memory pane: the agent's episodic store as a table keyed by fact id.

Rows are added, updated and removed by key (never clear()), so the cursor and scroll
position survive updates. Superseded facts are dim and struck through, completed facts
dim; active facts in a contradiction are highlighted; facts read by the last decision are
marked in the first column. New facts come in at the bottom and the pane follows them, unless the
operator has scrolled up. Focused, enter posts MemoryPane.Selected with the whole fact.
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
FACT_WIDTH = 32


def _clip(text: str, width: int = FACT_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


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
        """At the bottom (or nothing to scroll): new facts scroll into view."""
        return self.scroll_y >= self.max_scroll_y

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key, width=FACT_WIDTH if key == "fact" else None)
        start_pulling(self, self.interval)

    def pull(self) -> None:
        snap = self.source() if self.source else None
        if snap is None or snap.version == self._version:
            return
        self.show(snap)

    def _follow(self) -> None:
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
        fid, status = fact["fact_id"], fact["status"]
        if status == "superseded":
            style = styles["superseded"]
        elif status == "completed":
            style = styles["completed"]
        elif fid in conflicted:
            style = styles["contradiction"]
        else:
            style = Style()
        marker = Text("▶", style=styles["read"]) if fid in read else Text("")
        status_text = status + (" ⚠" if fid in conflicted and status == "active" else "")
        last = fact.get("last_confirmed_decision")
        return (marker,
                Text(fid, style=style),
                Text(fact.get("kind", ""), style=style),
                Text(_clip(f"{fact.get('subject')} / {fact.get('predicate')} / {fact.get('object')}"), style=style),
                Text(status_text, style=style),
                Text(f"{fact.get('confidence', 0):.2f}", style=style),
                Text("—" if last is None else f"d{last}", style=style))

    def show(self, snap: MemoryLike) -> None:
        self._version = snap.version
        conflicted = {i for group in snap.contradictions for i in group}
        read = set(snap.last_read)
        styles = self._styles()
        seen = set()
        follow = self.following
        added = False
        self._snap = snap
        self._facts = {f["fact_id"]: f for f in snap.facts}
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
                    for (_, col), new, prev in zip(COLUMNS, cells, old, strict=True):
                        if new != prev:
                            self.update_cell(fid, col, new)
                self._cells[fid] = cells
            for fid in [f for f in self._cells if f not in seen]:
                self.remove_row(fid)
                del self._cells[fid]
        if added and follow:  # the newest facts are at the bottom: keep them in view
            self.call_after_refresh(self._follow)
        active = sum(1 for f in snap.facts if f["status"] == "active")
        parts = [f"{len(snap.facts)} facts, {active} active"]
        if snap.contradictions:
            parts.append(f"{len(snap.contradictions)} contradiction(s)")
        if snap.last_read:
            parts.append("read " + ", ".join(snap.last_read[:3]) + ("…" if len(snap.last_read) > 3 else ""))
        self.border_subtitle = " · ".join(parts)
