"""An agent that plays through tool calls (oakwatch's MCP server: policy mcp and cli).

The tool desk is where two threads meet: the trial loop (engine.loop.trial, in the runner's thread) and
the tool server (sessions.execute.mcp_server, on its own event loop). When the loop asks its policy for a
decision, ToolCallPolicy opens a *turn* on the desk holding the decision's Observation; a
`press_keys` call takes the turn and becomes that decision's response, so the contract, retries,
budgets, trace, operator pause/step/tag/end, verify and replay all apply to it unchanged. The
call's result is what the loop recorded: the desk is also a sink and answers the call from the
decision's trace line (or, for a rejected call, from the retry's feedback).

`get_screen` reads the open turn's screen; each one served is logged in the next decision's
response (responses.jsonl, the attempt's `reply`). Once the trial is over every call is refused
with the reason. A client that disconnects ends the trial as `agent-disconnected`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
import time
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

import pydantic_core

from engine.battle.battle import BATTLE_TOOLS
from engine.loop.control import RunControl
from engine.loop.display import Display
from engine.loop.events import DecisionRecorded, TrialEnded
from engine.loop.outcomes import EndRequest
from engine.loop.records import ReplyOversize, TraceLine, Usage
from engine.loop.trial import utc_now
from engine.policies.base import contract_json
from engine.policies.policy import Observation, PolicyExhausted, PolicyReply


class TrialOver(Exception):
    """A call made once the trial has ended (or before the server could play): refused with the reason."""


@dataclass
class Call:
    """One press_keys (or reset) call, as the client made it."""

    arguments: dict
    received: float  # time.perf_counter()
    received_utc: str
    result: Future = field(default_factory=Future)  # -> dict (the decision's outcome) or TrialOver
    # or "reset" (ruleset battle: a decision that presses nothing and ends the episode), or a battle call
    # (apply_team, lead, action: engine.battle.battle judges it in the loop)
    tool: str = "press_keys"
    session: str | None = None  # the SHA-256 of the MCP session that made it (one per trial: verify)


@dataclass
class Turn:
    """A decision waiting for its call."""

    obs: Observation
    opened: float  # time.perf_counter()
    call: Future = field(default_factory=Future)  # -> Call
    taken: bool = False
    screens: list[dict] = field(default_factory=list)  # get_screen calls served during this turn


def _awaitable(future: Future) -> asyncio.Future:
    """`future` (set from any thread) as an asyncio future of the running loop. asyncio.wrap_future
    always wakes the loop through its self-pipe, a system call whose return waits for the GIL; when
    the setter is this loop's own thread (oakwatch mcp: the trial and the server share one loop) the
    result is passed on at once. Cancelling the awaitable cancels `future`, as with
    wrap_future (a turn the loop stopped waiting for is then refused to a late call)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    owner = threading.get_ident()

    def copy(source: Future) -> None:
        if waiter.done():
            return
        if source.cancelled():
            waiter.cancel()
        elif (exc := source.exception()) is not None:
            waiter.set_exception(exc)
        else:
            waiter.set_result(source.result())

    def done(source: Future) -> None:
        if loop.is_closed():
            return  # nobody waits any more (a client gone with its loop)
        if threading.get_ident() == owner:
            # copied at once: an asyncio future wakes its waiter through call_soon anyway, so a call_soon
            # here would only cost another turn of the loop (two per call); a future already done (the
            # turn a call finds open) is then awaited without suspending at all
            copy(source)
        else:
            loop.call_soon_threadsafe(copy, source)

    waiter.add_done_callback(lambda w: future.cancel() if w.cancelled() else None)
    future.add_done_callback(done)
    return waiter


