"""Review: label a memory error at the decision in view, or mark the trial reviewed, as a named annotator.

The label dialog collects type (the rubric's), severity, refers-to (the earlier fact id or decision),
role (primary cause or memory consequence, naming its primary), the decision where the agent
recovered, and a note; the reviewed dialog the decisions looked at and a note. `submit` records it
and returns why it was refused, if it was: a refused record stays in the dialog with the reason
shown, so nothing typed is lost."""

from __future__ import annotations

from collections.abc import Callable

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

SEVERITIES = ("minor", "material", "critical")
ROLES = ("primary", "consequence")


class AnnotateDialog(ModalScreen[object | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    AnnotateDialog { align: center middle; background: $background 60%; }
    AnnotateDialog > #annotate-dialog {
        width: 72; max-width: 95%; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 0 2; overflow-y: auto;
    }
    AnnotateDialog Label { margin-top: 1; }
    AnnotateDialog .dialog-title { text-style: bold; color: $primary; margin-top: 0; }
    AnnotateDialog .dialog-help { color: $text-muted; margin-top: 0; width: 1fr; }
    AnnotateDialog .dialog-error { color: $error; margin-top: 0; }
    AnnotateDialog .dialog-buttons { height: auto; margin-top: 1; align-horizontal: right; }
    AnnotateDialog .dialog-buttons Button { margin-left: 2; }
    AnnotateDialog .row { height: auto; }
    AnnotateDialog .row > Vertical { height: auto; width: 1fr; }
    """

    def __init__(self, types: dict[str, str], *, trial_key: str, decision_id: int, annotator: str,
                 submit: Callable[[dict], tuple[object | None, str | None]]):
        super().__init__()
        self.types = types
        self.trial_key = trial_key
        self.decision_id = decision_id
        self.annotator = annotator
        self.submit = submit

    def compose(self) -> ComposeResult:
        with Vertical(id="annotate-dialog"):
            yield Label(f"Label a memory error at decision {self.decision_id} of {self.trial_key} "
                        f"(as {self.annotator})", classes="dialog-title")
            yield Label("the decision in view is the later, contradicting one", classes="dialog-help")
            yield Label("Type")
            yield Select([(k, k) for k in self.types], id="label-type", allow_blank=False,
                         value=next(iter(self.types)))
            yield Label("", id="label-help", classes="dialog-help")
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Severity")
                    yield Select([(s, s) for s in SEVERITIES], id="label-severity", allow_blank=False,
                                 value="minor")
                with Vertical():
                    yield Label("Role")
                    yield Select([(r, r) for r in ROLES], id="label-role", allow_blank=False, value="primary")
            yield Label("Refers to (the earlier fact id or decision number, required)")
            yield Input(placeholder="fact-0003 or 42", id="label-refers")
            yield Label("Primary cause (a consequence: your label id it follows from)")
            yield Input(placeholder=f"{self.annotator}-1", id="label-primary")
            yield Label("Recovered at decision (optional)")
            yield Input(placeholder="a later decision number", id="label-recovered")
            yield Label("Note")
            yield Input(placeholder="what went wrong", id="label-note")
            yield Label("", id="label-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Label", variant="primary", id="label-ok")
                yield Button("Cancel", id="label-cancel")

    def on_mount(self) -> None:
        self._describe(self.query_one("#label-type", Select).value)
        self.query_one("#label-refers", Input).focus()

    def _describe(self, key) -> None:
        self.query_one("#label-help", Label).update(self.types.get(key, "") if isinstance(key, str) else "")

    @on(Select.Changed, "#label-type")
    def _type_changed(self, event: Select.Changed) -> None:
        self._describe(event.value)

    def values(self) -> dict:
        return {
            "type": self.query_one("#label-type", Select).value,
            "severity": self.query_one("#label-severity", Select).value,
            "role": self.query_one("#label-role", Select).value,
            "refers_to": self.query_one("#label-refers", Input).value.strip() or None,
            "primary_id": self.query_one("#label-primary", Input).value.strip() or None,
            "recovered_decision": self.query_one("#label-recovered", Input).value.strip() or None,
            "note": self.query_one("#label-note", Input).value.strip(),
        }

    @property
    def error(self) -> str:
        return str(self.query_one("#label-error", Label).render())

    @on(Input.Submitted)
    @on(Button.Pressed, "#label-ok")
    def _ok(self) -> None:
        record, problem = self.submit(self.values())
        if problem:
            self.query_one("#label-error", Label).update(f"refused: {problem}")
            return
        self.dismiss(record)

    @on(Button.Pressed, "#label-cancel")
    def _cancel_button(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ReviewedDialog(ModalScreen[object | None]):
    """Mark a trial reviewed: the decisions looked at (the whole trial, or what is left of it, by
    default) and a note. A review is an append-only record, so it is confirmed here, never made by a
    single key press; a refused one stays open with the reason shown."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ReviewedDialog { align: center middle; background: $background 60%; }
    ReviewedDialog > #reviewed-dialog {
        width: 72; max-width: 95%; height: auto; max-height: 95%;
        border: thick $primary; background: $surface; padding: 0 2; overflow-y: auto;
    }
    ReviewedDialog Label { margin-top: 1; }
    ReviewedDialog .dialog-title { text-style: bold; color: $primary; margin-top: 0; }
    ReviewedDialog .dialog-help { color: $text-muted; margin-top: 0; width: 1fr; }
    ReviewedDialog .dialog-error { color: $error; margin-top: 0; }
    ReviewedDialog .dialog-buttons { height: auto; margin-top: 1; align-horizontal: right; }
    ReviewedDialog .dialog-buttons Button { margin-left: 2; }
    ReviewedDialog .row { height: auto; }
    ReviewedDialog .row > Vertical { height: auto; width: 1fr; }
    """

    def __init__(self, *, trial_key: str, first: int, last: int, annotator: str, already: str = "",
                 submit: Callable[[dict], tuple[object | None, str | None]]):
        super().__init__()
        self.trial_key = trial_key
        self.first = first
        self.last = last
        self.annotator = annotator
        self.already = already
        self.submit = submit

    def compose(self) -> ComposeResult:
        with Vertical(id="reviewed-dialog"):
            yield Label(f"Mark {self.trial_key} reviewed (as {self.annotator})", classes="dialog-title")
            yield Label("you looked at these decisions for memory errors and labelled every one you found; "
                        "with none labelled the trial counts a known 0" +
                        (f" · already reviewed: {self.already}" if self.already else ""), classes="dialog-help")
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("From decision")
                    yield Input(str(self.first), id="reviewed-from")
                with Vertical():
                    yield Label("To decision (inclusive)")
                    yield Input(str(self.last), id="reviewed-to")
            yield Label("Note")
            yield Input(placeholder="e.g. no memory error found", id="reviewed-note")
            yield Label("", id="reviewed-error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Reviewed", variant="primary", id="reviewed-ok")
                yield Button("Cancel", id="reviewed-cancel")

    def on_mount(self) -> None:
        self.query_one("#reviewed-note", Input).focus()

    def values(self) -> dict:
        return {"first": self.query_one("#reviewed-from", Input).value.strip(),
                "last": self.query_one("#reviewed-to", Input).value.strip(),
                "note": self.query_one("#reviewed-note", Input).value.strip()}

    @property
    def error(self) -> str:
        return str(self.query_one("#reviewed-error", Label).render())

    @on(Input.Submitted)
    @on(Button.Pressed, "#reviewed-ok")
    def _ok(self) -> None:
        record, problem = self.submit(self.values())
        if problem:
            self.query_one("#reviewed-error", Label).update(f"refused: {problem}")
            return
        self.dismiss(record)

    @on(Button.Pressed, "#reviewed-cancel")
    def _cancel_button(self) -> None:
        self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
