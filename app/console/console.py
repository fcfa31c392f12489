"""The live operator console (Textual): panes over a running experiment, operator controls.

The run loop is one thread worker owned by the App (`exit_on_error=False`). It publishes
events into a ConsoleSink (thread-safe latest state plus a bounded trace buffer); every pane
pulls from it on its own timer. Nothing is posted per frame and the run thread never waits
on the UI. Operator commands go to the run's one RunControl, which the loop obeys at
decision boundaries (a pause pressed between trials holds the next one).

On a real terminal that speaks an image protocol (Kitty graphics, Sixel) the frame is sent as
an image (panes.trial.image_frame, asked before the app starts); elsewhere, in tests and with
OAKWATCH_FRAME=halfblock it is drawn with half blocks. `f` zooms the frame, `m` maximises the
focused pane, `?` shows every key and glyph, enter on a trace line or memory fact shows it whole,
and when the run is over a summary table appears above the trace (on a screen of its own where
the terminal is too short for it, `r` shows it again). The panes are laid out by the space they
have (panes.trial.trial_layout); the footer fits its keys to the width (panes.key_footer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import ModalScreen, Screen
from textual.theme import Theme
from textual.worker import Worker, WorkerState

from app.console.console_state import ConsoleSink
from engine.loop.control import SPEEDS, RunControl
from engine.loop.trial import utc_now
from engine.policies.human import HumanPolicy, key_queue, offer
from panes.dialogs import EndTrialDialog, TagDialog
from panes.help import HelpScreen, TextScreen
from panes.key_footer import KeyFooter
from panes.status import StatusBar, SummaryPane, SummaryScreen, speed_label
from panes.trial.budgets import BudgetsPane
from panes.trial.frame import FramePane
from panes.trial.ladder import LadderPane
from panes.trial.memory import MemoryPane
from panes.trial.trace import TracePane, detail_text
from panes.trial.trial_layout import TrialPanes
from themes import DEFAULT_THEME, TCSS, THEMES, load_config, save_config

RUBRIC = Path(__file__).resolve().parents[2] / "assets" / "prompts" / "memory-error-rubric.yaml"
HUMAN_KEYS = {"up": "UP", "down": "DOWN", "left": "LEFT", "right": "RIGHT", "z": "A", "x": "B",
              "enter": "START", "backspace": "SELECT"}
ZOOMS = ("", "fit", "native")  # f: normal -> the frame on the whole screen -> whole pixels (1:1) -> normal
# The footer where the keys do not fit: shorter descriptions, then the keys last in this list give way.
SHORT_KEYS = {"pause": "Pause", "end_trial": "End", "end_trial_human": "End"}
KEY_PRIORITY = ["quit", "help", "summary", "pause", "tag", "end_trial", "end_trial_human", "step", "zoom",
                "maximise", "faster", "slower"]


def short_path(path, width: int) -> str:
    """A folder as the operator would type it (relative to here when inside it), its tail kept when cut."""
    text = str(path)
    try:
        text = str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        home = str(Path.home())
        if text.startswith(home + "/"):
            text = "~" + text[len(home):]
    return text if len(text) <= width else "…" + text[-max(1, width - 1):]


def trial_panes(sink, frame_protocol, *, summary: bool = False) -> ComposeResult:
    """The live panes of one trial, fed by a ConsoleSink (the live console, and attach's drill-in),
    laid out by the space they have (panes.trial.trial_layout). Yielded inside a compose(); the panes
    pull from the sink on the owner's one tick."""
    yield TrialPanes(sink, frame_protocol, summary=summary, id="trial")


def rubric_types() -> dict[str, str]:
    try:
        data = yaml.safe_load(RUBRIC.read_text(encoding="utf-8"))
        types = {str(k): str(v) for k, v in data["types"].items()}
        if types:
            return types
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    keys = ("omission", "false-persistence", "fabrication", "contradiction", "duplicate-objective",
            "context-substitution", "memory-use-failure", "unsupported-overwrite", "other")
    return {k: "" for k in keys}


class OakwatchConsole(App[int]):
    """The operator console. Without `prepared` it shows whatever is fed into `sink` (tests)."""

    TITLE = "oakwatch"
    CSS_PATH = TCSS
    AUTO_FOCUS = None  # nothing focused at start: no table cursor, every key goes to the console
    ALLOW_IN_MAXIMIZED_VIEW = "Footer, StatusBar"  # a maximised pane keeps the status bar and the keys
    BINDINGS = [
        Binding("p", "pause", "Pause/resume"),
        Binding("s", "step", "Step"),
        Binding("t", "tag", "Tag"),
        Binding("x", "end_trial", "End trial"),
        Binding("ctrl+x", "end_trial_human", "End trial"),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+"),
        Binding("minus", "slower", "Slower", key_display="-"),
        Binding("f", "zoom", "Zoom"),
        Binding("m", "maximise", "Max"),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("r", "summary", "Summary"),  # once the run is over
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),  # ends the run cleanly too
        # Human play: active only while a human-policy trial runs and no dialog is open.
        Binding("up", "human('UP')", "Up", show=False, priority=True),
        Binding("down", "human('DOWN')", "Down", show=False, priority=True),
        Binding("left", "human('LEFT')", "Left", show=False, priority=True),
        Binding("right", "human('RIGHT')", "Right", show=False, priority=True),
        Binding("z", "human('A')", "A", priority=True),
        Binding("x", "human('B')", "B", priority=True),
        Binding("enter", "human('START')", "START", key_display="⏎", priority=True),
        Binding("backspace", "human('SELECT')", "SELECT", key_display="⌫", priority=True),
    ]

    def __init__(self, prepared=None, folder=None, *, speed: float | None = 1.0,
                 sink: ConsoleSink | None = None, start_run: bool = True,
                 clock: Callable[[], float] = time.monotonic, frame_fps: float = 30.0,
                 max_speed_fps: float = 5.0,
                 human_labels: Iterable[str] | None = None, theme: str | None = None,
                 policy_factories: dict | None = None, positions: list[int] | None = None,
                 frame_protocol: str | None = None):
        super().__init__()
        self.frame_protocol = frame_protocol  # "tgp", "sixel" or None (half blocks): see panes.trial.image_frame
        experiment_id = prepared.manifest.experiment_id if prepared is not None else ""
        self.prepared = prepared
        self.folder = folder
        self.sink = sink or ConsoleSink(experiment_id, clock=clock)
        if prepared is not None and sink is None:
            self._preset_sink(prepared)
        self.speed = speed
        self.frame_fps = frame_fps
        # At maximum pace every screen update (~15 ms of Python, under the GIL the run shares) is
        # time taken from the run, and no eye follows 1,000 actions a second: the console then
        # refreshes 5 times a second (frame, trace and all). Paced runs get 30 fps, trace 10 Hz.
        self.max_speed_fps = max_speed_fps
        self.control = RunControl(speed)
        self.human_keys = key_queue()
        self.runner = None
        self.summary: dict | None = None
        self.run_error: str | None = None
        self._quitting = False
        self._run_worker: Worker | None = None
        self.event_loop: asyncio.AbstractEventLoop | None = None
        self.human_labels = _human_labels(prepared, human_labels)
        self._human_active = False
        self._step_from: int | None = None
        self._errors_shown = 0
        if prepared is not None and start_run:
            self._make_runner(prepared, folder, policy_factories, positions)
        self._choose_theme(theme)

    def _preset_sink(self, prepared) -> None:
        """The ladder and the models to blind, known before the run's first event."""
        self.sink.preset_ladder(tuple((m.id, m.name, m.points) for m in prepared.game.milestones),
                                tuple(m.id for m in prepared.game.milestones if not m.required))
        self.sink.blind(c.model for c in prepared.manifest.conditions if c.model)

    def _make_runner(self, prepared, folder, policy_factories: dict | None, positions: list[int] | None) -> None:
        from sessions.execute.runner import ExperimentRunner

        factories = {"human": self._human_policy, **(policy_factories or {})}
        self.runner = ExperimentRunner(prepared, folder, sinks=[self.sink], control=self.control,
                                       policy_factories=factories, positions=positions,
                                       resumed=positions is not None)

    def _choose_theme(self, theme: str | None) -> None:
        """The theme asked for, else the one remembered, else the default (remembered when not asked for)."""
        for t in THEMES.values():
            self.register_theme(t)
        chosen = theme or load_config().get("theme") or DEFAULT_THEME
        self.theme = chosen if chosen in self.available_themes else DEFAULT_THEME
        self._remember_theme = theme is None

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        sink = self.sink
        # The panes pull from the sink; one console tick drives them all, so everything that
        # changed lands in the same screen update (separate timers out of phase would cost a
        # compositor pass each).
        yield StatusBar(sink.status, extras=self._status_extras, interval=None, id="status")
        yield from trial_panes(sink, self.frame_protocol, summary=True)
        yield KeyFooter(SHORT_KEYS, KEY_PRIORITY)

    def on_mount(self) -> None:
        self.event_loop = asyncio.get_running_loop()  # where signal handlers hand their work
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self._panes = (self.query_one(FramePane), self.query_one(TracePane),
                       (self.query_one(StatusBar), self.query_one(BudgetsPane), self.query_one(LadderPane),
                        self.query_one(MemoryPane)))
        self._last_fast = self._last_slow = 0.0
        self._tick_timer = None
        self._schedule_tick(self.speed)
        self.watch(self.screen, "maximized", self._maximized_changed, init=False)
        self._show_folder()
        if self.runner is not None:
            # Start once the first screen is painted: the initial layout never competes with the run.
            self.call_after_refresh(self._start_run)

    def _start_run(self) -> None:
        if self._run_worker is None and not self._quitting:
            self._run_worker = self._run()

    def _frame_rate(self, speed: float | None) -> float:
        if self.runner is None:
            return self.frame_fps
        return self.frame_fps if speed is not None else min(self.frame_fps, self.max_speed_fps)

    def _schedule_tick(self, speed: float | None) -> None:
        rate = self._frame_rate(speed)
        if self._tick_timer is not None:
            if self._tick_rate == rate:
                return
            self._tick_timer.stop()
        self._tick_rate = rate
        self._tick_timer = self.set_interval(1 / rate, self._tick, name="console-tick")

    def _tick(self) -> None:
        """Frame at the tick rate (30 fps, fewer at max pace); trace ~10 Hz; the rest 4 Hz."""
        try:
            self._pull_panes()
        except Exception as exc:  # a display fault must never take the console (and the run) down
            self.sink.note("error", f"display: {type(exc).__name__}: {exc}")

    def _pull_panes(self) -> None:
        frame, trace, slow = self._panes
        frame.pull()
        now = time.monotonic()
        if now - self._last_fast >= 0.095:
            self._last_fast = now
            trace.pull()
        # Tables and meters: 4 Hz when paced; once a second at maximum pace, where each memory
        # table re-render is ~10 ms of Python taken from the run (they share the GIL).
        if now - self._last_slow >= (0.245 if self.control.speed is not None else 0.995):
            self._last_slow = now
            for pane in slow:
                pane.pull()
            self._watch_mode()

    def on_resize(self, event) -> None:
        self.set_class(event.size.height < 40, "-compact")  # dialogs: fewer blank lines
        self.set_class(event.size.height < 28, "-tiny")
        self._show_folder()

    def _show_folder(self) -> None:
        """The folder being written, under the trace (written, once the run is over)."""
        root = getattr(self.folder, "root", None)
        trace = self.query(TracePane)
        if root is None or not trace:
            return
        verb = "written" if self.runner is not None and self.run_done else "writing"
        width = max(12, self.size.width - 8 - len(verb))
        trace.first().border_subtitle = f"{verb} {short_path(root, width)}"

    def _status_extras(self) -> dict:
        return {"speed": self.control.speed, "human": self._human_active}

    def _theme_changed(self, theme: Theme) -> None:
        if self._remember_theme and theme.name in THEMES:
            save_config({"theme": theme.name})

    # -- the run ---------------------------------------------------------------------------
    @work(thread=True, exit_on_error=False, name="run", group="run", description="experiment run")
    def _run(self) -> dict:
        self.summary = self.runner.run()
        return self.summary

    def _human_policy(self, condition, trial_number: int) -> HumanPolicy:
        def should_stop() -> str | None:
            request = self.control.request
            return None if request is None else (request.detail or request.reason)

        return HumanPolicy(self.human_keys, should_stop)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._run_worker:
            return
        state = event.state
        if state == WorkerState.SUCCESS:
            last = self.sink.results[-1].get("termination_reason") if self.sink.results else None
            detail = "operator quit" if self._quitting else "run complete"
            if self.summary is None and self.runner is not None and self.runner.fatal:
                detail = f"the run could not write its final records: {self.runner.fatal}"
            self.sink.mark("finished", detail + (f" (last trial: {last})" if last else ""))
        elif state == WorkerState.ERROR:
            error = event.worker.error
            self.run_error = f"{type(error).__name__}: {error}"
            self.sink.mark("error", "the run failed", error=self.run_error)
            self.sink.note("error", f"run failed: {self.run_error}")
            self.notify(self.sink.redact(self.run_error), title="The run failed", severity="error", timeout=10)
        elif state == WorkerState.CANCELLED:
            self.sink.mark("finished", "cancelled")
        else:
            return
        self.refresh_bindings()
        if self._quitting:
            self.exit(self.exit_status(), return_code=self.exit_status())
            return
        self._show_folder()
        if state == WorkerState.SUCCESS and self.summary is not None:
            self.show_summary(self.summary, list(self.runner.results) if self.runner is not None else [])

    def show_summary(self, summary, results: list) -> None:
        """The summary table the headless printer ends with: above the trace where the layout has
        rows for it, else on a screen of its own (escape closes it, r shows it again)."""
        from app.console.headless import summary_table

        try:
            table = summary_table(summary, results)
        except Exception as exc:  # a display fault must not hide that the run is over
            table = f"(the summary could not be shown: {type(exc).__name__}: {exc})"
        root = getattr(self.folder, "root", None)
        self.query_one(SummaryPane).show_table(self.sink.redact(table) or "", str(root) if root else None)
        self.refresh_bindings()
        trial = self.query_one(TrialPanes)
        trial.relayout()
        if trial.plan is not None and not trial.plan.summary_in_place:
            self.action_summary()

    @property
    def run_done(self) -> bool:
        w = self._run_worker
        if w is None:
            return self.runner is None or self._quitting
        return w.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED)

    def exit_status(self) -> int:
        if self.run_error is not None:
            return 2
        if self.summary is None:
            return 0 if self.runner is None or (self._quitting and self._run_worker is None) else 2
        from sessions.analysis.summary import exit_status

        return exit_status(self.summary)

    def _watch_mode(self) -> None:
        if len(self.sink.handle_errors) > self._errors_shown:
            for error in self.sink.handle_errors[self._errors_shown:]:
                self.sink.note("error", f"display: {error}")
            self._errors_shown = len(self.sink.handle_errors)
        status = self.sink.status()
        if status.state == "stepping" and self._step_from is not None and status.decisions > self._step_from \
                and self.control.paused:
            self._step_from = None
            self.sink.mark("paused")
        human = status.label in self.human_labels and status.state not in ("ended", "finished", "error")
        if human != self._human_active:
            self._human_active = human
            self.refresh_bindings()

    # -- bindings --------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        modal = isinstance(self.screen, ModalScreen)
        if action in ("human", "end_trial", "end_trial_human"):
            return self._check_human_action(action, modal)
        if action in ("pause", "step", "tag") and self.runner is not None and self.run_done:
            return False
        if action in ("faster", "slower") and self.runner is not None and self.run_done:
            return None  # shown greyed once the run is over
        if action in ("zoom", "maximise", "help"):
            return not modal
        if action == "summary":  # shown once there is a summary to show
            return bool(self.query(SummaryPane) and self.query_one(SummaryPane).text) and not modal
        return True

    def _check_human_action(self, action: str, modal: bool) -> bool:
        if action == "human":
            return self._human_active and not modal
        if action == "end_trial":  # x is the B button while a human plays ...
            if self.runner is not None and self.run_done:
                return False  # once the run is over the footer stops offering p, s, t and x
            return not self._human_active
        return self._human_active  # end_trial_human: ... so ctrl+x ends the trial then

    # -- looking closer --------------------------------------------------------------------
    def action_zoom(self) -> None:
        """f: the frame on the whole screen (scaled to fit), then whole pixels (1:1), then back."""
        frame = self.query_one(FramePane)
        zoom = ZOOMS[(ZOOMS.index(frame.zoom) + 1) % len(ZOOMS)] if frame.zoom in ZOOMS else ""
        if zoom:
            self.screen.maximize(frame, container=False)
            frame.set_zoom(zoom)
        else:
            frame.set_zoom("")
            self.screen.minimize()

    def action_maximise(self) -> None:
        """m: the focused pane (the frame when none is) fills the screen; m again restores."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
            return
        target = screen.focused
        if target is None or not target.allow_maximize:
            target = self.query_one(FramePane)
        screen.maximize(target, container=False)

    def _maximized_changed(self, maximized) -> None:
        frame = self.query_one(FramePane)
        if maximized is not frame and frame.zoom:
            frame.set_zoom("")  # escape (or m) restored the layout: the frame unzooms too

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_summary(self) -> None:
        """r: the run's summary on a screen of its own."""
        pane = self.query_one(SummaryPane)
        if pane.text and not isinstance(self.screen, ModalScreen):
            self.push_screen(SummaryScreen(pane.text, pane.where))

    def on_trace_pane_selected(self, event: TracePane.Selected) -> None:
        text = self.sink.redact(detail_text(event.kind, event.payload)) or ""
        self.push_screen(TextScreen("Trace line", text))

    def on_memory_pane_selected(self, event: MemoryPane.Selected) -> None:
        title = f"Memory fact {event.fact.get('fact_id', '')}"
        self.push_screen(TextScreen(title, self.sink.redact(event.text) or ""))

    def action_pause(self) -> None:
        control = self.control
        control.toggle_pause()
        if not control.paused:
            self.sink.mark("running")

    def action_step(self) -> None:
        if not self.control.paused:
            self.notify("Step works while paused (press p first).", timeout=3)
            return
        self._step_from = self.sink.status().decisions
        self.control.step()

    def action_tag(self) -> None:
        if self.runner is None or self.run_done:
            self.notify("No trial is running.", severity="warning", timeout=3)
            return
        # What the operator is looking at now is what the tag is about, however long the typing.
        status = self.sink.status()
        captured = {"trial_key": status.trial_key, "decision_id": status.decisions,
                    "frame_sha256": status.frame_sha256, "frame_index": status.frame_index,
                    "opened_utc": utc_now()}

        def check(tag: dict) -> str | None:
            try:
                self.control.tag({**tag, **captured}, commit=False)
            except (ValueError, LookupError, RuntimeError) as exc:
                return str(exc)
            return None

        def done(tag: dict | None) -> None:
            if tag is None:
                return
            try:
                record = self.control.tag({**tag, **captured})
            except (ValueError, LookupError, RuntimeError) as exc:
                self.notify(f"Not tagged: {exc}", severity="error", timeout=5)
            else:
                self.notify(f"Tagged {record.type} ({record.severity}) at {record.trial_key} decision "
                            f"{record.decision_id}", timeout=3)

        self.push_screen(TagDialog(rubric_types(), status.decisions, status.trial_key, check), done)

    def action_end_trial(self) -> None:
        if self.runner is None or self.run_done:
            self.notify("No trial is running.", severity="warning", timeout=3)
            return
        trial_key = self.sink.status().trial_key
        by_player = self._human_active  # a human player ending their own trial has played it

        def done(reason: str | None) -> None:
            if reason:
                if self.sink.status().trial_key != trial_key:
                    self.notify(f"Trial {trial_key} had already ended.", severity="warning", timeout=4)
                    return
                self.control.end_trial(reason, by_player=by_player)
                self.notify(f"Ending trial {trial_key}: {reason}", timeout=4)

        self.push_screen(EndTrialDialog(trial_key, by_player=by_player), done)

    def action_end_trial_human(self) -> None:
        self.action_end_trial()

    def _set_speed(self, step: int) -> None:
        i = SPEEDS.index(self.control.speed) if self.control.speed in SPEEDS else 0
        speed = SPEEDS[max(0, min(len(SPEEDS) - 1, i + step))]
        self.speed = speed
        self.control.set_speed(speed)
        self._schedule_tick(speed)
        self.query_one(StatusBar).pull()
        self.notify(f"Pace {speed_label(speed)}", timeout=1.5)

    def action_faster(self) -> None:
        self._set_speed(+1)

    def action_slower(self) -> None:
        self._set_speed(-1)

    def action_human(self, action: str) -> None:
        if not offer(self.human_keys, action):
            self.bell()

    async def action_quit(self) -> None:
        """End the run cleanly (evidence complete), then exit once the worker has finished."""
        self.stop_run("operator-quit", "operator quit")

    def stop_run(self, reason: str, detail: str, cause: str | None = None) -> None:
        """Quit or a signal: end the current trial (invalid), start no other, exit when the run is done."""
        if self.runner is None or self._run_worker is None or self.run_done:
            if self.runner is not None and self._run_worker is None:
                self.summary = self.runner.close_unstarted(reason)  # the run never started
            self._quitting = True  # a run not started yet never starts
            self.exit(self.exit_status(), return_code=self.exit_status())
            return
        if self._quitting:
            return
        self._quitting = True
        self.control.stop_run(reason, detail, cause)
        self.sink.mark("quitting", "ending the run cleanly…")

    async def on_unmount(self) -> None:
        # However the app ends, never leave the run thread going (the process would hang).
        if self.runner is not None and not self.run_done:
            self.control.stop_run("operator-quit", "console closed")

    # -- command palette -------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Pause / resume", "Pause or resume at the next decision boundary (p)",
                            self.action_pause)
        yield SystemCommand("Step", "Run exactly one decision while paused (s)", self.action_step)
        yield SystemCommand("Tag a memory error", "Annotate the current decision (t)", self.action_tag)
        yield SystemCommand("End trial", "End the current trial with a reason (x, ctrl+x in human play)",
                            self.action_end_trial)
        yield SystemCommand("Faster", "Pace: 1× → 2× → 4× → max (+)", self.action_faster)
        yield SystemCommand("Slower", "Pace: max → 4× → 2× → 1× (-)", self.action_slower)
        yield SystemCommand("Zoom the frame", "Whole screen, then 1:1 pixels, then back (f)", self.action_zoom)
        yield SystemCommand("Maximise / restore the focused pane", "The frame if none is focused (m)",
                            self.action_maximise)
        yield SystemCommand("Help: keys and legend", "Every key and every glyph the panes draw (?)",
                            self.action_help)
        yield SystemCommand("Quit oakwatch", "End the run cleanly and exit (q)", self.action_quit)
        for name, label in (("gameboy", "Game Boy green"), ("firered", "FireRed red"),
                            ("emerald", "Emerald green")):
            yield SystemCommand(f"Theme: {label}", f"Switch to the {name} theme",
                                lambda n=name: setattr(self, "theme", n))


