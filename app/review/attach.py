"""`oakwatch attach DIR`: the console over an experiment started elsewhere (headless, CI, a cluster,
another terminal), following its evidence folder as it grows.

The overview shows every trial of the schedule at once (blinded label, status: waiting, running,
paused, stepping or the outcome in the end line's words; deepest rung, accepted actions, cost, a
sparkline of points over actions); enter drills into one with the live console's panes (frame,
budgets, ladder, memory, trace), escape goes back. Once the run is over (its summary.json written
after its last run-finished line) the summary table headless runs print appears under the rows.
The folder is read with aiofiles on a timer (app.review.attach_data), so the UI never waits on disk.
Paused and stepping come from the control channel's status op (the folder records no pause):
without a channel a held trial reads running.

Operator keys p (pause/resume), s (step), x (end the trial) and t (tag) act on the selected trial
through the run's control channel (sessions.execute.control_socket) when the run listens on one; without
it attach is read-only and says so. q only closes the console: the run goes on.
"""

from __future__ import annotations

import time
from pathlib import Path

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static

from app.console.console import rubric_types, short_path, trial_panes
from app.console.console_state import MODEL_REDACTED
from app.review.attach_data import AttachFolder, TrialFollower
from engine.loop.trial import utc_now
from panes.dialogs import EndTrialDialog, TagDialog
from panes.help import TextScreen
from panes.key_footer import KeyFooter
from panes.overview import OverviewPane
from panes.status import StatusBar, SummaryPane
from panes.trial.budgets import BudgetsPane
from panes.trial.frame import FramePane
from panes.trial.ladder import LadderPane
from panes.trial.memory import MemoryPane
from panes.trial.trace import TracePane, detail_text
from sessions.execute.control_socket import ControlClient
from themes import DEFAULT_THEME, TCSS, THEMES, load_config

POLL_SECONDS = 0.25
STATUS_SECONDS = 1.0
READ_ONLY = "read-only: no control channel (pauses not shown)"


def held_trials(reply: dict) -> dict[str, str]:
    """trial key -> paused or stepping, from a status reply (sessions.execute.control_socket)."""
    held = ("paused", "stepping")
    states = reply.get("trial_states")
    if isinstance(states, dict):  # a run of many trials at once
        return {k: v for k, v in states.items() if isinstance(k, str) and v in held}
    if isinstance(reply.get("paused_trials"), list):  # the same, from a run that names no states
        return {k: "paused" for k in reply["paused_trials"] if isinstance(k, str)}
    if reply.get("paused") and isinstance(reply.get("trial"), str):  # one trial at a time
        return {reply["trial"]: "stepping" if reply.get("state") == "stepping" else "paused"}
    return {}

# The footer fits 80 columns as the console's does: `q` and the way back give way last.
SHORT_KEYS = {"pause": "Pause", "end_trial": "End"}
KEY_PRIORITY = ["quit", "back", "pause", "tag", "end_trial", "step", "maximise"]


