"""One trial's panes laid out by the space they have (the live console, and attach's drill-in).

`plan_layout` is the whole rule, a pure function of the cells there are: the frame column is as
wide as the picture needs at the height it gets (a Game Boy frame is 160x144 pixels, two pixels
a cell down), the right column takes the rest; the budgets keep their five meters, the ladder
shows every rung (in columns when it is short of rows), the memory and the trace share what is
left. Three arrangements, chosen by the rows of the area (the terminal's, less the status bar
and the footer):

- regular (38 rows and more; a 160x50 or 200x60 terminal): frame | budgets, ladder, memory
  above; the trace below (30%). Once the run is over the summary sits above the trace, in the
  trace's rows, never in the panes above it.
- short (26 to 37 rows; 100x30): the same, the ladder in two columns, the trace 25%.
- tiny (under 26 rows; 80x24): frame | budgets and the ladder; the memory across the whole
  width beneath them, then the trace. The summary has no room here (nor in short): the console
  shows it on a dismissable screen (`summary_in_place` is False).

`TrialPanes` is a grid whose rows and columns it sets from the plan on every resize.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Container

from panes.status import SummaryPane
from panes.trial.budgets import BudgetsPane
from panes.trial.frame import FramePane
from panes.trial.ladder import LadderPane
from panes.trial.memory import MemoryPane
from panes.trial.trace import TracePane

GAME_BOY_ASPECT = 160 / 144
BUDGETS_ROWS = 7  # five meters and the border
TRACE_MIN = 4  # two lines and the border
TRACE_KEPT = 6  # the trace rows a summary in place leaves (four lines)
MEMORY_MIN = {"regular": 6, "short": 5, "tiny": 5}  # the border, the header, three (two) facts
RIGHT_MIN = 44  # the budgets' meters and figures side by side
LADDER_COLUMNS_MAX = 4


@dataclass(frozen=True)
class Plan:
    """Rows and columns of each pane (borders included); every row of the area is given out once."""

    mode: str  # "regular", "short" or "tiny"
    width: int
    height: int
    frame_width: int
    budgets: int
    ladder: int
    ladder_columns: int
    memory: int
    summary: int  # rows of the summary in place (0: not shown here)
    trace: int

    @property
    def top(self) -> int:
        """Rows of the frame's column."""
        return self.height - self.trace - self.summary - (self.memory if self.mode == "tiny" else 0)

    @property
    def summary_in_place(self) -> bool:
        """Whether a summary can have rows of its own (regular layouts)."""
        return self.mode == "regular"


def plan_layout(width: int, height: int, *, aspect: float = GAME_BOY_ASPECT, rungs: int = 8,
                summary: int | None = None) -> Plan:
    """The layout of a width x height area. `aspect` is the frame's width over its height in
    pixels; `rungs` the ladder's milestones; `summary` the rows the summary wants (None: none)."""
    if height >= 38:
        mode, trace = "regular", int(height * 0.3)
    elif height >= 26:
        mode, trace = "short", int(height * 0.25)
    else:
        mode, trace = "tiny", height // 5
    trace = max(TRACE_MIN, trace)
    shown = 0
    if summary and mode == "regular":
        shown = max(0, min(summary, trace - TRACE_KEPT))
        trace -= shown
    rest = max(0, height - trace - shown)
    lines = max(1, rungs)
    room = rest - BUDGETS_ROWS - MEMORY_MIN[mode] - 2  # rows for rungs
    columns = 1 if room >= lines else min(LADDER_COLUMNS_MAX, math.ceil(lines / max(1, room)))
    # A ladder longer than the columns can hold (a full game's 68 rungs) gets the rows there are: the
    # pane shows a window of rungs around the next one to reach, and all of them when maximised.
    ladder = min(math.ceil(lines / columns), max(1, room)) + 2
    if mode == "tiny":
        top = BUDGETS_ROWS + ladder
        memory = max(0, rest - top)
    else:
        top = rest
        memory = max(0, rest - BUDGETS_ROWS - ladder)
    picture_rows = max(1, top - 3)  # the border and the caption
    needed = math.ceil(aspect * 2 * picture_rows) + 2
    frame_width = max(16, min(needed, width - max(RIGHT_MIN, width * 2 // 5)))
    return Plan(mode, width, height, frame_width, BUDGETS_ROWS, ladder, columns, memory, shown, trace)


class TrialPanes(Container):
    """Frame, budgets, ladder, memory, (summary,) trace in a grid set from `plan_layout`."""

    DEFAULT_CSS = """
    TrialPanes { layout: grid; grid-size: 2; height: 1fr; }
    """

    def __init__(self, sink, frame_protocol: str | None = None, *, summary: bool = False,
                 id: str | None = None):
        super().__init__(id=id)
        self.sink = sink
        self.frame_protocol = frame_protocol
        self.with_summary = summary
        self.plan: Plan | None = None

    def compose(self) -> ComposeResult:
        sink = self.sink
        yield FramePane(sink.frame, fps=None, protocol=self.frame_protocol, id="frame")
        yield BudgetsPane(sink.budgets, interval=None, id="budgets")
        yield LadderPane(sink.ladder, interval=None, id="ladder")
        yield MemoryPane(sink.memory, interval=None, id="memory")
        if self.with_summary:
            summary = SummaryPane(id="summary")
            summary.display = False  # until the run is over and the plan gives it rows
            yield summary
        yield TracePane(sink.drain_trace, interval=None, id="trace")

    def on_resize(self) -> None:
        self.relayout()

    def on_frame_pane_aspect_changed(self, event) -> None:
        self.relayout()

    def on_ladder_pane_rungs_changed(self, event) -> None:
        self.relayout()

    def relayout(self) -> None:
        """Plan for the size there is now and apply it (no-op when nothing changed)."""
        width, height = self.size
        if not width or not height:
            return
        frame, ladder = self.query_one(FramePane), self.query_one(LadderPane)
        summaries = self.query(SummaryPane)
        summary = summaries.first() if summaries else None
        wanted = summary.rows_wanted(width) if summary is not None and summary.text else None
        plan = plan_layout(width, height, aspect=frame.aspect, rungs=ladder.rungs, summary=wanted)
        if plan == self.plan:
            return
        self.plan = plan
        tiny = plan.mode == "tiny"
        styles = self.styles
        styles.grid_columns = f"{plan.frame_width} 1fr"
        rows = [plan.budgets, plan.ladder, plan.memory] + ([plan.summary] if plan.summary else []) + [plan.trace]
        styles.grid_rows = " ".join(str(r) for r in rows)
        frame.styles.row_span = 2 if tiny else 3
        memory = self.query_one(MemoryPane)
        memory.styles.column_span = 2 if tiny else 1
        if summary is not None:
            summary.styles.column_span = 2
            summary.display = plan.summary > 0
        self.query_one(TracePane).styles.column_span = 2
        ladder.set_columns(plan.ladder_columns, rows=plan.ladder - 2)
        for name in ("regular", "short", "tiny"):
            self.set_class(plan.mode == name, f"-{name}")
