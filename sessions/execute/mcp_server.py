"""oakwatch's MCP tool server, on the official `mcp` SDK (MCPServer), over stdio or streamable HTTP.

One server plays one trial through a ToolDesk (engine.policies.tools). The tools are exactly the
manifest's ruleset (engine.policies.rulesets): the list the server exposes is read back from the server
itself and recorded in the trial's result (provenance.tool_server.tools), which `oakwatch verify`
checks against the ruleset (sessions.audit.verify_tools). No tool reads the probe: the screen, the keys,
and under the standard ruleset the loop's Observation (on the structured track, only its allowlist);
under the battle ruleset seed 004's battle tools, judged in the loop by the task's battle rules
(engine.battle.battle), `observe` showing only the battle screen's facts the game's battle adapter reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import secrets
import socket
import stat
import sys
from collections.abc import Callable
from importlib.metadata import version as dist_version
from typing import Annotated, Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import WithJsonSchema

from engine.games.gamedef import TASK_LINE
from engine.loop.shortcuts import SHORTCUT_WORDS
from engine.loop.trial import utc_now
from engine.policies.model import screen_png
from engine.policies.rulesets import SHORTCUT_TOOL, served_tools
from engine.policies.tools import ToolDesk, TrialOver, refusal_text, screen_record

INSTRUCTIONS = ("You are playing a Game Boy game in an emulator. Call get_screen to see the screen, then "
                "press_keys with one or more buttons to press in order ({allowed}; at most {most} per call). "
                "Each press holds the button {press} frames and waits {settle} more: the timing is fixed. "
                "Every press_keys call is one decision of the trial; an invalid one is charged. The trial ends "
                "at its final milestone or when a budget runs out; then every call is refused.")


BATTLE_INSTRUCTIONS = ("You are playing a battle in a game in an emulator, through battle tools: observe "
                       "(the battle screen's facts: your party, the enemy, the phase; phase before-battle: it has "
                       "not started, your first action starts it), apply_team (your team, checked against the "
                       "task's party limit {limit}, level cap {cap} and pool: {pool}; only before lead), lead (the "
                       "party slot that starts), action (FIGHT with a move, SWITCH or SEND with a slot: each is "
                       "pressed for you as the game's buttons) and get_screen. Every apply_team, lead, action and "
                       "reset call is one decision of the trial; a refused one is charged as an invalid output. "
                       "The trial ends when you win or a budget runs out; then every call is refused.")

SHORTCUT_INSTRUCTIONS = (" This task permits mechanical shortcuts: the shortcut tool runs one as the real button "
                         "presses it stands for (its description lists them); each call is one decision.")

RESET_INSTRUCTIONS = (" This task is episodic: an episode ends when you lose or use up its presses, and reset ends "
                      "it at once; the next episode starts from the task's start state, up to the trial's episode "
                      "budget (a reset in the last episode is refused and charged).")


def sdk_version() -> str:
    return dist_version("mcp")


def build_server(desk: ToolDesk, *, ruleset: str, image_scale: int, allowed: tuple[str, ...], max_actions: int,
                 press_frames: int, settle_frames: int, instruction: str | None,
                 on_session: Callable[[str | None], None] | None = None, battle: dict | None = None,
                 record: dict | None = None, shortcuts: tuple[str, ...] = ()) -> MCPServer:
    """The server for one trial. `instruction`: what the agent is asked to do (the frozen manifest's
    agent.instruction, the same bytes a model's system prompt holds), first in the server's instructions
    (None: a folder frozen before instructions, told nothing). `on_session(id)`: told the session of each
    tool call (HTTP). `record`: the trial's provenance.tool_server, where a call the SDK refuses before
    any tool runs (an unknown tool, a required argument missing) is written as a refusal (note_refusal).
    `battle`: the battle ruleset's rules (engine.battle.battle BattleSettings, as JSON), named in its
    instructions. `shortcuts`: the manifest's agent.shortcuts; any: one more tool, `shortcut`."""
    names = served_tools(ruleset, shortcuts)
    if "apply_team" in names:
        instructions = _battle_instructions(battle or {})
    else:
        instructions = INSTRUCTIONS.format(allowed=", ".join(allowed), most=max_actions, press=press_frames,
                                           settle=settle_frames)
    if "reset" in names:
        instructions += RESET_INSTRUCTIONS
    if shortcuts:
        instructions += SHORTCUT_INSTRUCTIONS
    if instruction is not None:
        instructions = TASK_LINE.format(instruction=instruction) + instructions
    server = MCPServer(name="oakwatch", version=dist_version("oakwatch"), log_level="WARNING",
                       instructions=instructions)
    # A session with no id of its own (stdio, in-process): one per server, as its client is.
    local = f"local-{secrets.token_hex(16)}"
    calls = _Calls(desk, on_session, local)
    tools = _screen_tools(calls, image_scale, allowed, max_actions) | _battle_tools(calls)
    if shortcuts:
        tools[SHORTCUT_TOOL] = _shortcut_tool(calls, shortcuts)
    for name in names:
        server.add_tool(tools[name], name=name, structured_output=False,
                        description=shortcut_description(shortcuts) if name == SHORTCUT_TOOL else None)
        portable(server._tool_manager.get_tool(name).parameters)
    if record is not None:
        _record_sdk_refusals(server, record, set(names), lambda ctx: session_hash(_session_id(ctx) or local))
    return server


def _battle_instructions(b: dict) -> str:
    """The battle ruleset's instructions, naming the task's party limit, level cap and pool."""
    pool = b.get("pool") or {}
    shown = "; ".join((f"{k} {', '.join(v)}" if v else f"no {k}") for k, v in pool.items() if v is not None) \
        or "anything the game has"
    return BATTLE_INSTRUCTIONS.format(limit=b.get("party_limit") or "(the game's party size)",
                                      cap=b.get("level_cap") or "none", pool=shown)


class _Calls:
    """What every tool of one server shares: the desk, the sessions seen and the decision waiting."""

    def __init__(self, desk: ToolDesk, on_session: Callable[[str | None], None] | None, local: str) -> None:
        self.desk, self.on_session, self.local = desk, on_session, local
        self._hashed: tuple[str | None, str] = (None, session_hash(local))  # the last session and its hash

    def seen(self, ctx: Context) -> str:
        """Count the call; the SHA-256 of its session, recorded with each decision (verify: one per trial)."""
        self.desk.calls += 1
        session = _session_id(ctx)
        if self.on_session is not None:
            self.on_session(session)
        last, digest = self._hashed
        if session != last:  # one session a trial: hashed once, not per call
            digest = session_hash(session or self.local)
            self._hashed = (session, digest)
        return digest

    async def open_turn(self):
        """The decision waiting for a call (engine.policies.tools.Turn); refused once the trial is over."""
        try:
            return await self.desk.current_turn()
        except TrialOver as exc:
            raise ToolError(str(exc)) from None

    async def decision(self, tool: str, arguments: dict, session: str) -> str:
        """A call that is one decision of the trial: what the loop recorded of it, or the loop's reason as
        a ToolError (charged as an invalid output of that decision, as a model's would be)."""
        try:
            result = await self.desk.press(arguments, tool=tool, session=session)
        except TrialOver as exc:
            raise ToolError(str(exc)) from None
        if result["rejected"] is not None:
            raise ToolError(refusal_text(tool, result))
        return json.dumps(result)


def _screen_tools(calls: _Calls, image_scale: int, allowed: tuple[str, ...], max_actions: int) -> dict:
    """The standard ruleset's tools (get_screen also serves the battle ruleset): the functions the SDK
    reads each tool's name, description (its docstring) and schema from."""
    seen, open_turn, decision = calls.seen, calls.open_turn, calls.decision

    async def get_screen(ctx: Context) -> Image:
        """The current screen as a PNG image (the emulator's frame, each pixel enlarged to a square
        block). It changes only when press_keys plays."""
        seen(ctx)
        turn = await open_turn()
        png = screen_png(turn.obs.frame, image_scale)
        turn.screens.append(screen_record(turn, png))
        return Image(data=png, format="png")

    # The schema a client is shown is exact (the manifest's buttons, at most its per-decision count), but
    # the SDK lets any value through to the action contract: a malformed call is then an invalid output
    # of the decision, logged and charged like a model's, rather than refused unrecorded.
    keys_schema = {"type": "array", "items": {"type": "string", "enum": list(allowed)}, "minItems": 1,
                   "maxItems": max_actions, "description": "buttons to press, in order"}

    async def press_keys(keys: list[str], ctx: Context) -> str:
        """Press buttons in order, each with the fixed timing; returns the decision's number and what
        was pressed (a press may end the trial: then `trial_over` is true and `ending` says why)."""
        return await decision("press_keys", {"keys": keys}, seen(ctx))

    async def get_observation(ctx: Context) -> str:
        """What the harness tells every agent besides the screen: your recent actions, the buttons
        allowed, and on the structured information track the game's allowlisted state and dialogue."""
        seen(ctx)
        turn = await open_turn()
        obs = turn.obs
        turn.screens.append({"tool": "get_observation", "frame_sha256": obs.frame_sha256})
        return json.dumps({"decision_id": obs.decision_id, "recent_actions": list(obs.recent_actions),
                           "allowed_actions": list(obs.allowed_actions), "max_actions": obs.max_actions,
                           "structured": obs.structured}, sort_keys=True)

    async def reset(ctx: Context) -> str:
        """End the current episode and start the next from the task's start state (your memory is kept).
        One decision that presses nothing; refused and charged where no episode can follow (a trial
        that is not episodic, or its last episode)."""
        return await decision("reset", {}, seen(ctx))

    # (set as objects: this module's annotations are strings, evaluated where the schemas are unknown).
    press_keys.__annotations__["keys"] = Annotated[Any, WithJsonSchema(keys_schema)]
    return {"get_screen": get_screen, "press_keys": press_keys, "get_observation": get_observation, "reset": reset}


def _battle_tools(calls: _Calls) -> dict:
    """The battle ruleset's tools (seed 004), each but observe one decision of the trial."""
    seen, open_turn, decision = calls.seen, calls.open_turn, calls.decision

    async def observe(ctx: Context) -> str:
        """A snapshot of the battle as its screen shows it: your party (species, type, moves; the active
        creature's HP), the enemy's species and HP, and the phase. Not a decision; it changes only when a
        decision plays."""
        seen(ctx)
        turn = await open_turn()
        if turn.obs.battle is None:
            raise ToolError("observe: this trial has no battle rules (a game with a battle adapter)")
        text = json.dumps({"decision_id": turn.obs.decision_id, **turn.obs.battle}, sort_keys=True)
        turn.screens.append({"tool": "observe", "frame_sha256": turn.obs.frame_sha256,
                             "sha256": hashlib.sha256(text.encode()).hexdigest()})
        return text

    async def apply_team(team: list, ctx: Context) -> str:
        """Make your team the party, before lead in an episode: a list of {species, level, moves, item} and,
        in a Gen-3 game, nature, ability, evs and ivs by stat (hp, attack, defense, speed, sp_attack,
        sp_defense) (null where the game has none), checked against the task's party limit, level cap and pool. The
        party is written into the game's memory; one decision."""
        return await decision("apply_team", {"team": team}, seen(ctx))

    async def lead(slot: int, ctx: Context) -> str:
        """Choose the party slot (from 0) that starts the battle, before the episode's first action;
        one decision (without it, slot 0 leads)."""
        return await decision("lead", {"slot": slot}, seen(ctx))

    async def action(kind: str, ctx: Context, move: str | None = None, slot: int | None = None) -> str:
        """One battle action, pressed for you as the game's buttons: FIGHT with a move the active creature
        knows, SWITCH to a party slot, or SEND a party slot in when the active creature has fainted; one
        decision (its presses may end the episode or the trial: see episode_end and trial_over)."""
        session = seen(ctx)
        arguments = {"kind": kind} | ({"move": move} if move is not None else {}) | (
            {"slot": slot} if slot is not None else {})
        return await decision("action", arguments, session)

    # (set as objects, as press_keys's). As for press_keys, a value outside the schema reaches the loop, to be
    # refused and charged there.
    apply_team.__annotations__["team"] = Annotated[Any, WithJsonSchema(TEAM_SCHEMA)]
    lead.__annotations__["slot"] = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 0})]
    action.__annotations__["kind"] = Annotated[Any, WithJsonSchema({"type": "string",
                                                                    "enum": ["FIGHT", "SWITCH", "SEND"]})]
    action.__annotations__["move"] = Annotated[Any, WithJsonSchema({"type": "string"})]
    action.__annotations__["slot"] = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 0})]
    return {"observe": observe, "apply_team": apply_team, "lead": lead, "action": action}


