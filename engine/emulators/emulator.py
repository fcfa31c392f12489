"""The emulator interface the trial loop drives, independent of any one emulator."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from engine.frozen import quick_frozen


class EmulatorError(RuntimeError):
    """The emulator failed or reached a state it cannot continue from."""


def frame_sha256(rgb: np.ndarray) -> str:
    """SHA-256 of the raw RGB pixels, row-major, 3 bytes per pixel."""
    return hashlib.sha256(np.ascontiguousarray(rgb).data).hexdigest()


@dataclass(frozen=True)
class Timing:
    """Fixed controller timing: every action is held and settled for the same frame counts."""

    press_frames: int
    settle_frames: int

    def __post_init__(self) -> None:
        if self.press_frames < 1 or self.settle_frames < 2:
            raise ValueError("press_frames must be >= 1 and settle_frames >= 2")

    @property
    def frames_per_action(self) -> int:
        return self.press_frames + self.settle_frames


@quick_frozen  # made every decision (engine.frozen)
@dataclass(frozen=True)
class StepResult:
    """What one action produced: the settled frame and the probe's last two samples."""

    frame: np.ndarray  # (H, W, 3) uint8, a copy owned by the caller
    frame_sha256: str
    frame_index: int  # emulator frame number at which the frame was captured
    press_frame: int  # frame number at which the button went down (None-like -1 for NOOP)
    ram_before_last: dict[str, int]  # probe one frame before capture
    ram_last: dict[str, int]  # probe at the capture frame


class Emulator(Protocol):
    name: str
    version: str
    frame_size: tuple[int, int]

    def restore(self, state: bytes) -> None: ...

    def frame(self) -> np.ndarray: ...

    @property
    def frame_index(self) -> int: ...

    def read_range(self, address: int, length: int) -> Sequence[int]: ...

    # RAM writes (the battle ruleset's apply_team: engine.battle.battle), recorded in the trace and replayed;
    # EmulatorError where the backend cannot write.
    def write(self, address: int, data: bytes) -> None: ...

    def step(self, action: str, timing: Timing, probe: ProbeFn) -> StepResult: ...

    def close(self) -> None: ...


class ProbeFn(Protocol):
    def __call__(self, read_range: ReadRangeFn) -> dict[str, int]: ...


class ReadRangeFn(Protocol):
    def __call__(self, address: int, length: int) -> Sequence[int]: ...
