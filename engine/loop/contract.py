"""The action contract: the one response shape every policy must produce.

Validated strictly (types, enums, lengths, ranges). A response with more actions than the
manifest allows is rejected, never truncated.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.loop.actions import Action

Screen = Literal["overworld", "dialogue", "menu", "battle", "transition", "unknown"]
FactKind = Literal["objective", "location", "event", "inventory", "warning"]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]


class _Strict(BaseModel):
    # strict: `"certainty": true` or `"0.8"` is not a number; NaN and infinity are not certainties
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Observed(_Strict):
    screen: Screen
    location_guess: Annotated[str, Field(max_length=200)]
    objective_guess: Annotated[str, Field(max_length=300)]
    certainty: Unit


class MemoryWrite(_Strict):
    kind: FactKind
    value: Annotated[str, Field(min_length=1, max_length=200)]
    confidence: Unit
    evidence: Annotated[str, Field(max_length=300)]
    # Optional structure for atomic facts; without it the fact is (player, kind, value).
    subject: Annotated[str, Field(min_length=1, max_length=80)] | None = None
    predicate: Annotated[str, Field(min_length=1, max_length=80)] | None = None
    supersedes: Annotated[str, Field(max_length=40)] | None = None
    status: Literal["active", "completed"] = "active"


class AgentResponse(_Strict):
    reasoning_summary: Annotated[str, Field(max_length=1000)]
    observed: Observed
    memory_read: Annotated[list[Annotated[str, Field(max_length=40)]], Field(max_length=32)]
    memory_write: Annotated[list[MemoryWrite], Field(max_length=8)]
    actions: Annotated[list[Action], Field(min_length=1)]
    # Bounded context only (engine.loop.context): the notebook's new text, cut to the limit by the harness.
    # Absent from the schema sent unless the manifest sets agent.context.
    notebook: Annotated[str, Field(max_length=100_000)] | None = None


class ContractError(ValueError):
    """A response broke the contract; the message says how, for the log and the retry."""


def parse_response(raw: str, max_actions: int, allowed: frozenset[str] | None = None) -> AgentResponse:
    """Parse and validate one raw response; raise ContractError naming every problem."""
    try:  # the common case, parsed and validated in one pass by pydantic's own JSON parser
        response = AgentResponse.model_validate_json(raw)
    except (ValidationError, ValueError, TypeError, RecursionError):
        response = _parse_slowly(raw)  # a refusal: the slow path words it
    if len(response.actions) > max_actions:
        raise ContractError(
            f"actions: {len(response.actions)} actions given, at most {max_actions} allowed per decision")
    if allowed is not None:
        banned = [a for a in response.actions if a not in allowed]
        if banned:
            raise ContractError(f"actions: not allowed by the manifest: {', '.join(banned)}")
    return response


def _parse_slowly(raw: str) -> AgentResponse:
    try:
        data = json.loads(raw)
    except (ValueError, TypeError) as exc:  # JSONDecodeError, an integer over 4300 digits, bad bytes
        raise ContractError(f"response is not a JSON object: {exc}") from None
    except RecursionError:
        raise ContractError("response is not a JSON object: nested too deeply") from None
    if not isinstance(data, dict):
        raise ContractError("response is not a JSON object")
    try:
        response = AgentResponse.model_validate(data)
    except RecursionError:
        raise ContractError("response nested too deeply") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise ContractError(problems) from None
    return response


def response_json_schema(max_actions: int, notebook_chars: int | None = None) -> dict:
    """The response schema sent; with `notebook_chars` (bounded context) it has an optional notebook."""
    schema = AgentResponse.model_json_schema()
    notebook = schema["properties"].pop("notebook")
    if notebook_chars is not None:
        schema["properties"]["notebook"] = {"type": "string", "maxLength": notebook_chars,
                                            "description": "your notebook's new text (replaces the old)"}
    del notebook  # (the model's field, dropped from the schema sent without bounded context)
    schema["properties"]["actions"]["maxItems"] = max_actions
    schema["title"] = "oakwatch agent response"
    return schema
