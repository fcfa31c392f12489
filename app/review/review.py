"""`oakwatch review DIR`: the console on a finished (or still running) experiment, from its evidence.

Pick a trial (by blinded label and outcome), scrub it decision by decision, and see for the
decision in view the frame the agent saw, its full raw response and reasoning, the parsed actions,
the memory store as it stood then (that decision's reads and writes marked) and the ladder so far.
Label memory errors as a named annotator (`a`), and mark a trial reviewed (`r`: every memory error
found in it is labelled, none making its count a known 0; the trial list marks reviewed trials ✓):
records go to `annotations/<annotator>/` through the annotation layer, never into the evidence.
Condition identity stays hidden (labels only, model ids masked, condition files unread) until the
folder holds `unblinded/`. A running experiment is re-read on a timer; a torn last line waits for
the next read.
"""

from __future__ import annotations

import re
from pathlib import Path

from textual import on
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from app.review.review_data import (
    REVIEWED_MARK,
    LabelRefused,
    ReviewFolder,
    TrialData,
    append_label,
    rubric_types,
    spans_text,
)
from engine.loop.trial import utc_now
from panes.review.annotate import AnnotateDialog, ReviewedDialog
from panes.review.response import ResponsePane
from panes.review.review_memory import ReviewMemoryPane
from panes.review.scrubber import Scrubber
from panes.trial.frame import FrameView
from panes.trial.ladder import LadderPane
from sessions.evidence import layout
from themes import DEFAULT_THEME, THEMES, load_config

ANNOTATOR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
RESERVED_ANNOTATORS = (layout.OPERATOR_ANNOTATOR, "adjudication")
REREAD_SECONDS = 1.0


def annotator_problem(name: str | None) -> str | None:
    """Why a name cannot be an annotator's (None: it can)."""
    if name is None:
        return None
    if not ANNOTATOR_NAME.fullmatch(name):
        return (f"--annotator {name!r}: letters, digits, '.', '_' and '-' only (up to 64, starting with a "
                f"letter or digit)")
    if name in RESERVED_ANNOTATORS:
        return f"--annotator {name!r} is reserved ({', '.join(RESERVED_ANNOTATORS)}); choose your own name"
    return None


