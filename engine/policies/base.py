"""Helpers shared by the non-model policies."""

from __future__ import annotations

import json


def contract_json(actions: list[str], *, summary: str, objective: str = "",
                  screen: str = "unknown", memory_write: list[dict] | None = None) -> str:
    """A well-formed contract response carrying the given actions."""
    return json.dumps({
        "reasoning_summary": summary,
        "observed": {"screen": screen, "location_guess": "unknown", "objective_guess": objective,
                     "certainty": 0.0},
        "memory_read": [],
        "memory_write": memory_write or [],
        "actions": actions,
    })
