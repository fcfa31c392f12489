"""Driver for the Parcel Quest cartridge tests: boot to the canonical start, apply actions with the
harness timing (press 4 frames, release, settle 12 frames; NOOP = 16 frames without input)."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from pyboy import PyBoy

from engine.loop.script import parse_script

CART = Path(__file__).resolve().parents[2] / "assets" / "cartridge"
ROM = CART / "parcel-quest.gb"
START = yaml.safe_load((CART / "start.yaml").read_text(encoding="utf-8"))
PRESS = int(START["press_frames"])
SETTLE = int(START["settle_frames"])
BOOT = int(START["boot_frames"])

# fixed WRAM addresses (RAM.md)
MAGIC, MAP, X, Y, FACING = 0xD000, 0xD001, 0xD002, 0xD003, 0xD004
FLAGS0, FLAGS1, BAG_COUNT, BAG = 0xD005, 0xD006, 0xD007, 0xD008
PARTY_COUNT, BATTLE, TEXT, MENU = 0xD010, 0xD014, 0xD017, 0xD018
FRAMES = range(0xD01C, 0xD020)
PARCEL, DEX = 0x01, 0x02


def boot(rom: Path = ROM) -> PyBoy:
    """A PyBoy at the canonical start: BOOT frames after power-on, no input."""
    pb = PyBoy(str(rom), window="null", sound_emulated=False)
    pb.set_emulation_speed(0)
    pb.tick(BOOT - 1, False)
    pb.tick(1, True)
    return pb


def act(pb: PyBoy, action: str) -> None:
    """One harness action: press for PRESS frames, release, settle SETTLE frames."""
    if action == "NOOP":
        pb.tick(PRESS + SETTLE - 1, False)
    else:
        button = action.lower()
        pb.button_press(button)
        pb.tick(PRESS, False)
        pb.button_release(button)
        pb.tick(SETTLE - 1, False)
    pb.tick(1, True)


def frame_hash(pb: PyBoy) -> str:
    return hashlib.sha256(pb.screen.ndarray[:, :, :3].tobytes()).hexdigest()


def state(pb: PyBoy, lo: int = 0xD000, hi: int = 0xD100) -> bytes:
    """Game RAM 0xD000..0xD0FF without the frame counter."""
    return bytes(0 if a in FRAMES else pb.memory[a] for a in range(lo, hi))


def bag(pb: PyBoy) -> list[int]:
    return [pb.memory[BAG + i] for i in range(pb.memory[BAG_COUNT])]


def screen_rows(pb: PyBoy) -> list[bytes]:
    """The 20x18 visible background tile indices (SCX = SCY = 0, map at 0x9800)."""
    return [bytes(pb.memory[0x9800 + r * 32 + c] for c in range(20)) for r in range(18)]


def save(pb: PyBoy) -> io.BytesIO:
    buf = io.BytesIO()
    pb.save_state(buf)
    buf.seek(0)
    return buf


def restore(pb: PyBoy, buf: io.BytesIO) -> None:
    buf.seek(0)
    pb.load_state(buf)


def walkthrough() -> list[str]:
    return parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8"), "walkthrough.txt")


@dataclass
class Step:
    action: str
    hash: str
    ram: bytes  # 0xD000..0xD0FF, frame counter zeroed

    def __getitem__(self, addr: int) -> int:
        return self.ram[addr - 0xD000]

    @property
    def bag(self) -> list[int]:
        return list(self.ram[BAG - 0xD000 : BAG - 0xD000 + self[BAG_COUNT]])


def run_walkthrough(actions: list[str]) -> list[Step]:
    pb = boot()
    try:
        steps = [Step("START", frame_hash(pb), state(pb))]
        for a in actions:
            act(pb, a)
            steps.append(Step(a, frame_hash(pb), state(pb)))
        return steps
    finally:
        pb.stop(save=False)


@pytest.fixture
def cart():
    """A PyBoy at the canonical start of Parcel Quest."""
    pb = boot()
    yield pb
    pb.stop(save=False)


@pytest.fixture(scope="session")
def walkthrough_trace() -> list[Step]:
    """The walkthrough played once: the state after the canonical start and after every action."""
    return run_walkthrough(walkthrough())