class ReviewApp(App[int]):
    """The review console over `root`. Labels need an `annotator`."""

    TITLE = "oakwatch review"
    CSS = """
    Screen { layout: vertical; background: $background; }
    #review-status { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    #review-top { height: 1fr; }
    #review-left { width: 42%; }
    #review-right { width: 1fr; }
    #trials { height: auto; max-height: 8; }
    #frame-box { height: 1fr; }
    #frame-caption { height: 1; color: $text-muted; text-align: center; }
    FrameView { background: $background; }
    #trials, #frame-box, ResponsePane, LadderPane, ReviewMemoryPane, Scrubber {
        border: round $secondary; border-title-color: $primary; border-title-style: bold;
        border-subtitle-color: $text-muted; background: $surface;
    }
    #trials:focus, ResponsePane:focus, ReviewMemoryPane:focus { border: round $primary; }
    Scrubber { height: 4; }
    LadderPane { height: auto; max-height: 12; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    ResponsePane { padding: 0 1; }
    ReviewMemoryPane { height: 30%; min-height: 6; }
    """
    BINDINGS = [
        Binding("left", "step(-1)", "−1", priority=True),
        Binding("right", "step(1)", "+1", priority=True),
        Binding("pageup", "step(-10)", "−10", priority=True, show=False),
        Binding("pagedown", "step(10)", "+10", priority=True, show=False),
        Binding("home", "edge(0)", "First", priority=True, show=False),
        Binding("end", "edge(1)", "Last", priority=True, show=False),
        Binding("m", "jump('milestone', 1)", "Milestone", priority=True),
        Binding("M", "jump('milestone', -1)", "Prev milestone", priority=True, show=False),
        Binding("t", "jump('tag', 1)", "Tag", priority=True),
        Binding("T", "jump('tag', -1)", "Prev tag", priority=True, show=False),
        Binding("i", "jump('invalid', 1)", "Invalid", priority=True),
        Binding("I", "jump('invalid', -1)", "Prev invalid", priority=True, show=False),
        Binding("a", "annotate", "Annotate", priority=True),
        Binding("r", "mark_reviewed", "Reviewed", priority=True),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, root: Path, *, annotator: str | None = None, theme: str | None = None,
                 reread_seconds: float | None = REREAD_SECONDS):
        super().__init__()
        self.root = Path(root)
        self.annotator = annotator
        self.folder = ReviewFolder(self.root, annotator or "")
        self.trial: TrialData | None = None
        self.decision = 0
        self.reread_seconds = reread_seconds
        self.shown_frame_sha256: str | None = None  # the pixels in the frame view (None: not stored yet)
        self.memory_view = None  # the decision in view's MemoryView and LadderView (app.review.review_data)
        self.ladder_view = None
        for t in THEMES.values():
            self.register_theme(t)
        chosen = theme or load_config().get("theme") or DEFAULT_THEME
        self.theme = chosen if chosen in self.available_themes else DEFAULT_THEME

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static("", id="review-status", markup=False)
        with Horizontal(id="review-top"):
            with Vertical(id="review-left"):
                yield OptionList(id="trials")
                with Vertical(id="frame-box"):
                    yield FrameView(id="review-frame")
                    yield Static("", id="frame-caption", markup=False)
            with Vertical(id="review-right"):
                yield ResponsePane(id="response")
                yield LadderPane(None, interval=None, id="review-ladder")
        yield Scrubber(id="scrubber")
        yield ReviewMemoryPane(id="review-memory")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#trials", OptionList).border_title = "Trials"
        self.query_one("#frame-box").border_title = "Frame the agent saw"
        self.query_one(Scrubber).border_title = "Decisions"
        self._fill_trials()
        if self.folder.trials:
            self.open_trial(self.folder.trials[0].key)
        else:
            self._status()
        if self.reread_seconds:
            self.set_interval(self.reread_seconds, self.reread, name="review-reread")

    def _fill_trials(self) -> None:
        options = self.query_one("#trials", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        options.add_options([Option(e.line(), id=e.key) for e in self.folder.trials])
        if self.folder.trials:
            options.highlighted = min(highlighted or 0, len(self.folder.trials) - 1)
        subtitle = f"{len(self.folder.trials)} trial(s)"
        if self.annotator:
            done = sum(e.reviewed_whole for e in self.folder.trials)
            subtitle += f" · {REVIEWED_MARK} {done} reviewed"
        options.border_subtitle = subtitle + " · enter opens"

    @on(OptionList.OptionSelected, "#trials")
    def _trial_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id and (self.trial is None or event.option.id != self.trial.key):
            self.open_trial(event.option.id)

    def open_trial(self, key: str) -> None:
        self.trial = self.folder.open(key)
        self.decision = 0
        self.seek(1)

    # -- moving -------------------------------------------------------------------------------
    def seek(self, decision: int) -> None:
        trial = self.trial
        if trial is None:
            return
        self.decision = max(1, min(trial.decisions, decision)) if trial.decisions else 0
        self.show()

    def show(self) -> None:
        trial, n = self.trial, self.decision
        scrubber = self.query_one(Scrubber)
        scrubber.set(n, trial.decisions, {k: trial.marks(k) for k in ("milestone", "tag", "invalid")},
                     live=trial.running)
        self._status()
        if n == 0:
            self.query_one(ResponsePane).clear(
                "no decision recorded yet" + (" (the trial is running: re-reading)" if trial.running else ""))
            self.query_one("#frame-caption", Static).update("")
            return
        view = trial.view(n)
        pixels = trial.frame(view.frame_sha256)
        caption = f"decision {n} · frame {view.frame_index} · {view.frame_sha256[:12]}"
        if pixels is None:
            caption += " · not in the frame store yet"
            self.shown_frame_sha256 = None
        else:
            self.query_one(FrameView).show(pixels)
            self.shown_frame_sha256 = view.frame_sha256
        self.query_one("#frame-caption", Static).update(caption)
        self.query_one(ResponsePane).show(view)
        self.memory_view = trial.memory_at(n)
        self.ladder_view = trial.ladder_at(n)
        self.query_one(ReviewMemoryPane).show(self.memory_view)
        self.query_one(LadderPane).show(self.ladder_view)

    def _status(self) -> None:
        trial = self.trial
        blind = "UNBLINDED" if trial is not None and trial.unblinded else "blinded"
        parts = [f"review ({blind})", self.folder.experiment_id]
        if trial is None:
            parts.append("no trials yet")
        else:
            who = f"condition {trial.label}"
            name = trial.condition_name
            if name:
                who += f" = {name}"
            parts += [f"trial {trial.key}", who,
                      "running" if trial.running else trial.result.outcome,
                      f"decision {self.decision}/{trial.decisions}"]
        parts.append(f"annotator {self.annotator}" if self.annotator else "read-only (no --annotator)")
        if self.annotator and trial is not None:
            parts.append(f"{REVIEWED_MARK} reviewed" if trial.reviewed_whole else
                         f"reviewed {spans_text(trial.reviewed)} of 1..{trial.decisions}" if trial.reviewed
                         else "not reviewed (r)")
        if trial is not None and trial.problems:
            parts.append(f"⚠ {trial.problems[0]}")
        self.query_one("#review-status", Static).update(" · ".join(parts))

    def reread(self) -> None:
        """Pick up what a running experiment wrote since the last read."""
        if self.folder.rescan():
            self._fill_trials()
            if self.trial is None and self.folder.trials:
                self.open_trial(self.folder.trials[0].key)
                return
        if self.trial is not None and self.trial.refresh():
            self.seek(self.decision or 1)

    def _guard(self) -> None:
        if isinstance(self.screen, ModalScreen):
            raise SkipAction()

    def action_step(self, delta: int) -> None:
        self._guard()
        if self.trial is not None:
            self.seek(self.decision + delta)

    def action_edge(self, end: int) -> None:
        self._guard()
        if self.trial is not None:
            self.seek(self.trial.decisions if end else 1)

    def action_jump(self, kind: str, direction: int) -> None:
        self._guard()
        if self.trial is None:
            return
        target = self.trial.next_mark(kind, self.decision, direction)
        if target is None:
            self.notify(f"no {'next' if direction > 0 else 'previous'} {kind} decision", timeout=2)
            return
        self.seek(target)

    @on(Scrubber.Seek)
    def _seek(self, event: Scrubber.Seek) -> None:
        self.seek(event.decision)

    # -- labelling ----------------------------------------------------------------------------
    def action_annotate(self) -> None:
        self._guard()
        trial = self.trial
        if not self.annotator:
            self.notify("Read-only: start `oakwatch review DIR --annotator NAME` to label.", severity="warning",
                        timeout=4)
            return
        if trial is None or self.decision == 0:
            self.notify("No decision in view to label.", severity="warning", timeout=3)
            return
        decision, opened, annotator = self.decision, utc_now(), self.annotator

        submit = self._appender(trial, lambda values: trial.build_label(decision, values, annotator=annotator,
                                                                         opened_utc=opened))

        def done(record) -> None:
            if record is None:
                return
            trial.refresh()
            self.show()
            ident = getattr(record, "id", None)
            self.notify(f"Labelled {record.type} ({record.severity}) at {trial.key} decision {decision}"
                        + (f" as {ident}" if ident else ""), timeout=3)

        self.push_screen(AnnotateDialog(rubric_types(), trial_key=trial.key, decision_id=decision,
                                        annotator=annotator, submit=submit), done)

    def _appender(self, trial, build):
        """A dialog's submit: build the record from its values and append it to this annotator's layer;
        a refusal comes back (masked) for the dialog to show, keeping what was typed."""
        def submit(values: dict):
            try:
                record = build(values)
                append_label(self.root, self.annotator, record)
            except LabelRefused as exc:
                return None, trial.masker.text(str(exc))
            return record, None

        return submit

    def action_mark_reviewed(self) -> None:
        self._guard()
        trial = self.trial
        if not self.annotator:
            self.notify("Read-only: start `oakwatch review DIR --annotator NAME` to mark trials reviewed.",
                        severity="warning", timeout=4)
            return
        if trial is None or trial.decisions == 0:
            self.notify("No decision recorded yet to review.", severity="warning", timeout=3)
            return
        if trial.reviewed_whole:
            self.notify(f"{trial.key} is already reviewed by {self.annotator} "
                        f"(decisions {spans_text(trial.reviewed)}).", timeout=3)
            return
        opened, annotator = utc_now(), self.annotator

        submit = self._appender(trial, lambda values: trial.build_reviewed(values, annotator=annotator,
                                                                            opened_utc=opened))

        def done(record) -> None:
            if record is None:
                return
            trial.refresh()
            self.folder.rescan()
            self._fill_trials()
            self.show()
            self.notify(f"Marked {trial.key} reviewed: decisions {record.decision_id}..{record.through_decision}"
                        + (f" as {record.id}" if record.id else ""), timeout=3)

        self.push_screen(ReviewedDialog(trial_key=trial.key, first=trial.first_unreviewed(), last=trial.decisions,
                                        annotator=annotator, already=spans_text(trial.reviewed), submit=submit),
                         done)


def run_review(root: Path, annotator: str | None = None) -> int:
    app = ReviewApp(root, annotator=annotator)
    app.run()
    return 0
