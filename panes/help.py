"""The help screen (`?`): every key and a legend for every glyph the panes draw; and the modal
that shows one trace line, memory fact or text whole.

Help never scrolls: its sections are laid out in as many columns as the screen's width holds
(each line wrapped under its own description), and what does not fit one screen goes on to
further pages (←/→ turn them)."""

from __future__ import annotations

import textwrap

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Label, Static

# (keys, what they do): the help screen and the keys table of docs/console.md say the same.
KEYS: tuple[tuple[str, str], ...] = (
    ("p", "pause / resume at the next decision boundary"),
    ("s", "step one decision while paused"),
    ("t", "tag a memory error at the decision in view"),
    ("x, ctrl+x", "end the trial, with a reason (ctrl+x while a human plays: x is B)"),
    ("+ / -", "pacing: 1×, 2×, 4×, maximum"),
    ("f", "zoom the frame: whole screen, then 1:1 pixels (dialogue readable), then back"),
    ("m", "maximise the focused pane (the frame if none is); m or escape restores"),
    ("tab / shift+tab", "move between panes"),
    ("↑↓ pgup/dn home/end", "move the row cursor in a focused trace or memory pane"),
    ("enter", "show the selected trace line or memory fact whole"),
    ("escape", "close a dialog, restore a maximised pane, leave a pane"),
    ("?", "this help"),
    ("r", "the run's summary again, once the run is over"),
    ("ctrl+p", "command palette: the same commands and the themes"),
    ("q, ctrl+c", "quit: end the run cleanly at the next decision boundary"),
)
HUMAN_PLAY = (("← ↑ ↓ →", "D-pad"), ("z", "A"), ("x", "B"), ("enter", "START"), ("backspace", "SELECT"),
              ("ctrl+x", "end your own trial"))

# (glyph, its style, meaning) per pane.
LEGEND: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    ("Status bar (top)", (
        ("▶ running", "$success", "decisions are being made"),
        ("‖ paused", "$warning", "held at a decision boundary (p resumes, s steps one)"),
        ("⏯ stepping", "$accent", "running exactly one decision"),
        ("■ ended / finished", "$primary", "a trial ended / the run is over"),
        ("… starting / quitting", "", "before the first trial / ending the run cleanly"),
        ("✗", "$error", "an error (a failed run, a trial error)"),
        ("elapsed", "bold", "the whole run's clock, pauses included; stops at the end"),
        ("pace", "bold", "1×, 2×, 4×, max (waits between decisions only)"),
    )),
    ("Frame", (
        ("▀", "", "half blocks: two pixels a cell (top = foreground, bottom = background)"),
        ("decision · frame · hash", "$text-muted", "the decision shown, the emulator frame index, its SHA-256"),
        ("ZOOM fit / 1:1", "", "f: whole screen; then whole pixels, cut to the bottom rows (dialogue)"),
    )),
    ("Budgets", (
        ("█", "$success", "used (green under 75%)"),
        ("█", "$warning", "used, over 75% of the limit"),
        ("█", "$error", "used, over 90% (or not known against a limit)"),
        ("░", "$panel-lighten-2", "what is left"),
        ("no limit", "$foreground-disabled", "no limit in the manifest: the figure alone"),
        ("unknown", "$foreground-muted", "not measured (never shown as 0 or $0)"),
        ("wall time", "bold", "this trial's active time, pauses and pacing excluded; the limit is per trial"),
    )),
    ("Milestones", (
        ("✓", "$success bold", "reached: points, the decision, the evidence frame's hash"),
        ("=", "$foreground-muted", "held at the start (earns no points)"),
        ("·", "$foreground-muted", "not reached yet (\"optional\": not required)"),
        ("✗ skipped", "$error bold", "a required rung passed over: a later one was reached first"),
        ("deepest · points", "$text-muted", "the subtitle: deepest rung, points so far, rungs reached"),
    )),
    ("Memory", (
        ("▶", "$accent bold", "read by the last decision"),
        ("⚠", "$error bold", "an active fact in a contradiction (highlighted)"),
        ("superseded", "dim strike", "replaced by a later fact"),
        ("completed", "dim italic", "an objective done"),
        ("conf / last", "", "confidence; the decision that last confirmed it (— never)"),
    )),
    ("Trace", (
        ("▶", "$primary bold", "a trial started (its place in the schedule, first frame)"),
        ("■", "$accent bold", "a trial ended: outcome, reason, cost and tokens"),
        ("↻", "$primary bold", "an episodic trial's next episode: the start state restored (docs/tasks.md)"),
        ("★", "$success bold", "a milestone reached"),
        ("⚑", "$warning bold", "an operator's memory-error tag"),
        ("‖", "italic", "a run state change"),
        ("↻", "$primary bold", "a new episode: the task's start state restored (episodic tasks)"),
        ("✗", "$error bold", "an error; in mem w: a write that was not stored"),
        ("d00012", "", "the decision: actions (n/m accepted) │ what the agent saw │ cost │ tokens in/out │ "
                       "latency"),
        ("↳", "italic", "the agent's reasoning summary (cut at the pane's width: enter shows it whole)"),
        ("mem r: w:", "", "memory facts read / written; → milestones this decision reached"),
        ("ABORTED INVALID", "$error bold", "a call cancelled in flight; output that did not parse"),
        ("cost unknown", "$warning bold", "a paid call its provider did not price"),
    )),
)
Entry = tuple[str, str, str]  # what is explained (key or glyph), its style, the explanation


