"""Review scrubber: a one-line slider over a trial's decisions, with its milestones, tags and
invalid outputs marked; a click (or a drag) seeks to the decision under the pointer."""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.message import Message
from textual.widget import Widget

MARKS = (("invalid", "✗", "$error"), ("tag", "▲", "$warning"), ("milestone", "◆", "$success"))


class Scrubber(Widget):
    DEFAULT_CSS = """
    Scrubber { height: 2; width: 1fr; padding: 0 1; }
    """

    class Seek(Message):
        def __init__(self, decision: int) -> None:
            super().__init__()
            self.decision = decision

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.total = 0
        self.current = 0
        self.marks: dict[str, list[int]] = {}
        self.live = False

    def set(self, current: int, total: int, marks: dict[str, list[int]], live: bool = False) -> None:
        if (current, total, marks, live) != (self.current, self.total, self.marks, self.live):
            self.current, self.total, self.marks, self.live = current, total, marks, live
            self.refresh()

    def _width(self) -> int:
        return max(1, self.content_region.width)

    def column(self, decision: int) -> int:
        width = self._width()
        if self.total <= 1:
            return 0
        return round((decision - 1) * (width - 1) / (self.total - 1))

    def decision_at(self, x: int) -> int:
        width = self._width()
        if self.total <= 1:
            return min(1, self.total)
        x = max(0, min(width - 1, x))
        return max(1, min(self.total, round(x * (self.total - 1) / max(1, width - 1)) + 1))

    def render(self) -> Content:
        width = self._width()
        if self.total == 0:
            return Content.styled("no decisions yet", "$foreground-muted")
        cells: list[tuple[str, str]] = []
        here = self.column(self.current)
        for x in range(width):
            cells.append(("━", "$primary") if x <= here else ("─", "$foreground-muted"))
        for kind, glyph, style in MARKS:
            for d in self.marks.get(kind, ()):
                cells[self.column(d)] = (glyph, style)
        cells[here] = ("●", "$accent bold")
        bar = Content.assemble(*cells)
        counts = "  ".join(f"{glyph} {len(self.marks.get(kind, ()))} {kind}s" for kind, glyph, _ in MARKS[::-1])
        live = "  · live: re-reading" if self.live else ""
        info = Content.styled(f"decision {self.current}/{self.total}   {counts}{live}", "$foreground-muted")
        return Content("\n").join([bar, info])

    def on_click(self, event: events.Click) -> None:
        if self.total and event.y == 0:
            self.post_message(self.Seek(self.decision_at(event.x - self.styles.padding.left)))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if event.button == 1 and self.total and event.y == 0:
            self.post_message(self.Seek(self.decision_at(event.x - self.styles.padding.left)))