def run_console(prepared, folder, speed: float | None = 1.0, positions: list[int] | None = None) -> int:
    """Open the console on a prepared experiment; returns the exit status (as headless does).
    SIGINT, SIGTERM and SIGHUP end the run cleanly, like q; a second one exits at once."""
    from app.commands.signals import SignalStop
    from panes.trial.image_frame import frame_protocol

    # Asked now: textual-image queries the terminal, which it cannot once Textual reads stdin.
    app = OakwatchConsole(prepared, folder, speed=speed, positions=positions, frame_protocol=frame_protocol())

    def defer(callback) -> None:
        loop = app.event_loop
        if loop is not None:
            loop.call_soon_threadsafe(callback)
        else:  # the app has not started: nothing is running yet
            callback()

    def on_signal(name: str) -> None:
        app.stop_run("signal", name, f"signal:{name}")

    def restore_terminal() -> None:
        driver = getattr(app, "_driver", None)
        if driver is not None:
            try:
                driver.stop_application_mode()
            except Exception:
                pass

    signals = SignalStop(on_signal, folder.root, defer=defer, on_second=restore_terminal)
    if app.runner is not None:  # the watchdog hears of a signal the stuck loop cannot take
        app.runner.watchdog_options = {"signal_waiting": signals.waiting, "before_exit": restore_terminal}
    signals.install()
    try:
        app.run()
    finally:
        signals.restore()
    if app.return_code not in (None, 0) and app.summary is None:
        return app.return_code
    status = app.exit_status()
    print(f"evidence: {folder.root} (check with: oakwatch verify {folder.root})")
    return status


def _human_labels(prepared, human_labels: Iterable[str] | None) -> frozenset[str]:
    """The labels a human plays: those given, else the prepared run's human conditions."""
    if human_labels is not None:
        return frozenset(human_labels)
    if prepared is not None:
        return frozenset(lab for cid, lab in prepared.labels.items() if prepared.condition(lab).policy == "human")
    return frozenset()