def shortcut_description(permitted: tuple[str, ...]) -> str:
    """The shortcut tool's description: the permitted shortcuts, each with its argument."""
    return ("Call a mechanical shortcut instead of pressing buttons: it runs as the real controller presses it "
            "stands for (each in the input log), one decision; refused and charged when the screen does not "
            "offer it. Permitted here: " + "; ".join(SHORTCUT_WORDS[n] for n in permitted) + ".")


def _shortcut_tool(calls: _Calls, permitted: tuple[str, ...]):
    """The shortcut tool (engine.loop.shortcuts): a decision whose response calls the shortcut, judged by the
    loop exactly as a model's reply with `shortcut` is."""
    seen, decision = calls.seen, calls.decision

    async def shortcut(name: str, ctx: Context, argument: str | int | None = None) -> str:
        session = seen(ctx)
        return await decision(SHORTCUT_TOOL, {"name": name} | ({"argument": argument} if argument is not None
                                                              else {}), session)

    # (set as objects, as press_keys's): the schema is exact, but any value reaches the loop, refused there.
    shortcut.__annotations__["name"] = Annotated[Any, WithJsonSchema({"type": "string", "enum": list(permitted),
                                                                      "description": "the shortcut"})]
    shortcut.__annotations__["argument"] = Annotated[Any, WithJsonSchema(
        {"anyOf": [{"type": "string"}, {"type": "integer"}],
         "description": "a move or item name, or a party slot from 1; leave out for advance_dialogue"})]
    return shortcut


