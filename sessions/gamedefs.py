"""Loading game definitions (engine.gamedef.GameDefinition) from YAML files."""

from __future__ import annotations

from pathlib import Path

from engine.gamedef import GameDefinition
from sessions.yamlfile import load_yaml_model


class GameDefinitionError(ValueError):
    pass


def load_game_definition(path: Path) -> GameDefinition:
    return load_yaml_model(path, GameDefinition, GameDefinitionError, "game definition")
