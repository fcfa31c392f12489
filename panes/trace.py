"""Trace pane: one line per decision, milestones and operator tags highlighted.

Items are drained from the run's buffer on a ~10 Hz timer and written in one batch with
Log.write_lines; the log keeps the last 5,000 lines.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Log

from panes.lines import milestone_line, trial_ended_line, trial_started_line
from panes.pulling import start_pulling

MAX_LINES = 5_000

MARKS = {"★": "milestone", "⚑": "tag", "✗": "error", "■": "ended", "▶": "trial", "‖": "state"}


def _short(value, width: int) -> str:
    text = str(value or "")
    return text if len(text) <= width else text[: width - 1] + "…"


def decision_line(t: dict) -> str:
    actions = t.get("parsed_actions") or []
    accepted = t.get("accepted_actions", 0)
    acts = ",".join(actions) if actions else "—"
    if actions and accepted != len(actions):
        acts += f" ({accepted}/{len(actions)} accepted)"
    observed = t.get("observed") or {}
    parts = [f"d{t.get('decision_id', 0):05d}", f"{acts:<12}", f"{observed.get('screen', '?'):<10}"]
    objective = observed.get("objective_guess")
    if objective:
        parts.append("obj: " + _short(objective, 28))
    reads, writes = t.get("memory_reads") or [], t.get("memory_writes") or []
    if reads or writes:
        mem = []
        if reads:
            mem.append("r:" + ",".join(reads))
        if writes:
            mem.append("w:" + ",".join(w if w else "✗" for w in writes))
        parts.append("mem " + " ".join(mem))
    if t.get("invalid_output"):
        parts.append("INVALID")
    attempts = t.get("attempts", 1)
    if attempts > 1:
        parts.append(f"retries {attempts - 1}")
    cost = t.get("provider_cost_usd")
    if cost is not None:
        parts.append(f"${cost:.4f}")
    elif t.get("model_id"):
        parts.append("cost unknown")
    if t.get("input_tokens") is not None:
        parts.append(f"tok {t['input_tokens']}/{t.get('output_tokens')}")
    if t.get("latency_ms") is not None:
        parts.append(f"{t['latency_ms']:.0f}ms")
    before, after = t.get("milestones_before") or [], t.get("milestones_after") or []
    new = [m for m in after if m not in before]
    if new:
        parts.append("→ " + ",".join(new))
    if t.get("termination_reason"):
        parts.append(f"end: {t['termination_reason']}")
    return ("  " + " │ ".join(parts)).rstrip()


def format_item(kind: str, payload) -> str:
    if kind == "decision":
        return decision_line(payload if isinstance(payload, dict) else payload.model_dump())
    if kind == "milestone":
        return f"★ {milestone_line(payload)}"
    if kind == "annotation":
        r = payload
        refers = f" re {r['refers_to']}" if r.get("refers_to") else ""
        note = f": {r['note']}" if r.get("note") else ""
        return (f"⚑ TAG {r.get('type')} ({r.get('severity')}){refers} at decision {r.get('decision_id')} "
                f"{str(r.get('frame_sha256', ''))[:12]}{note}")
    if kind == "trial":
        p = payload
        return "▶ " + trial_started_line(p["trial_key"], p["schedule_index"], p["trials_total"], p["frame_sha256"])
    if kind == "ended":
        return f"■ {trial_ended_line(payload)}"
    if kind == "state":
        return f"‖ {payload}"
    if kind == "error":
        return f"✗ {payload}"
    return f"  {payload}"


class TraceHighlighter(Highlighter):
    """Colours whole lines by their leading mark, using the app's theme."""

    def __init__(self, styles: Callable[[], dict[str, Style]]):
        self._styles = styles

    def highlight(self, text: Text) -> None:
        plain = text.plain
        kind = MARKS.get(plain[:1])
        if kind is None:
            if "INVALID" in plain:
                start = plain.index("INVALID")
                text.stylize(self._styles()["error"], start, start + 7)
            return
        text.stylize(self._styles()[kind])


class TracePane(Log):
    DEFAULT_CSS = """
    TracePane { height: 1fr; overflow-y: scroll; }
    """

    # Log grows its virtual size with every write, and a layout-triggering reactive would reflow
    # the whole screen ten times a second; this pane's own size never depends on its content,
    # so growing it only needs the scrollbars updated.
    virtual_size = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        if self.is_mounted:
            self._scroll_update(size)

    def __init__(self, source: Callable[[], list[tuple[str, object]]] | None = None, *,
                 interval: float | None = 0.1, id: str | None = None, classes: str | None = None):
        super().__init__(highlight=True, max_lines=MAX_LINES, auto_scroll=True, id=id, classes=classes)
        self.source = source
        self.interval = interval
        self.highlighter = TraceHighlighter(self._theme_styles)
        self.border_title = "Trace"
        self._style_cache: tuple[str, dict[str, Style]] | None = None

    def _theme_styles(self) -> dict[str, Style]:
        theme = self.app.current_theme
        if self._style_cache is None or self._style_cache[0] != theme.name:
            self._style_cache = (theme.name, {
                "milestone": Style(color=theme.success, bold=True),
                "tag": Style(color=theme.warning, bold=True),
                "error": Style(color=theme.error, bold=True),
                "ended": Style(color=theme.accent or theme.primary, bold=True),
                "trial": Style(color=theme.primary, bold=True),
                "state": Style(italic=True),
            })
        return self._style_cache[1]

    def on_mount(self) -> None:
        start_pulling(self, self.interval)

    def on_resize(self) -> None:
        if self.auto_scroll:
            self.scroll_end(animate=False, immediate=True)

    def pull(self) -> None:
        items = self.source() if self.source else []
        if items:
            self.add_items(items)

    def add_items(self, items: list[tuple[str, object]]) -> None:
        lines = [format_item(kind, payload) for kind, payload in items[-MAX_LINES:]]
        self.write_lines(lines)
