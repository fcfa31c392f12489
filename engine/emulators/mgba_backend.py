"""mGBA (Game Boy Advance, Game Boy, Game Boy Color) implementation of the emulator interface.

Package `mgba` 0.10.2 (its cp311 wheel, over Debian's libmgba0.10). What this module guarantees,
like engine.emulators.pyboy_backend:

* the ROM is loaded from the bytes the harness hashed (an in-memory file): nothing re-reads the
  ROM file, and no battery save (.sav) is looked for, read or written beside it (mGBA only loads
  one when asked to: we never call `autoload_save`; the cartridge's save RAM lives in memory);
* no BIOS file (mGBA's built-in boot: the same on every machine), no SGB border (a Game Boy
  frame is 160x144), no audio output (samples are produced into a buffer nobody reads), mGBA's
  log silenced;
* the real-time clock is pinned (RTC_FIXED, see `rtc_seconds`), so a game that reads it
  (Emerald, Gold/Silver/Crystal) sees the same time on every run and replay;
* fixed input timing exactly as PyBoyEmulator.step: the button held for press_frames, then
  settle_frames with no input, the probe sampled one frame before the capture and at it;
* the frame after `restore` is drawn from the state alone (see `restore`);
* `frame_index` counts the frames this emulator ran since it was created (restoring a state does
  not change it), as PyBoy's frame_count does.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Sequence
from importlib.metadata import version as _dist_version

import numpy as np

from engine.emulators.emulator import EmulatorError, ProbeFn, StepResult, Timing, frame_sha256

FRAME_SIZES = {"gb": (160, 144), "gbc": (160, 144), "gba": (240, 160)}

# The pinned clock: 2005-05-01 12:00:00 (Emerald's North American release). A GBA cartridge clock
# is read by mGBA through localtime(), so for GBA the value is the local time whose calendar
# fields are these (the game reads 2005-05-01 12:00:00 in every time zone); a Game Boy MBC3 clock
# counts seconds since its last latch, so for GB/GBC it is the same instant in UTC.
# Settings that change what is emulated, from a fresh configuration (no user config file is read).
CONFIG = {"sgb.borders": 0, "skipBios": 1, "useBios": 0}

RTC_FIELDS = (2005, 5, 1, 12, 0, 0)


def rtc_seconds(platform: str) -> int:
    """The Unix time mGBA's clock returns, always, on this platform."""
    if platform == "gba":
        return int(time.mktime((*RTC_FIELDS, 0, 0, -1)))
    return calendar.timegm((*RTC_FIELDS, 0, 0, 0))


_callbacks_ready = False


def ready_python_callbacks() -> None:
    """Call before a process runs its first mGBA frame. mGBA's binding calls back into Python at
    every frame's end, and the first such call initialises cffi's embedding behind a spin lock that
    CPython 3.11 keeps in PyCapsule_Type.tp_version_tag (cffi/_embedding.h). Any attribute lookup on
    a capsule's type gives that type a version tag, and then the spin lock never opens: the first
    frame hangs forever (seen under pytest with trio imported). PyType_Modified() drops the tag."""
    global _callbacks_ready
    if _callbacks_ready:
        return
    import ctypes
    import datetime
    import sys

    if sys.version_info < (3, 12):  # from 3.12 cffi locks on tp_as_buffer, which nothing sets
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(type(datetime.datetime_CAPI)))
    _callbacks_ready = True


def mgba_version() -> str:
    """The installed binding's version; ImportError (or OSError) if it or libmgba is missing."""
    import mgba  # noqa: F401  (loads the binding and libmgba)

    return _dist_version("mgba")


def _platform_of(core, lib) -> str | None:
    p = core.platform(core)
    if p == getattr(lib, "mPLATFORM_GBA", None):
        return "gba"
    if p == getattr(lib, "mPLATFORM_GB", None):
        return "gb"
    return None


