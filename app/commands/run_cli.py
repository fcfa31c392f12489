"""`oakwatch run` (and `oakwatch` with no command): an experiment, on the console or headless, or resumed.

Exit status follows seed 001: 0 every trial succeeded; 1 a valid game-failure and no invalid trial;
2 an invalid trial, bad arguments or a failed preflight.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands import EXIT_BAD_INPUT, EXIT_OK, release_gc
from app.commands import fail as _fail

_WORKERS = 1  # `run --workers N`, for the run about to start (0: as many as the Ray cluster has CPUs)
_EXECUTOR: tuple[str, str | None] = ("local", None)  # `run --executor`, `--ray-address`


def add_parser(sub) -> None:
    """The run subcommand, on cli.py's subparsers."""
    from engine.emulators.backends import BACKENDS  # here, not at import: a Ctrl-C while numpy loads is main's to catch
    from engine.providers import PROVIDERS

    run = sub.add_parser("run", help="run an experiment (console on a terminal, else headless)")
    run.add_argument("manifest", nargs="?", type=Path,
                     help="experiment manifest (YAML), or bundled:NAME (e.g. bundled:demo.yaml); default: the "
                          "bundled cartridge dry-run")
    run.add_argument("--headless", action="store_true", help="no console: plain progress lines (for CI)")
    run.add_argument("--output", type=Path, help="new evidence folder (default: runs/<id>-<timestamp>-<tag>)")
    run.add_argument("--resume", type=Path, metavar="DIR",
                     help="rerun the voided and missing schedule positions of DIR with its frozen manifest")
    run.add_argument("--provider", choices=list(PROVIDERS),
                     help="let a model play: one condition with this provider (its key from the environment)")
    run.add_argument("--model", help="with --provider: the exact model id")
    run.add_argument("--base-url", help="with --provider: the API's address (required for openai-compatible); "
                                        "alone: the address of every openai-compatible condition of the manifest")
    run.add_argument("--api", choices=sorted({a for p in PROVIDERS.values() for a in p.apis}),
                     help="with --provider: the API (default: messages for anthropic, chat for the others)")
    run.add_argument("--emulator", choices=list(BACKENDS),
                     help="run on this emulator backend instead of the manifest's emulator.name (its start state "
                          "from game.start_states; the choice is frozen with the run)")
    run.add_argument("--force", action="store_true",
                     help="run a ROM its game definition does not list (a hack, a bad dump); recorded in the run")
    _add_execution_options(run)


def _add_execution_options(run: argparse.ArgumentParser) -> None:
    """How the trials run: processes, executor, goal and pacing."""
    run.add_argument("--workers", type=int, default=None, metavar="N",
                     help="trials at once, each in its own process (default 1: one after another; "
                          "with --executor ray: the cluster's CPUs)")
    run.add_argument("--executor", choices=["local", "ray"], default="local",
                     help="where trial processes run: this machine (default) or a Ray cluster (optional extra "
                          "`ray`; docs/ray.md)")
    run.add_argument("--ray-address", metavar="ADDRESS",
                     help="with --executor ray: an existing cluster (e.g. auto, or ray://head:10001); "
                          "default: a local Ray instance started for the run")
    run.add_argument("--goal", metavar="ID",
                     help="end each trial as a success when this goal of the game definition is met (e.g. catch: "
                          "any Pokémon caught), instead of at the ladder's final rung; frozen with the run")
    run.add_argument("--speed", choices=["1", "2", "4", "max"],
                     help="pacing, times real time (console default: the manifest's emulator.speed_multiplier, "
                          "the bundled dry-run says 1; headless default: max); one trial at a time only")


def default_command(args: argparse.Namespace) -> int:
    """`oakwatch` alone: the bundled cartridge's dry-run, on the console when there is a terminal."""
    return _run(None, headless=not sys.stdout.isatty(), output=None, speed=None)


