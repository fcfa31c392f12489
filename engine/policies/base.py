"""Helpers shared by the non-model policies."""

from __future__ import annotations

import json

UNKNOWN_OBSERVATION = {"screen": "unknown", "location_guess": "unknown", "objective_guess": "", "certainty": 0.0}


def contract_json(actions: list[str], *, summary: str, observed: dict | None = None,
                  memory_read: list[str] | None = None, memory_write: list[dict] | None = None,
                  observed_json: str | None = None, shortcut: dict | None = None) -> str:
    """A well-formed contract response carrying the given actions. `observed_json`: `observed`
    already encoded, for a policy that repeats one observation over many decisions. `shortcut`: the
    response's `shortcut` (a tool call's, every value as sent: the contract judges it)."""
    plain = shortcut is None and not memory_read and not memory_write
    if plain and observed is None and summary in _PLAIN:
        return _PLAIN[summary] % json.dumps(actions)  # the common case, without re-encoding the rest
    if plain and observed_json is not None:
        return (f'{{"reasoning_summary": {json.dumps(summary)}, "observed": {observed_json}, '
                f'"memory_read": [], "memory_write": [], "actions": {json.dumps(actions)}}}')
    return json.dumps({
        "reasoning_summary": summary,
        "observed": observed or UNKNOWN_OBSERVATION,
        "memory_read": memory_read or [],
        "memory_write": memory_write or [],
        "actions": actions,
        **({"shortcut": shortcut} if shortcut is not None else {}),
    })


# Responses that differ only in their actions (random play, key presses): the rest encoded once.
_PLAIN = {summary: json.dumps({"reasoning_summary": summary, "observed": UNKNOWN_OBSERVATION, "memory_read": [],
                               "memory_write": [], "actions": None}).replace("null", "%s")
          for summary in ("random", "operator key press", "press_keys tool call")}
