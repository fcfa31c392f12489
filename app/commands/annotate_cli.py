"""`oakwatch annotate`, `oakwatch unblind` and `oakwatch export --for-annotators`.

Exit status as the audit commands: 0 done, 1 problems found (a malformed layer in `annotate list`),
2 bad input or refused (a label that does not stand, a frozen layer, labels not frozen yet, an
existing output folder), with one line saying why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands import EXIT_OK, EXIT_PROBLEMS
from app.commands import fail as _fail


def add_parsers(sub) -> None:
    """The annotate, unblind and export subcommands, on cli.py's subparsers."""
    annotate = sub.add_parser("annotate", help="label memory errors and routes, mark trials reviewed, in a layer "
                                               "beside the evidence")
    asub = annotate.add_subparsers(dest="annotate_command", required=True)
    _add_label_parsers(asub)
    _add_layer_parsers(asub)
    unblind = sub.add_parser("unblind", help="once every layer is frozen: unblinded/summary.json with condition ids")
    unblind.add_argument("folder", type=Path, metavar="DIR")
    export = sub.add_parser("export", help="export a folder; --for-annotators: a blinded copy for labelling")
    export.add_argument("folder", type=Path, metavar="DIR")
    export.add_argument("--for-annotators", action="store_true",
                        help="trials with model ids masked, no condition files or blinding key")
    export.add_argument("--output", type=Path, metavar="OUT", required=False)
    export.add_argument("--format", choices=["package", "inspect"], default="package",
                        help="package (default): the publishable package; inspect: each trial as an Inspect AI "
                             "eval log (OUT/<trial>.eval, opens in `inspect view`)")



def _add_label_parsers(asub) -> None:
    """annotate add, route, milestone and reviewed: labels in an annotator's layer."""
    add = asub.add_parser("add", help="a memory-error label: the later decision and the earlier fact or decision")
    add.add_argument("folder", type=Path, metavar="DIR")
    add.add_argument("--annotator", required=True, help="your name: the layer annotations/NAME/")
    add.add_argument("--trial", required=True, metavar="KEY", help="trial key, e.g. A-01")
    add.add_argument("--decision", required=True, type=int, metavar="N", help="the later, contradicting decision")
    add.add_argument("--type", required=True, metavar="T", help="a type of the memory-error rubric")
    add.add_argument("--severity", required=True, choices=["minor", "material", "critical"])
    add.add_argument("--refers-to", required=True, metavar="REF",
                     help="the earlier fact id (fact-0003) or decision number")
    add.add_argument("--role", choices=["primary", "consequence"], default="primary")
    add.add_argument("--primary", metavar="ID", help="with --role consequence: the primary cause's annotation id")
    add.add_argument("--recovered", type=int, metavar="N", help="the decision where the agent recovered")
    add.add_argument("--note", default="", metavar="TEXT")
    route = asub.add_parser("route", help="a room/landmark annotation for a decision without coordinates")
    route.add_argument("folder", type=Path, metavar="DIR")
    route.add_argument("--annotator", required=True)
    route.add_argument("--trial", required=True, metavar="KEY")
    route.add_argument("--decision", required=True, type=int, metavar="N")
    route.add_argument("--room", required=True)
    route.add_argument("--landmark")
    route.add_argument("--note", default="", metavar="TEXT")
    milestone = asub.add_parser("milestone", help="a milestone scored by hand (a game without a memory probe): the "
                                                  "rung first reached at a decision")
    milestone.add_argument("folder", type=Path, metavar="DIR")
    milestone.add_argument("--annotator", required=True, help="your name: the layer annotations/NAME/")
    milestone.add_argument("--trial", required=True, metavar="KEY", help="trial key, e.g. A-01")
    milestone.add_argument("--decision", required=True, type=int, metavar="N", help="the decision it was reached at")
    milestone.add_argument("--milestone", required=True, metavar="ID", help="a rung of the frozen ladder, e.g. M3")
    milestone.add_argument("--note", default="", metavar="TEXT")
    reviewed = asub.add_parser("reviewed", help="a trial looked at for memory errors: every one found is labelled "
                                                "(none: its count is a known 0)")
    reviewed.add_argument("folder", type=Path, metavar="DIR")
    reviewed.add_argument("--annotator", required=True, help="your name: the layer annotations/NAME/")
    reviewed.add_argument("--trial", required=True, metavar="KEY", help="trial key, e.g. A-01")
    reviewed.add_argument("--from", dest="first", type=int, metavar="N",
                          help="the first decision reviewed (default 1)")
    reviewed.add_argument("--to", dest="last", type=int, metavar="N",
                          help="the last decision reviewed, inclusive (default the trial's last)")
    reviewed.add_argument("--note", default="", metavar="TEXT")