def _record_sdk_refusals(server: MCPServer, record: dict, names: set[str], session_of) -> None:
    """A call that never reaches a tool (an unknown tool, a required argument missing) is refused by the
    SDK with an error naming it; it is no decision, but it is recorded (MCPServer looks call_tool up on
    the instance for every tools/call)."""
    from pydantic import ValidationError

    record.setdefault("auth", None)
    record.setdefault("refused", [])
    record.setdefault("refused_count", 0)
    original = server.call_tool

    async def call_tool(name, arguments, context=None):
        try:
            return await original(name, arguments, context)
        except ToolError as exc:
            if name not in names:
                note_refusal(record, f"a call to {str(name)[:64]!r}, a tool this ruleset lacks",
                             session_of(context) if context is not None else None)
            elif isinstance(exc.__cause__, ValidationError):
                fields = sorted({".".join(map(str, e["loc"])) for e in exc.__cause__.errors()})
                note_refusal(record, f"a {name} call the SDK refused: {', '.join(fields)[:200]} missing or malformed",
                             session_of(context) if context is not None else None)
            raise

    server.call_tool = call_tool


def note_refusal(record: dict, reason: str, session_sha256: str | None = None) -> int:
    """Write one refusal into the trial's record: the first MAX_REFUSALS_KEPT one by one, all counted.
    Returns the count."""
    record["refused_count"] = record.get("refused_count", 0) + 1
    kept = record.setdefault("refused", [])
    if len(kept) < MAX_REFUSALS_KEPT:
        kept.append({"at_utc": utc_now(), "reason": reason, "session_sha256": session_sha256})
    return record["refused_count"]


