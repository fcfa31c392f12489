"""The run's summary once it is over: the table the headless printer ends with (one row a trial:
outcome, deepest rung, points, actions, decisions, cost, end reason) and the "runs:" line, fitted
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

GAP = "  "


def summary_lines(rows: list[tuple[str, ...]], runs: str, width: int) -> list[str]:
    """The table and the runs line in `width` cells: the columns as wide as their widest cell; where
    that is too wide, each trial's end reason goes on a line of its own under it; the runs line wraps."""
    if not rows:
        return textwrap.wrap(runs, max(20, width)) if runs else []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]

    def line(cells, ws) -> str:
        return GAP.join(cell.ljust(w) for cell, w in zip(cells, ws, strict=True)).rstrip()

    table: list[str]
    if sum(widths) + len(GAP) * (len(widths) - 1) <= width or len(widths) < 2:
        table = [line(row, widths) for row in rows]
        table.insert(1, GAP.join("-" * w for w in widths))
    else:
        head = widths[:-1]
        table = [line(rows[0][:-1], head), GAP.join("-" * w for w in head)]
        for row in rows[1:]:
            table += [line(row[:-1], head), f"  ↳ {rows[0][-1]}: {row[-1]}"]
    return [*table, "", *(textwrap.wrap(runs, max(20, width)) if runs else [])]


class SummaryPane(Static):
    """The run's summary (app.headless.summary_rows), drawn at the pane's width."""

    DEFAULT_CSS = """
    SummaryPane { height: auto; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    ALLOW_MAXIMIZE = True
    can_focus = True

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes)
        self.border_title = "Summary"
        self.rows: list[tuple[str, ...]] = []
        self.runs = ""
        self.where: str | None = None
        self.text = ""  # the whole summary as plain text (empty until the run is over)
        self._drawn_at = -1

    def show_summary(self, rows: list[tuple[str, ...]], runs: str, where: str | None = None) -> None:
        self.rows, self.runs, self.where = rows, runs, where
        self.text = "\n".join(summary_lines(rows, runs, 10_000))
        self.border_subtitle = f"evidence: {where} · check with: oakwatch verify" if where else ""
        self._drawn_at = -1
        self._draw()

    def show_error(self, message: str) -> None:
        """What to show when the summary itself could not be built (the run is over all the same)."""
        self.show_summary([], message, None)

    def on_resize(self) -> None:
        self._draw()

    def _inner(self, width: int) -> int:
        gutter = self.styles.gutter.width if self.is_mounted else 4
        return max(20, width - gutter)

    def rows_wanted(self, width: int) -> int:
        """The rows (border included) the summary needs at `width` cells across."""
        gutter = self.styles.gutter.height if self.is_mounted else 2
        return len(summary_lines(self.rows, self.runs, self._inner(width))) + gutter

    def _draw(self) -> None:
        if not self.text:
            return
        width = self._inner(self.size.width) if self.size.width else 96
        if width != self._drawn_at:
            self._drawn_at = width
            self.update(Content("\n".join(summary_lines(self.rows, self.runs, width))))


class SummaryScreen(ModalScreen[None]):
    """The summary on a screen of its own (where the layout has no rows for it); escape closes it."""

    BINDINGS = [Binding("escape,enter,r", "close", "Close")]  # q still quits

    def __init__(self, rows: list[tuple[str, ...]], runs: str, where: str | None = None):
        super().__init__(id="summary-screen")
        self.rows, self.runs, self.where = rows, runs, where

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="summary-dialog"):
            yield Label("The run is over", classes="dialog-title")
            yield SummaryPane(id="summary-whole")
            if self.where:
                yield Label(f"evidence: {self.where} · check with: oakwatch verify", classes="dialog-help")
            yield Label("escape closes · r shows it again", classes="dialog-help")

    def on_mount(self) -> None:
        self.query_one(SummaryPane).show_summary(self.rows, self.runs, None)

    def action_close(self) -> None:
        self.dismiss(None)