def _add_layer_parsers(asub) -> None:
    """annotate adjudicate, freeze and list: settling, sealing and reading layers."""
    adj = asub.add_parser("adjudicate", help="settle labels (the originals stay) in the adjudication layer")
    adj.add_argument("folder", type=Path, metavar="DIR")
    adj.add_argument("--resolves", required=True, nargs="+", metavar="ID", help="annotation ids, e.g. alice-3 bob-2")
    adj.add_argument("--resolution", required=True, choices=["accept", "reject", "relabel"])
    adj.add_argument("--type", metavar="T", help="the settled type (required with relabel)")
    adj.add_argument("--severity", choices=["minor", "material", "critical"])
    adj.add_argument("--reason", required=True, metavar="TEXT")
    freeze = asub.add_parser("freeze", help="seal a layer: no more labels; its sums record the frozen hash, "
                                            "which fixes the layer's root")
    freeze.add_argument("folder", type=Path, metavar="DIR")
    freeze.add_argument("--annotator", required=True, help="the layer (an annotator, operator or adjudication)")
    listing = asub.add_parser("list", help="the labels of every layer, or of one")
    listing.add_argument("folder", type=Path, metavar="DIR")
    listing.add_argument("--annotator")


def run(args: argparse.Namespace) -> int:
    from sessions.evidence.folder import evidence_problem

    folder: Path = args.folder
    problem = evidence_problem(folder)  # a home directory is not an experiment with no labels yet
    if problem is not None:
        return _fail(problem)
    if args.command == "annotate":
        return _annotate(args, folder)
    if args.command == "unblind":
        return _unblind(folder)
    if args.command == "export":
        return _export(args, folder)
    return _fail(f"unknown command {args.command}")


def _annotate(args: argparse.Namespace, folder: Path) -> int:
    from sessions.annotations import annotation_layer as al

    cmd = args.annotate_command
    try:
        if cmd == "add":
            if args.role == "consequence" and not args.primary:
                return _fail("--role consequence needs --primary ID (the primary cause's annotation id)")
            a = al.add_label(folder, args.annotator, args.trial, args.decision, type=args.type,
                             severity=args.severity, refers_to=args.refers_to, role=args.role,
                             primary_id=args.primary, recovered_decision=args.recovered, note=args.note)
        elif cmd == "route":
            a = al.add_route(folder, args.annotator, args.trial, args.decision, room=args.room,
                             landmark=args.landmark, note=args.note)
        elif cmd == "milestone":
            a = al.add_milestone(folder, args.annotator, args.trial, args.decision, milestone=args.milestone,
                                 note=args.note)
        elif cmd == "reviewed":
            a = al.add_reviewed(folder, args.annotator, args.trial, args.first, args.last, note=args.note)
        elif cmd == "adjudicate":
            a = al.adjudicate(folder, args.resolves, args.resolution, args.reason, type=args.type,
                              severity=args.severity)
        elif cmd == "freeze":
            layer = al.AnnotationLayer(folder, args.annotator)
            if not layer.path.is_file():
                return _fail(f"no layer {args.annotator} in {folder / 'annotations'}")
            layer.freeze()
            # The layer's root (the SHA-256 of its SHA256SUMS) is fixed from now on; reports cite it.
            print(f"oakwatch annotate: froze annotations/{args.annotator} (annotations.jsonl "
                  f"{layer.frozen_sha256()}); its root, fixed from now on: {layer.layer_root()} "
                  f"(sha256sum annotations/{args.annotator}/SHA256SUMS)")
            return EXIT_OK
        else:
            return _list(folder, args.annotator)
    except al.LayerError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write the layer ({exc.strerror or exc})")
    print(f"oakwatch annotate: {a.id} added to annotations/{a.id.rsplit('-', 1)[0]} ({_describe(a)})")
    return EXIT_OK


