"""Every trial of an experiment at once: status, deepest rung, actions, cost and a progress sparkline.

Rows come from app.attach_data (`Row`); the table is updated cell by cell so the cursor stays on
the trial it was on. Enter on a row posts DataTable.RowSelected (the row key is the trial key).
Labels only: no condition or model is ever named here.
"""

from __future__ import annotations

from textual.widgets import DataTable

from app.attach_data import Row, sparkline

COLUMNS = (("trial", "Trial"), ("status", "Status"), ("deepest", "Deepest"), ("decisions", "Decisions"),
           ("actions", "Actions"), ("cost", "Cost"), ("points", "Points"), ("progress", "Points over actions"))
SPARK_WIDTH = 24


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
    def cells(row: Row) -> tuple:
        waiting = row.status == "waiting"
        return (row.key, row.status_text(), "" if waiting else (row.deepest or "none"),
                "" if waiting else str(row.decisions), "" if waiting else str(row.actions),
                row.cost_text(), "" if waiting else f"{row.points}/{row.total_points}",
                sparkline(row.series, SPARK_WIDTH, row.total_points, row.max_actions))

    def show(self, rows: list[Row]) -> None:
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
                        self.update_cell(row.key, col, new)
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
