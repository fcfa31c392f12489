"""`oakwatch report DIR` and the publishable `oakwatch export DIR --output OUT`.

Exit status as the audit commands: 0 written (and the folder verifies), 1 written but the folder
has integrity problems or the rows do not reconcile with summary.json, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2


def _fail(message: str) -> int:
    print(f"oakwatch: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _say(message: str) -> None:
    print(f"oakwatch report: {message}", flush=True)


def add_parsers(sub) -> None:
    """The report subcommand, and --include-raw/--seed on the export subcommand (made here if absent)."""
    report = sub.add_parser("report", help="the protocol's answer: report.md, report.html, report.json, CSV rows")
    report.add_argument("folder", type=Path, metavar="DIR", help="an evidence folder")
    report.add_argument("--output", type=Path, metavar="OUT", help="where to write (default: DIR/reports/)")
    report.add_argument("--seed", type=int, default=0, metavar="N", help="bootstrap seed (recorded; default 0)")
    report.add_argument("--no-replay", action="store_true",
                        help="do not replay trials for per-action state (screen-based figures only)")
    export = sub.choices.get("export")
    if export is None:
        export = sub.add_parser("export", help="the publishable package of an experiment")
        export.add_argument("folder", type=Path, metavar="DIR")
        export.add_argument("--output", type=Path, metavar="OUT")
    export.add_argument("--include-raw", action="store_true",
                        help="also frames and raw provider payloads (never the ROM or a state)")
    export.add_argument("--seed", type=int, default=0, metavar="N", help="bootstrap seed for the package's report")


def report_main(args: argparse.Namespace) -> int:
    from sessions.analysis.report import build_report
    from sessions.evidence.folder import evidence_problem

    folder: Path = args.folder
    from sessions.tasks.task_batch import is_batch

    if is_batch(folder):  # a task batch (docs/tasks.md): per-task success, the success-within-E curve
        from app.commands.tasks_cli import report_main as batch_report_main

        return batch_report_main(folder, args.output)
    problem = evidence_problem(folder)
    if problem is not None:
        return _fail(problem)
    if args.output is not None and args.output.exists() and not args.output.is_dir():
        return _fail(f"{args.output}: exists and is not a folder")
    from sessions.annotations.annotation_layer import LayerError

    try:
        doc = build_report(folder, args.output, seed=args.seed, progress=_say, replay=not args.no_replay)
    except OSError as exc:
        return _fail(f"cannot write the report ({exc.strerror or exc})")
    except LayerError as exc:  # a malformed layer: named in one line, no report written from it
        return _fail(f"cannot read the annotation layers: {exc} (oakwatch verify {folder} lists every problem)")
    for name, path in doc["paths"].items():
        print(f"  {name}: {path}")
    status = EXIT_OK
    if not doc["integrity"]["ok"]:
        print(f"oakwatch report: {len(doc['integrity']['problems'])} integrity problem(s) (oakwatch verify {folder})")
        status = EXIT_PROBLEMS
    if not doc["reconciliation"]["ok"]:
        print("oakwatch report: the trial rows do not reconcile with summary.json")
        status = EXIT_PROBLEMS
    return status


def export_package(args: argparse.Namespace) -> int:
    """`oakwatch export DIR --output OUT [--include-raw]`: the publishable package (seed 000)."""
    from sessions.analysis.report import ExportError, write_package
    from sessions.annotations.annotation_layer import LayerError

    if args.output is None:
        return _fail("export needs --output OUT (a new folder)")
    folder: Path = args.folder
    try:
        done = write_package(folder, args.output, include_raw=getattr(args, "include_raw", False),
                             seed=getattr(args, "seed", 0), progress=lambda m: print(f"oakwatch export: {m}"))
    except ExportError as exc:
        return _fail(str(exc))
    except LayerError as exc:  # a malformed layer: named in one line, nothing written
        return _fail(f"cannot read the annotation layers: {exc} (oakwatch verify {folder} lists every problem)")
    except OSError as exc:
        return _fail(f"cannot write {args.output} ({exc.strerror or exc})")
    print(f"oakwatch export: {done['files']} files written to {args.output}"
          + (f"; redacted: {', '.join(done['redacted'])}" if done["redacted"] else ""))
    return EXIT_OK
