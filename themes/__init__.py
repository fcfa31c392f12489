"""Console themes (data only): Game Boy green, FireRed red, Emerald green, plus the app's .tcss.

The operator's choice is remembered in $XDG_CONFIG_HOME/oakwatch/config.json
(default ~/.config/oakwatch/config.json).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from textual.theme import Theme

TCSS = Path(__file__).resolve().parent / "oakwatch.tcss"

GAMEBOY = Theme(
    name="gameboy",
    primary="#8bac0f",
    secondary="#306230",
    accent="#9bbc0f",
    foreground="#c4d8a0",
    background="#0f380f",
    surface="#16441a",
    panel="#306230",
    success="#9bbc0f",
    warning="#e8c547",
    error="#e8603c",
    dark=True,
    variables={"footer-key-foreground": "#9bbc0f", "border": "#8bac0f", "border-blurred": "#306230"},
)

FIRERED = Theme(
    name="firered",
    primary="#e83c28",
    secondary="#f8a030",
    accent="#f8d030",
    foreground="#f8ece0",
    background="#1c0f0e",
    surface="#2a1614",
    panel="#4a1e1a",
    success="#78c850",
    warning="#f8a030",
    error="#ff4a5a",
    dark=True,
    variables={"footer-key-foreground": "#f8d030", "border": "#e83c28", "border-blurred": "#6a2a22"},
)

EMERALD = Theme(
    name="emerald",
    primary="#30c078",
    secondary="#3890f8",
    accent="#f8d848",
    foreground="#e6fff2",
    background="#0b1f19",
    surface="#102b23",
    panel="#17473a",
    success="#50e890",
    warning="#f8c838",
    error="#f85858",
    dark=True,
    variables={"footer-key-foreground": "#f8d848", "border": "#30c078", "border-blurred": "#17473a"},
)

THEMES: dict[str, Theme] = {t.name: t for t in (GAMEBOY, FIRERED, EMERALD)}
DEFAULT_THEME = "gameboy"


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "oakwatch" / "config.json"


def load_config(path: Path | None = None) -> dict:
    path = path or config_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_config(update: dict, path: Path | None = None) -> None:
    """Merge `update` into the config file; a failure to write is not fatal."""
    path = path or config_path()
    data = {**load_config(path), **update}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
