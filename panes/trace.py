"""Trace pane: one line per decision (and the agent's reasoning summary under it, muted),
milestones and operator tags highlighted.

Items are drained from the run's buffer on a ~10 Hz timer, formatted here on the UI thread and
written in one batch with Log.write_lines; the log keeps the last 10,000 lines. A line wider
than the pane ends in an ellipsis when drawn (the log keeps the whole line, for copying).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.geometry import Size
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import Log

from panes.lines import count, milestone_line, trial_ended_line, trial_started_line, usd
from panes.pulling import start_pulling

MAX_LINES = 10_000  # a decision with a reasoning summary takes two
REASONING_MAX = 400  # characters kept of a summary (the whole response is in responses.jsonl)
REASONING = " " * 9 + "↳ "  # the reasoning line's lead: its text starts under the actions
MARKS = {"★": "milestone", "⚑": "tag", "✗": "error", "■": "ended", "▶": "trial", "‖": "state"}
FLAGS = ("ABORTED", "INVALID")  # drawn in the error colour
UNKNOWNS = ("cost unknown", "tok unknown")  # drawn in the warning colour


def _clean(value) -> str:
    """One line: every run of whitespace (newlines and other line breaks too) becomes one space."""
    return " ".join(str(value).split()) if value is not None else ""


def _short(value, width: int) -> str:
    text = _clean(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _ids(ids: list, shown: int = 2) -> str:
    listed = ",".join(str(i) if i else "✗" for i in ids[:shown])
    return listed + (f",+{len(ids) - shown}" if len(ids) > shown else "")


def _latency(ms: float) -> str:
    return f"{ms:.0f}ms" if ms < 10_000 else f"{ms / 1000:.1f}s"


def observation(observed: dict | None) -> str:
    """What the agent said it saw: screen, where it thinks it is, how sure it is."""
    observed = observed or {}
    text = f"{_short(observed.get('screen') or '?', 10):<10}"
    where = _clean(observed.get("location_guess"))
    if where == "unknown":  # what a policy that sees nothing says (scripted, random, human)
        where = ""
    if where:
        text += " @ " + _short(where, 18)
    certainty = observed.get("certainty")
    if isinstance(certainty, (int, float)) and not isinstance(certainty, bool) and (where or certainty):
        text += f" ({certainty:.0%} sure)"
    return text.rstrip()


def decision_line(t: dict) -> str:
    """A decision's line (a TraceLine as a dict); with a reasoning summary, a second, indented
    line holding it."""
    actions = t.get("parsed_actions") or []
    accepted = t.get("accepted_actions", 0)
    acts = ",".join(actions) if actions else "—"
    if actions and accepted != len(actions):
        acts += f" ({accepted}/{len(actions)} accepted)"
    parts = [f"d{t.get('decision_id', 0):05d}", f"{acts:<12}"]
    attempts = t.get("attempts", 1)
    aborted = bool(t.get("aborted"))
    if aborted:
        parts.append("ABORTED: call cancelled")
    # An aborted call is itself an invalid attempt; INVALID then means an earlier one was too.
    if t.get("invalid_output") and (not aborted or attempts > 1):
        parts.append("INVALID")
    if attempts > 1:
        parts.append(f"retries {attempts - 1}")
    observed = t.get("observed")
    if observed or not aborted:
        parts.append(observation(observed))
        objective = (observed or {}).get("objective_guess")
        if objective:
            parts.append("obj: " + _short(objective, 24))
    cost, tokens_in, tokens_out = t.get("provider_cost_usd"), t.get("input_tokens"), t.get("output_tokens")
    if t.get("paid_calls") or cost is not None or tokens_in is not None:
        # A paid call's figures: unknown reads "unknown" (a policy that pays nothing shows none).
        parts.append("cost unknown" if cost is None else usd(cost))
        if tokens_in is None and tokens_out is None:
            parts.append("tok unknown")
        else:
            parts.append(f"tok {count(tokens_in)}/{count(tokens_out)}")
    if t.get("latency_ms") is not None:
        parts.append(_latency(t["latency_ms"]))
    reads, writes = t.get("memory_reads") or [], t.get("memory_writes") or []
    if reads or writes:
        mem = []
        if reads:
            mem.append("r:" + _ids(reads))
        if writes:
            mem.append("w:" + _ids(writes))
        parts.append("mem " + " ".join(mem))
    before, after = t.get("milestones_before") or [], t.get("milestones_after") or []
    new = [m for m in after if m not in before]
    if new:
        parts.append("→ " + ",".join(new))
    if t.get("termination_reason"):
        parts.append(f"end: {_clean(t['termination_reason'])}")
    line = ("  " + " │ ".join(parts)).rstrip()
    reasoning = _short(t.get("reasoning_summary"), REASONING_MAX)
    return f"{line}\n{REASONING}{reasoning}" if reasoning else line


def format_item(kind: str, payload) -> str:
    if kind == "decision":
        return decision_line(payload if isinstance(payload, dict) else payload.model_dump())
    if kind == "milestone":
        return f"★ {_clean(milestone_line(payload))}"
    if kind == "annotation":
        r = payload
        refers = f" re {r['refers_to']}" if r.get("refers_to") else ""
        note = f": {r['note']}" if r.get("note") else ""
        return _clean(f"⚑ TAG {r.get('type')} ({r.get('severity')}){refers} at decision {r.get('decision_id')} "
                      f"{str(r.get('frame_sha256', ''))[:12]}{note}")
    if kind == "trial":
        p = payload
        return "▶ " + trial_started_line(p["trial_key"], p["schedule_index"], p["trials_total"], p["frame_sha256"])
    if kind == "ended":
        return f"■ {_clean(trial_ended_line(payload))}"
    if kind == "state":
        return f"‖ {_clean(payload)}"
    if kind == "error":
        return f"✗ {_clean(payload)}"
    return f"  {_clean(payload)}"


class TraceHighlighter(Highlighter):
    """Colours whole lines by their leading mark, reasoning lines muted, flags and unknowns
    in the theme's error and warning colours."""

    def __init__(self, styles: Callable[[], dict[str, Style]]):
        self._styles = styles

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if plain.startswith(REASONING):
            text.stylize(self._styles()["reasoning"], len(REASONING) - 2)
            return
        kind = MARKS.get(plain[:1])
        if kind is not None:
            text.stylize(self._styles()[kind])
            return
        for words, style in ((FLAGS, "error"), (UNKNOWNS, "warning")):
            for word in words:
                start = plain.find(word)
                if start >= 0:
                    text.stylize(self._styles()[style], start, start + len(word))


def _muted(theme) -> str:
    """The theme's foreground, faded towards its surface (a reasoning line reads as secondary)."""
    try:
        surface = Color.parse(theme.surface or theme.background or "#000000")
        return surface.blend(Color.parse(theme.foreground or "#e0e0e0"), 0.62).hex
    except Exception:  # a theme without usable colours: dim instead
        return "default"


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
                "warning": Style(color=theme.warning, bold=True),
                "reasoning": Style(color=_muted(theme), italic=True),
            })
        return self._style_cache[1]

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        scroll_x, scroll_y = self.scroll_offset
        index, width = scroll_y + y, self.scrollable_content_region.width  # the scrollbar's cells excluded
        lines = self._lines  # (only the lines in view are drawn: this runs a few dozen times a refresh)
        if scroll_x or width < 2 or index >= len(lines) or cell_len(self._process_line(lines[index])) <= width:
            return strip
        kept = strip.crop(0, width - 1)
        last = next(reversed(kept), None)
        style = last.style if last is not None else None
        cut = Strip.join([kept, Strip([Segment("…", style)], 1)])
        # As wide as the strip it replaces: the cells under the scrollbar stay painted.
        return cut.extend_cell_length(self.size.width, self.rich_style).apply_offsets(scroll_x, index)

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
