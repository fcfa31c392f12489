"""Review: one decision's response in full: the observation, the parsed actions and the inputs
accepted, the reasoning summary, and every attempt's raw text exactly as produced (retries and
invalid outputs included) with its fate, usage and any reasoning the reply carried.

Text is given as plain Text (never markup): a raw response may hold anything."""

from __future__ import annotations

from typing import Protocol

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.figures import latency, money, tokens


class AttemptLike(Protocol):
    n: int
    raw: str | None
    valid: bool
    error: str | None
    aborted: bool
    model: str | None
    latency_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    stop_reason: str | None
    failure: str | None
    thinking: str | None


def _head(out: Text, title: str) -> None:
    """A bold section title, a blank line after any text before it."""
    if out:
        out.append("\n")
    out.append(title + "\n", style="bold")


def render_decision(view) -> Text:
    """The whole text of the pane for a DecisionView (app.review.review_data)."""
    out = Text()
    _head(out, f"Decision {view.decision_id}" + ("  INVALID OUTPUT" if view.invalid_output else "")
          + ("  ABORTED" if view.aborted else ""))
    _summary(out, view)
    if view.observed:
        _head(out, "Observed")
        for key, value in view.observed.items():
            out.append(f"{key}: ", style="dim")
            out.append(f"{value}\n")
    _head(out, "Reasoning summary")
    out.append((view.reasoning_summary or "none") + "\n")
    reads = ", ".join(view.memory_reads) or "none"
    writes = ", ".join(w or "refused" for w in view.memory_writes) or "none"
    out.append(f"memory read: {reads}   wrote: {writes}\n", style="dim")
    for a in view.attempts:
        _attempt(out, a, len(view.attempts))
    if not view.attempts:
        _head(out, "Raw response")
        out.append("not recorded\n", style="dim")
    return out


def _summary(out: Text, view) -> None:
    """Model, latency, cost, actions and what the decision reached or ended."""
    if view.model is not None:
        out.append(f"model {view.model}  ", style="dim")
    out.append(f"latency {latency(view.latency_ms)}  cost {money(view.cost_usd)}\n", style="dim")
    out.append("actions  ", style="bold")
    out.append(" ".join(view.parsed_actions) or "none")
    out.append(f"   accepted {view.accepted_actions}: {' '.join(view.inputs) or 'none'}\n")
    if view.awarded:
        out.append(f"reached  {' '.join(view.awarded)}\n", style="bold")
    if view.termination_reason:
        out.append(f"ended    {view.termination_reason}\n", style="bold")


def _attempt(out: Text, a: AttemptLike, count: int) -> None:
    fate = "valid" if a.valid else ("aborted" if a.aborted else "invalid")
    _head(out, f"Attempt {a.n} of {count}: {fate}")
    meta = [f"latency {latency(a.latency_ms)}", f"tokens {tokens(a.input_tokens)}/{tokens(a.output_tokens)}",
            f"cost {money(a.cost_usd)}"]
    if a.model is not None:
        meta.insert(0, f"model {a.model}")
    if a.stop_reason:
        meta.append(f"stop {a.stop_reason}")
    if a.failure:
        meta.append(f"failure {a.failure}")
    out.append("  ".join(meta) + "\n", style="dim")
    if a.error:
        out.append(f"error: {a.error}\n", style="bold red")
    if a.thinking:
        out.append("reasoning:\n", style="dim")
        out.append(a.thinking + "\n", style="italic")
    out.append("raw:\n", style="dim")
    out.append((a.raw if a.raw is not None else "(no answer)") + "\n")


class ResponsePane(VerticalScroll):
    DEFAULT_CSS = """
    ResponsePane { height: 1fr; }
    ResponsePane > #response-text { width: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.border_title = "Response"
        self.text = Text()

    def compose(self):
        yield Static(id="response-text", markup=False)

    def show(self, view) -> None:
        self.text = render_decision(view)
        self.query_one("#response-text", Static).update(self.text)
        self.border_subtitle = f"decision {view.decision_id} · {len(view.attempts)} attempt(s)"
        self.scroll_home(animate=False)

    def clear(self, message: str) -> None:
        self.text = Text(message)
        self.query_one("#response-text", Static).update(self.text)
        self.border_subtitle = ""
