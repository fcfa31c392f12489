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
import json
import os
import socket
import sys
from collections.abc import Callable
from importlib.metadata import version as dist_version
from typing import Annotated, Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import WithJsonSchema

from engine.policies.model import screen_png
from engine.policies.rulesets import tools_for
from engine.policies.tools import ToolDesk, TrialOver, screen_record

REJECTED_PREFIX = "Your previous response was rejected: "

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

RESET_INSTRUCTIONS = (" This task is episodic: an episode ends when you lose or use up its presses, and reset ends "
                      "it at once; the next episode starts from the task's start state, up to the trial's episode "
                      "budget (a reset in the last episode is refused and charged).")


def sdk_version() -> str:
    return dist_version("mcp")


def build_server(desk: ToolDesk, *, ruleset: str, image_scale: int, allowed: tuple[str, ...], max_actions: int,
                 press_frames: int, settle_frames: int,
                 on_session: Callable[[str | None], None] | None = None, battle: dict | None = None) -> MCPServer:
    """The server for one trial. `on_session(id)`: told the session of each tool call (HTTP), so the
    session that plays is the one whose end counts as the agent disconnecting. `battle`: the battle
    ruleset's rules (engine.battle.battle BattleSettings, as JSON), named in its instructions."""
    names = tools_for(ruleset)
    if "apply_team" in names:
        b = battle or {}
        pool = b.get("pool") or {}
        shown = "; ".join((f"{k} {', '.join(v)}" if v else f"no {k}") for k, v in pool.items() if v is not None) \
            or "anything the game has"
        instructions = BATTLE_INSTRUCTIONS.format(limit=b.get("party_limit") or "(the game's party size)",
                                                  cap=b.get("level_cap") or "none", pool=shown)
    else:
        instructions = INSTRUCTIONS.format(allowed=", ".join(allowed), most=max_actions, press=press_frames,
                                           settle=settle_frames)
    if "reset" in names:
        instructions += RESET_INSTRUCTIONS
    server = MCPServer(name="oakwatch", version=dist_version("oakwatch"), log_level="WARNING",
                       instructions=instructions)

    def seen(ctx: Context) -> None:
        desk.calls += 1
        if on_session is not None:
            on_session(_session_id(ctx))

    async def open_turn():
        """The decision waiting for a call (engine.policies.tools.Turn); refused once the trial is over."""
        try:
            return await desk.current_turn()
        except TrialOver as exc:
            raise ToolError(str(exc)) from None

    async def decision(tool: str, arguments: dict, *, refused: str = "refused") -> str:
        """A call that is one decision of the trial: what the loop recorded of it, or the loop's reason as
        a ToolError (charged as an invalid output of that decision, as a model's would be)."""
        try:
            result = await desk.press(arguments, tool=tool)
        except TrialOver as exc:
            raise ToolError(str(exc)) from None
        if result["rejected"] is not None:
            why = result["rejected"].removeprefix(REJECTED_PREFIX)
            ended = f" (the trial has ended: {result['ending']})" if result["trial_over"] else ""
            raise ToolError(f"{tool} {refused}, charged as an invalid output of decision {result['decision_id']}: "
                            f"{why}{ended}")
        return json.dumps(result)

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
        seen(ctx)
        return await decision("press_keys", {"keys": keys}, refused="rejected")

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
        seen(ctx)
        return await decision("reset", {})

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
        seen(ctx)
        return await decision("apply_team", {"team": team})

    async def lead(slot: int, ctx: Context) -> str:
        """Choose the party slot (from 0) that starts the battle, before the episode's first action;
        one decision (without it, slot 0 leads)."""
        seen(ctx)
        return await decision("lead", {"slot": slot})

    async def action(kind: str, ctx: Context, move: str | None = None, slot: int | None = None) -> str:
        """One battle action, pressed for you as the game's buttons: FIGHT with a move the active creature
        knows, SWITCH to a party slot, or SEND a party slot in when the active creature has fainted; one
        decision (its presses may end the episode or the trial: see episode_end and trial_over)."""
        seen(ctx)
        arguments = {"kind": kind} | ({"move": move} if move is not None else {}) | (
            {"slot": slot} if slot is not None else {})
        return await decision("action", arguments)

    # (set as objects: this module's annotations are strings, evaluated where the schemas are unknown).
    # As for press_keys, a value outside the schema reaches the loop, to be refused and charged there.
    press_keys.__annotations__["keys"] = Annotated[Any, WithJsonSchema(keys_schema)]
    apply_team.__annotations__["team"] = Annotated[Any, WithJsonSchema(TEAM_SCHEMA)]
    lead.__annotations__["slot"] = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 0})]
    action.__annotations__["kind"] = Annotated[Any, WithJsonSchema({"type": "string",
                                                                    "enum": ["FIGHT", "SWITCH", "SEND"]})]
    action.__annotations__["move"] = Annotated[Any, WithJsonSchema({"type": "string"})]
    action.__annotations__["slot"] = Annotated[Any, WithJsonSchema({"type": "integer", "minimum": 0})]
    tools = {"get_screen": get_screen, "press_keys": press_keys, "get_observation": get_observation, "reset": reset,
             "observe": observe, "apply_team": apply_team, "lead": lead, "action": action}
    for name in names:
        server.add_tool(tools[name], name=name, structured_output=False)
    return server


