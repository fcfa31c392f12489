"""`oakwatch portal DIR… --output OUT`: the static results site (docs/portal.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub) -> None:
    portal = sub.add_parser("portal", help="one self-contained HTML results site from task batches and campaigns")
    portal.add_argument("folders", type=Path, nargs="+", metavar="DIR", help="task batches and campaign folders")
    portal.add_argument("--output", type=Path, required=True, metavar="OUT", help="an absent or empty folder")


def portal_main(args: argparse.Namespace) -> int:
    from sessions.analysis.portal import PortalError, build_portal

    try:
        paths = build_portal(list(args.folders), args.output)
    except PortalError as exc:
        print(f"oakwatch: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"oakwatch: cannot write the portal ({exc.strerror or exc})", file=sys.stderr)
        return 2
    print(f"portal: {len(paths)} page(s) in {args.output} (open {args.output / 'index.html'})")
    return 0