def portable(schema):
    """A tool's input schema as strict validators (the MCP Inspector's strict mode) accept it: an optional
    argument is simply left out, so no `"default": null` that its own type refuses (the SDK writes one for
    each optional parameter). `null` is still accepted as absent by every tool."""
    if isinstance(schema, dict):
        if "default" in schema and schema["default"] is None:
            del schema["default"]
        for value in schema.values():
            portable(value)
    elif isinstance(schema, list):
        for value in schema:
            portable(value)
    return schema


# level and item are optional rather than `type: [x, null]` (a type list strict validators flag as
# unportable): left out, or sent as null all the same, they are unknown (a game without them takes none).
_BY_STAT = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}
TEAM_SCHEMA = {"type": "array", "minItems": 1, "maxItems": 6, "description": "the team, in party order",
               "items": {"type": "object", "required": ["species"], "additionalProperties": False,
                         "properties": {"species": {"type": "string"},
                                        "level": {"type": "integer", "minimum": 1,
                                                  "description": "leave out where the game has no levels"},
                                        "moves": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                                        "item": {"type": "string",
                                                 "description": "leave out for none, or where the game has none"},
                                        # a Gen-3 game's records (engine.battle.gen3_battle); left out elsewhere
                                        "nature": {"type": "string"},
                                        "ability": {"type": "string"},
                                        "evs": _BY_STAT, "ivs": _BY_STAT}}}


