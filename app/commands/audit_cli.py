"""`oakwatch verify`, `replay`, `recover` and `frames`: the audit commands.

They share one exit rule: 0 all good, 1 problems found, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands import EXIT_OK, EXIT_PROBLEMS
from app.commands import fail as _fail


def add_parsers(sub) -> None:
    """The verify, replay, recover and frames subcommands, on cli.py's subparsers."""
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


def verify_command(args: argparse.Namespace) -> int:
    return _verify(args.folder, args.deep, args.print_root, args.expect_root)


def replay_command(args: argparse.Namespace) -> int:
    return _replay(args.trial, args.rom, args.state)


def recover_command(args: argparse.Namespace) -> int:
    return _recover(args.folder)


def frames_command(args: argparse.Namespace) -> int:
    return _frames(args.trial, args.decisions, args.output)


def _verify(folder: Path, deep: bool, print_root: bool, expect_root: str | None) -> int:
    import re

    from engine.text import printable
    from sessions.audit.verify import audit
    from sessions.evidence import roots
    from sessions.evidence.folder import evidence_problem

    expected = expect_root.strip().lower() if expect_root is not None else None
    if expected is not None and not re.fullmatch(r"[0-9a-f]{64}", expected):
        return _fail(f"--expect-root {printable(expect_root)}: not a root hash (64 hex digits, as --print-root "
                     f"prints it)")
    other = _verify_other_kind(folder, deep, print_root or expected is not None)
    if other is not None:
        return other
    problem = evidence_problem(folder)
    if problem is not None:
        return _fail(problem)
    report = audit(folder, deep=deep)
    problems = report.interrupted + report.problems
    # The root covers the evidence and every layer (sessions.evidence.roots); a mismatch names each part
    # changed, added or removed since the published root was printed.
    problems += roots.compare(folder, expected) if expected is not None else []
    if problems:
        return _verify_failed(folder, problems, report.interrupted)
    print(f"oakwatch verify: {folder} OK (files, hash chains, trace, inputs, memory, frames, results, "
          f"run log, summary and annotation layers reconcile{'; every frame decoded' if deep else ''})")
    if print_root:
        _print_root(folder)
    return EXIT_OK


def _verify_other_kind(folder: Path, deep: bool, root: bool) -> int | None:
    """A task batch or a package is checked its own way; None for anything else (an evidence folder)."""
    from sessions.evidence.folder import is_package
    from sessions.tasks.task_batch import is_batch

    if is_batch(folder):  # a task batch (docs/tasks.md): every run folder's audit and the ledger
        from app.commands.tasks_cli import verify_main

        return verify_main(folder, deep, root)
    if is_package(folder):  # the publishable package (docs/report.md): what it holds, not the evidence audit
        return _verify_package(folder, deep, root)
    return None


def _verify_failed(folder: Path, problems: list, interrupted: list) -> int:
    for p in problems:
        print(f"FAIL {p}", file=sys.stderr)
    kind = "interrupted" if interrupted and len(problems) == len(interrupted) else "problem(s)"
    print(f"oakwatch verify: {len(problems)} {kind} in {folder}", file=sys.stderr)
    return EXIT_PROBLEMS


def _print_root(folder: Path) -> None:
    from sessions.evidence import roots

    listed = roots.parts(folder)
    print(f"root: {roots.root_of(listed) if listed else None}")
    print("covers (the SHA-256 of each part's SHA256SUMS; the root is the SHA-256 of these lines; "
          "reports/ is not covered):")
    for rel, digest in listed.items():
        print(f"  {digest}  {rel}")


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
    from sessions.evidence.folder import evidence_problem
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
