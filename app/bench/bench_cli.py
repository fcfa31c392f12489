"""`oakwatch bench`: measure the harness against the raw emulator."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> None:
    """The bench subcommand, on cli.py's subparsers."""
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
    bench.add_argument("--report-decisions", type=int, default=0, metavar="N",
                       help="also report a directions-only random walk of N decisions (e.g. 1000000; about 12 "
                            "minutes) against one of 10,000: issue 31's report memory at scale (0 to skip)")
    bench.add_argument("--report-only", action="store_true",
                       help="exit 0 even when a target is missed (a bench that broke still exits 1)")
    bench.add_argument("--json", type=Path, metavar="FILE", help="also write every figure to FILE as JSON")


def bench_command(args: argparse.Namespace) -> int:
    from app.bench.bench import run_bench

    return run_bench(args.runs, args.memory_actions, args.verify_decisions, args.console, args.workers_phase,
                     args.parallel_models, report_only=args.report_only, json_path=args.json,
                     mcp_calls=max(0, args.mcp_calls), gba_actions=max(0, args.gba_actions),
                     steady_sizes=tuple(max(0, n) for n in args.steady_actions),
                     workers_sizes=tuple(max(1, n) for n in args.workers_size),
                     report_decisions=max(0, args.report_decisions))
