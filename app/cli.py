"""The `oakwatch` command: run (console or headless), resume, verify, replay, recover, frames, demo-server, bench.

Exit status. `run` follows seed 001: 0 every trial succeeded; 1 a valid game-failure and no
invalid trial; 2 an invalid trial, bad arguments or a failed preflight. The audit commands
(verify, replay, recover, frames) share one rule: 0 all good, 1 problems found, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2


def _fail(message: str) -> int:
    print(f"oakwatch: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _version() -> str:
    from importlib.metadata import version

    from engine.emulators.backends import BACKENDS

    emulators = ", ".join(f"{b.name} {b.version() or 'not installed'}" for b in BACKENDS.values())
    return f"oakwatch {version('oakwatch')} ({emulators}, textual {version('textual')})"


def _parser() -> argparse.ArgumentParser:
    from engine.emulators.backends import BACKENDS  # here, not at import: a Ctrl-C while numpy loads is main's to catch
    from engine.providers import PROVIDERS

    parser = argparse.ArgumentParser(
        prog="oakwatch",
        description="Live operator console and evaluation harness for game-playing agents. "
                    "With no command, opens the console on the bundled cartridge's dry-run.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command")
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
    verify = sub.add_parser("verify", help="audit an evidence folder")
    verify.add_argument("folder", type=Path)
    verify.add_argument("--deep", action="store_true", help="also decode every stored frame and check its pixels")
    verify.add_argument("--print-root", action="store_true",
                        help="print the root hash that pins the evidence and every layer (publish or sign it)")
    verify.add_argument("--expect-root", metavar="SHA256",
                        help="fail unless the folder's root hash is this one, naming each part changed since")
    replay = sub.add_parser("replay", help="re-run a trial's recorded inputs and check every frame hash")
    replay.add_argument("trial", type=Path, help="a trial folder: <experiment>/trials/<label>-<NN>")
    replay.add_argument("--rom", type=Path, help="the ROM, if not where the manifest says (a package: always, "
                        "unless the manifest names a bundled one)")
    replay.add_argument("--state", type=Path, help="the start state, if not where the manifest says (a package "
                        "whose manifest's path to it was redacted)")
    recover = sub.add_parser("recover", help="finish a folder whose run died (kill -9, power loss)")
    recover.add_argument("folder", type=Path)
    frames = sub.add_parser("frames", help="write a trial's stored frames out as PNG files")
    frames.add_argument("trial", type=Path, help="a trial folder: <experiment>/trials/<label>-<NN>")
    frames.add_argument("--decisions", default=None, metavar="A:B",
                        help="decision range, inclusive (0 is the start frame); default: all")
    frames.add_argument("--output", type=Path, required=True, help="new folder for the PNG files")
    review = sub.add_parser("review", help="the console on a finished or running experiment: scrub, inspect, "
                                           "label memory errors (blinded)")
    review.add_argument("folder", type=Path, help="an evidence folder")
    review.add_argument("--annotator", metavar="NAME",
                        help="label as NAME: labels go to annotations/NAME/ (without it, review is read-only)")
    serve = sub.add_parser("serve", help="the attached console for an experiment as a web page (one console per "
                                         "browser tab; read-only unless --operator)")
    serve.add_argument("folder", type=Path, help="an evidence folder (a running or finished experiment)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default: 127.0.0.1; watch a remote run through an SSH tunnel)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    serve.add_argument("--operator", action="store_true",
                       help="let the page control the run (pause, step, terminate, tag) through its control socket")
    attach = sub.add_parser("attach", help="the console over a run started elsewhere: follows its evidence folder "
                                           "as it grows (operator keys through the run's control channel)")
    attach.add_argument("folder", type=Path, help="an evidence folder (being written, or finished)")
    attach.add_argument("--read-only", action="store_true",
                        help="watch only: the operator keys do nothing (also with OAKWATCH_READONLY=1)")
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
    from app.commands.annotate_cli import add_parsers as annotate_parsers

    annotate_parsers(sub)  # annotate, unblind, export
    from app.commands.report_cli import add_parsers as report_parsers

    report_parsers(sub)  # report; --include-raw and --seed on export
    from app.commands.cartridge_cli import add_parsers as cartridge_parsers

    cartridge_parsers(sub)  # cartridge variant
    from app.commands.tasks_cli import add_parsers as tasks_parsers

    tasks_parsers(sub)  # tasks list|run|derive|data (docs/tasks.md)
    from app.commands.portal_cli import add_parser as portal_parser

    portal_parser(sub)  # the static results site (docs/portal.md)
    from app.servers.demo_server import add_parser as demo_parser

    demo_parser(sub)  # demo-server
    from app.commands.mcp_cli import add_parser as mcp_parser

    mcp_parser(sub)  # mcp: serve one trial to your own agent (docs/mcp.md)
    bench = sub.add_parser("bench", help="measure the harness against the raw emulator")
    bench.add_argument("--runs", type=int, default=5, help="repetitions; the median is reported")
    bench.add_argument("--memory-actions", type=int, default=10_000,
                       help="length of the random-policy trial for per-action cost and memory (0 to skip)")
    bench.add_argument("--verify-decisions", type=int, default=100_000,
                       help="length of the trial whose verify is timed (0 to skip)")
    bench.add_argument("--console", action="store_true", help="also measure the console (issue targets)")
    bench.add_argument("--steady-actions", type=int, nargs=2, default=[20_000, 10_000], metavar=("BIG", "SMALL"),
                       help="per action in steady state: the BIG-action random trial minus the SMALL one "
                            "(issue 31; 0 0 to skip)")
    bench.add_argument("--workers-phase", action="store_true",
                       help="also measure random trials with 2 workers vs 1 against the raw PyBoy pair on the "
                            "same work (target >= 95%% of its speed-up)")
    bench.add_argument("--workers-size", type=int, nargs=2, default=[8, 10_000], metavar=("TRIALS", "ACTIONS"),
                       help="the workers phase's trials and accepted actions per trial")
    bench.add_argument("--parallel-models", action="store_true",
                       help="also measure 16 model trials against a local 200 ms server with 8 workers vs 1 "
                            "(target <= 1/6 of the serial time) and the console attached to that run")
    bench.add_argument("--mcp-calls", type=int, default=100, metavar="N",
                       help="press_keys calls through `oakwatch mcp` timed against the raw press (0 to skip)")
    bench.add_argument("--gba-actions", type=int, default=2000, metavar="N",
                       help="length of the random trial on the open GBA cartridge timed against raw mGBA (0 to skip)")
    bench.add_argument("--report-only", action="store_true",
                       help="exit 0 even when a target is missed (a bench that broke still exits 1)")
    bench.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before a run holds a folder (preflight, a probe): nothing was written
        print("oakwatch: interrupted", file=sys.stderr)
        return 128 + 2


def _main(argv: list[str] | None) -> int:
    from engine.emulators.backends import BACKENDS
    from sessions.preflight.assets import BUNDLED_PREFIX, resolve

    args = _parser().parse_args(argv)
    if args.command is None:
        return _run(None, headless=not sys.stdout.isatty(), output=None, speed=None)
    if args.command == "run":
        headless = args.headless or not sys.stdout.isatty()
        if args.workers is not None and not 1 <= args.workers <= 256:
            return _fail(f"--workers {args.workers}: give a number from 1 to 256")
        if args.ray_address is not None and args.executor != "ray":
            return _fail("--ray-address goes with --executor ray")
        if args.executor == "ray":
            from sessions.execute.ray_pool import RayUnavailable, ray_module

            try:
                ray_module()
            except RayUnavailable as exc:
                return _fail(str(exc))
        global _WORKERS, _EXECUTOR
        _WORKERS = args.workers if args.workers is not None else (0 if args.executor == "ray" else 1)
        if args.speed not in (None, "max") and (_WORKERS != 1 or args.executor != "local"):
            return _fail(f"--speed {args.speed} paces one trial at a time: it does not go with --workers or "
                         f"--executor ray (trials run at once go at full speed)")
        _EXECUTOR = (args.executor, args.ray_address)
        if args.resume is not None:
            if (args.manifest is not None or args.output is not None or args.provider is not None
                    or args.model is not None or args.base_url is not None or args.api is not None
                    or args.emulator is not None or args.force or args.goal is not None):
                return _fail("--resume uses the folder's frozen manifest: give no MANIFEST, --output, --provider, "
                             "--model, --base-url, --api, --emulator, --force or --goal")
            return _resume(args.resume, headless=headless, speed=args.speed)
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
        if model is not None or base_url is not None or args.emulator is not None or args.force \
                or args.goal is not None:
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
        return _run(args.manifest, headless=headless, output=args.output, speed=args.speed)
    if args.command == "verify":
        return _verify(args.folder, args.deep, args.print_root, args.expect_root)
    if args.command == "replay":
        return _replay(args.trial, args.rom, args.state)
    if args.command == "recover":
        return _recover(args.folder)
    if args.command == "frames":
        return _frames(args.trial, args.decisions, args.output)
    if args.command == "review":
        return _review(args.folder, args.annotator)
    if args.command == "serve":
        from app.servers.serve import serve

        return serve(args.folder, host=args.host, port=args.port, operator=args.operator)
    if args.command == "attach":
        return _attach(args.folder, args.read_only)
    if args.command == "make-state":
        return _make_state(args.rom, args.frames, args.output, args.emulator)
    if args.command == "state":
        from app.commands.state_new import state_new

        return state_new(args.rom, args.game, args.output, inputs=args.inputs, emulator=args.emulator,
                         boot_frames=args.boot_frames, force=args.force, experiment=args.experiment)
    if args.command == "report":
        from app.commands.report_cli import report_main

        return report_main(args)
    if args.command in ("annotate", "unblind", "export"):
        from app.commands import annotate_cli

        return annotate_cli.run(args)
    if args.command == "cartridge":
        from app.commands import cartridge_cli

        return cartridge_cli.run(args)
    if args.command == "mcp":
        from app.commands.mcp_cli import run_command as mcp_command

        return mcp_command(args)
    if args.command == "portal":
        from app.commands.portal_cli import portal_main

        return portal_main(args)
    if args.command == "tasks":
        from app.commands import tasks_cli

        return tasks_cli.run(args)
    if args.command == "demo-server":
        from app.servers.demo_server import run_command

        return run_command(args.host, args.port, args.replies, args.seed, args.latency_ms)
    if args.command == "bench":
        from app.bench.bench import run_bench

        return run_bench(args.runs, args.memory_actions, args.verify_decisions, args.console, args.workers_phase,
                         args.parallel_models, report_only=args.report_only, json_path=args.json,
                         mcp_calls=max(0, args.mcp_calls), gba_actions=max(0, args.gba_actions),
                         steady_sizes=tuple(max(0, n) for n in args.steady_actions),
                         workers_sizes=tuple(max(1, n) for n in args.workers_size))
    return _fail(f"unknown command {args.command}")


def _pacing(prepared, speed: str | None) -> float | None:
    if speed is not None:
        return {"1": 1.0, "2": 2.0, "4": 4.0, "max": None}[speed]
    return prepared.manifest.emulator.speed_multiplier or None  # 0 means as fast as possible


def _run(manifest: Path | None, *, headless: bool, output: Path | None, speed: str | None, origin=None) -> int:
    from sessions.preflight.experiment import PreflightError, create_folder, default_output, prepare

    try:
        prepared = prepare(manifest, output, allow_human=not headless, origin=origin)
        folder = create_folder(prepared, output or default_output(prepared.manifest.experiment_id))
    except PreflightError as exc:
        return _fail(str(exc))
    return _start_holding(prepared, folder, headless=headless, speed=speed, positions=None)


def _resume(root: Path, *, headless: bool, speed: str | None) -> int:
    from sessions.preflight.experiment import PreflightError, prepare_resume

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


_WORKERS = 1  # `run --workers N`, for the run about to start (0: as many as the Ray cluster has CPUs)
_EXECUTOR: tuple[str, str | None] = ("local", None)  # `run --executor`, `--ray-address`


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


def _verify(folder: Path, deep: bool, print_root: bool, expect_root: str | None) -> int:
    import re

    from engine.text import printable
    from sessions.audit.verify import audit
    from sessions.evidence import roots
    from sessions.evidence.folder_kind import evidence_problem

    expected = expect_root.strip().lower() if expect_root is not None else None
    if expected is not None and not re.fullmatch(r"[0-9a-f]{64}", expected):
        return _fail(f"--expect-root {printable(expect_root)}: not a root hash (64 hex digits, as --print-root "
                     f"prints it)")
    from sessions.tasks.task_batch import is_batch

    if is_batch(folder):  # a task batch (docs/tasks.md): every run folder's audit and the ledger
        from app.commands.tasks_cli import verify_main

        return verify_main(folder, deep, print_root or expected is not None)
    from sessions.audit.package import is_package

    if is_package(folder):  # the publishable package (docs/report.md): what it holds, not the evidence audit
        return _verify_package(folder, deep, print_root or expected is not None)
    problem = evidence_problem(folder)
    if problem is not None:
        return _fail(problem)
    report = audit(folder, deep=deep)
    problems = report.interrupted + report.problems
    # The root covers the evidence and every layer (sessions.evidence.roots); a mismatch names each part
    # changed, added or removed since the published root was printed.
    problems += roots.compare(folder, expected) if expected is not None else []
    if problems:
        for p in problems:
            print(f"FAIL {p}", file=sys.stderr)
        kind = "interrupted" if report.interrupted and len(problems) == len(report.interrupted) else "problem(s)"
        print(f"oakwatch verify: {len(problems)} {kind} in {folder}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"oakwatch verify: {folder} OK (files, hash chains, trace, inputs, memory, frames, results, "
          f"run log, summary and annotation layers reconcile{'; every frame decoded' if deep else ''})")
    if print_root:
        listed = roots.parts(folder)
        print(f"root: {roots.root_of(listed) if listed else None}")
        print("covers (the SHA-256 of each part's SHA256SUMS; the root is the SHA-256 of these lines; "
              "reports/ is not covered):")
        for rel, digest in listed.items():
            print(f"  {digest}  {rel}")
    return EXIT_OK


def _verify_package(folder: Path, deep: bool, root: bool) -> int:
    from sessions.audit.package import verify_package

    if deep or root:
        return _fail("--deep, --print-root and --expect-root audit an evidence folder; a package is checked by "
                     "`oakwatch verify PKG` alone (its evidence root is in its README and package.json)")
    problems, checked = verify_package(folder)
    if problems:
        for p in problems:
            print(f"FAIL {p}", file=sys.stderr)
        print(f"oakwatch verify: {len(problems)} problem(s) in the package {folder}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"oakwatch verify: package {folder} OK ({checked['files']} files match SHA256SUMS, "
          f"{checked['from_evidence']} of them the evidence's own bytes; {checked['trials']} trial(s), "
          f"{checked['decisions']} decisions: hash chains, inputs, memory and results reconcile with the run log)")
    return EXIT_OK


def _replay(trial: Path, rom: Path | None, state: Path | None = None) -> int:
    from sessions.audit.replay import Divergence, replay_trial
    from sessions.evidence.reader import FormatProblem
    from sessions.preflight.experiment import PreflightError

    try:
        report = replay_trial(trial, rom, state=state)
    except PreflightError as exc:
        return _fail(str(exc))
    except FormatProblem as exc:
        print(f"oakwatch replay: FAIL {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except Divergence as exc:
        print(f"oakwatch replay: DIVERGED at {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    print(f"oakwatch replay: {trial} matches: {report['decisions']} decisions, {report['actions']} actions, "
          f"milestones {' '.join(report['milestones']) or 'none'}")
    return EXIT_OK


def _recover(folder: Path) -> int:
    from sessions.audit.recover import RecoverRefused, recover
    from sessions.evidence.durable import EvidenceError
    from sessions.evidence.experiment_folder import FolderBusy
    from sessions.evidence.folder_kind import evidence_problem
    from sessions.tasks.task_batch import is_batch

    if is_batch(folder):  # a task batch (docs/tasks.md): each run folder, then the ledger
        from app.commands.tasks_cli import recover_main

        return recover_main(folder)
    problem = evidence_problem(folder)
    if problem is not None:
        return _fail(problem)
    try:
        done = recover(folder)
    except FolderBusy as exc:
        return _fail(str(exc))
    except RecoverRefused as exc:
        print(f"oakwatch recover: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except EvidenceError as exc:
        print(f"oakwatch recover: {exc}; free space and run it again", file=sys.stderr)
        return EXIT_PROBLEMS
    if done.nothing_to_do:
        print(f"oakwatch recover: {folder} is finished already; nothing to recover")
        return EXIT_OK
    for line in done.cut:
        print(f"  cut {line}")
    if done.removed:
        print(f"  removed trial folders that never started: {', '.join(done.removed)}")
    print(f"oakwatch recover: {folder} finished: {len(done.finished)} trial(s) closed as harness-error "
          f"(process-died){', voids ' + ', '.join(map(str, done.voided)) if done.voided else ''}; "
          f"`oakwatch verify {folder}` checks it, `oakwatch run --resume {folder}` reruns what is missing")
    return EXIT_OK


def _frames(trial: Path, decisions: str | None, output: Path) -> int:
    from sessions.analysis.frames_export import ExportError, export_frames

    try:
        written = export_frames(trial, decisions, output)
    except ExportError as exc:
        return _fail(str(exc))
    print(f"oakwatch frames: {written} PNG file(s) in {output}")
    return EXIT_OK


def _review(folder: Path, annotator: str | None) -> int:
    from app.review.review import annotator_problem, run_review

    if not (folder / "trials").is_dir():
        return _fail(f"{folder}: not an evidence folder (no trials/)")
    problem = annotator_problem(annotator)
    if problem:
        return _fail(problem)
    if annotator is not None and (folder / "unblinded").exists():  # labels are taken only while it is blind
        return _fail(f"{folder} is unblinded (unblinded/ exists): it takes no more labels; review it without "
                     f"--annotator (read-only), or label a blinded copy (`oakwatch export --for-annotators`)")
    if not sys.stdout.isatty():
        return _fail("review is a console: run it in a terminal")
    return run_review(folder, annotator)


def _attach(folder: Path, read_only: bool = False) -> int:
    import os

    from app.review.attach import run_attach
    from app.review.attach_data import is_evidence_folder

    if not is_evidence_folder(folder):
        return _fail(f"{folder}: not an evidence folder (no trials/ or schedule.json)")
    if not sys.stdout.isatty() and not os.environ.get("TEXTUAL_DRIVER"):  # textual-serve sets a web driver
        return _fail("attach is a console: run it in a terminal")
    return run_attach(folder, read_only=read_only or os.environ.get("OAKWATCH_READONLY") == "1")


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


if __name__ == "__main__":
    sys.exit(main())