class TrialScreen(Screen):
    """One trial with the live console's panes, fed from its follower's sink."""

    BINDINGS = [Binding("escape", "back", "Overview"), Binding("m", "maximise", "Max")]

    def __init__(self, follower: TrialFollower, frame_protocol: str | None = None):
        super().__init__()
        self.follower = follower
        self.frame_protocol = frame_protocol

    @property
    def key(self) -> str:
        return self.follower.key

    def compose(self) -> ComposeResult:
        sink = self.follower.sink
        yield StatusBar(sink.status, interval=None, id="status")
        yield from trial_panes(sink, self.frame_protocol)
        yield KeyFooter(SHORT_KEYS, KEY_PRIORITY)

    def on_mount(self) -> None:
        self._last_slow = 0.0
        self.query_one(TracePane).border_subtitle = f"following {short_path(self.follower.folder, 60)}"
        self.pull()
        self.set_interval(1 / 20, self.pull, name="attach-trial-tick")  # paints up to 20 fps (target 15)

    def pull(self) -> None:
        try:
            self.query_one(FramePane).pull()
            self.query_one(TracePane).pull()
            now = time.monotonic()
            if now - self._last_slow >= 0.245:
                self._last_slow = now
                for pane in (self.query_one(StatusBar), self.query_one(BudgetsPane), self.query_one(LadderPane),
                             self.query_one(MemoryPane)):
                    pane.pull()
        except Exception as exc:  # a display fault must not take the console down
            self.follower.sink.note("error", f"display: {type(exc).__name__}: {exc}")

    def action_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        self.app.pop_screen()

    def action_maximise(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        target = self.focused if self.focused is not None and self.focused.allow_maximize else None
        self.maximize(target or self.query_one(FramePane), container=False)

    def on_trace_pane_selected(self, event: TracePane.Selected) -> None:
        sink = self.follower.sink
        self.app.push_screen(TextScreen("Trace line", sink.redact(detail_text(event.kind, event.payload)) or ""))

    def on_memory_pane_selected(self, event: MemoryPane.Selected) -> None:
        title = f"Memory fact {event.fact.get('fact_id', '')}"
        self.app.push_screen(TextScreen(title, self.follower.sink.redact(event.text) or ""))


class AttachApp(App[int]):
    """The attached console over `root`."""

    TITLE = "oakwatch attach"
    CSS_PATH = TCSS
    CSS = """
    #attach-status { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    #summary { max-height: 45%; }  /* the overview keeps the rest: the rows stay in view */
    OverviewPane { border: round $secondary; border-title-color: $primary; border-title-style: bold;
                   border-subtitle-color: $text-muted; background: $surface; }
    """
    BINDINGS = [
        Binding("p", "pause", "Pause/resume"),
        Binding("s", "step", "Step"),
        Binding("t", "tag", "Tag"),
        Binding("x", "end_trial", "End trial"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, root: Path, *, poll_seconds: float | None = POLL_SECONDS, theme: str | None = None,
                 frame_protocol: str | None = None, client: ControlClient | None = None,
                 read_only: bool = False):
        super().__init__()
        self.read_only = read_only
        self.root = Path(root)
        self.folder = AttachFolder(self.root)
        self.client = client or ControlClient(self.root, timeout=2.0)
        self.poll_seconds = poll_seconds
        self.frame_protocol = frame_protocol
        self.control_state: dict | None = None
        self._summary_shown = None
        self._polling = False
        self._last_status = 0.0
        self.polls = 0
        for t in THEMES.values():
            self.register_theme(t)
        chosen = theme or load_config().get("theme") or DEFAULT_THEME
        self.theme = chosen if chosen in self.available_themes else DEFAULT_THEME

    def compose(self) -> ComposeResult:
        yield Static("", id="attach-status", markup=False)
        yield OverviewPane(id="overview")
        yield SummaryPane(id="summary")  # under the rows (hidden until the run is over)
        yield KeyFooter(SHORT_KEYS, KEY_PRIORITY)

    async def on_mount(self) -> None:
        self.query_one(OverviewPane).focus()
        await self.poll()
        if self.poll_seconds:
            self.set_interval(self.poll_seconds, self.poll, name="attach-poll")

    # -- following ------------------------------------------------------------------------------
    @property
    def trial_screen(self) -> TrialScreen | None:
        screen = self.screen
        if isinstance(screen, ModalScreen):
            for s in reversed(self.screen_stack):
                if isinstance(s, TrialScreen):
                    return s
            return None
        return screen if isinstance(screen, TrialScreen) else None

    async def poll(self) -> None:
        """One read of everything new in the folder (re-entrant calls are skipped)."""
        if self._polling:
            return
        self._polling = True
        try:
            shown = self.trial_screen
            await self.folder.poll(focus=shown.key if shown is not None else None)
            if shown is not None and self.folder.followers.get(shown.key) is not shown.follower:
                # The trial was read again from scratch (recovered, voided, a new attempt): follow that.
                self.pop_screen()
                self._open(shown.key)
            now = time.monotonic()
            if now - self._last_status >= STATUS_SECONDS:
                self._last_status = now
                await self._control_status()
            self.polls += 1
            self.show_overview()
        except Exception as exc:  # a fault in reading must not take the console down
            self.notify(f"attach: {type(exc).__name__}: {exc}", severity="error", timeout=5)
        finally:
            self._polling = False

    async def _control_status(self) -> None:
        """Which trials are paused or stepping: only the run's control channel knows (the folder
        records no pause), so without one every running trial reads running. A read-only console
        asks too: status changes nothing."""
        if not self.client.available:
            self.control_state = None
            self.folder.held = {}
            return
        reply = await self.client.asend({"op": "status"})
        self.control_state = reply if reply.get("ok") else None
        self.folder.held = held_trials(reply) if reply.get("ok") else {}

    def show_overview(self) -> None:
        rows = self.folder.rows()
        self.query_one(OverviewPane).show(rows)
        self._show_summary()
        counts = {s: sum(1 for r in rows if r.status == s) for s in ("running", "ended", "waiting", "voided")}
        parts = ["attach (blinded)", self.folder.experiment_id or short_path(self.root, 40),
                 f"run {self.folder.run_state}",
                 ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no trials yet",
                 "read-only" if self.read_only else
                 "control channel" if self.control_state is not None else READ_ONLY]
        self.query_one("#attach-status", Static).update(" · ".join(parts))

    def _show_summary(self) -> None:
        """Once the run is over, the summary table headless runs print (and the single console shows)."""
        summary = self.folder.summary
        if summary is None or summary is self._summary_shown:
            return
        from app.console.headless import summary_table

        try:
            table = summary_table(summary, self.folder.results())
        except Exception as exc:  # a display fault must not hide that the run is over
            table = f"(the summary could not be shown: {type(exc).__name__}: {exc})"
        for model_id in sorted((m for m in self.folder.models if len(m) >= 3), key=len, reverse=True):
            table = table.replace(model_id, MODEL_REDACTED)
        self._summary_shown = summary
        self.query_one(SummaryPane).show_table(table, short_path(self.root, 60))
        # The run is over: the footer drops the controls (after a refresh: at mount it is not listening yet).
        self.call_after_refresh(self.refresh_bindings)

    # -- moving -----------------------------------------------------------------------------------
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._open(event.row_key.value)

    def _open(self, key: str | None) -> None:
        follower = self.folder.followers.get(key) if key else None
        if follower is None or not follower.started:
            self.notify(f"Trial {key} has not started yet.", timeout=2)
            return
        self.push_screen(TrialScreen(follower, self.frame_protocol))
        self.call_later(self.poll)  # its frame is decoded now that it is in view

    def selected_key(self) -> str | None:
        shown = self.trial_screen
        if shown is not None:
            return shown.key
        return self.query_one(OverviewPane).selected_key

    # -- operator controls ------------------------------------------------------------------------
    CONTROLS = frozenset({"pause", "step", "tag", "end_trial"})

    @property
    def run_over(self) -> bool:
        """The run has written its summary: no trial is left to pause, step, tag or end."""
        return self.folder.summary is not None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Once the run is over the footer stops offering the controls (False: not shown, not run).
        return not (action in self.CONTROLS and self.run_over)

    def _target(self) -> str | None:
        if isinstance(self.screen, ModalScreen):
            return None
        if self.read_only:
            self.notify("read-only: started with --read-only", severity="warning", timeout=3)
            return None
        if not self.client.available:
            self.notify(READ_ONLY, severity="warning", timeout=3)
            return None
        key = self.selected_key()
        if key is None:
            self.notify("No trial selected.", severity="warning", timeout=3)
        return key

    async def _send(self, message: dict, done: str) -> dict:
        reply = await self.client.asend(message)
        if reply.get("ok"):
            self.notify(done, timeout=3)
        else:
            self.notify(f"Refused: {reply.get('error')}", severity="error", timeout=5)
        self._last_status = 0.0
        return reply

    async def action_pause(self) -> None:
        key = self._target()
        if key is None:
            return
        await self._control_status()
        op = "resume" if key in self.folder.paused_trials else "pause"
        await self._send({"op": op, "trial": key},
                         f"{'Resuming' if op == 'resume' else 'Pausing'} {key} at the next decision boundary")

    async def action_step(self) -> None:
        key = self._target()
        if key is not None:
            await self._send({"op": "step", "trial": key}, f"Stepping {key} one decision")

    def action_end_trial(self) -> None:
        key = self._target()
        if key is None:
            return

        async def done(reason: str | None) -> None:
            if reason:
                await self._send({"op": "end", "trial": key, "reason": reason}, f"Ending trial {key}: {reason}")

        self.push_screen(EndTrialDialog(key), done)

    def action_tag(self) -> None:
        key = self._target()
        if key is None:
            return
        follower = self.folder.followers.get(key)
        status = follower.sink.status() if follower is not None else None
        decision = status.decisions if status is not None else 0
        captured = {"op": "tag", "trial": key, "decision": decision,
                    "frame_sha256": status.frame_sha256 if status is not None else None,
                    "frame_index": status.frame_index if status is not None else None, "opened_utc": utc_now()}

        def message(tag: dict) -> dict:
            return {**captured, "type": tag.get("type"), "severity": tag.get("severity"),
                    "refers_to": tag.get("refers_to"), "note": tag.get("note") or ""}

        def check(tag: dict) -> str | None:
            reply = self.client.send({**message(tag), "check": True})
            return None if reply.get("ok") else str(reply.get("error"))

        async def done(tag: dict | None) -> None:
            if tag is not None:
                await self._send(message(tag), f"Tagged {tag.get('type')} ({tag.get('severity')}) at {key} "
                                                f"decision {decision}")

        self.push_screen(TagDialog(rubric_types(), decision, key, check), done)


def run_attach(root: Path, read_only: bool = False) -> int:
    import os

    from panes.trial.image_frame import frame_protocol

    web = bool(os.environ.get("TEXTUAL_DRIVER"))  # in a browser (textual-serve): half blocks
    app = AttachApp(root, frame_protocol=None if web else frame_protocol(), read_only=read_only)
    app.run()
    return 0