def run_command(args: argparse.Namespace) -> int:
    problem = _executor_problem(args)
    if problem is not None:
        return _fail(problem)
    global _WORKERS, _EXECUTOR
    _WORKERS = args.workers if args.workers is not None else (0 if args.executor == "ray" else 1)
    if args.speed not in (None, "max") and (_WORKERS != 1 or args.executor != "local"):
        return _fail(f"--speed {args.speed} paces one trial at a time: it does not go with --workers or "
                     f"--executor ray (trials run at once go at full speed)")
    _EXECUTOR = (args.executor, args.ray_address)
    headless = args.headless or not sys.stdout.isatty()
    if args.resume is not None:
        if _manifest_options_given(args):
            return _fail("--resume uses the folder's frozen manifest: give no MANIFEST, --output, --provider, "
                         "--model, --base-url, --api, --emulator, --force or --goal")
        return _resume(args.resume, headless=headless, speed=args.speed)
    return _run_manifest(args, headless)


def _executor_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with --workers, --executor and --ray-address, if anything."""
    if args.workers is not None and not 1 <= args.workers <= 256:
        return f"--workers {args.workers}: give a number from 1 to 256"
    if args.ray_address is not None and args.executor != "ray":
        return "--ray-address goes with --executor ray"
    if args.executor == "ray":
        from sessions.execute.ray_pool import RayUnavailable, ray_module

        try:
            ray_module()
        except RayUnavailable as exc:
            return str(exc)
    return None


def _manifest_options_given(args: argparse.Namespace) -> bool:
    """Options that choose or change the manifest (none of them goes with --resume)."""
    return (args.manifest is not None or args.output is not None or args.provider is not None
            or args.model is not None or args.base_url is not None or args.api is not None
            or args.emulator is not None or args.force or args.goal is not None)


def _run_manifest(args: argparse.Namespace, headless: bool) -> int:
    """A new run of the given manifest, rewritten first when options override it."""
    from engine.emulators.backends import BACKENDS
    from sessions.preflight.assets import BUNDLED_PREFIX, resolve

    if args.manifest is not None and str(args.manifest).startswith(BUNDLED_PREFIX):
        try:
            args.manifest = resolve(str(args.manifest), Path.cwd())
        except ValueError as exc:  # a bundled name that leaves assets/
            return _fail(str(exc))
    model = base_url = None
    if args.provider is not None or args.model is not None:
        model = {"provider": args.provider, "model": args.model, "base_url": args.base_url, "api": args.api}
    else:
        base_url = args.base_url  # the manifest's own model conditions, pointed elsewhere
    if model is None and base_url is None and args.emulator is None and not args.force and args.goal is None:
        return _run(args.manifest, headless=headless, output=args.output, speed=args.speed)
    from app.commands.model_run import ModelRunError, built_manifest

    if args.emulator is not None and BACKENDS[args.emulator].version() is None:
        return _fail(BACKENDS[args.emulator].missing_message())
    try:
        with built_manifest(args.manifest, model=model, emulator=args.emulator,
                            force=args.force, base_url=base_url, goal=args.goal) as (manifest, origin):
            # errors name the options and the user's own file, never the temporary copy
            return _run(manifest, headless=headless, output=args.output, speed=args.speed, origin=origin)
    except ModelRunError as exc:
        return _fail(str(exc))


def _pacing(prepared, speed: str | None) -> float | None:
    if speed is not None:
        return {"1": 1.0, "2": 2.0, "4": 4.0, "max": None}[speed]
    return prepared.manifest.emulator.speed_multiplier or None  # 0 means as fast as possible


def _run(manifest: Path | None, *, headless: bool, output: Path | None, speed: str | None, origin=None) -> int:
    from sessions.execute.start import create_folder, default_output
    from sessions.preflight.experiment import PreflightError, prepare

    try:
        prepared = prepare(manifest, output, allow_human=not headless, origin=origin)
        folder = create_folder(prepared, output or default_output(prepared.manifest.experiment_id))
    except PreflightError as exc:
        return _fail(str(exc))
    return _start_holding(prepared, folder, headless=headless, speed=speed, positions=None)


def _resume(root: Path, *, headless: bool, speed: str | None) -> int:
    from sessions.execute.start import prepare_resume
    from sessions.preflight.experiment import PreflightError

    try:
        prepared, folder, positions = prepare_resume(root, allow_human=not headless)
    except PreflightError as exc:
        return _fail(str(exc))
    if not positions:
        folder.leave_as_found()
        print(f"oakwatch: {root}: every schedule position already holds a valid trial; nothing to resume")
        return EXIT_OK
    return _start_holding(prepared, folder, headless=headless, speed=speed, positions=positions)


def _start_holding(prepared, folder, **how) -> int:
    """_start, once the folder exists. A Ctrl-C that lands before the run's own signal handlers are
    installed stops the run as a signal does, before its first trial: summary and sums, status 2."""
    try:
        release_gc()  # start-up is over: the run begins
        return _start(prepared, folder, **how)
    except KeyboardInterrupt:
        if folder.finished:  # (the handlers are restored only after the folder is finished)
            raise
        from sessions.analysis.summary import exit_status
        from sessions.execute.runner import ExperimentRunner

        print("oakwatch: SIGINT: ending the run before its first trial", file=sys.stderr)
        positions = how["positions"]
        runner = ExperimentRunner(prepared, folder, positions=positions, resumed=positions is not None)
        summary = runner.close_unstarted("signal")
        return EXIT_BAD_INPUT if summary is None else exit_status(summary)


def _start(prepared, folder, *, headless: bool, speed: str | None, positions: list[int] | None) -> int:
    if headless or _WORKERS != 1 or _EXECUTOR[0] != "local":
        if not headless:  # many trials at once: the console over all of them follows the folder
            return _run_watched(prepared, folder, positions)
        # Headless goes at full speed unless --speed says otherwise (the manifest's pacing is the console's).
        return _run_headless(prepared, folder, positions, pacing=_pacing(prepared, speed) if speed else None)
    from app.console.console import run_console

    return run_console(prepared, folder, speed=_pacing(prepared, speed), positions=positions)


def _run_watched(prepared, folder, positions: list[int] | None) -> int:
    from app.console.run_watch import run_watched
    from sessions.execute.runner import ExperimentRunner

    return run_watched(ExperimentRunner(prepared, folder, positions=positions, resumed=positions is not None,
                                        workers=_WORKERS, executor=_EXECUTOR[0], ray_address=_EXECUTOR[1]))


def _run_headless(prepared, folder, positions: list[int] | None, pacing: float | None = None) -> int:
    from app.commands.signals import SignalStop
    from app.console.headless import HeadlessPrinter, print_line, summary_table
    from engine.loop.control import RunControl
    from sessions.analysis.summary import exit_status
    from sessions.execute.runner import ExperimentRunner

    printer = HeadlessPrinter(schedule=len(positions) if positions is not None else len(prepared.schedule))
    signals = SignalStop(lambda name: runner.control.stop_run("signal", name, f"signal:{name}"), folder.root)
    runner = ExperimentRunner(prepared, folder, sinks=[printer], control=RunControl(pacing), positions=positions,
                              resumed=positions is not None, watchdog_options={"signal_waiting": signals.waiting},
                              workers=_WORKERS, executor=_EXECUTOR[0], ray_address=_EXECUTOR[1])
    signals.install()
    print_line(f"oakwatch: experiment {prepared.manifest.experiment_id} → {folder.root}"
               + (f" (paced at {pacing:g}× real time)" if pacing else ""))
    printer.start()
    try:
        summary = runner.run()
    finally:
        printer.stop()
        signals.restore()
    if summary is None:
        print(f"oakwatch: error: the run could not write its final records ({runner.fatal}); free space, "
              f"then `oakwatch recover {folder.root}`", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not printer.closed:
        print_line("\n" + summary_table(summary, runner.results) + f"\nevidence: {folder.root} "
                   f"(check with: oakwatch verify {folder.root})")
    if runner.fatal:
        print(f"oakwatch: error: the run stopped: {runner.fatal}", file=sys.stderr)
    if summary.missing_positions:
        print_line(f"positions without a valid trial: {summary.missing_positions}; "
                   f"`oakwatch run --resume {folder.root}` reruns them")
    return exit_status(summary)