def help_sections() -> list[tuple[str, tuple[Entry, ...]]]:
    """Every section of help in order: the keys, human play, then each pane's legend."""
    return [("Keys", tuple((keys, "bold $accent", does) for keys, does in KEYS)),
            ("While a human plays", tuple((key, "bold $accent", button) for key, button in HUMAN_PLAY)),
            *LEGEND]


def entry_lines(entry: Entry, lead_width: int, width: int) -> list[Content]:
    """One entry in `width` cells: its lead (padded to `lead_width`), then its explanation wrapped
    under itself; a lead wider than `lead_width` gets a line of its own."""
    lead, style, text = entry
    indent = 2 + lead_width + 2
    wrapped = textwrap.wrap(text, max(8, width - indent)) or [""]
    first = Content.assemble("  ", (lead.ljust(lead_width), style or ""), "  ", wrapped[0])
    lines = [first] if len(lead) <= lead_width else [Content.assemble("  ", (lead, style or "")),
                                                     Content(" " * indent + wrapped[0])]
    return lines + [Content(" " * indent + more) for more in wrapped[1:]]


def help_columns(width: int, height: int) -> list[list[Content]]:
    """Help in columns of `width` x `height` cells: each section's title then its entries (an entry
    never split; a section going on in the next column repeats its title, "cont.")."""
    columns: list[list[Content]] = [[]]
    for title, entries in help_sections():
        lead_width = min(max(len(lead) for lead, _, _ in entries), max(4, width // 3))
        blocks = [entry_lines(entry, lead_width, width) for entry in entries]
        heading = Content.styled(title, "bold $primary")
        for i, block in enumerate(blocks):
            column = columns[-1]
            lead = [] if i else ([Content("")] if column else []) + [heading]
            if column and len(column) + len(lead) + len(block) > height:
                columns.append([])
                column = columns[-1]
                lead = [heading if not i else Content.styled(f"{title} (cont.)", "bold $primary")]
            column.extend(lead + block)
    return columns


def help_pages(width: int, height: int, gap: int = 3, min_column: int = 44) -> tuple[int, list[list[list[Content]]]]:
    """(column width, pages of columns) for help in a `width` x `height` region: as many columns
    as fit (each at least `min_column` cells) for the fewest pages."""
    best: tuple[int, int, list] | None = None
    for count in range(1, max(1, (width + gap) // (min_column + gap)) + 1):
        column_width = (width - gap * (count - 1)) // count
        columns = help_columns(column_width, height)
        pages = [columns[i:i + count] for i in range(0, len(columns), count)]
        if best is None or len(pages) < len(best[2]):
            best = (count, column_width, pages)
    _, column_width, pages = best
    return column_width, pages


def help_content() -> Content:
    """All of help as one column (for reading in tests and elsewhere)."""
    return Content("\n").join(help_columns(10_000, 10_000)[0])


def help_text() -> str:
    return help_content().plain


class HelpPages(Widget):
    """Help in columns fitted to this widget's size; one page at a time."""

    DEFAULT_CSS = """
    HelpPages { width: 1fr; height: 1fr; }
    """
    GAP = 3

    class Paged(Message):
        """The pages were laid out again, or turned."""

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.page = 0
        self.pages: list[list[list[Content]]] = []
        self.column_width = 0

    def on_resize(self) -> None:
        width, height = self.size
        if width and height:
            self.column_width, self.pages = help_pages(width, height, self.GAP)
            self.page = min(self.page, len(self.pages) - 1)
            self.post_message(self.Paged())
            self.refresh()

    def turn(self, step: int) -> None:
        if self.pages:
            self.page = (self.page + step) % len(self.pages)
            self.post_message(self.Paged())
            self.refresh()

    def render(self) -> Content:
        if not self.pages:
            return Content("")
        columns = self.pages[self.page]
        rows = max(len(column) for column in columns)
        lines = []
        for y in range(rows):
            cells = []
            for x, column in enumerate(columns):
                line = column[y] if y < len(column) else Content("")
                last = x == len(columns) - 1
                cells.append(line if last else line.pad_right(max(0, self.column_width - line.cell_length + self.GAP)))
            lines.append(Content("").join(cells))
        return Content("\n").join(lines)


class TextScreen(ModalScreen[None]):
    """A title and a body that scrolls; escape, enter or q closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close"), Binding("enter", "close", "Close", show=False)]

    def __init__(self, title: str, body: Content | str, *, id: str | None = None):
        super().__init__(id=id)
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            with VerticalScroll():
                yield Static(self.body if isinstance(self.body, Content) else Content(self.body), id="text-body")
            yield Label("escape closes · ↑↓ scroll", classes="dialog-help")

    def on_mount(self) -> None:
        self.query_one(VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """`?`: every key and glyph, in columns and pages that fit the screen; ←/→ turn the pages."""

    BINDINGS = [Binding("escape,q,question_mark", "close", "Close"),
                Binding("right,pagedown,space", "turn(1)", "Next page", show=False),
                Binding("left,pageup", "turn(-1)", "Previous page", show=False)]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="help-dialog"):
            yield Label("oakwatch console: keys and legend", classes="dialog-title")
            yield HelpPages(id="help-pages")
            yield Label("", id="help-pager", classes="dialog-help")

    def on_help_pages_paged(self) -> None:
        pages = self.query_one(HelpPages)
        count = len(pages.pages)
        turn = f"page {pages.page + 1} of {count} · ←/→ turn · " if count > 1 else ""
        self.query_one("#help-pager", Label).update(f"{turn}escape closes")

    def action_turn(self, step: int) -> None:
        self.query_one(HelpPages).turn(step)

    def action_close(self) -> None:
        self.dismiss(None)
