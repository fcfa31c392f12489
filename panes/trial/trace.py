"""Trace pane: one line per decision (and the agent's reasoning summary under it, muted),
milestones and operator tags highlighted.

Items are drained from the run's buffer on a ~10 Hz timer, formatted here on the UI thread and
written in one batch with Log.write_lines; the log keeps the last 10,000 lines. A line wider
than the pane ends in an ellipsis when drawn (the log keeps the whole line, for copying).

Focused (tab), the pane has a row cursor (arrows, page keys, home/end); enter posts
TracePane.Selected with the item behind the line, which the console shows whole
(`detail_text`).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.color import Color
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import Reactive
from textual.strip import Strip
from textual.widgets import Log

from engine.figures import decision_figure, latency, money, tokens
from panes.lines import milestone_line, trial_ended_line, trial_started_line
from panes.pulling import start_pulling

MAX_LINES = 10_000  # a decision with a reasoning summary takes two
OBJECTIVE_MIN = 24  # characters of the agent's objective guess kept however narrow the pane
REASONING_MAX = 400  # characters kept of a summary (the whole response is in responses.jsonl)
REASONING = " " * 9 + "↳ "  # the reasoning line's lead: its text starts under the actions
MARKS = {"★": "milestone", "⚑": "tag", "✗": "error", "■": "ended", "▶": "trial", "‖": "state", "↻": "trial"}
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


def decision_line(t: dict, width: int | None = None) -> str:
    """A decision's line (a TraceLine as a dict); with a reasoning summary, a second, indented
    line holding it. Given the pane's `width`, the objective takes what the line leaves of it
    (never less than OBJECTIVE_MIN characters); without, it is cut at OBJECTIVE_MIN."""
    parts = [f"d{t.get('decision_id', 0):05d}", f"{_actions_text(t):<12}", *_call_parts(t)]
    at_objective, objective = None, None
    observed = t.get("observed")
    if observed or not t.get("aborted"):
        parts.append(observation(observed))
        objective = (observed or {}).get("objective_guess")
        if objective:
            at_objective = len(parts)
            parts.append("obj: " + _short(objective, OBJECTIVE_MIN))
    parts += _spend_parts(t) + _outcome_parts(t)
    if width is not None and at_objective is not None:
        room = width - len("  " + " │ ".join(parts)) + len(parts[at_objective]) - len("obj: ")
        parts[at_objective] = "obj: " + _short(objective, max(OBJECTIVE_MIN, room))
    line = ("  " + " │ ".join(parts)).rstrip()
    reasoning = _short(t.get("reasoning_summary"), REASONING_MAX)
    return f"{line}\n{REASONING}{reasoning}" if reasoning else line


def _actions_text(t: dict) -> str:
    actions = t.get("parsed_actions") or []
    accepted = t.get("accepted_actions", 0)
    acts = ",".join(actions) if actions else "—"
    if actions and accepted != len(actions):
        acts += f" ({accepted}/{len(actions)} accepted)"
    return acts


def _call_parts(t: dict) -> list[str]:
    """How the decision's calls went: aborted, invalid, retried."""
    parts = []
    attempts = t.get("attempts", 1)
    aborted = bool(t.get("aborted"))
    if aborted:
        parts.append("ABORTED: call cancelled")
    # An aborted call is itself an invalid attempt; INVALID then means an earlier one was too.
    if t.get("invalid_output") and (not aborted or attempts > 1):
        parts.append("INVALID")
    if attempts > 1:
        parts.append(f"retries {attempts - 1}")
    return parts


def _spend_parts(t: dict) -> list[str]:
    """Cost, tokens and latency."""
    parts = []
    cost, tokens_in, tokens_out = t.get("provider_cost_usd"), t.get("input_tokens"), t.get("output_tokens")
    if t.get("paid_calls") or cost is not None or tokens_in is not None:
        # A paid call's figures: unknown reads "unknown" (a policy that pays nothing shows none).
        parts.append("cost unknown" if cost is None else money(cost))
        if tokens_in is None and tokens_out is None:
            parts.append("tok unknown")
        else:
            parts.append(f"tok {tokens(tokens_in)}/{tokens(tokens_out)}")
    if t.get("latency_ms") is not None:
        parts.append(latency(t["latency_ms"]))
    return parts


def _outcome_parts(t: dict) -> list[str]:
    """Memory read and written, rungs reached and the end, if any."""
    parts = []
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
    return parts


def format_item(kind: str, payload, width: int | None = None) -> str:
    """A trace item's line(s); `width` (the pane's) lets a decision's objective take the room there is."""
    if kind == "decision":
        return decision_line(payload if isinstance(payload, dict) else payload.model_dump(), width)
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
    if kind == "episode":  # an episodic trial restored its start state (engine.battle.episodes)
        p = payload
        return _clean(f"↻ episode {p['episode']}/{p['budget']}: start state restored (the previous episode ended: "
                      f"{p['previous_ended']}) {str(p['frame_sha256'])[:12]}")
    if kind == "ended":
        return f"■ {_clean(trial_ended_line(payload))}"
    if kind == "state":
        return f"‖ {_clean(payload)}"
    if kind == "error":
        return f"✗ {_clean(payload)}"
    return f"  {_clean(payload)}"


