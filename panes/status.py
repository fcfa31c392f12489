"""Status bar: experiment, blinded condition label, trial n of N, run state, elapsed time,
pacing. Only the blinded label is shown: never a condition id or a model name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from textual.content import Content
from textual.widgets import Static

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
