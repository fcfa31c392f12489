"""The `oakwatch` command: run (console or headless), verify, replay, bench."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"oakwatch: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _version() -> str:
    from importlib.metadata import version

    return f"oakwatch {version('oakwatch')} (pyboy {version('pyboy')}, textual {version('textual')})"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oakwatch",
        description="Live operator console and evaluation harness for game-playing agents. "
                    "With no command, opens the console on the bundled cartridge's dry-run.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run an experiment (console on a terminal, else headless)")
    run.add_argument("manifest", nargs="?", type=Path,
                     help="experiment manifest (YAML); default: the bundled cartridge dry-run")
    run.add_argument("--headless", action="store_true", help="no console: plain progress lines (for CI)")
    run.add_argument("--output", type=Path, help="new evidence folder (default: runs/<id>-<timestamp>)")
    run.add_argument("--speed", choices=["1", "2", "4", "max"],
                     help="console pacing (default: the manifest's emulator.speed_multiplier; "
                          "the bundled dry-run says 1)")
    verify = sub.add_parser("verify", help="audit an evidence folder")
    verify.add_argument("folder", type=Path)
    replay = sub.add_parser("replay", help="re-run a trial's recorded inputs and check every frame hash")
    replay.add_argument("trial", type=Path, help="a trial folder: <experiment>/trials/<label>-<NN>")
    replay.add_argument("--rom", type=Path, help="the ROM, if not where the manifest says")
    state = sub.add_parser("make-state", help="make a canonical start state: power on, run N frames, save")
    state.add_argument("rom", type=Path)
    state.add_argument("--frames", type=int, required=True, help="frames to run from power-on with no input")
    state.add_argument("--output", type=Path, required=True, help="state file to write (must not exist)")
    bench = sub.add_parser("bench", help="measure the harness against the raw emulator")
    bench.add_argument("--runs", type=int, default=5, help="repetitions; the median is reported")
    bench.add_argument("--memory-actions", type=int, default=10_000,
                       help="length of the random-policy memory soak (0 to skip)")
    bench.add_argument("--console", action="store_true", help="also measure the console (issue targets)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:
        if sys.stdout.isatty():
            return _run(None, headless=False, output=None, speed=None)
        return _run(None, headless=True, output=None, speed=None)
    if args.command == "run":
        headless = args.headless or not sys.stdout.isatty()
        return _run(args.manifest, headless=headless, output=args.output, speed=args.speed)
    if args.command == "verify":
        return _verify(args.folder)
    if args.command == "replay":
        return _replay(args.trial, args.rom)
    if args.command == "make-state":
        return _make_state(args.rom, args.frames, args.output)
    if args.command == "bench":
        from app.bench import run_bench

        return run_bench(args.runs, args.memory_actions, args.console)
    return _fail(f"unknown command {args.command}")


def _run(manifest: Path | None, *, headless: bool, output: Path | None, speed: str | None) -> int:
    from sessions.experiment import PreflightError, create_folder, default_output, prepare

    try:
        prepared = prepare(manifest, output, allow_human=not headless)
        folder = create_folder(prepared, output or default_output(prepared.manifest.experiment_id))
    except PreflightError as exc:
        return _fail(str(exc))
    if headless:
        return _run_headless(prepared, folder)
    from app.console import run_console

    pacing = {"1": 1.0, "2": 2.0, "4": 4.0, "max": None}
    if speed is not None:
        chosen = pacing[speed]
    else:  # the manifest's display pacing: the bundled dry-run opens at 1x, 0 means maximum
        multiplier = prepared.manifest.emulator.speed_multiplier
        chosen = multiplier or None
    return run_console(prepared, folder, speed=chosen)


def _run_headless(prepared, folder: Path) -> int:
    from app.headless import HeadlessPrinter, print_line, summary_table
    from sessions.runner import ExperimentRunner
    from sessions.summary import exit_status

    printer = HeadlessPrinter()
    runner = ExperimentRunner(prepared, folder, sinks=[printer])

    def interrupt(signum, frame):  # end cleanly: the evidence folder stays complete
        runner.quit_requested = True
        runner.control.terminate("interrupted by signal")

    old = signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    print_line(f"oakwatch: experiment {prepared.manifest.experiment_id} → {folder}")
    printer.start()
    try:
        summary = runner.run()
    finally:
        printer.stop()
        signal.signal(signal.SIGINT, old)
    if not printer.closed:
        print_line("\n" + summary_table(summary, runner.results) + f"\nevidence: {folder} "
                   f"(check with: oakwatch verify {folder})")
    return exit_status(summary)


def _verify(folder: Path) -> int:
    from sessions.verify import verify_experiment

    problems = verify_experiment(folder)
    if problems:
        for p in problems:
            print(f"FAIL {p}", file=sys.stderr)
        print(f"oakwatch verify: {len(problems)} problem(s) in {folder}", file=sys.stderr)
        return 1
    print(f"oakwatch verify: {folder} OK (checksums, trace, inputs, results and summary reconcile)")
    return 0


def _replay(trial: Path, rom: Path | None) -> int:
    from sessions.experiment import PreflightError
    from sessions.replay import Divergence, replay_trial

    try:
        report = replay_trial(trial, rom)
    except PreflightError as exc:
        return _fail(str(exc))
    except Divergence as exc:
        print(f"oakwatch replay: DIVERGED at {exc}", file=sys.stderr)
        return 1
    print(f"oakwatch replay: {trial} matches: {report['decisions']} decisions, {report['actions']} actions, "
          f"milestones {' '.join(report['milestones']) or 'none'}")
    return 0


def _make_state(rom: Path, frames: int, output: Path) -> int:
    from engine.emulator import EmulatorError
    from sessions.startstate import write_start_state

    if not rom.is_file():
        return _fail(f"ROM not found: {rom}")
    if output.exists():
        return _fail(f"state file already exists: {output}")
    if frames < 1:
        return _fail("--frames must be at least 1")
    try:
        info = write_start_state(rom, frames, output)
    except EmulatorError as exc:
        return _fail(str(exc))
    for key, value in info.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