def _session_id(ctx: Context) -> str | None:
    """The streamable-HTTP session of a call (its Mcp-Session-Id header); None on stdio."""
    headers = ctx.headers
    return headers.get("mcp-session-id") if headers is not None else None


MAX_LINE_BYTES = 64 << 20  # the longest stdio message read (a screen is ~100 kB, a call a few hundred bytes)


class StdioFault(Exception):
    """The stdio wire failed on our side (a message too long to read): the trial ends as a harness fault."""


def stdio_problem(fd: int = 0) -> str | None:
    """Why `fd` cannot carry an MCP client to this server, or None. The event loop watches pipes,
    sockets and terminals; /dev/null or a regular file it cannot watch (epoll refuses them), and a
    server on one would wait for a client that is not there."""
    try:
        st = os.fstat(fd)
    except OSError as exc:
        return f"stdin is not open ({exc.strerror or exc})"
    mode = st.st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd)):
        return None
    if stat.S_ISCHR(mode):
        null = os.stat(os.devnull)
        what = "/dev/null" if (st.st_rdev, st.st_ino) == (null.st_rdev, null.st_ino) else "a device"
    else:
        what = "a regular file" if stat.S_ISREG(mode) else "not a pipe"
    return (f"--transport stdio: stdin is {what}, not a client's pipe (an MCP client starts this command and "
            f"talks on its stdin and stdout; or serve --transport http)")


class _PipeLines:
    """stdin as the SDK's stdio_server reads it (an async iterator of text lines), read by the event
    loop itself: the SDK's default reads each line in a worker thread, which costs a thread hop per
    message (about a millisecond a call here)."""

    def __init__(self, fd: int):
        self._fd = fd
        self._reader: asyncio.StreamReader | None = None

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            self._reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
            try:
                await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(self._reader),
                                             os.fdopen(self._fd, "rb", buffering=0))
            except (OSError, ValueError) as exc:  # a descriptor the loop cannot watch (stdio_problem)
                raise StdioFault(f"stdin cannot be read by the server ({exc})") from None
        try:
            line = await self._reader.readline()
        except ValueError:  # asyncio.LimitOverrunError, as readline raises it
            raise StdioFault(f"the client sent a message longer than the {MAX_LINE_BYTES >> 20} MiB the server "
                             f"reads on stdin") from None
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class _PipeWriter:
    """stdout for the SDK's stdio_server: whole messages written straight to the wire's descriptor."""

    def __init__(self, fd: int):
        self._fd = fd
        self._buffer: list[str] = []
        self.gone = False

    async def write(self, text: str) -> None:
        self._buffer.append(text)

    async def flush(self) -> None:
        data = "".join(self._buffer).encode("utf-8")
        self._buffer.clear()
        view = memoryview(data)
        while view and not self.gone:  # a blocking write: the client reads as we write (a screen is ~100 kB)
            try:
                view = view[os.write(self._fd, view):]
            except (BrokenPipeError, ConnectionResetError):  # the client left: its stdin's end tells the rest
                self.gone = True


