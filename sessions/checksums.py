"""SHA256SUMS over an evidence folder, in the format `sha256sum --check` reads."""

from __future__ import annotations

import hashlib
from pathlib import Path

SUMS = "SHA256SUMS"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def evidence_files(folder: Path) -> list[Path]:
    return sorted((p for p in folder.rglob("*") if p.is_file() and p.name != SUMS
                   and not p.name.endswith(".tmp")),
                  key=lambda p: p.relative_to(folder).as_posix())


def write_sums(folder: Path) -> Path:
    lines = [f"{file_sha256(p)}  {p.relative_to(folder).as_posix()}\n" for p in evidence_files(folder)]
    target = folder / SUMS
    tmp = folder / (SUMS + ".tmp")
    tmp.write_text("".join(lines), encoding="utf-8")
    tmp.replace(target)
    return target


def check_sums(folder: Path) -> list[str]:
    """Problems found, as messages; empty when every file matches and none is missing or extra."""
    sums = folder / SUMS
    if not sums.exists():
        return [f"{SUMS} is missing"]
    listed: dict[str, str] = {}
    problems = []
    for n, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            problems.append(f"{SUMS}:{n}: malformed line")
            continue
        listed[name] = digest
    for name, digest in listed.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: listed in {SUMS} but missing")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: content differs from its {SUMS} entry")
    for path in evidence_files(folder):
        rel = path.relative_to(folder).as_posix()
        if rel not in listed:
            problems.append(f"{rel}: present but not listed in {SUMS}")
    return problems
