"""The open GBA cartridge, Parcel Quest Advance (FireRed layout), through the whole harness on real
mGBA and the UNCHANGED FireRed definition: shared, read-only fixtures (copy a folder before changing it)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing
from engine.games.probe import Probe
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition

CART = ASSETS / "gba-cartridge"
ROM = CART / "parcel-quest-advance.gba"
STATE = CART / "parcel-quest-advance.mgba.state"
START = yaml.safe_load((CART / "start.yaml").read_text()) if (CART / "start.yaml").is_file() else {}
WALKTHROUGH = CART / "walkthrough.txt"
FIRERED = ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml"
DRY_RUN = ASSETS / "experiments" / "parcel-quest-advance-dry-run.yaml"
MCP = ASSETS / "experiments" / "parcel-quest-advance-mcp.yaml"
TIMING = Timing(START.get("press_frames", 4), START.get("settle_frames", 12))
ROOT = Path(__file__).resolve().parents[2]
# where FireRed keeps them in SaveBlock1 (pret/pokefirered include/global.h), as the definition reads them
KEY_POCKET, FLAGS, FLAG_BYTES = 0x3B8, 0xEE0, 288

needs_mgba = pytest.mark.skipif(
    BACKENDS["mgba"].version() is None or not ROM.is_file(),
    reason=BACKENDS["mgba"].missing_message() if BACKENDS["mgba"].version() is None else f"no {ROM.name} yet")


@pytest.fixture(scope="module")
def machine():
    """One mGBA on the FireRed build per test module (each test restores the state it starts from)."""
    emu = BACKENDS["mgba"].open(ROM.read_bytes(), str(ROM), "gba")
    yield emu
    emu.close()


def oakwatch(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="session")
def gba_dry_run(tmp_path_factory):
    """`oakwatch run bundled:parcel-quest-advance-dry-run.yaml --headless`, once: (folder, completed process)."""
    out = tmp_path_factory.mktemp("gba") / "exp"
    done = oakwatch("run", "bundled:parcel-quest-advance-dry-run.yaml", "--headless", "--output", out)
    return out, done


@dataclass
class Step:
    action: str
    sample: dict  # the probe's sample at the capture frame (through the definition's pointers)
    reached: list[str]  # rungs held on this sample
    key_pocket: bytes  # SaveBlock1's key-items pocket as stored (30 x u16 id, u16 quantity XOR key)
    flags_at: dict[int, bytes]  # the flags array as stored at these save-block 1 addresses (this and the last)


@pytest.fixture(scope="session")
def walk() -> list[Step]:
    """The walkthrough played on mGBA from the bundled start state, with the FireRed definition's own
    probe sampled after every action (what the trial loop sees at each decision)."""
    game = load_game_definition(FIRERED)
    probe = Probe(game)
    emu = BACKENDS["mgba"].open(ROM.read_bytes(), str(ROM), "gba")
    try:
        emu.restore(STATE.read_bytes())

        def step(action: str, sample: dict, last_sb1: int) -> Step:
            sb1 = sample["sb1"]
            return Step(action, sample, [m.id for m in game.milestones if m.holds(sample)],
                        bytes(emu.read_range(sb1 + KEY_POCKET, 30 * 4)),
                        {a: bytes(emu.read_range(a + FLAGS, FLAG_BYTES)) for a in {sb1, last_sb1}})

        first = probe(emu.read_range)
        steps = [step("(start)", first, first["sb1"])]
        for action in parse_script(WALKTHROUGH.read_text(), WALKTHROUGH.name):
            sample = emu.step(action, TIMING, probe).ram_last
            steps.append(step(action, sample, steps[-1].sample["sb1"]))
    finally:
        emu.close()
    return steps
