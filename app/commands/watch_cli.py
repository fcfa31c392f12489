"""`oakwatch review`, `serve` and `attach`: the console over an experiment's evidence folder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands import fail as _fail

EXIT_BAD_INPUT = 2


def add_parsers(sub) -> None:
    """The review, serve and attach subcommands, on cli.py's subparsers."""
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


def review_command(args: argparse.Namespace) -> int:
    return _review(args.folder, args.annotator)


def serve_command(args: argparse.Namespace) -> int:
    from app.servers.serve import serve

    return serve(args.folder, host=args.host, port=args.port, operator=args.operator)


def attach_command(args: argparse.Namespace) -> int:
    return _attach(args.folder, args.read_only)


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
