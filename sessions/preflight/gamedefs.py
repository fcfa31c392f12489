"""Loading game definitions (engine.games.gamedef.GameDefinition) from YAML files."""

from __future__ import annotations

from pathlib import Path

from engine.games.gamedef import GameDefinition
from sessions.preflight.yamlfile import load_yaml_model, parse_yaml_model


class GameDefinitionError(ValueError):
    """A game definition that cannot be used; the message names the file, line and field."""


def parse_game_definition(text: str, source: str) -> GameDefinition:
    return parse_yaml_model(text, source, GameDefinition, GameDefinitionError, "a game definition")


def load_game_definition(path: Path) -> GameDefinition:
    return load_yaml_model(path, GameDefinition, GameDefinitionError, "game definition")
