"""Making a canonical start state: power on, run a fixed number of frames with no input, save.

Deterministic: the same ROM, emulator version and frame count give the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.emulator import frame_sha256
from engine.pyboy_backend import PyBoyEmulator


def make_start_state(rom: Path, boot_frames: int) -> tuple[bytes, str]:
    """Return (state bytes, SHA-256 of the first frame seen after restoring it)."""
    emulator = PyBoyEmulator(rom)
    try:
        emulator.boot(boot_frames)
        state = emulator.save_state()
    finally:
        emulator.close()
    check = PyBoyEmulator(rom)
    try:
        check.restore(state)
        first = frame_sha256(check.frame())
    finally:
        check.close()
    return state, first


def write_start_state(rom: Path, boot_frames: int, output: Path) -> dict:
    state, first = make_start_state(rom, boot_frames)
    output.write_bytes(state)
    return {"state": str(output), "state_sha256": hashlib.sha256(state).hexdigest(),
            "first_frame_sha256": first, "rom_sha256": hashlib.sha256(rom.read_bytes()).hexdigest(),
            "boot_frames": boot_frames}
