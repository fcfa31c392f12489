"""The `oakwatch` command: run (console or headless), resume, verify, replay, recover, frames, demo-server, bench.

Exit status. `run` follows seed 001: 0 every trial succeeded; 1 a valid game-failure and no
invalid trial; 2 an invalid trial, bad arguments or a failed preflight. The audit commands
(verify, replay, recover, frames) share one rule: 0 all good, 1 problems found, 2 bad input.

This module only parses and dispatches: each subcommand's parsers and handler live in its module under
app/commands/ (the tables below say which).
"""

from __future__ import annotations

import argparse
import os
import sys

from app.commands import end_gc, hold_gc, release_gc
from app.commands import fail as _fail


def _version() -> str:
    from importlib.metadata import version

    from engine.emulators.backends import BACKENDS

    emulators = ", ".join(f"{b.name} {b.version() or 'not installed'}" for b in BACKENDS.values())
    return f"oakwatch {version('oakwatch')} ({emulators}, textual {version('textual')})"


class _VersionAction(argparse._VersionAction):
    """argparse's `--version`, its line built only when asked: every backend's version loads that
    backend's native library (mGBA's alone is ~0.1 s), which no other command should pay at start."""

    def __call__(self, parser, namespace, values, option_string=None):
        self.version = _version()
        super().__call__(parser, namespace, values, option_string)


# Each command's module adds its own parsers, in this order (the order `oakwatch --help` lists them in).
_PARSERS: tuple[tuple[str, str], ...] = (
    ("app.commands.run_cli", "add_parser"),  # run (first: _parse uses it alone for `oakwatch run`)
    ("app.commands.audit_cli", "add_parsers"),  # verify, replay, recover, frames
    ("app.commands.watch_cli", "add_parsers"),  # review, serve, attach
    ("app.commands.state_cli", "add_parsers"),  # make-state, state new
    ("app.commands.annotate_cli", "add_parsers"),  # annotate, unblind, export
    ("app.commands.report_cli", "add_parsers"),  # report; --include-raw and --seed on export
    ("app.commands.cartridge_cli", "add_parsers"),  # cartridge variant
    ("app.commands.tasks_cli", "add_parsers"),  # tasks list|run|derive|data (docs/tasks.md)
    ("app.commands.portal_cli", "add_parser"),  # the static results site (docs/portal.md)
    ("app.servers.demo_server", "add_parser"),  # demo-server
    ("app.commands.mcp_cli", "add_parser"),  # mcp: serve one trial to your own agent (docs/mcp.md)
    ("app.bench.bench_cli", "add_parser"),  # bench
)

# Commands whose start-up (preflight, the evidence folder) ends inside the handler, which calls
# app.commands.release_gc there; every other command releases it once its arguments are parsed.
_STARTS_LATER = {None, "run"}

# The handler of each subcommand (None: no command), imported when it runs.
_HANDLERS: dict[str | None, tuple[str, str]] = {
    None: ("app.commands.run_cli", "default_command"),
    "run": ("app.commands.run_cli", "run_command"),
    "verify": ("app.commands.audit_cli", "verify_command"),
    "replay": ("app.commands.audit_cli", "replay_command"),
    "recover": ("app.commands.audit_cli", "recover_command"),
    "frames": ("app.commands.audit_cli", "frames_command"),
    "review": ("app.commands.watch_cli", "review_command"),
    "serve": ("app.commands.watch_cli", "serve_command"),
    "attach": ("app.commands.watch_cli", "attach_command"),
    "make-state": ("app.commands.state_cli", "make_state_command"),
    "state": ("app.commands.state_cli", "state_command"),
    "report": ("app.commands.report_cli", "report_main"),
    "annotate": ("app.commands.annotate_cli", "run"),
    "unblind": ("app.commands.annotate_cli", "run"),
    "export": ("app.commands.annotate_cli", "run"),
    "cartridge": ("app.commands.cartridge_cli", "run"),
    "mcp": ("app.commands.mcp_cli", "run_command"),
    "portal": ("app.commands.portal_cli", "portal_main"),
    "tasks": ("app.commands.tasks_cli", "run"),
    "demo-server": ("app.servers.demo_server", "cli_command"),
    "bench": ("app.bench.bench_cli", "bench_command"),
}


def _attribute(module: str, name: str):
    from importlib import import_module  # here, not at import: a Ctrl-C while numpy loads is main's to catch

    return getattr(import_module(module), name)


def _parser(*, only_run: bool = False) -> argparse.ArgumentParser:
    parser = (_RunOnlyParser if only_run else argparse.ArgumentParser)(
        prog="oakwatch",
        description="Live operator console and evaluation harness for game-playing agents. "
                    "With no command, opens the console on the bundled cartridge's dry-run.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command")
    for module, name in _PARSERS[:1] if only_run else _PARSERS:
        _attribute(module, name)(sub)
    return parser


class _RunOnlyParser(argparse.ArgumentParser):
    """The parser for `oakwatch run ...` alone (its subparser is one too): the other eleven command
    modules and their parsers cost ~22 ms of CPU at every start (issue 31, row 2). Any error goes back
    to the whole parser, whose messages (its usage line lists every command) are the ones printed."""

    def error(self, message):
        raise _WholeParserNeeded


class _WholeParserNeeded(Exception):
    pass


def _parse(argv: list[str]) -> argparse.Namespace:
    if argv[:1] == ["run"]:
        try:
            return _parser(only_run=True).parse_args(argv)
        except _WholeParserNeeded:
            pass
    return _parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    _no_pydantic_plugins()
    _one_blas_thread()
    hold_gc()  # until the command's start-up is over (app.commands.release_gc)
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before a run holds a folder (preflight, a probe): nothing was written
        print("oakwatch: interrupted", file=sys.stderr)
        return 128 + 2
    finally:
        end_gc(process_ends=argv is None)  # None: called as the program (console script, -m app.cli)


def _no_pydantic_plugins() -> None:
    """Before any model is built: pydantic would otherwise scan every installed distribution's entry
    points for plugins (~6 ms quiet, ~15 ms under load, on every start) and wrap each validator in any it
    finds. oakwatch uses none, and third-party code inside the validators that decide what evidence is
    accepted has no place in an evaluation harness. PYDANTIC_DISABLE_PLUGINS is read by
    pydantic/plugin/_loader.py:get_plugins since pydantic 2.7 (pyproject asks >= 2.10); a value the user
    set is kept."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _one_blas_thread() -> None:
    """Before numpy is imported: its OpenBLAS starts a thread per core at import, which spin for
    ~100 ms of CPU on this 2-core machine (more with more cores) and take a core from the emulator
    under load; oakwatch does no linear algebra (only frame copies and compares). A value the user set
    is kept."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _main(argv: list[str] | None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.command not in _STARTS_LATER:
        release_gc()
    handler = _HANDLERS.get(args.command)
    if handler is None:
        return _fail(f"unknown command {args.command}")
    return _attribute(*handler)(args)


if __name__ == "__main__":
    sys.exit(main())
