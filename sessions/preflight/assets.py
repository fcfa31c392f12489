"""Where bundled files live, and how manifests name them (`bundled:NAME`).

A bundled name is a path inside assets/ and nothing else: an absolute name, a `..` part or a
name that resolves (symlinks followed) outside assets/ is refused from the name and the folder's
own entries alone, before any file is opened. The manifest's path fields check it when they are
parsed (sessions.preflight.manifest.PathRef); `resolve` checks it again for every other caller.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

ASSETS = Path(__file__).resolve().parents[2] / "assets"
BUNDLED_DIRS = ("cartridge", "games", "experiments", "prompts", "pricing")
BUNDLED_PREFIX = "bundled:"
DEFAULT_MANIFEST = ASSETS / "experiments" / "dry-run.yaml"


def _located(name: str) -> Path:
    """Where `bundled:NAME` points: the first bundled folder holding NAME, else assets/NAME."""
    for folder in BUNDLED_DIRS:
        candidate = ASSETS / folder / name
        if os.path.lexists(candidate):  # lstat only: a FIFO or device is not opened here
            return candidate
    return ASSETS / name


def bundled_problem(name: str) -> str | None:
    """Why `bundled:NAME` does not name a file inside assets/ (None: it does)."""
    if not name:
        return "names no file (give bundled:NAME)"
    parts = PurePosixPath(name).parts
    if PurePosixPath(name).is_absolute():
        return "is an absolute path (a bundled name is relative to oakwatch's assets/)"
    if ".." in parts:
        return "contains '..' (a bundled name cannot leave oakwatch's assets/)"
    try:
        real = Path(os.path.realpath(_located(name)))  # readlink and lstat: nothing is opened
    except (OSError, ValueError) as exc:
        return f"cannot be resolved ({exc})"
    root = Path(os.path.realpath(ASSETS))
    if real != root and not real.is_relative_to(root):
        return "resolves outside oakwatch's assets/ (through a symbolic link)"
    return None


def resolve(ref: str, base: Path) -> Path:
    """A manifest's file reference: `bundled:NAME` or a path relative to the manifest.
    Raises ValueError for a bundled name that leaves assets/ (nothing is opened first)."""
    if ref.startswith(BUNDLED_PREFIX):
        name = ref[len(BUNDLED_PREFIX):]
        problem = bundled_problem(name)
        if problem is not None:
            raise ValueError(f"{ref} {problem}")
        return _located(name)
    path = Path(ref).expanduser()
    return path if path.is_absolute() else (base / path)


def bundled_refs(data: object, path: str = "") -> Iterator[tuple[str, str]]:
    """Every `bundled:` string in plain data (a manifest or template read as YAML), with its field path."""
    if isinstance(data, str):
        if data.startswith(BUNDLED_PREFIX):
            yield path, data
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from bundled_refs(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from bundled_refs(value, f"{path}.{i}" if path else str(i))
