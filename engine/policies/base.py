"""Helpers shared by the non-model policies."""

from __future__ import annotations

import json

UNKNOWN_OBSERVATION = {"screen": "unknown", "location_guess": "unknown", "objective_guess": "", "certainty": 0.0}


def contract_json(actions: list[str], *, summary: str, observed: dict | None = None,
                  memory_read: list[str] | None = None, memory_write: list[dict] | None = None) -> str:
    """A well-formed contract response carrying the given actions."""
    return json.dumps({
        "reasoning_summary": summary,
        "observed": observed or UNKNOWN_OBSERVATION,
        "memory_read": memory_read or [],
        "memory_write": memory_write or [],
        "actions": actions,
    })
