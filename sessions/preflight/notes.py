"""Script notes: what a scripted policy reports alongside its actions (observations, memory).

A YAML file keyed by decision number; validated with the action contract's own models, so a
note can say nothing an agent's response could not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from engine.loop.contract import MemoryWrite, Observed
from sessions.preflight.yamlfile import load_yaml_model, parse_yaml_model

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)  # `true` is not a number


class Note(BaseModel):
    model_config = _STRICT
    observed: Observed | None = None
    memory_read: Annotated[list[Annotated[str, Field(max_length=40)]], Field(max_length=32)] = []
    memory_write: Annotated[list[MemoryWrite], Field(max_length=8)] = []


class ScriptNotes(BaseModel):
    model_config = _STRICT
    # keyed by decision number; no run makes more decisions than a budget allows
    notes: dict[Annotated[int, Field(ge=1, le=10_000_000)], Note]


class NotesError(ValueError):
    """Script notes that cannot be used; the message names the file, line and field."""


def _plain(notes: ScriptNotes) -> dict[int, dict]:
    return {n: note.model_dump(exclude_defaults=True) for n, note in notes.notes.items()}


def parse_notes(text: str, source: str) -> dict[int, dict]:
    return _plain(parse_yaml_model(text, source, ScriptNotes, NotesError, "script notes"))


def load_notes(path: Path) -> dict[int, dict]:
    """Notes as plain dicts by decision number; errors name the file, line and field."""
    return _plain(load_yaml_model(path, ScriptNotes, NotesError, "script notes"))
