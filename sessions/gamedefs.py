"""Loading game definitions (engine.gamedef.GameDefinition) from YAML files."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from engine.gamedef import GameDefinition


class GameDefinitionError(ValueError):
    pass


def load_game_definition(path: Path) -> GameDefinition:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GameDefinitionError(f"{path}: cannot read game definition ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise GameDefinitionError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    try:
        return GameDefinition.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
        raise GameDefinitionError(f"{path}: {loc}: {e['msg']}") from None
