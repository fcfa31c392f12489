"""A fake emulator, game definition and test policies for fast unit tests of the trial loop.

The fake is a tiny deterministic grid world kept in a bytearray "RAM", driven through the same
`engine.emulators.emulator.Emulator` protocol and the same frame arithmetic as
`engine.emulators.pyboy_backend.PyBoyEmulator.step`: a button goes down at `press_frame`, is held for
`press_frames`, the world settles for `settle_frames`, the probe runs one frame before the capture
frame and again at it. NOOP presses nothing (press_frame -1) but takes the same frames.

The world (8x8 tiles per map, `#` walls on the border):

  map 0 (the room)              map 1 (the yard)
    ########                      ########
    #......#                      #......#
    #......#                      #......#
    #.c@...D  @ start (3,3)       D..k...#  k key (3,3): sets FLAGS bit 0
    #......#  c coin (2,3)        #......#
    #......#  D door (7,3)        #.b...G#  b bell (2,5): FLAGS bit 1, late; G goal (6,5): FLAGS bit 2
    #......#    -> map 1 (1,3)    #......#  D door (0,3) -> map 0 (6,3)
    ########                      ########

The bell's flag is written on the capture frame of the step that reached it, so the probe sees it
qualify on one frame only in that step: the ladder must wait for the next action to award it.
The coin adds 1 to COINS (a progress field, no milestone) once.

The frame is a 16x16 RGB rendering of the RAM (2x2 pixels per tile; wall colour encodes the
flags, coins and map), so identical RAM gives identical frames and frame hashes, and an action
into a wall (or A, B, START, SELECT, NOOP) changes nothing: an ignored input.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

import numpy as np

from engine.emulators.emulator import EmulatorError, ProbeFn, StepResult, Timing, frame_sha256
from engine.games.gamedef import GameDefinition
from engine.loop.events import DecisionRecorded, Event, SinkFailure
from engine.policies.base import contract_json
from engine.policies.policy import Observation, PolicyExhausted, PolicyReply, Usage

BASE = 0xC000  # the fake RAM sits here in the address space
MAGIC, MAP, X, Y, FLAGS, COINS, BELL_TIMER = range(7)  # offsets into RAM
RAM_SIZE = 16
MAGIC_VALUE = 0x4F
TIMING = Timing(press_frames=2, settle_frames=4)  # 6 frames per action

MAPS = (
    ("########",
     "#......#",
     "#......#",
     "#.c....D",
     "#......#",
     "#......#",
     "#......#",
     "########"),
    ("########",
     "#......#",
     "#......#",
     "D..k...#",
     "#......#",
     "#.b...G#",
     "#......#",
     "########"),
)
DOORS = {(0, 7, 3): (1, 1, 3), (1, 0, 3): (0, 6, 3)}
MOVES = {"UP": (0, -1), "DOWN": (0, 1), "LEFT": (-1, 0), "RIGHT": (1, 0)}
BUTTONS = ("UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT")
TILE_COLOURS = {".": (200, 200, 160), "c": (230, 200, 0), "D": (120, 60, 20), "k": (0, 160, 230),
                "b": (180, 0, 180), "G": (0, 200, 0)}
PLAYER_COLOUR = (255, 0, 0)

# Routes from the start (each a list of actions): where the milestones are.
TO_DOOR = ["RIGHT"] * 4  # M1 on the 4th action (map 1 at (1,3))
DOOR_TO_KEY = ["RIGHT"] * 2  # M2 on the 2nd action (the key at (3,3))
KEY_TO_BELL = ["DOWN", "DOWN", "LEFT"]  # the bell at (2,5); M3 one action later (it is late)
BELL_TO_GOAL = ["RIGHT"] * 4  # the goal at (6,5): M4, the final milestone
SQUARE = ["RIGHT", "DOWN", "LEFT", "UP"]  # from the start, back to the start: 4 transitions


def make_state(*, map_id: int = 0, x: int = 3, y: int = 3, flags: int = 0, coins: int = 0,
               magic: int = MAGIC_VALUE, frame_index: int = 1000) -> bytes:
    """A saved state: the frame counter (u32le) and the RAM."""
    ram = bytearray(RAM_SIZE)
    ram[MAGIC], ram[MAP], ram[X], ram[Y], ram[FLAGS], ram[COINS] = magic, map_id, x, y, flags, coins
    return frame_index.to_bytes(4, "little") + bytes(ram)


START_STATE = make_state()


def render(ram: bytes | bytearray) -> np.ndarray:
    """The screen for a RAM: a pure function of the probed state (never of the frame counter)."""
    map_id = ram[MAP] % len(MAPS)
    out = np.zeros((16, 16, 3), np.uint8)
    wall = (40 + ram[FLAGS] * 20 % 200, 40 + ram[COINS] * 60 % 200, 40 + map_id * 100)
    for ty, row in enumerate(MAPS[map_id]):
        for tx, tile in enumerate(row):
            colour = wall if tile == "#" else TILE_COLOURS[tile]
            if tile == "c" and ram[COINS]:
                colour = TILE_COLOURS["."]
            out[ty * 2:ty * 2 + 2, tx * 2:tx * 2 + 2] = colour
    if ram[MAGIC] == MAGIC_VALUE:
        out[ram[Y] % 8 * 2:ram[Y] % 8 * 2 + 2, ram[X] % 8 * 2:ram[X] % 8 * 2 + 2] = PLAYER_COLOUR
    return out


class FakeEmulator:
    """The `engine.emulators.emulator.Emulator` protocol over the grid world. `fail_at_step` (1-based) makes
    that step raise EmulatorError before it changes anything."""

    name = "fake"
    version = "0.1"
    frame_size = (16, 16)

    def __init__(self, fail_at_step: int | None = None):
        self.ram = bytearray(RAM_SIZE)
        self._frame_index = 0
        self.fail_at_step = fail_at_step
        self.steps = 0  # step calls that ran
        self.actions: list[str] = []
        self.restored = 0
        self.closed = False
        self._ticks_left = 0  # frames left in the current step (the bell writes on the last)

    # -- state -----------------------------------------------------------------------
    def restore(self, state: bytes) -> None:
        if len(state) != 4 + RAM_SIZE:
            raise EmulatorError(f"cannot restore state: {len(state)} bytes, expected {4 + RAM_SIZE}")
        self._frame_index = int.from_bytes(state[:4], "little")
        self.ram[:] = state[4:]
        self.restored += 1

    def save_state(self) -> bytes:
        return self._frame_index.to_bytes(4, "little") + bytes(self.ram)

    # -- observation -----------------------------------------------------------------
    def frame(self) -> np.ndarray:
        return render(self.ram)

    @property
    def frame_index(self) -> int:
        return self._frame_index

    def read_range(self, address: int, length: int) -> list[int]:
        start = address - BASE
        if start < 0 or start + length > RAM_SIZE:
            raise EmulatorError(f"read outside the fake RAM: 0x{address:X}+{length}")
        return list(self.ram[start:start + length])

    # -- input -----------------------------------------------------------------------
    def step(self, action: str, timing: Timing, probe: ProbeFn) -> StepResult:
        if self.closed:
            raise EmulatorError("the emulator is closed")
        if action != "NOOP" and action not in BUTTONS:
            raise EmulatorError(f"unknown action {action!r}")
        if self.fail_at_step is not None and self.steps + 1 >= self.fail_at_step:
            raise EmulatorError(f"the fake emulator failed at step {self.steps + 1} ({action})")
        self.steps += 1
        self.actions.append(action)
        press_frame = -1 if action == "NOOP" else self._frame_index
        self._ticks_left = timing.press_frames + timing.settle_frames
        self._tick(action if action != "NOOP" else None)  # the world answers on the first held frame
        for _ in range(timing.press_frames - 1):
            self._tick(None)
        for _ in range(timing.settle_frames - 1):
            self._tick(None)
        before_last = probe(self.read_range)
        self._tick(None)
        last = probe(self.read_range)
        rgb = render(self.ram)
        return StepResult(rgb, frame_sha256(rgb), self._frame_index, press_frame, before_last, last)

    def _tick(self, button: str | None) -> None:
        self._frame_index += 1
        self._ticks_left -= 1
        ram = self.ram
        if ram[BELL_TIMER]:
            ram[BELL_TIMER] -= 1
            if not ram[BELL_TIMER]:
                ram[FLAGS] |= 0b10
        if button not in MOVES or ram[MAGIC] != MAGIC_VALUE:
            return
        dx, dy = MOVES[button]
        map_id, x, y = ram[MAP], ram[X] + dx, ram[Y] + dy
        if not (0 <= x < 8 and 0 <= y < 8):
            return
        tile = MAPS[map_id][y][x]
        if tile == "#":
            return
        if tile == "D":
            map_id, x, y = DOORS[(map_id, x, y)]
            tile = MAPS[map_id][y][x]
        ram[MAP], ram[X], ram[Y] = map_id, x, y
        if tile == "c" and not ram[COINS]:
            ram[COINS] = 1
        elif tile == "k":
            ram[FLAGS] |= 0b1
        elif tile == "G":
            ram[FLAGS] |= 0b100
        elif tile == "b" and not ram[FLAGS] & 0b10:
            ram[BELL_TIMER] = self._ticks_left  # written on this step's capture frame

    def close(self) -> None:
        self.closed = True


GAME = GameDefinition.model_validate({
    "id": "fake-grid", "title": "Fake grid world", "platform": "gb",
    "fields": {
        "magic": {"address": BASE + MAGIC}, "map_id": {"address": BASE + MAP},
        "x": {"address": BASE + X}, "y": {"address": BASE + Y},
        "flags": {"address": BASE + FLAGS}, "coins": {"address": BASE + COINS},
    },
    "ready": [{"field": "magic", "eq": MAGIC_VALUE}],
    "position": {"map": "map_id", "x": "x", "y": "y"},
    "progress_fields": ["flags", "coins"],
    "milestones": [
        {"id": "M1", "name": "Left the room", "points": 1, "all": [{"field": "map_id", "eq": 1}]},
        {"id": "M2", "name": "Key found", "points": 2, "all": [{"field": "flags", "bit_set": 0}]},
        {"id": "M3", "name": "Bell rung", "points": 3, "all": [{"field": "flags", "bit_set": 1}]},
        {"id": "M4", "name": "Goal reached", "points": 4, "all": [{"field": "flags", "bit_set": 2}]},
    ],
})


# -- policies ------------------------------------------------------------------------------------

def valid(actions: Sequence[str], **kw) -> str:
    """A well-formed contract response carrying `actions`."""
    return contract_json(list(actions), summary="test", **kw)


Reply = str | list[str] | BaseException | Callable[[Observation], "str | list[str]"]


class FakePolicy:
    """Answers each call with the next scripted reply: a list of actions (a valid response), a raw
    text (exactly as given), an exception instance (raised), or a callable of the observation.
    When the replies run out it raises PolicyExhausted.

    paid: a model policy (its calls cost money); usage: the Usage each answered call reports
    (default: 10+5 tokens at $0.01 when paid, None when not); delay: seconds each call takes (a
    cancellable sleep; a sequence gives one per call, its last repeating); on_call: called with the
    observation as each call starts."""

    name = "fake"

    def __init__(self, replies: Sequence[Reply], *, paid: bool = False, usage: Usage | None = None,
                 delay: float | Sequence[float] = 0.0, on_call: Callable[[Observation], None] | None = None,
                 model_id: str | None = None):
        self.replies = list(replies)
        self.paid = paid
        self.model_id = model_id or ("fake-model" if paid else None)
        self.usage = usage if usage is not None or not paid else Usage(
            input_tokens=10, output_tokens=5, cached_tokens=0, cost_usd=0.01, cost_source="provider")
        self.delay = delay
        self.on_call = on_call
        self.observations: list[Observation] = []
        self.calls = 0
        self.cancelled = 0
        self.closed = False
        self.started = threading.Event()  # set as a call begins (for tests driving control from a thread)

    async def decide(self, observation: Observation) -> PolicyReply:
        self.calls += 1
        self.observations.append(observation)
        if self.on_call is not None:
            self.on_call(observation)
        self.started.set()
        delay = self.delay if isinstance(self.delay, int | float) else \
            self.delay[min(self.calls, len(self.delay)) - 1]
        if delay:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if not self.replies:
            raise PolicyExhausted("the fake policy has no replies left")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(observation)
        text = valid(reply) if isinstance(reply, list) else reply
        return PolicyReply(text=text, model_id=self.model_id, response_id=f"r{self.calls}" if self.paid else None,
                           usage=self.usage, latency_ms=1.0 if self.paid else None)

    def close(self) -> None:
        self.closed = True


# -- sinks ---------------------------------------------------------------------------------------

class ListSink:
    """Collects every event; lets a test thread wait for the loop to reach a point."""

    wants_budgets = wants_frames = wants_memory_store = True  # like a live display: every event

    def __init__(self):
        self.events: list[Event] = []
        self._cond = threading.Condition()

    def handle(self, event: Event) -> None:
        with self._cond:
            self.events.append(event)
            self._cond.notify_all()

    def of(self, kind: type) -> list:
        with self._cond:
            return [e for e in self.events if isinstance(e, kind)]

    @property
    def decisions(self) -> list[DecisionRecorded]:
        return self.of(DecisionRecorded)

    def wait_for(self, test: Callable[[ListSink], bool], timeout: float = 5.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: test(self), timeout):
                raise AssertionError("timed out waiting for the trial loop")


class FailingSink:
    """A recorder that fails (SinkFailure) when asked to commit decision `at_decision`."""

    def __init__(self, at_decision: int, cause: str = "disk-full"):
        self.at_decision = at_decision
        self.cause = cause

    def handle(self, event: Event) -> None:
        if isinstance(event, DecisionRecorded) and event.trace.decision_id == self.at_decision:
            raise SinkFailure(f"no space left writing decision {self.at_decision}", self.cause)
