"""A differential run of `oakwatch report` and the Inspect export between two code trees (issue 31
item 8: streaming must not change a byte). Not collected by pytest; run it by hand:

    git archive OLD_COMMIT | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old uv run python tests/sessions/analysis/report_differential.py write FOLDER /tmp/out-old
    uv run python tests/sessions/analysis/report_differential.py write FOLDER /tmp/out-new
    uv run python tests/sessions/analysis/report_differential.py compare /tmp/out-old /tmp/out-new

`write` pins what differs from run to run by nature (report.json's `generated_utc`, Inspect's random
ids and the zip entries' clock) and writes the report with and without replay and the export;
`compare` needs every file byte-identical (exit 1 otherwise, naming the files)."""

from __future__ import annotations

import random
import sys
import time
import types
import uuid
import zipfile
from datetime import UTC, datetime
from pathlib import Path


def write(folder: Path, out: Path) -> None:
    import sessions.analysis.report as rep

    class _Fixed(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)

    rep.datetime = _Fixed
    rng = random.Random(0)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    zipfile.time = types.SimpleNamespace(time=lambda: 1796385600.0, localtime=time.localtime)
    out.mkdir(parents=True)
    rep.build_report(folder, out / "replay", replay=True)
    rep.build_report(folder, out / "noreplay", replay=False)
    from sessions.analysis.inspect_export import export_inspect

    export_inspect(folder, out / "inspect")


def compare(a: Path, b: Path) -> int:
    names_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    names_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    if names_a != names_b:
        print(f"different files: {sorted(set(names_a) ^ set(names_b))}")
        return 1
    differ = [rel for rel in names_a if (a / rel).read_bytes() != (b / rel).read_bytes()]
    for rel in differ:
        print(f"{rel}: differs")
    print(f"{len(names_a)} files compared, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["write"]:
        write(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
