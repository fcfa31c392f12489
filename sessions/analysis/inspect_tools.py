"""The Inspect export of what an agent did through oakwatch's tool server (policy mcp and cli), and
the screens every agent was shown, as Inspect's own types.

A tool-server decision is not a model's reply: the agent made tool calls. So each is exported as
what happened, in the order the server received it: the `get_screen` (`get_observation`, `observe`)
calls of the turn, then the call that was the decision (`press_keys`, `reset`, or a battle tool),
each an assistant message holding a `ToolCall` (empty text: what the agent said, if anything, never
reached the server) followed by a `ChatMessageTool` with the server's answer, and a `ToolEvent` in
the decision's span. Nothing is invented: the contract JSON the loop builds around a call (a
"press_keys tool call" summary, `certainty` 0) is not the agent's, so it is not a message, and the
trace line shown beside it leaves those two fields out.

The answers are rebuilt from the evidence with the server's own code (engine.policies.tools
call_answer/refusal_text): the trace line and the buttons pressed. A screen is the frame store's
lossless PNG enlarged by the manifest's `agent.image_scale`, exactly as the server (or a model's
request) encoded it: for `get_screen` the recorded `png_sha256` of the bytes served is kept beside
the SHA-256 of the bytes embedded, and they agree whenever the same encoder wrote both.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from engine.loop.records import Attempt, ResponseLine, TraceLine
from engine.policies.model import screen_png
from engine.policies.tools import call_answer, refusal_text
from sessions.evidence.framestore import StoredFrame, decode_png, iter_pngs, scan_store

TOOL_POLICIES = frozenset({"mcp", "cli"})  # played through the tool server (engine.policies.tools)
# Trace fields the loop fills in for a tool call, which has none: not the agent's (engine.trial).
NOT_THE_AGENTS = frozenset({"reasoning_summary", "observed"})


class ToolExportProblem(ValueError):
    """A tool call's record that cannot be read; the message is one line."""


class _Screen(BaseModel):
    """One get_screen / get_observation / observe call served during a turn (engine.policies.tools)."""

    model_config = ConfigDict(extra="ignore")
    tool: str
    frame_sha256: str | None = None
    png_sha256: str | None = None  # get_screen: the bytes served
    sha256: str | None = None  # observe: the text served
    at_ms: float | None = None  # after the turn opened


class _Call(BaseModel):
    """An attempt's `reply` under a tool policy: the call as the client made it."""

    model_config = ConfigDict(extra="ignore")
    tool: str
    arguments: dict[str, Any]
    received_utc: str
    screens: list[_Screen] = []


class Screens:
    """A trial's frames as the PNG an agent was shown (data URIs), read from its frame store once."""

    def __init__(self, store: Path, scale: int):
        self.scale = scale
        self._store = store
        self._index: dict[str, StoredFrame] | None = None
        self._cache: dict[str, tuple[str, str]] = {}

    def image(self, frame_sha256: str) -> tuple[str, str] | None:
        """(data URI, SHA-256 of its PNG bytes) for a frame, or None when the store lacks it."""
        if frame_sha256 in self._cache:
            return self._cache[frame_sha256]
        if self._index is None:
            frames = scan_store(self._store)[0] if self._store.is_file() else []
            self._index = {f.sha256: f for f in frames}
        stored = self._index.get(frame_sha256)
        if stored is None:
            return None
        ((_, png),) = iter_pngs(self._store, [stored])
        served = screen_png(decode_png(png), self.scale)
        found = (f"data:image/png;base64,{base64.b64encode(served).decode('ascii')}",
                 hashlib.sha256(served).hexdigest())
        self._cache[frame_sha256] = found
        return found

    def content(self, frame_sha256: str):
        """Inspect content for a frame: the image, or a line saying it is not stored."""
        from inspect_ai.model import ContentImage, ContentText

        found = self.image(frame_sha256)
        if found is None:
            return ContentText(text=f"(the frame with pixel SHA-256 {frame_sha256} is not in the frame store)")
        return ContentImage(image=found[0], detail="high")


def _received(call: _Call, attempt: Attempt, at_ms: float | None = None) -> datetime:
    """When the server received a call; a screen call's time, from its offset into the turn."""
    received = datetime.fromisoformat(call.received_utc)
    if at_ms is None or attempt.latency_ms is None:
        return received
    return received - timedelta(milliseconds=max(0.0, attempt.latency_ms - at_ms))


