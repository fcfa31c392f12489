"""The action vocabulary the agent may use: controller buttons and NOOP, nothing else."""

from __future__ import annotations

from typing import Literal

Action = Literal["UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP"]

ACTIONS: tuple[str, ...] = ("UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP")