def _done(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class ToolDesk(Display):
    """The hand-off between the tool server and the trial loop (see the module doc)."""

    # Never asked for budgets, frames or the memory store: the desk costs the loop nothing extra.
    wants_budgets = wants_frames = wants_memory_store = False

    def __init__(self, control: RunControl | None = None):
        self._lock = threading.Lock()
        self._turn: Future = Future()  # -> Turn, or None once the trial is over
        self._pending: Call | None = None  # a call handed to the loop, waiting for its decision's record
        self.control = control
        self.ended: str | None = None  # the trial's termination reason, once known
        self.gone: str | None = None  # the client disconnected: why
        self.calls = 0  # tool calls received (every tool, refused ones included)
        self.finished = threading.Event()  # set when the trial's result is sealed
        self.result = None  # engine.loop.records.TrialResult, once sealed

    # -- the loop's side (ToolCallPolicy) -------------------------------------------------------
    def open_turn(self, obs: Observation) -> Turn:
        with self._lock:
            if self.gone is not None or self.ended is not None:
                raise PolicyExhausted(self._over_message())
            pending, self._pending = self._pending, None
            turn = Turn(obs, time.perf_counter())
            if self._turn.done():
                self._turn = Future()
            self._turn.set_result(turn)
        if pending is not None:  # the loop asks again within the decision: the call was rejected
            _resolve(pending.result, {"decision_id": obs.decision_id, "pressed": [], "rejected": obs.retry_feedback,
                                      "charged": True, "trial_over": False, "ending": None})
        return turn

    def took(self, call: Call) -> None:
        with self._lock:
            self._pending = call

    # -- the server's side ----------------------------------------------------------------------
    async def current_turn(self) -> Turn:
        """The open turn (waiting for it if the loop is busy); TrialOver once the trial is over."""
        return (await self._wait_turn())[1]

    async def _wait_turn(self) -> tuple[Future, Turn]:
        with self._lock:
            waiting = self._turn
        turn = await _awaitable(waiting)
        if turn is None:
            raise TrialOver(self._over_message())
        return waiting, turn

    async def press(self, arguments: dict, tool: str = "press_keys", session: str | None = None) -> dict:
        """Hand one press_keys (or reset) call to the loop and wait for what the loop made of it."""
        while True:
            waiting, turn = await self._wait_turn()
            with self._lock:
                if turn.taken or self._turn is not waiting:
                    continue  # another call took it: wait for the next
                turn.taken = True
                self._turn = Future()
            call = Call(arguments, time.perf_counter(), utc_now(), tool=tool, session=session)
            try:
                turn.call.set_result(call)
            except InvalidStateError:  # the loop stopped waiting (the trial was ended meanwhile)
                continue
            break
        return await _awaitable(call.result)

    def disconnect(self, detail: str) -> None:
        """The client went away: the trial ends as agent-disconnected (if it is still running)."""
        with self._lock:
            if self.gone is not None or self.ended is not None:
                return
            self.gone = detail
        if self.control is not None:
            self.control.end_trial_as(EndRequest("agent-disconnected", detail))
        self._over()

    # -- the sink's side: what the loop recorded -------------------------------------------------
    def handle(self, event) -> None:
        if isinstance(event, DecisionRecorded):
            trace = event.trace
            with self._lock:
                pending, self._pending = self._pending, None
                if trace.termination_reason is not None and self.ended is None:
                    self.ended = trace.termination_reason
            if pending is not None:
                attempts = event.response.attempts
                rejected = None if trace.parsed_actions else (attempts[-1].error if attempts else None)
                _resolve(pending.result, call_answer(trace, [i.action for i in event.inputs], rejected))
        elif isinstance(event, TrialEnded):
            self.result = event.result
            with self._lock:
                self.ended = self.ended or event.result.termination_reason
            self._over()
            self.finished.set()

    def trial_over(self, reason: str) -> None:
        """The trial will not play (it could not start, or the run stopped): refuse every call."""
        with self._lock:
            self.ended = self.ended or reason
        self._over()
        self.finished.set()

    def _over(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, None
            turn_future = self._turn
            if turn_future.done():
                self._turn = _done(None)
            else:
                turn_future.set_result(None)
        message = self._over_message()
        if turn_future.done() and (turn := turn_future.result()) is not None and not turn.call.done():
            try:
                turn.call.set_exception(PolicyExhausted(message))
            except InvalidStateError:
                pass
        if pending is not None:
            _resolve(pending.result, TrialOver(message))

    def _over_message(self) -> str:
        if self.gone is not None and self.ended in (None, "agent-disconnected"):
            return f"the trial has ended: the agent disconnected ({self.gone})"
        if self.ended is not None:
            return f"the trial has ended ({self.ended}); no more calls are accepted"
        return "the trial has ended; no more calls are accepted"


REJECTED_PREFIX = "Your previous response was rejected: "  # engine.loop.trial's retry feedback
OVERSIZE_FEEDBACK = re.compile(r"it was longer than the ([\d,]+) bytes a reply may have")  # engine.loop.trial's


def call_answer(trace: TraceLine, pressed: list[str], rejected: str | None) -> dict:
    """What a decision's call is answered with, from what the loop recorded of it: its trace line and
    the buttons it pressed (inputs.jsonl). One definition, for the server and for the Inspect export."""
    return {"decision_id": trace.decision_id, "pressed": pressed, "rejected": rejected, "charged": True,
            "trial_over": trace.termination_reason is not None, "ending": trace.termination_reason,
            # an episodic trial's: the episode played, and why it ended with this decision
            **({"episode": trace.episode, "episode_end": trace.episode_end} if trace.episode is not None else {}),
            # a battle call's: what it wrote into RAM and the team and lead it set (engine.battle.battle)
            **({"battle": {k: trace.battle[k] for k in ("writes", "team", "lead")}}
               if trace.battle is not None else {}),
            # a shortcut's: its name, argument and the presses it expanded to (engine.loop.shortcuts)
            **({"shortcut": trace.shortcut} if trace.shortcut is not None else {})}


def refusal_text(tool: str, answer: dict) -> str:
    """The error a refused call is answered with (answer["rejected"] set): the loop's reason."""
    why = answer["rejected"].removeprefix(REJECTED_PREFIX)
    if (cap := OVERSIZE_FEEDBACK.match(why)) is not None:  # the loop's words to a model, put for a call
        why = (f"oversized call: its arguments, as stored, pass the {cap.group(1)} bytes a call may have "
               f"(agent.max_reply_bytes); kept as their size and SHA-256 only")
    ended = f" (the trial has ended: {answer['ending']})" if answer["trial_over"] else ""
    refused = "rejected" if tool == "press_keys" else "refused"
    return f"{tool} {refused}, charged as an invalid output of decision {answer['decision_id']}: {why}{ended}"


def _resolve(future: Future, value) -> None:
    try:
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass  # the caller stopped waiting (its client went away)


class ToolCallPolicy:
    """The Policy of a trial played through the tool desk: each press_keys call is one decision."""

    name = "mcp"
    model_id = None
    # The agent's calls cost money somewhere, but what each cost is unknown here: charged as unknown
    # (never 0). A client that reports its usage (policy cli) has it recorded beside the trial's result.
    paid = True
    transport = None

    def __init__(self, desk: ToolDesk, ruleset: str, record: dict | None = None, wall_seconds: float | None = None,
                 max_reply_bytes: int | None = None):
        self.desk = desk
        self.ruleset = ruleset
        # the manifest's agent.max_reply_bytes: a call whose stored record would pass it is kept as its size
        # and digest only (an invalid output), as a provider's reply over the cap is
        self.max_reply_bytes = max_reply_bytes
        # The wall-time budget, kept while waiting too: the loop checks it only between decisions, and
        # an agent that never calls would otherwise hold the trial for good. Counted from the policy's
        # start (made as the trial starts), less the operator's holds.
        self.wall_seconds = wall_seconds
        self._started = time.monotonic()
        # into the trial's result (engine.loop.trial): the server's exposed tools, transport, client
        self.provenance = {"tool_server": record} if record is not None else None

    async def decide(self, observation: Observation) -> PolicyReply:
        desk = self.desk
        try:
            turn = desk.open_turn(observation)
            call: Call = await self._wait(turn)
        except PolicyExhausted:
            if desk.gone is not None and desk.control is not None:  # a trial begun after the client left
                desk.control.end_trial_as(EndRequest("agent-disconnected", desk.gone))
            raise
        desk.took(call)
        control = desk.control
        if control is not None and control.paused:  # paused after this turn opened: hold the call, as the
            # loop holds between decisions (a step lets exactly this decision through)
            if await control.checkpoint_async() is not None:
                raise PolicyExhausted("the trial was ended while a call waited")
        latency = round((call.received - turn.opened) * 1000, 3)
        record = {"tool": call.tool, "arguments": call.arguments, "received_utc": call.received_utc,
                  "ruleset": self.ruleset, "screens": turn.screens}
        # who made the call (kept even where the call's body is not: an oversized one)
        identity = {"mcp_session_sha256": call.session} if call.session is not None else None
        text, kind = call_response(call)
        if self.max_reply_bytes is not None and (over := oversize(call.arguments, record, text,
                                                                  self.max_reply_bytes)) is not None:
            # as a provider's reply over the cap: an invalid output, charged, its size and digest kept
            return PolicyReply(text="", usage=Usage(), latency_ms=latency, identity=identity, oversize=over)
        return PolicyReply(text=text, usage=Usage(), latency_ms=latency, reply=record, identity=identity, **kind)

    async def _wait(self, turn: Turn) -> Call:
        waiting = _awaitable(turn.call)
        if self.wall_seconds is None:
            return await waiting
        control = self.desk.control
        held = control.held_seconds if control is not None else 0.0
        left = self.wall_seconds - (time.monotonic() - self._started - held)
        try:
            return await asyncio.wait_for(waiting, max(left, 0.0))
        except TimeoutError:
            if control is not None:
                control.end_trial_as(EndRequest("budget:wall_time", "the agent made no call before the wall-time "
                                                                    "budget ran out"))
            raise PolicyExhausted("the wall-time budget ran out while the server waited for a call") from None

    def close(self) -> None:
        pass


def oversize(arguments, record: dict, text: str, cap: int) -> ReplyOversize | None:
    """The call as verify measures what a decision stores (the reply record and the response text, each
    as JSON), against the cap; None when both fit. Its size and digest are of the arguments as received,
    re-serialised as JSON (the transport's own bytes are the SDK's)."""
    received = pydantic_core.to_json(arguments)
    stored = max(len(pydantic_core.to_json(record)), len(pydantic_core.to_json(text)))
    if stored <= cap and len(received) <= cap:
        return None
    digest = hashlib.sha256(received).hexdigest()
    if len(received) > cap:
        return ReplyOversize(cap_bytes=cap, received_bytes=len(received), received_sha256=digest,
                             size_bytes=len(received), size_source="received")
    return ReplyOversize(cap_bytes=cap, received_bytes=len(received), received_sha256=digest, size_bytes=stored,
                         size_source="stored")


def call_response(call: Call) -> tuple[str, dict]:
    """A call as the response text the loop judges, and what else the reply says (PolicyReply's reset or
    battle)."""
    if call.tool == "reset":  # the loop judges it (Trial._reset_response): nothing is pressed
        return contract_json([], summary="reset tool call"), {"reset": True}
    if call.tool == "shortcut":  # the loop judges it as a reply's `shortcut` (engine.loop.shortcuts)
        shortcut = {k: call.arguments[k] for k in ("name", "argument") if k in call.arguments}
        return contract_json([], summary="shortcut tool call", shortcut=shortcut), {}
    if call.tool in BATTLE_TOOLS:  # the loop's battle rules judge it (Trial._battle_response)
        return (contract_json([], summary=f"{call.tool} tool call"),
                {"battle": {"tool": call.tool, "arguments": call.arguments}})
    keys = call.arguments.get("keys")
    return contract_json(keys if keys is not None else [], summary="press_keys tool call"), {}


def screen_record(turn: Turn, png: bytes) -> dict:
    """What a get_screen call served, for the decision's record."""
    return {"tool": "get_screen", "frame_sha256": turn.obs.frame_sha256,
            "png_sha256": hashlib.sha256(png).hexdigest(),
            "at_ms": round((time.perf_counter() - turn.opened) * 1000, 3)}
