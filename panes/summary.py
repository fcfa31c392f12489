"""The run's summary once it is over: the table the headless printer ends with (one row a trial:
outcome, deepest rung, points, actions, decisions, cost, end reason) and its "runs:" line, fitted
to the width there is. It takes rows of its own above the trace where the layout has them
(panes.trial_layout), else it opens in a screen of its own that escape closes (`r` reopens it)."""

from __future__ import annotations

import textwrap

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Label, Static


def summary_lines(table: str, width: int) -> list[str]:
    """The summary (app.headless.summary_table's text: a header, a row of dashes, a row a trial, a
    blank line, the "runs:" line) in `width` cells. Where the table is wider, each trial's last
    column (its end reason, which starts where the last run of dashes does) goes on a line of its
    own under it; the lines after the table wrap."""
    lines = table.split("\n")
    if "" in lines:
        cut = lines.index("")
        rows, rest = lines[:cut], lines[cut + 1:]
    else:
        rows, rest = lines, []
    wrapped = [part for line in rest for part in (textwrap.wrap(line, max(20, width)) or [""])]
    rows = [row.rstrip() for row in rows]
    dashes = rows[1] if len(rows) > 1 else ""
    if all(len(row) <= width for row in rows) or " -" not in dashes:
        table_lines = rows
    else:
        start = dashes.rindex(" -") + 1  # where the last column starts
        label = rows[0][start:].strip()
        table_lines = [rows[0][:start].rstrip(), dashes[:start].rstrip()]
        for row in rows[2:]:
            table_lines += [row[:start].rstrip(), f"  ↳ {label}: {row[start:].strip()}"]
    return [*table_lines, *([""] if rest else []), *wrapped]


class SummaryPane(Static):
    """The run's summary (app.headless.summary_table), drawn at the pane's width."""

    DEFAULT_CSS = """
    SummaryPane { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    ALLOW_MAXIMIZE = True
    can_focus = True

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes)
        self.border_title = "Summary"
        self.where: str | None = None
        self.text = ""  # the summary table's text (empty until the run is over)
        self._drawn_at = -1

    def show_table(self, table: str, where: str | None = None) -> None:
        self.text, self.where = table, where
        self.border_subtitle = f"evidence: {where} · check with: oakwatch verify" if where else ""
        self._drawn_at = -1
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _inner(self, width: int) -> int:
        gutter = self.styles.gutter.width if self.is_mounted else 4
        return max(20, width - gutter)

    def rows_wanted(self, width: int) -> int:
        """The rows (border included) the summary needs at `width` cells across."""
        gutter = self.styles.gutter.height if self.is_mounted else 2
        return len(summary_lines(self.text, self._inner(width))) + gutter

    def _draw(self) -> None:
        if not self.text:
            return
        width = self._inner(self.size.width) if self.size.width else 96
        if width != self._drawn_at:
            self._drawn_at = width
            self.update(Content("\n".join(summary_lines(self.text, width))))


class SummaryScreen(ModalScreen[None]):
    """The summary on a screen of its own (where the layout has no rows for it); escape closes it."""

    BINDINGS = [Binding("escape,enter,r", "close", "Close")]  # q still quits

    def __init__(self, table: str, where: str | None = None):
        super().__init__(id="summary-screen")
        self.table, self.where = table, where

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="summary-dialog"):
            yield Label("The run is over", classes="dialog-title")
            yield SummaryPane(id="summary-whole")
            if self.where:
                yield Label(f"evidence: {self.where} · check with: oakwatch verify", classes="dialog-help")
            yield Label("escape closes · r shows it again", classes="dialog-help")

    def on_mount(self) -> None:
        self.query_one(SummaryPane).show_table(self.table)

    def action_close(self) -> None:
        self.dismiss(None)
