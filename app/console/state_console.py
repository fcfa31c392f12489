"""The small console of `oakwatch state new` with no --inputs: play to the start point, then save.

Every press is one action with the experiment's fixed timing, recorded in order; saving returns
the recorded prefix, and sessions.preflight.statemaker rebuilds the state from it headlessly, so what is
written is exactly what the prefix makes. Nothing is written until the operator saves.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from engine.emulators.backends import backend
from engine.emulators.emulator import Timing, frame_sha256
from panes.trial.frame import FramePane
from sessions.preflight.statemaker import Setup


@dataclass
class Snapshot:
    frame: object
    decision_id: int
    frame_sha256: str
    frame_index: int
    version: int


class StateConsole(App[list[str] | None]):
    """Returns the recorded actions when the operator saves, None when they quit."""

    TITLE = "oakwatch state new"
    AUTO_FOCUS = None
    BINDINGS = [
        Binding("up", "press('UP')", "Up", show=False), Binding("down", "press('DOWN')", "Down", show=False),
        Binding("left", "press('LEFT')", "Left", show=False), Binding("right", "press('RIGHT')", "Right", show=False),
        Binding("z", "press('A')", "A"), Binding("x", "press('B')", "B"),
        Binding("enter", "press('START')", "START", key_display="⏎"),
        Binding("backspace", "press('SELECT')", "SELECT", key_display="⌫"),
        Binding("n", "press('NOOP')", "Wait"),
        Binding("ctrl+s", "save", "Save state here"),
        Binding("ctrl+q", "quit_unsaved", "Quit, save nothing"),
    ]

    def __init__(self, setup: Setup, boot_frames: int, timing: Timing):
        super().__init__()
        self.setup = setup
        self.timing = timing
        self.actions: list[str] = []
        self._machine = backend(setup.emulator).open(setup.rom, str(setup.rom_path), setup.game.platform)
        self._machine.boot(boot_frames)
        self._snap = self._snapshot()

    def _snapshot(self) -> Snapshot:
        frame = self._machine.frame()
        return Snapshot(frame, len(self.actions), frame_sha256(frame), self._machine.frame_index, len(self.actions))

    def compose(self) -> ComposeResult:
        yield FramePane(lambda: self._snap, fps=30)
        yield Static(f"{self.setup.game.title} on {self.setup.emulator}: play to the start point, then "
                     "ctrl+s. Arrows, z=A, x=B, enter=START, backspace=SELECT, n=wait one action.",
                     id="state-help")
        yield Footer()

    def action_press(self, action: str) -> None:
        self._machine.step(action, self.timing, lambda read_range: {})
        self.actions.append(action)
        self._snap = self._snapshot()

    def action_save(self) -> None:
        self.exit(list(self.actions))

    def action_quit_unsaved(self) -> None:
        self.exit(None)

    def on_unmount(self) -> None:
        self._machine.close()