class _Malformed:
    """The stdio read stream, less what is not a JSON-RPC message: the SDK's stdio transport passes a line
    it cannot parse on as an exception, which its server only logs (no answer: a client waits on nothing,
    and nothing records it). Each is answered here as JSON-RPC asks (a parse error, or an invalid request,
    with a null id) and written to the trial's record as a refusal, naming the error's kind, never the
    line (which may hold anything). Every other item passes through untouched."""

    def __init__(self, read, write, record: dict | None, say: Callable[[str], None] | None):
        self._read, self._write, self._record, self._say = read, write, record, say

    @property
    def last_context(self):  # the SDK's dispatcher reads the sender's context off its stream
        return getattr(self._read, "last_context", None)

    async def receive(self):
        while isinstance(item := await self._read.receive(), Exception):
            await self._answer(item)
        return item

    def __aiter__(self):
        return self

    async def __anext__(self):
        while isinstance(item := await self._read.__anext__(), Exception):
            await self._answer(item)
        return item

    async def aclose(self) -> None:
        await self._read.aclose()

    async def __aenter__(self):
        await self._read.__aenter__()
        return self

    async def __aexit__(self, *exc) -> bool | None:
        return await self._read.__aexit__(*exc)

    async def _answer(self, exc: Exception) -> None:
        from mcp.shared.message import SessionMessage
        from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
        from pydantic import ValidationError

        kinds = sorted({e["type"] for e in exc.errors()}) if isinstance(exc, ValidationError) else []
        unparsed = not kinds or "json_invalid" in kinds
        what = "not JSON" if unparsed else f"JSON but not a JSON-RPC message ({', '.join(kinds)[:120]})"
        if self._record is not None:
            count = note_refusal(self._record, f"a message that is {what}")
            if self._say is not None and count <= REFUSALS_SAID:
                self._say(f"refused a message: it is {what}")
        error = ErrorData(code=PARSE_ERROR if unparsed else INVALID_REQUEST,
                          message="Parse error" if unparsed else "Invalid Request")
        await self._write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error)))


async def serve_stdio(server: MCPServer, record: dict | None = None,
                      say: Callable[[str], None] | None = None) -> None:
    """Serve on this process's stdin and stdout until the client closes stdin. As the SDK's own
    stdio transport does, stray output of ours goes to stderr while serving (fd 1 points there; the
    wire keeps a private copy of the original stdout) and fd 0 reads nothing. `record`: the trial's
    provenance.tool_server, where a message that is not JSON-RPC is written as a refusal (`_Malformed`)."""
    from mcp.server.stdio import stdio_server

    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        async with stdio_server(stdin=_PipeLines(wire_in), stdout=_PipeWriter(wire_out)) as (read, write):
            low = server._lowlevel_server  # MCPServer.run_stdio_async does exactly this, on the SDK's streams
            await low.run(_Malformed(read, write, record, say), write, low.create_initialization_options())
    finally:
        os.close(wire_out)


async def exposed_tools(server: MCPServer) -> list[str]:
    """The tool names the server lists to a client: what the trial records and verify checks."""
    return sorted(t.name for t in await server.list_tools())


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts (port 0: a free one), so its address is
    known at once."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(16)
    sock.setblocking(False)
    return sock


MCP_PATH = "/mcp"  # the SDK's streamable_http_path, as served
MAX_REFUSALS_KEPT = 50  # refused requests recorded one by one in the result; beyond, only counted
REFUSALS_SAID = 10  # the first refusals are also told on stderr; the record counts them all


