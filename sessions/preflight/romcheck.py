"""Probing the ROM and the start state before anything is written.

Two steps. First, in this process, the Game Boy cartridge header is checked against what PyBoy
2.8.1 itself requires (facts, from pyboy/core/cartridge/cartridge.py and trying it):

* an empty file: PyBoy raises "Empty ROM file";
* a size that is not a whole number of 16 KiB banks: PyBoy raises;
* a header checksum (0x14D over 0x134-0x14C) that does not match: PyBoy raises (so a random
  file is refused); the Nintendo logo (0x104-0x133) is NOT checked, by PyBoy or by us;
* a cartridge type (0x147) PyBoy has no controller for: PyBoy raises; a RAM-size code (0x149)
  outside 0-5: PyBoy raises a bare KeyError ("166");
* a one-bank (16 KiB) ROM: PyBoy accepts it and then reads bank 1 past the end of its buffer
  (its Cython build does no bounds checks) - so we require at least two banks (32 KiB).

These header checks are PyBoy's: they run for the pyboy backend only (mGBA checks the header
itself and refuses what it does not recognise, in the child).

Second, in a child process, the ROM is booted with the manifest's emulator backend
(engine.emulators.backends), the start state restored, the first frame hashed, the game definition's fields
probed, and a few frames run. The probe's sample right after the restore comes back with the first frame: the preflight
checks the frozen controls in it and every trial's restore is compared with it (engine.games.controls).
A child because PyBoy does not survive every state: empty, truncated or random
bytes are refused cleanly ("No data", "Cannot load state from a newer version of PyBoy", "LCD
was supposed to be downgraded!"), but a valid state with some bytes changed can restore and then
loop forever inside PyBoy's tick (one such case is in the tests), and out-of-range bank numbers
read outside PyBoy's buffers. A crash or a hang in the child becomes one line here.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from engine.emulators.romheader import gb_header_checksum
from engine.games.gamedef import GameDefinition
from engine.text import printable

BANK = 0x4000
MIN_ROM = 2 * BANK
# Cartridge types PyBoy 2.8.1 emulates (its CARTRIDGE_TABLE): ROM, MBC1, MBC2, MBC3, MBC5 variants.
PYBOY_CART_TYPES = frozenset({0x00, 0x01, 0x02, 0x03, 0x05, 0x06, 0x08, 0x09, 0x0F, 0x10, 0x11, 0x12, 0x13,
                              0x19, 0x1A, 0x1B, 0x1C, 0x1D, 0x1E})
PYBOY_RAM_SIZE_CODES = range(0, 6)  # its EXTERNAL_RAM_TABLE
PROBE_FRAMES = 60  # one second of play after the restore: a state that cannot run fails here
PROBE_TIMEOUT = 30.0  # seconds; the probe itself takes well under one
_ROOT = Path(__file__).resolve().parents[2]


class RomCheckError(ValueError):
    """The ROM or start state cannot run; one line naming the file."""


def check_rom_header(rom: bytes, source: str) -> None:
    """Refuse what PyBoy would refuse, or mis-run, before handing it the file."""
    where = f"ROM {printable(source)}"
    if not rom:
        raise RomCheckError(f"{where} is empty")
    if len(rom) < MIN_ROM:
        raise RomCheckError(f"{where} is {len(rom):,} bytes: a Game Boy ROM is at least {MIN_ROM:,}")
    if len(rom) % BANK:
        raise RomCheckError(f"{where} is {len(rom):,} bytes, not a whole number of 16 KiB banks "
                            "(a truncated or padded dump?)")
    if rom[0x14D] != gb_header_checksum(rom):
        raise RomCheckError(f"{where} is not a Game Boy ROM: header checksum at 0x14D is 0x{rom[0x14D]:02X}, "
                            f"the header gives 0x{gb_header_checksum(rom):02X}")
    if rom[0x147] not in PYBOY_CART_TYPES:
        raise RomCheckError(f"{where}: cartridge type 0x{rom[0x147]:02X} is not emulated by PyBoy")
    if rom[0x149] not in PYBOY_RAM_SIZE_CODES:
        raise RomCheckError(f"{where}: RAM size code 0x{rom[0x149]:02X} in the header is not valid")


def check_rom_and_state(rom_path: Path, rom: bytes, state: bytes, game: GameDefinition,
                        expected_first_frame_sha256: str | None = None, **kwargs) -> str:
    """Check that the ROM boots on `emulator` (a key of engine.emulators.backends.BACKENDS), the state
    restores and runs, and the game's fields can be read; return the SHA-256 of the first frame
    after the restore. Raises RomCheckError; writes nothing."""
    return probe_start_state(rom_path, rom, state, game, expected_first_frame_sha256, **kwargs)[0]


def probe_start_state(rom_path: Path, rom: bytes, state: bytes, game: GameDefinition,
                      expected_first_frame_sha256: str | None = None, *, state_path: Path | None = None,
                      game_path: Path | None = None, frames: int = PROBE_FRAMES,
                      timeout: float = PROBE_TIMEOUT, emulator: str = "pyboy",
                      first_frame_field: str = "first_frame_sha256") -> tuple[str, dict]:
    """check_rom_and_state, returning (first frame SHA-256, the probe's sample right after the
    restore): the hidden state every trial's restore must reproduce and the controls are read from."""
    from engine.emulators.backends import BACKENDS

    rom_where = f"ROM {printable(rom_path)}"
    state_where = f"initial state {printable(state_path or '(bytes)')}"
    game_where = f"game definition {printable(game_path or game.id)}"
    chosen = BACKENDS[emulator]
    version = chosen.version()
    if version is None:
        raise RomCheckError(chosen.missing_message())
    if not chosen.runs(game.platform):
        raise RomCheckError(f"{game_where} is for platform {game.platform!r}; {chosen.title} runs "
                            f"{', '.join(chosen.platforms)} games")
    if emulator == "pyboy":
        check_rom_header(rom, str(rom_path))
    elif not rom:
        raise RomCheckError(f"{rom_where} is empty")
    if not state:
        raise RomCheckError(f"{state_where} is empty")

    key = _cache_key(rom, state, game, frames, emulator, version)
    found = _cached(key)
    if found is None:
        found = _probe(rom_path, rom, state, game, frames, timeout, rom_where, state_where, game_where, emulator)
        _remember(key, *found)
    first, sample = found
    if expected_first_frame_sha256 is not None and first != expected_first_frame_sha256:
        raise RomCheckError(f"{state_where} restores to first frame {first}, but the manifest's "
                            f"game.{first_frame_field} is {expected_first_frame_sha256} (emulator or state differs)")
    return first, sample


