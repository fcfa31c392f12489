"""`oakwatch export DIR --format inspect --output OUT`: each trial as an Inspect AI eval log.

Exit status as the other exports: 0 written, 2 bad input or refused (one line; nothing written).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.commands import EXIT_OK
from app.commands import fail as _fail


def export_inspect_command(args: argparse.Namespace, folder: Path) -> int:
    if args.output is None:
        return _fail("export --format inspect needs --output OUT (a new folder)")
    if args.for_annotators or getattr(args, "include_raw", False):
        return _fail("--format inspect goes with neither --for-annotators nor --include-raw")
    from sessions.analysis.inspect_export import InspectExportError, export_inspect

    try:
        done = export_inspect(folder, args.output)
    except InspectExportError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write {args.output} ({exc.strerror or exc})")
    print(f"oakwatch export: {done['trials']} trial(s) written to {args.output} as Inspect eval logs "
          f"(open them with: inspect view --log-dir {args.output})")
    return EXIT_OK