class HttpSessions:
    """One trial, one client: the first streamable-HTTP session that initializes owns the trial; any
    other is refused (gate), as is any request without the trial's bearer token when it has one. Also
    when the owner's session ends (the client's DELETE, an idle timeout, a crash: the SDK's session
    manager discards it), which ends an unfinished trial as agent-disconnected.

    `record`: the trial's provenance.tool_server, where each refusal is written (never the token)."""

    def __init__(self, desk: ToolDesk, *, token: str | None = None, record: dict | None = None,
                 say: Callable[[str], None] | None = None):
        self.desk = desk
        self.token = token
        self.record = record if record is not None else {}
        self.record["auth"] = "bearer" if token is not None else None
        self.record.setdefault("refused", [])
        self.record.setdefault("refused_count", 0)
        self.say = say
        self.claimed = False  # an initialize is in flight or has succeeded
        self.playing: str | None = None  # the session that initialized first: the trial's client
        self.ended = asyncio.Event()  # the playing session ended

    def saw(self, session: str | None) -> None:
        """A tool call of `session`: nothing to decide, the gate let only the owner's through."""

    def refuse(self, reason: str, session: str | None = None) -> None:
        count = note_refusal(self.record, reason, session_hash(session) if session else None)
        if self.say is not None and count <= REFUSALS_SAID:
            self.say(f"refused a connection: {reason}")

    def watch(self, server: MCPServer) -> None:
        manager = server.session_manager
        discard = manager._discard_session  # the SDK's one place every session end passes

        async def discarded(session_id, transport):
            try:
                await discard(session_id, transport)
            finally:
                if session_id == self.playing:
                    self.desk.disconnect("the client's HTTP session ended")
                    self.ended.set()

        manager._discard_session = discarded

    def gate(self, app):
        """The ASGI app in front of the SDK's: the bearer token, then one session per trial."""
        expected = f"Bearer {self.token}".encode() if self.token is not None else None

        async def gated(scope, receive, send):
            if scope["type"] != "http":  # (the lifespan)
                return await app(scope, receive, send)
            headers = dict(scope.get("headers") or ())
            if expected is not None and not hmac.compare_digest(headers.get(b"authorization", b""), expected):
                self.refuse("no bearer token, or not this trial's (Authorization: Bearer ...)")
                return await _refusal(send, 401, "this trial's tool server needs its bearer token "
                                                 "(Authorization: Bearer TOKEN)", {b"www-authenticate": b"Bearer"})
            if scope.get("path", "").rstrip("/") != MCP_PATH:  # no MCP there: the app's 404, no session claimed
                return await app(scope, receive, send)
            session = headers.get(b"mcp-session-id", b"").decode("latin-1") or None

            async def noted(message):  # what the SDK refuses before any tool sees it is recorded too
                if message["type"] == "http.response.start" and 400 <= message["status"] < 500:
                    self.refuse(_SDK_REFUSALS.get(message["status"], "a request the SDK refused") +
                                f" (HTTP {message['status']})", session)
                await send(message)

            if session is not None:
                if session != self.playing:
                    self.refuse("a request for a session that is not this trial's client", session)
                    return await _refusal(send, 404, "no such session: this trial has one client, and it is "
                                                     "another (or has left)")
                return await app(scope, receive, noted)
            if self.claimed:
                self.refuse("a second client: this trial already has its client")
                return await _refusal(send, 403, "this trial already has its client: one trial, one client "
                                                 "(serve another trial with another oakwatch mcp)")
            self.claimed = True
            admitted: list[str] = []

            async def watch(message):
                if message["type"] == "http.response.start" and message["status"] < 400:
                    found = dict(message.get("headers") or ()).get(b"mcp-session-id")
                    if found:
                        admitted.append(found.decode("latin-1"))
                        self.playing = admitted[0]  # before the client can see the id
                await noted(message)

            try:
                await app(scope, receive, watch)
            finally:
                if not admitted:
                    self.claimed = False  # not a session (a bad first request): the next may initialize
            return None

        return gated


# what the SDK's HTTP transport means by a status it answers with (mcp/server/streamable_http.py)
_SDK_REFUSALS = {400: "a request the SDK refused as malformed", 406: "a request that accepts neither JSON nor SSE",
                 413: "a request body over the SDK's limit", 415: "a request body that is not JSON"}


async def _refusal(send, status: int, message: str, headers: dict | None = None) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or {}).items()]})
    await send({"type": "http.response.body", "body": body})


def session_hash(session: str) -> str:
    """What the evidence keeps of a session's id: its SHA-256 (the id itself lets a client in)."""
    return hashlib.sha256(session.encode()).hexdigest()


def after_the_trial(desk: ToolDesk, sessions: HttpSessions) -> Callable[[], bool]:
    """`oakwatch mcp`'s stop rule: the trial is over and the client that played has left (or none did)."""
    return lambda: desk.finished.is_set() and (sessions.ended.is_set() or sessions.playing is None)


async def serve_http(server: MCPServer, sock: socket.socket, sessions: HttpSessions, *,
                     stop_when: Callable[[], bool], log_level: str = "warning") -> None:
    """Serve streamable HTTP on `sock` until `stop_when()` (or the task is cancelled)."""
    import uvicorn

    host = sock.getsockname()[0]
    app = server.streamable_http_app(host=host, session_idle_timeout=600, streamable_http_path=MCP_PATH)
    sessions.watch(server)
    # a client's open stream never holds the stop up for long (stop_when has already ended the trial)
    config = uvicorn.Config(sessions.gate(app), log_level=log_level, lifespan="on", timeout_graceful_shutdown=5)
    http = uvicorn.Server(config)

    async def stopper():
        while not http.should_exit:
            if stop_when():
                http.should_exit = True
                break
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(stopper())
    try:
        await http.serve(sockets=[sock])
    finally:
        watcher.cancel()