_BY_STAT = {"type": ["object", "null"], "additionalProperties": {"type": "integer", "minimum": 0}}
TEAM_SCHEMA = {"type": "array", "minItems": 1, "maxItems": 6, "description": "the team, in party order",
               "items": {"type": "object", "required": ["species"], "additionalProperties": False,
                         "properties": {"species": {"type": "string"},
                                        "level": {"type": ["integer", "null"], "minimum": 1},
                                        "moves": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
                                        "item": {"type": ["string", "null"]},
                                        # a Gen-3 game's records (engine.battle.gen3_battle); null elsewhere
                                        "nature": {"type": ["string", "null"]},
                                        "ability": {"type": ["string", "null"]},
                                        "evs": _BY_STAT, "ivs": _BY_STAT}}}


def _session_id(ctx: Context) -> str | None:
    """The streamable-HTTP session of a call (its Mcp-Session-Id header); None on stdio."""
    headers = ctx.headers
    return headers.get("mcp-session-id") if headers is not None else None


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
            self._reader = asyncio.StreamReader(limit=64 << 20)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(self._reader),
                                         os.fdopen(self._fd, "rb", buffering=0))
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class _PipeWriter:
    """stdout for the SDK's stdio_server: whole messages written straight to the wire's descriptor."""

    def __init__(self, fd: int):
        self._fd = fd
        self._buffer: list[str] = []

    async def write(self, text: str) -> None:
        self._buffer.append(text)

    async def flush(self) -> None:
        data = "".join(self._buffer).encode("utf-8")
        self._buffer.clear()
        view = memoryview(data)
        while view:  # a blocking write: the client reads as we write (a screen is ~100 kB)
            view = view[os.write(self._fd, view):]


async def serve_stdio(server: MCPServer) -> None:
    """Serve on this process's stdin and stdout until the client closes stdin. As the SDK's own
    stdio transport does, stray output of ours goes to stderr while serving (fd 1 points there; the
    wire keeps a private copy of the original stdout) and fd 0 reads nothing."""
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
            await low.run(read, write, low.create_initialization_options())
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


class HttpSessions:
    """Which streamable-HTTP session plays, and when it ends (the client's DELETE, an idle timeout,
    a crash: the SDK's session manager discards it)."""

    def __init__(self, desk: ToolDesk):
        self.desk = desk
        self.playing: str | None = None  # the first session that called a tool
        self.ended = asyncio.Event()  # the playing session ended

    def saw(self, session: str | None) -> None:
        if self.playing is None and session is not None:
            self.playing = session

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


def after_the_trial(desk: ToolDesk, sessions: HttpSessions) -> Callable[[], bool]:
    """`oakwatch mcp`'s stop rule: the trial is over and the client that played has left (or none did)."""
    return lambda: desk.finished.is_set() and (sessions.ended.is_set() or sessions.playing is None)


async def serve_http(server: MCPServer, sock: socket.socket, sessions: HttpSessions, *,
                     stop_when: Callable[[], bool], log_level: str = "warning") -> None:
    """Serve streamable HTTP on `sock` until `stop_when()` (or the task is cancelled)."""
    import uvicorn

    host = sock.getsockname()[0]
    app = server.streamable_http_app(host=host, session_idle_timeout=600)
    sessions.watch(server)
    config = uvicorn.Config(app, log_level=log_level, lifespan="on")
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
