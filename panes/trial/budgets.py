"""Budgets pane: one meter per budget, used / limit, coloured as it nears the limit.

Accepted actions, model decisions, wall time, cost and tokens, from the trial's budget snapshot.
Unknown usage (None) reads "unknown", never 0 or $0.00 (a cost or token count is known zero until
a paid call, and stays unknown once one call's was not measured); a budget without a limit
shows what was used, without a bar. Costs and tokens are rendered by engine.figures.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.content import Content
from textual.widgets import Static

from engine.figures import UNKNOWN, money, tokens
from panes.pulling import start_pulling

ROWS = (("accepted_actions", "actions"), ("model_decisions", "decisions"),
        ("wall_time_minutes", "wall time"), ("total_cost_usd", "cost"), ("tokens", "tokens"))
WARNING_AT = 0.75
ERROR_AT = 0.90


def level(used, limit) -> str:
    """'error', 'warning', 'success', or 'unknown' for a used/limit pair."""
    if used is None:
        return "error" if limit is not None else "unknown"
    if not limit:
        return "success"
    ratio = used / limit
    if ratio > ERROR_AT:
        return "error"
    if ratio > WARNING_AT:
        return "warning"
    return "success"


def fmt(key: str, value) -> str:
    if value is None:
        return UNKNOWN
    if key == "total_cost_usd":
        return money(value)
    if key == "tokens":
        return tokens(value)
    if key == "wall_time_minutes":
        seconds = int(round(value * 60))
        return f"{seconds // 60}:{seconds % 60:02d}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.1f}"
    return f"{int(value):,}"


def meter_line(key: str, label: str, used, limit, width: int) -> Content:
    lvl = level(used, limit)
    used_s = fmt(key, used)
    # The figures keep 22 columns where there is room; narrower, they shrink first (never the bar's 4).
    num_w = max(10, min(22, width - 12 - 6 - 4))
    bar_w = max(4, width - 12 - num_w - 6)
    style = {"unknown": "$foreground-muted", "success": "$success", "warning": "$warning", "error": "$error"}[lvl]
    if limit is None:  # nothing to measure against: the figure alone
        return Content.assemble(
            (f"{label:<11}", "bold"),
            (f"{'no limit':<{bar_w + 6}}", "$foreground-disabled"),
            (f"{used_s:>{num_w}}", "$foreground-muted" if used is None else ""),
        )
    numbers = f"{used_s} / {fmt(key, limit)}"
    if len(numbers) > num_w:
        numbers = f"{used_s}/{fmt(key, limit)}"
    if limit and used is not None:
        ratio = min(1.0, used / limit)
        filled = int(round(ratio * bar_w))
        pct = f"{ratio * 100:3.0f}%"
    else:
        filled, pct = 0, "    "
    return Content.assemble(
        (f"{label:<11}", "bold"),
        ("█" * filled, style),
        ("░" * (bar_w - filled), "$panel-lighten-2"),
        " ",
        (pct, style),
        " ",
        (f"{numbers:>{num_w}}", style if lvl != "success" else ""),
    )


class BudgetsPane(Static):
    DEFAULT_CSS = """
    BudgetsPane { height: auto; }  /* five lines, fixed */
    """
    ALLOW_MAXIMIZE = True
    can_focus = True  # tab to it, then m maximises it

    def __init__(self, source: Callable[[], tuple[int, dict]] | None = None, *, interval: float | None = 0.25,
                 id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes)
        self.source = source
        self.interval = interval
        self._version = -1
        self._budgets: dict = {}
        self._width = 0
        self.border_title = "Budgets"

    def on_mount(self) -> None:
        self.show({})
        start_pulling(self, self.interval)

    def on_resize(self) -> None:
        if self.size.width != self._width:
            self.show(self._budgets)

    def pull(self) -> None:
        if self.source is None:
            return
        version, budgets = self.source()
        if version != self._version:
            self._version = version
            self.show(budgets)

    def show(self, budgets: dict) -> None:
        self._budgets = budgets
        self._width = self.size.width or 60
        lines = []
        for key, label in ROWS:
            entry = budgets.get(key, {"used": None, "limit": None})
            lines.append(meter_line(key, label, entry.get("used"), entry.get("limit"), self._width))
        self.update(Content("\n").join(lines), layout=False)  # always five lines
        self.border_subtitle = wall_note(budgets.get("wall_time_minutes", {}).get("limit"), self._width)


def wall_note(limit, width: int) -> str:
    """What the wall-time meter measures, against the header's elapsed clock."""
    per = f", limit {fmt('wall_time_minutes', limit)}" if limit is not None else ""
    for note in (f"wall time = this trial's active time, pauses excluded{per} a trial · elapsed (top) = whole run",
                 f"wall time = this trial, pauses excluded{per} · elapsed (top) = whole run",
                 f"wall time = this trial, pauses excluded{per}",
                 f"wall = this trial, pauses excluded{per}"):
        if len(note) <= width - 6:
            return note
    return "wall = trial, no pauses"
