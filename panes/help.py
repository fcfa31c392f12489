"""The help screen (`?`): every key and a legend for every glyph the panes draw; and the modal
that shows one trace line, memory fact or text whole."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Label, Static

# (keys, what they do): the help screen and the keys table of docs/console.md say the same.
KEYS: tuple[tuple[str, str], ...] = (
    ("p", "pause / resume at the next decision boundary"),
    ("s", "step exactly one decision while paused"),
    ("t", "tag a memory error at the decision in view"),
    ("x, ctrl+x", "end the trial, with a reason (ctrl+x while a human plays: x is B then)"),
    ("+ / -", "pacing: 1×, 2×, 4×, maximum"),
    ("f", "zoom the frame: whole screen, then 1:1 pixels (dialogue readable), then back"),
    ("m", "maximise the focused pane (the frame if none is focused); m or escape restores"),
    ("tab / shift+tab", "move between panes"),
    ("↑↓ pgup/dn home/end", "move the row cursor in a focused trace or memory pane"),
    ("enter", "show the selected trace line or memory fact whole"),
    ("escape", "close a dialog, restore a maximised pane, leave a pane"),
    ("?", "this help"),
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
        ("elapsed", "bold", "the whole run's clock since the console opened, pauses included; stops at the end"),
        ("pace", "bold", "1× real time, 2×, 4×, max (waits between decisions only)"),
    )),
    ("Frame", (
        ("▀", "", "half-block drawing: two pixels a cell (top = foreground, bottom = background)"),
        ("decision · frame · hash", "$text-muted", "the decision shown, the emulator frame index, its SHA-256"),
        ("ZOOM fit / 1:1", "", "f: whole screen; then whole pixels, cut to the bottom rows (the dialogue box)"),
    )),
    ("Budgets", (
        ("█", "$success", "used (green under 75%)"),
        ("█", "$warning", "used, over 75% of the limit"),
        ("█", "$error", "used, over 90% (or not known against a limit)"),
        ("░", "$panel-lighten-2", "what is left"),
        ("no limit", "$foreground-disabled", "no limit in the manifest: the figure alone"),
        ("unknown", "$foreground-muted", "not measured (never shown as 0 or $0)"),
        ("wall time", "bold", "this trial's active time; pauses and pacing waits excluded; the limit is per trial"),
    )),
    ("Milestones", (
        ("✓", "$success bold", "reached: points, the decision, the evidence frame's hash"),
        ("=", "$foreground-muted", "held at the start (earns no points)"),
        ("·", "$foreground-muted", "not reached yet (\"optional\": not required)"),
        ("✗ skipped", "$error bold", "a required rung passed over: a later one was reached first"),
        ("deepest · points · reached", "$text-muted", "the subtitle: deepest rung, points so far, rungs reached"),
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
        ("★", "$success bold", "a milestone reached"),
        ("⚑", "$warning bold", "an operator's memory-error tag"),
        ("‖", "italic", "a run state change"),
        ("✗", "$error bold", "an error; in mem w: a write that was not stored"),
        ("d00012", "", "the decision: actions (n/m accepted) │ what the agent saw │ cost │ tokens in/out │ latency"),
        ("↳", "italic", "the agent's reasoning summary (cut at the pane's width: enter shows it whole)"),
        ("mem r: w:", "", "memory facts read / written; → milestones this decision reached"),
        ("ABORTED INVALID", "$error bold", "a call cancelled in flight; output that did not parse"),
        ("cost unknown", "$warning bold", "a paid call its provider did not price"),
    )),
)


def help_content() -> Content:
    lines: list[Content] = [Content.styled("Keys", "bold $primary")]
    width = max(len(k) for k, _ in KEYS)
    for keys, does in KEYS:
        lines.append(Content.assemble((f"  {keys:<{width}}  ", "bold $accent"), does))
    lines.append(Content.assemble(("  while a human plays: ", "$text-muted"),
                                  *[part for key, button in HUMAN_PLAY
                                    for part in ((key, "bold $accent"), f" {button}   ")]))
    for title, rows in LEGEND:
        lines.append(Content(""))
        lines.append(Content.styled(title, "bold $primary"))
        gw = max(len(g) for g, _, _ in rows)
        for glyph, style, meaning in rows:
            lines.append(Content.assemble("  ", (f"{glyph:<{gw}}", style or ""), "  ", meaning))
    return Content("\n").join(lines)


def help_text() -> str:
    return help_content().plain


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


class HelpScreen(TextScreen):
    BINDINGS = [Binding("question_mark", "close", "Close", show=False)]

    def __init__(self):
        super().__init__("oakwatch console: keys and legend", help_content(), id="help")
