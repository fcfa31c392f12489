"""Script notes: what a scripted policy reports alongside its actions (observations, memory).

A YAML file keyed by decision number; validated with the action contract's own models, so a
note can say nothing an agent's response could not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from engine.contract import MemoryWrite, Observed
from sessions.yamlfile import load_yaml_model


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")
    observed: Observed | None = None
    memory_read: Annotated[list[str], Field(max_length=32)] = []
    memory_write: Annotated[list[MemoryWrite], Field(max_length=8)] = []


class ScriptNotes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    notes: dict[Annotated[int, Field(ge=1)], Note]


class NotesError(ValueError):
    pass


def load_notes(path: Path) -> dict[int, dict]:
    """Notes as plain dicts by decision number; errors name the file and the field."""
    notes = load_yaml_model(path, ScriptNotes, NotesError, "script notes")
    return {n: note.model_dump(exclude_defaults=True) for n, note in notes.notes.items()}
