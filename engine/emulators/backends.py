"""The emulator backends, by the name a manifest gives (`emulator.name`).

Every path that boots a ROM (run, replay, make-state, the preflight probe, bench) opens its
emulator here: `BACKENDS[name].open(rom_bytes, name, platform)` returns an engine.emulators.emulator.Emulator
that also has `boot(frames)` and `save_state()`. A backend is imported only when it is used
(mGBA is an optional extra), and it owns its frame size per platform.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

from engine.emulators.emulator import EmulatorError

FRAME_SIZES = {"gb": (160, 144), "gbc": (160, 144), "gba": (240, 160)}  # (width, height)


class BackendUnavailable(EmulatorError):
    """The backend's package or native library is not installed; one line saying how to install it."""


@dataclass(frozen=True)
class Backend:
    name: str  # the manifest's emulator.name
    title: str  # as people write it
    platforms: tuple[str, ...]
    install: str  # what to do when it is missing
    _version: Callable[[], str]  # the installed version; raises ImportError/OSError when missing
    _open: Callable[[bytes, str | None, str], object]
    # Whether its frames run with the GIL released, so another thread (the frame store's encoder)
    # works while it emulates: it decides where the frame store encodes (sessions/evidence/framestore.py).
    emulates_without_gil: bool = False

    def version(self) -> str | None:
        """The installed version, or None when the package or its native library is missing."""
        try:
            return self._version()
        except (ImportError, OSError, PackageNotFoundError):
            return None

    def missing_message(self) -> str:
        return f"{self.title} backend needs {self.install}"

    def require(self) -> str:
        """The installed version, or BackendUnavailable with the install message."""
        found = self.version()
        if found is None:
            raise BackendUnavailable(self.missing_message())
        return found

    def runs(self, platform: str) -> bool:
        return platform in self.platforms

    def frame_size(self, platform: str) -> tuple[int, int]:
        """(width, height) of this backend's frames for a game of `platform`."""
        if not self.runs(platform):
            raise EmulatorError(f"{self.name} runs {', '.join(self.platforms)} games, not {platform}")
        return FRAME_SIZES[platform]

    def open(self, rom: bytes, name: str | None = None, platform: str = "gb"):
        """A new emulator with the ROM loaded from `rom` (the bytes the harness hashed)."""
        self.require()
        if not self.runs(platform):
            raise EmulatorError(f"{name or 'the ROM'}: {self.name} runs {', '.join(self.platforms)} games, "
                                f"not {platform}")
        return self._open(rom, name, platform)


def _pyboy_version() -> str:
    return _dist_version("pyboy")


def _open_pyboy(rom: bytes, name: str | None, platform: str):
    from engine.emulators.pyboy_backend import PyBoyEmulator

    return PyBoyEmulator(rom, name=name)


def _mgba_version() -> str:
    from engine.emulators.mgba_backend import mgba_version

    return mgba_version()


def _open_mgba(rom: bytes, name: str | None, platform: str):
    from engine.emulators.mgba_backend import MGBAEmulator

    return MGBAEmulator(rom, name=name, platform=platform)


BACKENDS: dict[str, Backend] = {
    "pyboy": Backend("pyboy", "PyBoy", ("gb", "gbc"), "the package pyboy (uv sync)", _pyboy_version, _open_pyboy),
    "mgba": Backend("mgba", "mGBA", ("gb", "gbc", "gba"),
                    "the Python package mgba 0.10.2 (CPython 3.11 on Linux) and Debian's libmgba0.10: "
                    "install with uv sync --extra mgba and apt-get install libmgba0.10",
                    _mgba_version, _open_mgba, emulates_without_gil=True),  # cffi releases the GIL per call
}


def backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise EmulatorError(f"no emulator backend {name!r} (there are: {', '.join(BACKENDS)})") from None
