"""SHA256SUMS: the format `sha256sum --check` reads, kept from digests already computed."""

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


def render_sums(sums: dict[str, str]) -> str:
    """Sorted by path, so the same files always give the same bytes (and the same root)."""
    return "".join(f"{digest}  {rel}\n" for rel, digest in sorted(sums.items()))


class SumsFormatError(ValueError):
    pass


def parse_sums(text: str) -> dict[str, str]:
    """Path -> digest; raises SumsFormatError naming the first malformed line."""
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not name:
            raise SumsFormatError(f"{SUMS}:{n}: malformed line")
        if name in out:
            raise SumsFormatError(f"{SUMS}:{n}: {name} listed twice")
        out[name] = digest
    return out
