"""The action contract: the one response shape every policy must produce.

Validated strictly (types, enums, lengths, ranges). A response with more actions than the
manifest allows is rejected, never truncated.
"""

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

# The action vocabulary the agent may use: controller buttons and NOOP, nothing else.
Action = Literal["UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP"]
ACTIONS: tuple[str, ...] = ("UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP")

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


class ShortcutCallBody(_Strict):
    """A mechanical shortcut the agent calls instead of listing buttons (engine.loop.shortcuts)."""

    name: Literal["advance_dialogue", "choose_move", "use_item", "switch_to"]
    argument: Annotated[str, Field(max_length=64)] | int | None = None


class ShortcutResponse(AgentResponse):
    """The response where the manifest permits shortcuts: actions, or a shortcut with no actions."""

    actions: Annotated[list[Action], Field(max_length=64)]
    shortcut: ShortcutCallBody | None = None

    @model_validator(mode="after")
    def _one(self) -> "ShortcutResponse":
        if self.shortcut is None and not self.actions:
            raise ValueError("give at least one action, or a shortcut")
        if self.shortcut is not None and self.actions:
            raise ValueError("give actions or a shortcut, not both")
        return self


class ContractError(ValueError):
    """A response broke the contract; the message says how, for the log and the retry."""


def parse_response(raw: str, max_actions: int, allowed: frozenset[str] | None = None,
                   shortcuts: tuple[str, ...] | None = None) -> AgentResponse:
    """Parse and validate one raw response; raise ContractError naming every problem. `shortcuts`: the
    ones the manifest permits (then a response may call one instead of listing actions)."""
    model = AgentResponse if shortcuts is None else ShortcutResponse
    try:  # the common case, parsed and validated in one pass by pydantic's own JSON parser
        response = model.model_validate_json(raw)
    except (ValidationError, ValueError, TypeError, RecursionError):
        response = _parse_slowly(raw, model)  # a refusal: the slow path words it
    # (not getattr(response, "shortcut", None): a missing attribute costs pydantic a raised error per call)
    call = response.shortcut if model is ShortcutResponse else None
    if call is not None and call.name not in shortcuts:
        raise ContractError(f"shortcut: {call.name} is not permitted here (permitted: {', '.join(shortcuts)})")
    if len(response.actions) > max_actions:
        raise ContractError(
            f"actions: {len(response.actions)} actions given, at most {max_actions} allowed per decision")
    if allowed is not None:
        banned = [a for a in response.actions if a not in allowed]
        if banned:
            raise ContractError(f"actions: not allowed by the manifest: {', '.join(banned)}")
    return response


def _parse_slowly(raw: str, model: type[AgentResponse] = AgentResponse) -> AgentResponse:
    try:
        data = json.loads(raw)
    except (ValueError, TypeError) as exc:  # JSONDecodeError, an integer over 4300 digits, bad bytes
        raise ContractError(f"response is not a JSON object: {exc}") from None
    except RecursionError:
        raise ContractError("response is not a JSON object: nested too deeply") from None
    if not isinstance(data, dict):
        raise ContractError("response is not a JSON object")
    try:
        response = model.model_validate(data)
    except RecursionError:
        raise ContractError("response nested too deeply") from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise ContractError(problems) from None
    return response


def response_json_schema(max_actions: int, notebook_chars: int | None = None,
                         shortcuts: tuple[str, ...] | None = None) -> dict:
    """The response schema sent; with `notebook_chars` (bounded context) it has an optional notebook;
    with `shortcuts` (the permitted ones) an optional `shortcut` and actions that may be empty."""
    schema = AgentResponse.model_json_schema()
    notebook = schema["properties"].pop("notebook")
    if notebook_chars is not None:
        schema["properties"]["notebook"] = {"type": "string", "maxLength": notebook_chars,
                                            "description": "your notebook's new text (replaces the old)"}
    del notebook  # (the model's field, dropped from the schema sent without bounded context)
    schema["properties"]["actions"]["maxItems"] = max_actions
    if shortcuts:
        schema["properties"]["actions"]["minItems"] = 0
        schema["properties"]["shortcut"] = {
            "description": "a shortcut instead of actions (then actions is empty)",
            "anyOf": [{"type": "object", "additionalProperties": False, "required": ["name", "argument"],
                       "properties": {"name": {"type": "string", "enum": list(shortcuts)},
                                      "argument": {"anyOf": [{"type": "string"}, {"type": "integer"},
                                                             {"type": "null"}]}}},
                      {"type": "null"}]}
    schema["title"] = "oakwatch agent response"
    return schema
