"""The raw emulator loop every bench baseline is built on: one action straight on PyBoy, no harness.

`play_action` is the press/settle timing the harness uses (engine/emulators/pyboy_backend.py),
on PyBoy's own calls; `raw_press_ms` times each action of a list on its own, for figures that
need a median press (issue 31's MCP row: median call - median ping - median raw press).
"""

from __future__ import annotations

import time
from pathlib import Path

from engine.emulators.emulator import Timing, frame_sha256
from engine.emulators.pyboy_backend import BUTTONS, PyBoyEmulator, _rgb


def play_action(pb, action: str, press: int, settle: int, hashing: bool):
    """One action on the raw PyBoy `pb`; with `hashing`, the harness's frame capture and SHA-256 of
    the settled frame. Returns the captured RGB frame (None without hashing)."""
    if action != "NOOP":
        pb.button_press(BUTTONS[action])
        pb.tick(press, False, False)
        pb.button_release(BUTTONS[action])
    else:
        pb.tick(press, False, False)
    pb.tick(settle - 1, False, False)
    pb.tick(1, True, False)
    if not hashing:
        return None
    rgb = _rgb(pb.screen.ndarray)
    frame_sha256(rgb)
    return rgb


def raw_press_ms(rom: Path, state: bytes, actions: list[str], timing: Timing) -> list[float]:
    """Milliseconds of each action (with frame capture and SHA-256), one after another from the
    start state; constructing and closing the emulator are untimed."""
    emu = PyBoyEmulator(rom)
    pb = emu._pyboy  # the raw emulator, deliberately without our step()
    press, settle = timing.press_frames, timing.settle_frames
    times: list[float] = []
    try:
        emu.restore(state)
        for action in actions:
            started = time.perf_counter()
            play_action(pb, action, press, settle, True)
            times.append((time.perf_counter() - started) * 1000)
        return times
    finally:
        emu.close()
