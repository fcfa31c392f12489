"""Making a canonical start state: power on, run a fixed number of frames with no input, save.

Deterministic: the same ROM, emulator backend and version, and frame count give the same bytes.
A state is the backend's own (a PyBoy state does not load in mGBA): a manifest lists one per
backend under game.start_states.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from engine.emulators.backends import backend
from engine.emulators.emulator import frame_sha256
from engine.emulators.romheader import platform_of


def make_start_state(rom: Path | bytes, boot_frames: int, emulator: str = "pyboy",
                     platform: str | None = None) -> tuple[bytes, str]:
    """Return (state bytes, SHA-256 of the first frame seen after restoring it in a fresh emulator)."""
    data = rom if isinstance(rom, bytes) else rom.read_bytes()
    name = None if isinstance(rom, bytes) else str(rom)
    chosen = backend(emulator)
    platform = platform or platform_of(data) or "gb"
    machine = chosen.open(data, name, platform)
    try:
        machine.boot(boot_frames)
        state = machine.save_state()
    finally:
        machine.close()
    check = chosen.open(data, name, platform)
    try:
        check.restore(state)
        first = frame_sha256(check.frame())
    finally:
        check.close()
    return state, first


def write_start_state(rom: Path, boot_frames: int, output: Path, emulator: str | None = None) -> dict:
    """`emulator` None: mGBA for a Game Boy Advance ROM, PyBoy otherwise."""
    data = rom.read_bytes()
    platform = platform_of(data) or "gb"
    emulator = emulator or ("mgba" if platform == "gba" else "pyboy")
    version = backend(emulator).require()
    state, first = make_start_state(data, boot_frames, emulator, platform)
    output.write_bytes(state)
    return {"state": str(output), "state_sha256": hashlib.sha256(state).hexdigest(),
            "first_frame_sha256": first, "rom_sha256": hashlib.sha256(data).hexdigest(),
            "boot_frames": boot_frames, "emulator": emulator, "emulator_version": version, "platform": platform}