# A probe of the same bytes gives the same answer: remembered per user (keyed by the ROM, state,
# game definition, frame count, emulator backend and its version), so only the first run of a ROM and state pays
# for the child process (~1 s).
def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "oakwatch" / "probes"


def _cache_key(rom: bytes, state: bytes, game: GameDefinition, frames: int, emulator: str, version: str) -> str:
    h = hashlib.sha256()
    for part in (hashlib.sha256(rom).digest(), hashlib.sha256(state).digest(),
                 game.model_dump_json().encode(), str(frames).encode(), f"{emulator} {version}".encode()):
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def _cached(key: str) -> tuple[str, dict] | None:
    """(first frame, sample) remembered for this key; anything else (an older cache's bare hash, a
    damaged file) is a miss."""
    try:
        value = json.loads((_cache_dir() / key).read_text(encoding="ascii"))
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    first, sample = value.get("first_frame_sha256"), value.get("sample")
    if not (isinstance(first, str) and len(first) == 64 and all(c in "0123456789abcdef" for c in first)):
        return None
    return (first, sample) if isinstance(sample, dict) else None


def _remember(key: str, first: str, sample: dict) -> None:
    try:
        folder = _cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps({"first_frame_sha256": first, "sample": sample}) + "\n", encoding="ascii")
        os.replace(tmp, folder / key)
    except OSError:
        pass  # a cache that cannot be written only costs time


def _probe(rom_path: Path, rom: bytes, state: bytes, game: GameDefinition, frames: int, timeout: float,
           rom_where: str, state_where: str, game_where: str, emulator: str) -> tuple[str, dict]:
    """Boot, restore and run in a child process; the first frame's SHA-256 and the sample probed
    right after the restore, or RomCheckError."""
    # The bytes already read and hashed go down the pipe: the file is not read again.
    header = json.dumps({"rom": os.path.abspath(os.fsdecode(rom_path)), "rom_size": len(rom),
                         "game": game.model_dump(mode="json"), "frames": frames, "emulator": emulator})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    try:
        # Its own session: a terminal's Ctrl-C goes to oakwatch, which ends the probe itself.
        proc = subprocess.run([sys.executable, "-m", "sessions.preflight.romcheck"],
                              input=header.encode() + b"\n" + rom + state, capture_output=True, timeout=timeout,
                              env=env, cwd=str(_ROOT), start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        stage = _stages(exc.stdout or b"")[-1:] or ["start"]
        culprit = rom_where if stage[0] == "start" else state_where
        raise RomCheckError(f"{culprit}: the emulator did not finish {frames} frames within {timeout:.0f} s "
                            f"(it hangs on this {'ROM' if culprit == rom_where else 'state'})") from None
    except OSError as exc:
        raise RomCheckError(f"cannot start the emulator probe ({exc.strerror or exc})") from None
    result = _result(proc.stdout)
    if result is None:
        raise _crashed(proc, rom_where, state_where, game_where)
    if not result.get("ok"):
        culprit = {"rom": rom_where, "state": state_where, "game": game_where}.get(result.get("stage"), state_where)
        raise RomCheckError(f"{culprit}: {printable(result.get('detail', 'failed'))}")
    sample = result.get("sample")
    if not isinstance(sample, dict):
        raise RomCheckError(f"cannot check {rom_where}: the emulator probe returned no sample")
    return str(result["first_frame_sha256"]), sample


def _crashed(proc: subprocess.CompletedProcess, rom_where: str, state_where: str, game_where: str) -> RomCheckError:
    """A probe that printed no result: it could not start (the environment), or the emulator crashed at
    the stage it last reported (the ROM, the state or the game's fields to blame)."""
    stages = _stages(proc.stdout)
    last = stages[-1] if stages else "start"
    if proc.returncode >= 0 and not stages:  # not the emulator: the probe could not start (environment)
        lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if not _noise(ln)]
        why = (lines or ["no output"])[-1].strip()
        return RomCheckError(f"cannot check {rom_where}: the emulator probe could not start "
                             f"({printable(why[:200])}); check the environment with `uv sync --locked` "
                             f"and run again")
    culprit = {"start": rom_where, "booted": state_where, "restored": game_where}.get(last, state_where)
    return RomCheckError(f"{culprit}: the emulator crashed ({_how(proc.returncode)}) while {_DOING[last]}")


