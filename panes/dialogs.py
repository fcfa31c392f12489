"""Operator dialogs: tag a memory error, confirm ending a trial."""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

SEVERITIES = ("minor", "material", "critical")
COMPACT_BELOW = 32  # terminal rows under which the fields are drawn without borders (the dialog fits)


def fit_fields(screen: ModalScreen) -> None:
    """Borderless (compact) inputs, selects and buttons on a short terminal, so no dialog scrolls."""
    compact = screen.app.size.height < COMPACT_BELOW
    for widget in screen.query("Input, Select, Button"):
        widget.compact = compact


class TagDialog(ModalScreen[dict | None]):
    """Memory-error type, severity, what it refers to, and a note. Dismisses with the tag or None.

    The trial and decision are the ones in view when the dialog opened; `check` (if given) returns
    why a tag would be refused, so a bad reference is fixed here rather than lost. A tag is the
    operator's layer of labels: kind memory-error, source operator, role primary (see
    sessions.annotations.annotation_layer)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, types: dict[str, str], decision_id: int | None = None, trial_key: str | None = None,
                 check: Callable[[dict], str | None] | None = None):
        super().__init__()
        self.types = types
        self.decision_id = decision_id
        self.trial_key = trial_key
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(id="tag-dialog", classes="dialog"):
            where = f" at decision {self.decision_id}" if self.decision_id is not None else ""
            if self.trial_key:
                where += f" of {self.trial_key}"
            yield Label(f"Tag a memory error{where}", classes="dialog-title")
            yield Label("Type")
            yield Select([(key, key) for key in self.types], id="tag-type", allow_blank=False,
                         value=next(iter(self.types)))
            yield Label("", id="tag-help", classes="dialog-help")
            yield Label("Severity")
            yield Select([(s, s) for s in SEVERITIES], id="tag-severity", allow_blank=False, value="minor")
            yield Label("Refers to (earlier fact id or decision, optional)")
            yield Input(placeholder="fact-0003 or 42", id="tag-refers")
            yield Label("Note")
            yield Input(placeholder="what went wrong", id="tag-note")
            yield Label("", id="tag-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Tag", variant="primary", id="tag-ok")
                yield Button("Cancel", id="tag-cancel")

    def on_mount(self) -> None:
        fit_fields(self)
        self._describe(self.query_one("#tag-type", Select).value)
        self.query_one("#tag-type", Select).focus()

    def on_resize(self) -> None:
        fit_fields(self)

    def _describe(self, key) -> None:
        self.query_one("#tag-help", Label).update(self.types.get(key, "") if isinstance(key, str) else "")

    @on(Select.Changed, "#tag-type")
    def _type_changed(self, event: Select.Changed) -> None:
        self._describe(event.value)

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self._submit()

    @on(Button.Pressed, "#tag-ok")
    def _ok(self) -> None:
        self._submit()

    @on(Button.Pressed, "#tag-cancel")
    def _cancel_button(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def _submit(self) -> None:
        kind = self.query_one("#tag-type", Select).value
        severity = self.query_one("#tag-severity", Select).value
        refers = self.query_one("#tag-refers", Input).value.strip() or None
        note = self.query_one("#tag-note", Input).value.strip()
        if kind == "other" and not note:
            self.query_one("#tag-error", Label).update("type 'other' needs a note saying what")
            self.query_one("#tag-note", Input).focus()
            return
        # The operator's layer, in the annotators' format (engine.loop.records.Annotation).
        tag = {"kind": "memory-error", "source": "operator", "role": "primary", "type": kind, "severity": severity,
               "refers_to": refers, "note": note}
        problem = self.check(tag) if self.check is not None else None
        if problem:
            self.query_one("#tag-error", Label).update(problem)
            self.query_one("#tag-refers", Input).focus()
            return
        self.dismiss(tag)


class EndTrialDialog(ModalScreen[str | None]):
    """Confirm ending the current trial; a typed reason is required."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, trial_key: str | None = None, *, by_player: bool = False):
        super().__init__()
        self.trial_key = trial_key
        self.by_player = by_player

    def compose(self) -> ComposeResult:
        with Vertical(id="end-dialog", classes="dialog"):
            yield Label(f"End trial {self.trial_key or ''}?".replace("  ", " "), classes="dialog-title")
            if self.by_player:
                help_text = "You are the player: it is recorded as player-ended, a valid game-failure."
            else:
                help_text = "It is recorded as operator-abort with your reason: an invalid trial, rerun later."
            yield Label(help_text, classes="dialog-help")
            yield Label("Reason")
            yield Input(placeholder="why the trial is ended", id="end-reason")
            yield Label("", id="end-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("End trial", variant="error", id="end-ok")
                yield Button("Cancel", id="end-cancel")

    def on_mount(self) -> None:
        fit_fields(self)
        self.query_one("#end-reason", Input).focus()

    def on_resize(self) -> None:
        fit_fields(self)

    @on(Input.Submitted)
    @on(Button.Pressed, "#end-ok")
    def _ok(self) -> None:
        reason = self.query_one("#end-reason", Input).value.strip()
        if not reason:
            self.query_one("#end-error", Label).update("a reason is required")
            return
        self.dismiss(reason)

    @on(Button.Pressed, "#end-cancel")
    def _cancel_button(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
