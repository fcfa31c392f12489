"""PyBoy (Game Boy / Game Boy Color) implementation of the emulator interface.

Headless, sound off, no battery file: the agent cannot save or load anything; only the
harness restores the canonical state, before a trial starts.
"""

from __future__ import annotations

import io
import logging
import sys
import warnings
from importlib.metadata import version as _dist_version
from pathlib import Path

import numpy as np

from engine.emulators.emulator import EmulatorError, ProbeFn, StepResult, Timing, frame_sha256

BUTTONS = {"UP": "up", "DOWN": "down", "LEFT": "left", "RIGHT": "right",
           "A": "a", "B": "b", "START": "start", "SELECT": "select"}

PYBOY_VERSION = _dist_version("pyboy")
BLANK_SRAM = 16 * 8 * 1024  # sixteen 8 KiB banks: PyBoy reads as many as the cartridge has


def _import_pyboy():
    """PyBoy, imported without SDL2. Its window plugins import SDL2 when present (~0.2 s and a
    warning) although a headless emulator never opens a window; they fall back cleanly when the
    import fails, so SDL2 is hidden for the duration of PyBoy's own import."""
    if "pyboy" in sys.modules:
        from pyboy import PyBoy

        return PyBoy
    hide = "sdl2" not in sys.modules
    if hide:
        sys.modules["sdl2"] = None  # `import sdl2` now raises ImportError
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            from pyboy import PyBoy
    finally:
        if hide:
            del sys.modules["sdl2"]
    return PyBoy


def _rgb(rgba: np.ndarray) -> np.ndarray:
    """A contiguous RGB copy of PyBoy's RGBA screen; per-channel copies are 4x faster than [:, :, :3].copy()."""
    out = np.empty(rgba.shape[:2] + (3,), np.uint8)
    out[..., 0] = rgba[..., 0]
    out[..., 1] = rgba[..., 1]
    out[..., 2] = rgba[..., 2]
    return out


class PyBoyEmulator:
    name = "pyboy"
    version = PYBOY_VERSION
    frame_size = (160, 144)

    def __init__(self, rom: bytes | str | Path, name: str | None = None):
        """`rom`: the cartridge's bytes (what the harness hashed: nothing re-reads the file, which
        could have changed since) or a path; `name` says which ROM in messages."""
        PyBoy = _import_pyboy()

        logging.getLogger("pyboy").setLevel(logging.ERROR)
        source = io.BytesIO(rom) if isinstance(rom, bytes | bytearray) else str(rom)
        where = name or ("the ROM" if isinstance(source, io.BytesIO) else source)
        try:
            # A RAM file of zeros (a blank battery save, the largest any cartridge has) keeps PyBoy
            # from reading or writing a .ram beside the ROM, and gives every trial the same SRAM.
            self._pyboy = PyBoy(source, window="null", sound_emulated=False,
                                ram_file=io.BytesIO(bytes(BLANK_SRAM)), log_level="ERROR")
        except Exception as exc:  # PyBoy raises bare Exceptions for bad cartridges
            raise EmulatorError(f"{where}: PyBoy cannot load this ROM ({exc})") from exc
        self._pyboy.set_emulation_speed(0)
        self._memory = self._pyboy.memory
        self._screen = self._pyboy.screen

    # -- state -----------------------------------------------------------------------
    def boot(self, frames: int) -> None:
        """Run from power-on with no input (used to make the canonical start state)."""
        self._pyboy.tick(frames, True, False)

    def save_state(self) -> bytes:
        buf = io.BytesIO()
        self._pyboy.save_state(buf)
        return buf.getvalue()

    def restore(self, state: bytes) -> None:
        try:
            self._pyboy.load_state(io.BytesIO(state))
        except Exception as exc:
            raise EmulatorError(f"cannot restore state ({exc})") from exc
        # The screen buffer is not part of the state: render one frame's worth by re-running
        # nothing; callers read frame() which PyBoy restores from the state's LCD snapshot.

    # -- observation ---------------------------------------------------------------------
    def frame(self) -> np.ndarray:
        return _rgb(self._screen.ndarray)

    @property
    def frame_index(self) -> int:
        return int(self._pyboy.frame_count)

    def read_range(self, address: int, length: int) -> list[int]:
        return self._memory[address:address + length]

    def write(self, address: int, data: bytes) -> None:
        """Bus writes (pyboy.memory[addr] = value), byte by byte: no emulation runs."""
        if not (0 <= address and address + len(data) <= 0x10000):
            raise EmulatorError(f"write at {address:#x}: outside the Game Boy's address space")
        for i, value in enumerate(data):
            self._memory[address + i] = value

    # -- input -------------------------------------------------------------------------
    def step(self, action: str, timing: Timing, probe: ProbeFn) -> StepResult:
        """Hold one button for press_frames, settle, probe the last two frames, capture."""
        pb = self._pyboy
        press_frame = -1
        try:
            if action != "NOOP":
                button = BUTTONS[action]
                press_frame = pb.frame_count
                pb.button_press(button)
                pb.tick(timing.press_frames, False, False)
                pb.button_release(button)
            else:
                pb.tick(timing.press_frames, False, False)
            pb.tick(timing.settle_frames - 1, False, False)
            before_last = probe(self.read_range)
            pb.tick(1, True, False)
        except KeyError:
            raise EmulatorError(f"unknown action {action!r}") from None
        except Exception as exc:
            raise EmulatorError(f"emulator failed during {action}: {exc}") from exc
        last = probe(self.read_range)
        rgb = _rgb(self._screen.ndarray)
        return StepResult(rgb, frame_sha256(rgb), pb.frame_count, press_frame, before_last, last)

    def close(self) -> None:
        try:
            self._pyboy.stop(save=False)
        except Exception:  # closing a broken emulator must not mask the original error
            pass
