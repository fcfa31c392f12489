"""Every trial of an experiment at once: status, deepest rung, actions, cost and a progress sparkline.

Rows come from app.review.attach_data (its `Row`, read here through RowLike); the table is updated cell
by cell so the cursor stays on the trial it was on, each column widening to its longest text.
Every column is shown whole or not at all: a figure cut at the pane's edge would read as another
value (`$0.0123` as `$`, `$0`). Where the full table is wider than the pane (80 columns), the status
gives its reason up (the outcome alone; the summary under the rows has the reason) and the sparkline
narrows, then goes.
The status of an ended trial is its outcome in the end line's words, of a held one paused or
stepping; the cost is engine.figures' rendering. Enter on a row posts DataTable.RowSelected
(the row key is the trial key).
Labels only: no condition or model is ever named here.
"""

from __future__ import annotations

from typing import Protocol

from rich.cells import cell_len
from textual.widgets import DataTable

COLUMNS = (("trial", "Trial"), ("status", "Status"), ("deepest", "Deepest"), ("decisions", "Decisions"),
           ("actions", "Actions"), ("cost", "Cost"), ("points", "Points"), ("progress", "Points over actions"))
SHORT_LABELS = {"deepest": "Deep", "decisions": "Decs", "actions": "Acts", "points": "Pts",
                "progress": "Points/actions"}  # where the full table is too wide
SPARK_WIDTH = 24
SPARK_STEPS = (20, 16, 12)  # narrower than the last the line says nothing: the column goes
PADDING = 2  # a DataTable cell's padding, one each side
SPARK = " ▁▂▃▄▅▆▇█"


class RowLike(Protocol):
    key: str
    status: str
    deepest: str | None
    decisions: int
    actions: int
    points: int
    total_points: int
    series: list[tuple[int, int]]
    max_actions: int | None

    def status_text(self) -> str: ...

    def cost_text(self) -> str: ...


def sparkline(series: list[tuple[int, int]], width: int, total: int, max_x: int | None = None) -> str:
    """Points over accepted actions: `series` is (actions so far, points so far) per decision."""
    if width <= 0:
        return ""
    if not series:
        return SPARK[0] * width
    top_x = max(max_x or 0, series[-1][0], 1)
    top_y = max(total, max(p for _, p in series), 1)
    out, i, points = [], 0, 0
    for col in range(width):
        edge = (col + 1) * top_x / width
        while i < len(series) and series[i][0] <= edge:
            points = series[i][1]
            i += 1
        if i == 0 and series[0][0] > edge:
            out.append(SPARK[1])  # no points yet: the bottom of the line
            continue
        level = 1 + round(points / top_y * (len(SPARK) - 2))
        out.append(SPARK[min(level, len(SPARK) - 1)])
    # Beyond the actions taken so far there is nothing yet: blank, so the line shows how far it got.
    reached = series[-1][0]
    cut = int(reached / top_x * width + 0.999)
    return "".join(out[:cut]) + " " * (width - cut)


class OverviewPane(DataTable):
    DEFAULT_CSS = """
    OverviewPane { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self.border_title = "Trials"
        self._cells: dict[str, tuple] = {}
        self._fit: tuple[bool, int] | None = None  # (the status shortened, the sparkline's width) shown
        self._rows: list[RowLike] = []

    @staticmethod
    def cells(row: RowLike, short: bool = False, spark: int = SPARK_WIDTH) -> tuple:
        waiting = row.status == "waiting"
        status = row.status_text()
        if short:  # the outcome without its reason: "game-failure (budget:accepted_actions)" -> "game-failure"
            status = status.split(" (", 1)[0]
        cells = (row.key, status, "" if waiting else (row.deepest or "none"),
                 "" if waiting else str(row.decisions), "" if waiting else str(row.actions),
                 row.cost_text(), "" if waiting else f"{row.points}/{row.total_points}")
        return (*cells, sparkline(row.series, spark, row.total_points, row.max_actions)) if spark else cells

    @staticmethod
    def labels(short: bool) -> list[str]:
        return [SHORT_LABELS.get(key, label) if short else label for key, label in COLUMNS]

    def fit(self, rows: list[RowLike], width: int) -> tuple[bool, int]:
        """(shorten the status, the sparkline's width: 0 for none) so that every column fits `width`."""
        def needed(short: bool) -> int:
            table = [self.cells(r, short, 0) for r in rows]
            return sum(max(cell_len(label), *(cell_len(c[i]) for c in table)) + PADDING
                       for i, label in enumerate(self.labels(short)[:-1]))

        for short in (False, True):
            room = width - needed(short) - PADDING
            spark_label = cell_len(self.labels(short)[-1])
            if room >= max(SPARK_WIDTH, spark_label):
                return short, SPARK_WIDTH
        # In steps, so a figure growing by a digit does not rebuild the table each time.
        return True, next((w for w in SPARK_STEPS if room >= max(w, spark_label)), 0)

    def on_resize(self) -> None:
        if self._rows:
            self.show(self._rows)

    def show(self, rows: list[RowLike]) -> None:
        self._rows = rows
        keys = [r.key for r in rows]
        width = self.scrollable_content_region.width or self.app.size.width
        fit = self.fit(rows, width)
        short, spark = fit
        if fit != self._fit or list(self._cells) != keys:  # new columns, or the schedule is new: rebuild
            selected = self.selected_key
            self.clear(columns=fit != self._fit)
            if fit != self._fit:
                for (key, _), label in list(zip(COLUMNS, self.labels(short), strict=True))[:None if spark else -1]:
                    self.add_column(label, key=key)
                self._fit = fit
            self._cells = {}
            for row in rows:
                cells = self.cells(row, short, spark)
                self.add_row(*cells, key=row.key)
                self._cells[row.key] = cells
            if selected in self._cells:
                self.move_cursor(row=keys.index(selected))
        else:
            for row in rows:
                cells = self.cells(row, short, spark)
                old = self._cells[row.key]
                if cells == old:
                    continue
                for (col, _), new, was in zip(COLUMNS, cells, old, strict=False):
                    if new != was:
                        # The column widens to its new text: the widths the first (waiting) rows set
                        # would cut an outcome to "ended ·" and $0.00 to "$0.0".
                        self.update_cell(row.key, col, new, update_width=True)
                self._cells[row.key] = cells
        counts = {}
        for r in rows:
            counts[r.status] = counts.get(r.status, 0) + 1
        self.border_subtitle = " · ".join(f"{n} {s}" for s, n in counts.items()) + " · enter opens"

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