def _screen_answer(screen: _Screen, screens: Screens) -> tuple[Any, dict]:
    from inspect_ai.model import ContentText

    meta: dict[str, Any] = {"frame_sha256": screen.frame_sha256}
    if screen.tool == "get_screen" and screen.frame_sha256 is not None:
        found = screens.image(screen.frame_sha256)
        meta |= {"served_png_sha256": screen.png_sha256, "png_sha256": found[1] if found else None,
                 "image_scale": screens.scale}
        return [screens.content(screen.frame_sha256)], meta
    # get_observation's and observe's answers are not kept in the evidence: say so, do not rebuild them
    meta |= {"sha256": screen.sha256} if screen.sha256 is not None else {}
    return [ContentText(text=f"({screen.tool}'s answer is not kept in the evidence; it was made on the frame "
                             f"with pixel SHA-256 {screen.frame_sha256})")], meta


def tool_decision(line: TraceLine, response: ResponseLine | None, pressed: list[str], screens: Screens, *,
                  span: str, working_start) -> tuple[list, list]:
    """A tool-server decision's messages and ToolEvents, in the order the calls were received.
    `working_start(datetime) -> float` places an event on the trial's clock."""
    from inspect_ai.event import InfoEvent, ToolEvent
    from inspect_ai.model import ChatMessageAssistant, ChatMessageTool
    from inspect_ai.tool import ToolCall, ToolCallError

    n = line.decision_id
    messages: list = []
    events: list = []
    attempts = response.attempts if response is not None else []

    def called(call_id: str, tool: str, arguments: dict, at: datetime, answer, error: str | None, meta: dict):
        messages.append(ChatMessageAssistant(content="", source="generate",
                                             tool_calls=[ToolCall(id=call_id, function=tool, arguments=arguments)],
                                             metadata={"decision": n, **meta}))
        messages.append(ChatMessageTool(content=answer, tool_call_id=call_id, function=tool,
                                        error=ToolCallError("unknown", error) if error is not None else None,
                                        metadata={"decision": n, **meta}))
        events.append(ToolEvent(id=call_id, function=tool, arguments=arguments, result=answer,
                                error=ToolCallError("unknown", error) if error is not None else None,
                                span_id=span, timestamp=at, completed=at, working_start=working_start(at),
                                metadata={"decision": n, **meta}))

    for i, attempt in enumerate(attempts, 1):
        if attempt.reply is None:  # no call reached the loop (the attempt was aborted): nothing to show
            at = datetime.fromisoformat(line.timestamp_utc)
            events.append(InfoEvent(source="oakwatch/policy", span_id=span, timestamp=at,
                                    working_start=working_start(at), data={"decision": n, "attempt": i,
                                          **attempt.model_dump(mode="json", exclude={"raw"})}))
            continue
        try:
            call = _Call.model_validate(attempt.reply)
        except ValidationError as exc:
            raise ToolExportProblem(f"decision {n}, attempt {i}: its tool call record is malformed "
                                    f"({exc.errors()[0]['msg']})") from None
        for j, screen in enumerate(call.screens, 1):
            answer, meta = _screen_answer(screen, screens)
            called(f"d{n}-{i}-{screen.tool}-{j}", screen.tool, {}, _received(call, attempt, screen.at_ms), answer,
                   None, meta)
        last = i == len(attempts)
        if last:
            rejected = None if line.parsed_actions else attempt.error
            answer = call_answer(line, pressed, rejected)
        else:  # a rejected call answered by the retry's feedback (engine.policies.tools ToolDesk.open_turn)
            answer = {"decision_id": n, "pressed": [], "rejected": attempt.error, "charged": True,
                      "trial_over": False, "ending": None}
        error = refusal_text(call.tool, answer) if answer["rejected"] is not None else None
        called(f"d{n}-{i}-{call.tool}", call.tool, call.arguments, _received(call, attempt),
               error if error is not None else json.dumps(answer), error,
               {"attempt": i, "valid": attempt.valid, "received_utc": call.received_utc,
                "latency_ms": attempt.latency_ms})
    return messages, events


def trace_data(line: TraceLine, exclude: set[str], tool_policy: bool) -> dict:
    """The trace line for its info event; under a tool policy without the fields the loop filled in."""
    return line.model_dump(mode="json", exclude=exclude | (NOT_THE_AGENTS if tool_policy else set()))
