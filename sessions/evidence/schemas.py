"""The JSON Schemas of every record, as published in each evidence folder's schemas/.

Generating them from the models costs ~0.1 s per run, so they are generated once into
assets/schemas/ (`python -m sessions.evidence.schemas` rewrites them) and a test keeps the two equal.
"""

from __future__ import annotations

import json
import sys

from engine.loop.records import TRIAL_RECORDS
from sessions.evidence.records import EXPERIMENT_RECORDS
from sessions.preflight.assets import ASSETS

SCHEMAS_DIR = ASSETS / "schemas"


def generated() -> dict[str, bytes]:
    return {f"{name}.schema.json": (json.dumps(model.model_json_schema(), indent=2) + "\n").encode()
            for name, model in {**TRIAL_RECORDS, **EXPERIMENT_RECORDS}.items()}


def published() -> dict[str, bytes]:
    """The committed schema files, by file name."""
    return {p.name: p.read_bytes() for p in sorted(SCHEMAS_DIR.glob("*.schema.json"))}


def main() -> int:
    SCHEMAS_DIR.mkdir(exist_ok=True)
    for old in SCHEMAS_DIR.glob("*.schema.json"):
        old.unlink()
    for name, data in generated().items():
        (SCHEMAS_DIR / name).write_bytes(data)
    print(f"wrote {len(generated())} schemas to {SCHEMAS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