DETAIL_FIELDS = (  # what the detail view shows of a decision (never the model id or the condition id)
    ("decision_id", "decision"), ("timestamp_utc", "time"), ("parsed_actions", "actions"),
    ("accepted_actions", "accepted"), ("invalid_output", "invalid output"), ("attempts", "attempts"),
    ("aborted", "aborted"), ("observed", "observed"), ("provider_cost_usd", "cost"),
    ("cost_source", "cost source"), ("input_tokens", "input tokens"), ("output_tokens", "output tokens"),
    ("cached_tokens", "cached tokens"), ("latency_ms", "latency"), ("memory_reads", "memory read"),
    ("memory_writes", "memory written"), ("milestones_before", "milestones before"),
    ("milestones_after", "milestones after"), ("frame_sha256", "frame"), ("result_frame_sha256", "result frame"),
    ("result_frame_index", "result frame index"), ("prompt_sha256", "prompt"),
    ("termination_reason", "end"), ("reasoning_summary", "reasoning summary"))
ENDED_FIELDS = (("trial_key", "trial"), ("outcome", "outcome"), ("termination_reason", "reason"),
                ("termination_detail", "detail"), ("invalid_cause", "invalid cause"), ("error", "error"),
                ("started_utc", "started"), ("ended_utc", "ended"), ("last_decision", "last decision"),
                ("deepest_milestone", "deepest"), ("progress_points", "points"), ("total_points", "of points"))


def _value(value) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join("✗ (not stored)" if v is None else str(v) for v in value) or "—"
    return str(value)


def _figure(t: dict, key: str) -> str:
    """A decision's field as the detail view shows it: usage figures by engine.figures."""
    if key == "provider_cost_usd":
        return money(decision_figure(t, key))
    if key in ("input_tokens", "output_tokens", "cached_tokens"):
        return tokens(decision_figure(t, key))
    if key == "latency_ms":
        return latency(t.get(key))
    return _value(t[key])


def detail_text(kind: str, payload) -> str:
    """One trace item whole: its line, then every field that matters, the reasoning summary in full."""
    lines = [format_item(kind, payload), ""]
    if kind == "decision":
        t = payload if isinstance(payload, dict) else payload.model_dump()
        for key, label in DETAIL_FIELDS:
            if key in t:
                lines.append(f"{label}: {_figure(t, key)}")
    elif kind == "ended" and isinstance(payload, dict):
        for key, label in ENDED_FIELDS:
            if payload.get(key) is not None:
                lines.append(f"{label}: {_value(payload[key])}")
        telemetry = payload.get("telemetry") or {}
        if telemetry:
            lines.append(f"cost: {money(telemetry.get('cost_usd'))}, tokens: {tokens(telemetry.get('tokens'))}, "
                         f"decisions: {_value(telemetry.get('decisions'))}, "
                         f"accepted actions: {_value(telemetry.get('accepted_actions'))}")
    elif isinstance(payload, dict):
        for key, value in payload.items():
            lines.append(f"{key}: {_value(value)}")
    return "\n".join(lines).rstrip()


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
    ALLOW_MAXIMIZE = True
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor_page(-1)", "Page up", show=False),
        Binding("pagedown", "cursor_page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
        Binding("enter", "select", "Show whole"),
    ]

    class Selected(Message):
        """Enter on a trace line: the item (kind, payload) behind it."""

        def __init__(self, kind: str, payload) -> None:
            super().__init__()
            self.kind = kind
            self.payload = payload

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
        self._sources: list[tuple[str, object]] = []  # the item behind each line, in step with the log
        self.cursor: int | None = None  # the selected line while the pane has focus

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
                "cursor": Style(bgcolor=theme.panel or theme.secondary, bold=True),
            })
        return self._style_cache[1]

    def render_line(self, y: int) -> Strip:
        strip = self._render_cut(y)
        if self.cursor is not None and self.cursor == self.scroll_offset.y + y and self.has_focus:
            cursor = self._theme_styles()["cursor"]
            strip = Strip([Segment(seg.text, (seg.style or Style()) + cursor, seg.control) for seg in strip],
                          strip.cell_length)
        return strip

    def _render_cut(self, y: int) -> Strip:
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
        items = items[-MAX_LINES:]
        width = self.scrollable_content_region.width or None  # lines are formatted once, at this width
        lines = [format_item(kind, payload, width) for kind, payload in items]
        for item, line in zip(items, lines, strict=True):
            self._sources.extend([item] * (line.count("\n") + 1))
        before = len(self._lines)
        self.write_lines(lines)
        dropped = before + sum(line.count("\n") + 1 for line in lines) - len(self._lines)
        if len(self._sources) > len(self._lines):
            del self._sources[: len(self._sources) - len(self._lines)]
        if self.cursor is not None and dropped > 0:
            self.cursor = max(0, self.cursor - dropped)

    # -- the row cursor (focused) ----------------------------------------------------------
    def on_focus(self) -> None:
        if self.cursor is None and self._lines:
            self.cursor = min(len(self._lines) - 1, self.scroll_offset.y + self.scrollable_content_region.height - 1)
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def _move(self, to: int) -> None:
        if not self._lines:
            return
        self.cursor = max(0, min(len(self._lines) - 1, to))
        self.scroll_to_region(Region(0, self.cursor, 1, 1), animate=False, immediate=True)
        self.refresh()

    def action_cursor(self, step: int) -> None:
        self._move((self.cursor if self.cursor is not None else len(self._lines) - 1) + step)

    def action_cursor_page(self, step: int) -> None:
        page = max(1, self.scrollable_content_region.height - 1)
        self._move((self.cursor if self.cursor is not None else len(self._lines) - 1) + step * page)

    def action_cursor_to(self, where: int) -> None:
        self._move(where if where >= 0 else len(self._lines) - 1)

    def item_at(self, index: int | None) -> tuple[str, object] | None:
        if index is None or not 0 <= index < len(self._sources):
            return None
        return self._sources[index]

    def action_select(self) -> None:
        item = self.item_at(self.cursor)
        if item is not None:
            self.post_message(self.Selected(*item))
