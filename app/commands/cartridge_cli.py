"""`oakwatch cartridge variant --seed N|--seed-env NAME --output DIR`: a held-out Parcel Quest.

Exit status: 0 written; 2 bad input or a seed whose variant cannot be solved (one line, nothing
written).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from app.commands import EXIT_OK
from app.commands import fail as _fail


def add_parsers(sub) -> None:
    cart = sub.add_parser("cartridge", help="the bundled cartridge: held-out variants")
    cart_sub = cart.add_subparsers(dest="cartridge_command", required=True)
    var = cart_sub.add_parser(
        "variant", help="a new but equivalent Parcel Quest for a seed: ROM, start states, game definition "
                        "(with the optimal presses per rung), manifest and the solver's walkthrough")
    seed = var.add_mutually_exclusive_group(required=True)
    seed.add_argument("--seed", metavar="N", help="a non-negative integer (0 = the bundled cartridge; held-out "
                                                  "seeds should have at least 64 bits)")
    seed.add_argument("--seed-env", metavar="NAME", help="read the seed from this environment variable "
                                                         "(so it never appears in a command line or file)")
    var.add_argument("--output", type=Path, required=True, metavar="DIR", help="new folder to write")


def run(args: argparse.Namespace) -> int:
    from sessions.variants.variant_files import VariantFilesError, write_variant
    from sessions.variants.variants import VariantError, make_variant, parse_seed

    if args.seed_env is not None:
        raw = os.environ.get(args.seed_env)
        if raw is None:
            return _fail(f"--seed-env {args.seed_env}: no such environment variable")
        where = f"${args.seed_env}"
    else:
        raw, where = args.seed, "--seed"
    try:
        seed = parse_seed(raw)
    except ValueError as exc:
        return _fail(f"{where}: {exc}")
    if args.output.expanduser().exists():
        return _fail(f"output folder already exists: {args.output} (choose a new one)")
    t0 = time.monotonic()
    try:
        variant = make_variant(seed)
        written = write_variant(variant, args.output)
    except (VariantError, VariantFilesError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot write {args.output} ({exc})")
    sol = variant.solution
    print(f"oakwatch cartridge variant: solved in {time.monotonic() - t0:.1f} s; {len(sol.actions)} presses to M8 "
          f"(optimal per rung: {', '.join(f'{r} {n}' for r, n in sol.optimal.items())})")
    print(f"rom_sha256: {written['rom_sha256']}")
    print(f"wrote {args.output}/ ({', '.join(v for k, v in written.items() if k != 'rom_sha256')}); try: "
          f"oakwatch run {args.output}/manifest.yaml --headless")
    return EXIT_OK