_DOING = {"start": "loading the ROM", "booted": "restoring the state", "restored": "reading the game's fields",
          "probed": "running the state"}


def _how(returncode: int) -> str:
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        return f"signal {signal.Signals(-returncode).name}"
    except ValueError:
        return f"signal {-returncode}"


def _stages(stdout: bytes) -> list[str]:
    return [line for line in stdout.decode("utf-8", "replace").splitlines() if line in _DOING]


def _result(stdout: bytes) -> dict | None:
    for line in reversed(stdout.decode("utf-8", "replace").splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _child() -> int:
    """The probe itself: header JSON line then state bytes on stdin; progress lines and one JSON
    result on stdout. Runs in its own process: a crash or hang here cannot take the harness down."""
    import io
    import logging

    from engine.emulators.backends import BACKENDS
    from engine.emulators.emulator import frame_sha256
    from engine.games.probe import Probe

    logging.disable(logging.CRITICAL)  # PyBoy logs to stderr; the parent reports in one line
    data = sys.stdin.buffer.read()
    head, _, rest = data.partition(b"\n")
    spec = json.loads(head)
    rom, state = rest[:spec["rom_size"]], rest[spec["rom_size"]:]
    out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", line_buffering=True)
    chosen = BACKENDS[spec.get("emulator", "pyboy")]

    def report(**fields) -> int:
        print(json.dumps(fields), file=out)
        return 0

    try:
        game = GameDefinition.model_validate(spec["game"])
    except ValueError as exc:  # the parent validated it: a definition that does not round-trip is our bug
        return report(ok=False, stage="game", detail=f"the probe could not read back its game definition "
                      f"({_short(exc)}); this is an oakwatch bug: please report it with the command you ran")

    try:
        emulator = chosen.open(rom, spec["rom"], game.platform)
    except Exception as exc:  # PyBoy raises bare Exceptions (and KeyError) for bad cartridges
        return report(ok=False, stage="rom", detail=f"{chosen.title} cannot load this ROM ({_short(exc)})")
    print("booted", file=out)
    try:
        emulator.restore(state)
    except Exception as exc:
        why = _short(exc.__cause__ or exc)
        return report(ok=False, stage="state", detail=f"{chosen.title} cannot restore this state ({why})")
    first = frame_sha256(emulator.frame())
    print("restored", file=out)
    try:
        probe = Probe(game)
        sample = probe(emulator.read_range)
    except Exception as exc:
        return report(ok=False, stage="game", detail=f"its fields cannot be read ({_short(exc)})")
    print("probed", file=out)
    try:
        emulator.boot(int(spec["frames"]))
        probe(emulator.read_range)
    except Exception as exc:
        return report(ok=False, stage="state", detail=f"the emulator fails running this state ({_short(exc)})")
    emulator.close()
    plain = {k: [int(b) for b in v] if isinstance(v, list) else int(v) for k, v in sample.items()}
    return report(ok=True, first_frame_sha256=first, sample=plain)


def _short(exc: BaseException) -> str:
    """One line: for a pydantic error the first failing field and its message, never the URL tail."""
    errors = getattr(exc, "errors", None)
    if callable(errors):  # a pydantic ValidationError: where and why, of the first failure
        first = (errors() or [{}])[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "the definition"
        return f"{where}: {first.get('msg', 'invalid')}"[:300]
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if not _noise(ln)]
    return (lines[0] if lines else type(exc).__name__)[:300]


def _noise(line: str) -> bool:
    return not line.strip() or line.strip().startswith("For further information visit")


if __name__ == "__main__":
    sys.exit(_child())