def _describe(a) -> str:
    if a.kind == "route":
        return f"{a.trial_key} decision {a.decision_id}: room {a.room}" + (f", {a.landmark}" if a.landmark else "")
    if a.kind == "adjudication":
        return f"{a.resolution} {' '.join(a.resolves or [])} -> {a.type} {a.severity}: {a.reason}"
    if a.kind == "freeze":
        return f"frozen ({a.note})"
    if a.kind == "milestone":
        return f"{a.trial_key} decision {a.decision_id}: {a.milestone} reached" + (f" ({a.note})" if a.note else "")
    if a.kind == "reviewed":
        return (f"{a.trial_key} reviewed, decisions {a.decision_id}..{a.through_decision}"
                + (f" ({a.note})" if a.note else ""))
    text = f"{a.trial_key} decision {a.decision_id}: {a.type} {a.severity}, refers to {a.refers_to}"
    if a.role == "consequence":
        text += f", consequence of {a.primary_id}"
    if a.recovered_decision is not None:
        text += f", recovered at {a.recovered_decision}"
    return text + (f" ({a.note})" if a.note else "")


def _list(folder: Path, annotator: str | None) -> int:
    from sessions.annotations.annotation_layer import AnnotationLayer, LayerError, layer_names, trial_tags

    names = [annotator] if annotator else layer_names(folder)
    problems = 0
    shown = 0
    if not annotator or annotator == "operator":
        try:
            for a in trial_tags(folder):
                print(f"{a.id}  {_describe(a)}  [live tag]")
                shown += 1
        except LayerError as exc:
            print(f"FAIL {exc}", file=sys.stderr)
            problems += 1
    for name in names:
        try:
            layer = AnnotationLayer(folder, name)
            records = layer.records()
        except LayerError as exc:
            print(f"FAIL {exc}", file=sys.stderr)
            problems += 1
            continue
        for a in records:
            print(f"{a.id}  {_describe(a)}")
            shown += 1
        if annotator and not records and not layer.path.exists():
            return _fail(f"no layer {annotator} in {folder / 'annotations'}")
    print(f"oakwatch annotate: {shown} record(s) in {len(names)} layer(s)", file=sys.stderr)
    return EXIT_PROBLEMS if problems else EXIT_OK


def _unblind(folder: Path) -> int:
    from sessions.annotations.blinding import BlindingError, unblind

    try:
        target = unblind(folder)
    except BlindingError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write {folder / 'unblinded'} ({exc.strerror or exc})")
    print(f"oakwatch unblind: wrote {target}/summary.json (condition ids beside labels); "
          f"the run's summary.json is unchanged")
    return EXIT_OK


def _export(args: argparse.Namespace, folder: Path) -> int:
    if args.format == "inspect":
        from app.commands.inspect_cli import export_inspect_command

        return export_inspect_command(args, folder)
    if not args.for_annotators:
        from app.commands.report_cli import export_package  # the publishable package (seed 000)

        return export_package(args)
    if args.output is None:
        return _fail("export --for-annotators needs --output OUT (a new folder)")
    from sessions.annotations.blinding import BlindingError, export_for_annotators

    try:
        done = export_for_annotators(folder, args.output)
    except BlindingError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write {args.output} ({exc.strerror or exc})")
    print(f"oakwatch export: {done['trials']} trial(s) written blinded to {args.output} "
          f"({done['masked_ids']} model id(s) masked; see its README.md)")
    return EXIT_OK
