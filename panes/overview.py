"""Every trial of an experiment at once: status, deepest rung, actions, cost and a progress sparkline.

Rows come from app.review.attach_data (its `Row`, read here through RowLike); the table is updated cell
by cell so the cursor stays on the trial it was on, each column widening to its longest text.
The status of an ended trial is its outcome in the end line's words, of a held one paused or
stepping; the cost is engine.figures' rendering. Enter on a row posts DataTable.RowSelected
(the row key is the trial key).
Labels only: no condition or model is ever named here.
"""

from __future__ import annotations

from typing import Protocol

from textual.widgets import DataTable

COLUMNS = (("trial", "Trial"), ("status", "Status"), ("deepest", "Deepest"), ("decisions", "Decisions"),
           ("actions", "Actions"), ("cost", "Cost"), ("points", "Points"), ("progress", "Points over actions"))
SPARK_WIDTH = 24
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

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @staticmethod
    def cells(row: RowLike) -> tuple:
        waiting = row.status == "waiting"
        return (row.key, row.status_text(), "" if waiting else (row.deepest or "none"),
                "" if waiting else str(row.decisions), "" if waiting else str(row.actions),
                row.cost_text(), "" if waiting else f"{row.points}/{row.total_points}",
                sparkline(row.series, SPARK_WIDTH, row.total_points, row.max_actions))

    def show(self, rows: list[RowLike]) -> None:
        keys = [r.key for r in rows]
        if list(self._cells) != keys:  # the schedule is new (or first read): rebuild
            selected = self.selected_key
            self.clear()
            self._cells = {}
            for row in rows:
                cells = self.cells(row)
                self.add_row(*cells, key=row.key)
                self._cells[row.key] = cells
            if selected in self._cells:
                self.move_cursor(row=keys.index(selected))
        else:
            for row in rows:
                cells = self.cells(row)
                old = self._cells[row.key]
                if cells == old:
                    continue
                for (col, _), new, was in zip(COLUMNS, cells, old, strict=True):
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
