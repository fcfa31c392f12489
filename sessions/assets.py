"""Where bundled files live, and how manifests name them (`bundled:NAME`)."""

from __future__ import annotations

from pathlib import Path

ASSETS = Path(__file__).resolve().parent.parent / "assets"
BUNDLED_DIRS = ("cartridge", "games", "experiments", "prompts", "pricing")
BUNDLED_PREFIX = "bundled:"
DEFAULT_MANIFEST = ASSETS / "experiments" / "dry-run.yaml"


def resolve(ref: str, base: Path) -> Path:
    """A manifest's file reference: `bundled:NAME` or a path relative to the manifest."""
    if ref.startswith(BUNDLED_PREFIX):
        name = ref[len(BUNDLED_PREFIX):]
        for folder in BUNDLED_DIRS:
            candidate = ASSETS / folder / name
            if candidate.exists():
                return candidate
        return ASSETS / name
    path = Path(ref).expanduser()
    return path if path.is_absolute() else (base / path)
