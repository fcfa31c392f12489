"""`oakwatch make-state` and `oakwatch state new`: canonical start states."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.commands import EXIT_OK
from app.commands import fail as _fail


def add_parsers(sub) -> None:
    """The make-state and state subcommands, on cli.py's subparsers."""
    from engine.emulators.backends import BACKENDS

    state = sub.add_parser("make-state", help="make a canonical start state: power on, run N frames, save")
    state.add_argument("rom", type=Path)
    state.add_argument("--frames", type=int, required=True, help="frames to run from power-on with no input")
    state.add_argument("--output", type=Path, required=True, help="state file to write (must not exist)")
    state.add_argument("--emulator", choices=list(BACKENDS),
                       help="the emulator backend whose state this is (default: pyboy for a Game Boy ROM, "
                            "mgba for a Game Boy Advance ROM)")
    state_cmd = sub.add_parser("state", help="start states from your own ROM")
    state_sub = state_cmd.add_subparsers(dest="state_command", required=True)
    new = state_sub.add_parser(
        "new", help="boot your ROM, play an input prefix (from a file, or in a console), save the start state and "
                    "write a ready manifest")
    new.add_argument("--rom", type=Path, required=True, help="your legally dumped ROM")
    new.add_argument("--game", required=True, help="a bundled game definition id (e.g. pokemon-firered-leafgreen-en) "
                                                   "or a definition file")
    new.add_argument("--output", type=Path, required=True, help="new folder for the state, its hashes and a manifest")
    new.add_argument("--inputs", type=Path, help="input prefix (an input script); without it, play in the console "
                                                 "and press ctrl+s to save")
    new.add_argument("--experiment", metavar="TEMPLATE",
                     help="fill in this experiment (e.g. bundled:firered-design-a.yaml); default: a one-condition "
                          "smoke test")
    new.add_argument("--emulator", choices=list(BACKENDS), help="default: pyboy for GB games, mgba for GBA")
    new.add_argument("--boot-frames", type=int, default=0, help="frames to run from power-on before the prefix")
    new.add_argument("--force", action="store_true", help="a ROM the definition does not list (recorded)")


def make_state_command(args: argparse.Namespace) -> int:
    return _make_state(args.rom, args.frames, args.output, args.emulator)


def state_command(args: argparse.Namespace) -> int:
    from app.commands.state_new import state_new

    return state_new(args.rom, args.game, args.output, inputs=args.inputs, emulator=args.emulator,
                     boot_frames=args.boot_frames, force=args.force, experiment=args.experiment)


def _make_state(rom: Path, frames: int, output: Path, emulator: str | None = None) -> int:
    from engine.emulators.emulator import EmulatorError
    from sessions.preflight.startstate import write_start_state

    if not rom.is_file():
        return _fail(f"ROM not found: {rom}")
    if output.exists():
        return _fail(f"state file already exists: {output}")
    if not 1 <= frames <= 1_000_000:
        return _fail("--frames must be between 1 and 1,000,000")
    try:
        info = write_start_state(rom, frames, output, emulator)
    except EmulatorError as exc:
        return _fail(str(exc))
    for key, value in info.items():
        print(f"{key}: {value}")
    return EXIT_OK
