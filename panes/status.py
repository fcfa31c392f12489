"""Status bar: experiment, blinded condition label, trial n of N, run state, elapsed time,
pacing. Only the blinded label is shown: never a condition id or a model name.

And the run's summary once it is over: the table the headless printer ends with (one row a
trial: outcome, deepest rung, points, actions, decisions, cost, end reason) and its "runs:"
line, fitted to the width there is. In the live console it takes rows of its own above the
trace where the layout has them (panes.trial.trial_layout), else it opens on a screen of its own
(SummaryScreen) that escape closes and `r` reopens."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Protocol

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from panes.pulling import start_pulling

STATE_STYLE = {"running": "$success", "stepping": "$accent", "paused": "$warning", "ended": "$primary",
               "finished": "$primary", "quitting": "$warning", "starting": "$foreground-muted", "error": "$error"}
STATE_MARK = {"running": "▶", "stepping": "⏯", "paused": "‖", "ended": "■", "finished": "■", "quitting": "…",
              "starting": "…", "error": "✗"}


class StatusLike(Protocol):
    experiment_id: str
    label: str | None
    trial_key: str | None
    schedule_index: int | None
    trials_total: int | None
    state: str
    detail: str | None
    decisions: int
    elapsed: float
    error: str | None


def clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def speed_label(speed: float | None) -> str:
    return "max" if speed is None else f"{speed:g}×"


def status_line(s: StatusLike, *, speed: float | None = 1.0, human: bool = False, width: int = 160) -> Content:
    """The bar's text; under ~110 columns the labels shorten so the clock and pace stay on screen."""
    state = s.state
    detail = f": {s.detail}" if s.detail else ""
    trial = f"{s.schedule_index}/{s.trials_total}" if s.schedule_index else "—"
    mark = (f"{STATE_MARK.get(state, '·')} {state}", f"bold {STATE_STYLE.get(state, '')}")
    if width >= 110:
        parts: list = [("oakwatch ", "bold $primary"), (s.experiment_id, "bold"), "  "]
        parts += [("condition ", "$foreground-muted"), (s.label or "—", "bold"), "  "]
        parts += [("trial ", "$foreground-muted"), (trial, "bold"), "  "]
        parts += [(mark[0] + detail, mark[1]), "  "]
        parts += [("decision ", "$foreground-muted"), (str(s.decisions), "bold"), "  "]
        parts += [("elapsed ", "$foreground-muted"), (clock(s.elapsed), "bold"), "  "]
        parts += [("pace ", "$foreground-muted"), (speed_label(speed), "bold")]
    else:  # the essentials kept whole; the experiment id gives way first, the state's detail goes last
        rest: list = [("condition ", "$foreground-muted"), (s.label or "—", "bold"), " "]
        rest += [("trial ", "$foreground-muted"), (trial, "bold"), " "]
        rest += [mark, " "]
        rest += [("d", "$foreground-muted"), (str(s.decisions), "bold"), " "]
        rest += [("elapsed ", "$foreground-muted"), (clock(s.elapsed), "bold"), " "]
        rest += [(speed_label(speed), "bold")]
        room = width - 2 - Content.assemble(*rest).cell_length - 1
        exp = s.experiment_id if len(s.experiment_id) <= room else (s.experiment_id[: room - 1] + "…")
        parts = ([(exp, "bold $primary"), " "] if room >= 6 else []) + rest
        if s.detail:
            parts += [" ", (s.detail, mark[1])]
    if human:
        parts += ["  ", ("HUMAN ←↑↓→ z=A x=B ⏎=START ⌫=SELECT, ctrl+x ends trial", "bold $accent")]
    if s.error:
        parts += ["  ", ("✗ " + s.error, "bold $error")]
    return Content.assemble(*parts)


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; dock: top; padding: 0 1; }
    """

    def __init__(self, source: Callable[[], StatusLike] | None = None, *,
                 extras: Callable[[], dict] | None = None, interval: float | None = 0.25,
                 id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes)
        self.source = source
        self.extras = extras or (lambda: {})
        self.interval = interval
        self._last: Content | None = None

    def on_mount(self) -> None:
        start_pulling(self, self.interval)

    def pull(self) -> None:
        if self.source is not None:
            self.show(self.source(), **self.extras())

    def on_resize(self) -> None:
        if self._last is not None:
            self.pull()

    def show(self, s: StatusLike, *, speed: float | None = 1.0, human: bool = False) -> None:
        content = status_line(s, speed=speed, human=human, width=self.size.width or 160)
        if content != self._last:
            self._last = content
            self.update(content, layout=False)


def summary_lines(table: str, width: int) -> list[str]:
    """The summary (app.console.headless.summary_table's text: a header, a row of dashes, a row a trial, a
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
    """The run's summary (app.console.headless.summary_table), drawn at the pane's width."""

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
        self.add_class("-shown")

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