class MGBAEmulator:
    name = "mgba"

    def __init__(self, rom: bytes, name: str | None = None, platform: str = "gb"):
        """`rom`: the cartridge's bytes; `name` says which ROM in messages; `platform`: gb, gbc or gba
        (the game definition's; a ROM of the other family is refused)."""
        import mgba.log
        from mgba._pylib import ffi, lib

        where = name or "the ROM"
        if platform not in FRAME_SIZES:
            raise EmulatorError(f"mGBA runs gb, gbc and gba games, not {platform!r}")
        mgba.log.silence()
        self.version = _dist_version("mgba")
        self._ffi, self._lib = ffi, lib
        core = self._load(bytes(rom), where, platform)
        self._set_up_video(core, where, platform)
        core.reset()
        self._pin_clock(core)
        self._bind(core, platform)

    def _load(self, data: bytes, where: str, platform: str):
        """A core with the ROM loaded, once mGBA recognises it as a ROM of the game's platform family."""
        import mgba.core

        ffi, lib = self._ffi, self._lib
        if not data:
            raise EmulatorError(f"{where}: mGBA cannot load this ROM (empty)")
        # The bytes stay alive as long as the core: mGBA reads the ROM from this buffer.
        self._rom = ffi.new("uint8_t[]", data)
        vf = lib.VFileFromConstMemory(self._rom, len(data))
        native = lib.mCoreFindVF(vf) if vf != ffi.NULL else ffi.NULL
        if native == ffi.NULL:
            if vf != ffi.NULL:
                vf.close(vf)
            raise EmulatorError(f"{where}: mGBA cannot load this ROM (not a Game Boy or Game Boy Advance ROM "
                                "it recognises)")
        core = mgba.core.Core._init(native)
        found = _platform_of(native, lib)
        family = "gba" if platform == "gba" else "gb"
        if found != family:
            vf.close(vf)
            raise EmulatorError(f"{where}: mGBA reads a {found or 'unknown'} ROM, but the game is for {platform}")
        if not core._core.loadROM(core._core, vf):
            vf.close(vf)
            raise EmulatorError(f"{where}: mGBA cannot load this ROM")
        return core

    def _set_up_video(self, core, where: str, platform: str) -> None:
        """The frame-changing settings, and the video buffer the frames are read from (sized as checked)."""
        import mgba.core
        import mgba.image

        # Settings that change frames, from a fresh configuration (no user config file is read).
        self._config = mgba.core.Config(defaults=CONFIG)  # the core keeps pointers into it: kept alive
        core.load_config(self._config)
        width, height = core.desired_video_dimensions()
        if (width, height) != FRAME_SIZES[platform]:
            raise EmulatorError(f"{where}: mGBA draws {width}x{height} frames, expected "
                                f"{FRAME_SIZES[platform][0]}x{FRAME_SIZES[platform][1]} for {platform}")
        self.frame_size = (width, height)
        self.platform = platform
        # The renderer is attached at reset only if a video buffer is set: set it first.
        self._image = mgba.image.Image(width, height)
        core.set_video_buffer(self._image)
        self._pixels = np.frombuffer(self._ffi.buffer(self._image.buffer), np.uint8).reshape(
            height, self._image.stride, 4)[:, :width]

    def _bind(self, core, platform: str) -> None:
        """The core's calls and tables each step uses, looked up once."""
        self._core = core
        self._native = core._core
        self._run = self._native.runFrame
        self._set_keys = self._native.setKeys
        self._bus_read = self._native.busRead8
        self._keys = {"UP": 1 << core.KEY_UP, "DOWN": 1 << core.KEY_DOWN, "LEFT": 1 << core.KEY_LEFT,
                      "RIGHT": 1 << core.KEY_RIGHT, "A": 1 << core.KEY_A, "B": 1 << core.KEY_B,
                      "START": 1 << core.KEY_START, "SELECT": 1 << core.KEY_SELECT}
        self._space = 1 << 32 if platform == "gba" else 1 << 16
        self._direct = self._ram_blocks() if platform == "gba" else []
        self._state_size = self._native.stateSize(self._native)
        self._frames = 0

    def _ram_blocks(self) -> list[tuple[int, int, object]]:
        """(start, end, buffer) of the GBA's work RAM (EWRAM 0x02000000, IWRAM 0x03000000), read
        straight from mGBA's own buffers: a probe reads kilobytes of save block twice per action, and
        one bus call per byte costs about 2 µs. Plain RAM only; registers and mirrors go by the bus."""
        ffi, native = self._ffi, self._native
        listing = ffi.new("struct mCoreMemoryBlock**")
        count = native.listMemoryBlocks(native, listing)
        found = []
        for i in range(count):
            block = listing[0][i]
            if block.start not in (0x02000000, 0x03000000):
                continue
            size = ffi.new("size_t*")
            pointer = native.getMemoryBlock(native, block.id, size)
            if pointer != ffi.NULL and size[0] >= block.end - block.start:
                found.append((block.start, block.end, ffi.buffer(ffi.cast("uint8_t*", pointer), size[0])))
        return found

    def _pin_clock(self, core) -> None:
        rtc = core._core.rtc
        rtc.override = self._lib.RTC_FIXED
        rtc.value = rtc_seconds(self.platform) * 1000  # milliseconds

    def clock_seconds(self) -> int:
        """What the cartridge clock reads now (mGBA's RTC source, as the core asks it)."""
        rtc = self._native.rtc
        return int(rtc.d.unixTime(self._ffi.addressof(rtc.d)))

    # -- state -----------------------------------------------------------------------
    def _frame_n(self, n: int) -> None:
        run, native = self._run, self._native
        for _ in range(n):
            run(native)
        self._frames += n

    def boot(self, frames: int) -> None:
        """Run from power-on (or from where it is) with no input."""
        ready_python_callbacks()
        self._set_keys(self._native, 0)
        self._frame_n(frames)

    def save_state(self) -> bytes:
        buf = self._ffi.new("unsigned char[]", self._state_size)
        if not self._native.saveState(self._native, buf):
            raise EmulatorError("mGBA cannot save its state")
        return bytes(self._ffi.buffer(buf))

    def restore(self, state: bytes) -> None:
        ready_python_callbacks()
        if len(state) != self._state_size:
            why = (f"{len(state):,} bytes; an mGBA state for this core is {self._state_size:,}: not an mGBA "
                   f"state, or another emulator's")
            raise EmulatorError(f"cannot restore state ({why})") from ValueError(why)
        native = self._native
        buf = self._ffi.from_buffer(state)
        self._pin_clock(self._core)
        self._set_keys(native, 0)
        if not native.loadState(native, buf):
            why = "mGBA refuses it: another core or version, or a damaged state"
            raise EmulatorError(f"cannot restore state ({why})") from ValueError(why)
        # mGBA's state holds no picture (the screen buffer keeps whatever was drawn last): draw the
        # state's next frame, with no input, and restore again, so the frame after a restore is a
        # function of the state alone (the same in a fresh emulator and in one that has played).
        # That frame is not counted: emulation goes on from the restored state itself.
        self._run(native)
        native.loadState(native, buf)

    # -- observation ---------------------------------------------------------------------
    def frame(self) -> np.ndarray:
        px = self._pixels
        out = np.empty(px.shape[:2] + (3,), np.uint8)
        out[..., 0] = px[..., 0]
        out[..., 1] = px[..., 1]
        out[..., 2] = px[..., 2]
        return out

    @property
    def frame_index(self) -> int:
        return self._frames

    def read_range(self, address: int, length: int) -> Sequence[int]:
        """Bus reads (GB: 0x0000-0xFFFF; GBA: 32-bit bus addresses). Outside the address space,
        zeros; an unmapped GBA address reads what the bus gives (mGBA's open-bus value). GBA work
        RAM comes back as bytes (a copy; no list is built: the probe reads it twice per action)."""
        for start, end, buffer in self._direct:
            if start <= address and address + length <= end:
                return buffer[address - start:address - start + length]
        read, native, space = self._bus_read, self._native, self._space
        return [read(native, a) if 0 <= a < space else 0 for a in range(address, address + length)]

    def write(self, address: int, data: bytes) -> None:
        """Bus writes (mGBA's busWrite8), byte by byte: no emulation runs."""
        write = getattr(self._native, "busWrite8", None)
        if write is None:
            raise EmulatorError("this mGBA build has no bus write: the battle ruleset's apply_team cannot run on it")
        if not (0 <= address and address + len(data) <= self._space):
            raise EmulatorError(f"write at {address:#x}: outside the address space")
        for i, value in enumerate(data):
            write(self._native, address + i, value)

    # -- input -------------------------------------------------------------------------
    def step(self, action: str, timing: Timing, probe: ProbeFn) -> StepResult:
        """Hold one button for press_frames, settle, probe the last two frames, capture."""
        ready_python_callbacks()
        press_frame = -1
        native = self._native
        try:
            if action != "NOOP":
                keys = self._keys[action]
                press_frame = self._frames
                self._set_keys(native, keys)
                self._frame_n(timing.press_frames)
                self._set_keys(native, 0)
            else:
                self._frame_n(timing.press_frames)
            self._frame_n(timing.settle_frames - 1)
            before_last = probe(self.read_range)
            self._frame_n(1)
        except KeyError:
            raise EmulatorError(f"unknown action {action!r}") from None
        except Exception as exc:
            raise EmulatorError(f"emulator failed during {action}: {exc}") from exc
        last = probe(self.read_range)
        rgb = self.frame()
        return StepResult(rgb, frame_sha256(rgb), self._frames, press_frame, before_last, last)

    def close(self) -> None:
        self._pixels = None
        self._core = None  # the binding frees the core (ffi.gc) when the last reference goes
