"""`oakwatch mcp MANIFEST [--transport stdio|http] [--port P] [--trial KEY] [--output DIR]`.

An MCP server for your own agent harness: it plays one trial of the manifest (the first schedule
position of a `policy: mcp` condition, or --trial KEY) through the tools of the manifest's ruleset and
writes the usual evidence folder (docs/mcp.md). The trial runs with the usual runner (budgets, trace,
control socket for `oakwatch attach`) on the server's own event loop: a tool call and the decision it
becomes pass no thread between them, which would cost two wake-ups (and their waits for the GIL) per
call. The loop holds no blocking wait of the trial's: an operator's pause and the pacing wait in a
worker thread (engine.loop.control's checkpoint_async, pace_async), so the server answers meanwhile.

Exit status as `oakwatch run`: 0 the trial succeeded, 1 a valid game-failure, 2 an invalid trial
(the agent disconnected, an operator abort) or bad input (one line, nothing written).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from app.commands import EXIT_BAD_INPUT
from app.commands import fail as _fail

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # as `oakwatch run` (docs/faults.md)
# Not the demo server's (app.demo_server.DEFAULT_PORT): a harness served over HTTP and the demo model
# server run side by side on their defaults.
DEFAULT_HTTP_PORT = 8766


def add_parser(sub) -> None:
    mcp = sub.add_parser("mcp", help="serve one trial to your own agent over MCP (stdio or streamable HTTP)")
    mcp.add_argument("manifest", type=Path, help="experiment manifest with a `policy: mcp` condition (or bundled:NAME)")
    mcp.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                     help="stdio (default: the client starts this command) or streamable HTTP")
    mcp.add_argument("--host", default="127.0.0.1", help="with --transport http: address (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT,
                     help=f"with --transport http: port (default {DEFAULT_HTTP_PORT}; 0: any)")
    mcp.add_argument("--trial", metavar="KEY", help="the trial to play, e.g. A-01 (default: the first schedule "
                                                    "position of a policy mcp condition)")
    mcp.add_argument("--output", type=Path, help="new evidence folder (default: runs/<id>-<timestamp>-<tag>)")
    mcp.add_argument("--token-file", type=Path, metavar="FILE",
                     help="with --transport http: require a bearer token, made for this trial and written to FILE "
                          "(mode 0600); clients send `Authorization: Bearer <FILE's contents>`")


def _say(message: str) -> None:
    print(f"oakwatch mcp: {message}", file=sys.stderr, flush=True)  # stdout may be the MCP wire


def pick_position(prepared, trial: str | None) -> int:
    """The schedule position to play; ValueError with the reason when there is none."""
    from engine.loop.trial import trial_key

    keys = [trial_key(label, number) for label, number in prepared.schedule]
    if trial is not None:
        if trial not in keys:
            raise ValueError(f"--trial {trial}: not a trial of this schedule ({', '.join(keys[:8])})")
        position = keys.index(trial)
        policy = prepared.condition(prepared.schedule[position][0]).policy
        if policy != "mcp":
            raise ValueError(f"--trial {trial}: its condition is policy {policy!r}; oakwatch mcp plays policy "
                             f"'mcp' conditions")
        return position
    for position, (label, _) in enumerate(prepared.schedule):
        if prepared.condition(label).policy == "mcp":
            return position
    raise ValueError("the manifest has no condition with policy 'mcp' (add one: docs/mcp.md)")


def run_command(args) -> int:
    from sessions.execute.start import create_folder, default_output
    from sessions.preflight.assets import BUNDLED_PREFIX, resolve
    from sessions.preflight.experiment import PreflightError, prepare

    if args.transport == "http" and not 0 <= args.port <= 65535:
        return _fail(f"--port {args.port}: give a port from 0 to 65535")
    token_file = getattr(args, "token_file", None)
    if token_file is not None and args.transport != "http":
        return _fail("--token-file: a bearer token is for --transport http (a stdio client is the one that "
                     "started the server)")
    manifest = args.manifest
    try:
        if str(manifest).startswith(BUNDLED_PREFIX):
            manifest = resolve(str(manifest), Path.cwd())
        prepared = prepare(manifest, args.output, allow_mcp=True)
        position = pick_position(prepared, args.trial)
    except (PreflightError, ValueError) as exc:
        return _fail(str(exc))
    sock, problem = _open_transport(args)
    if problem is not None:
        return _fail(problem)
    output = args.output or default_output(prepared.manifest.experiment_id)
    token = None
    if token_file is not None:
        token, problem = _written_token(token_file, output)
        if problem is not None:
            return _fail(problem)
    try:
        folder = create_folder(prepared, output)
    except PreflightError as exc:
        return _fail(str(exc))
    session = ToolSession(prepared, folder, position, transport=args.transport, token=token)
    where = "stdio" if sock is None else f"http://{_host(sock)}/mcp"
    auth = f" (bearer token required: in {token_file})" if token is not None else ""
    _say(f"trial {session.trial_key} of {prepared.manifest.experiment_id} ({prepared.manifest.agent.ruleset} "
         f"ruleset: {', '.join(session.tools)}) on {where}{auth}; evidence: {folder.root}")
    return session.serve(sock)


def _open_transport(args):
    """(the listening socket for --transport http, else None; why the transport cannot serve, or None)."""
    if args.transport == "stdio":
        from sessions.execute.mcp_server import stdio_problem

        if (problem := stdio_problem(0)) is not None:
            return None, problem
    if args.transport == "http":
        from sessions.execute.mcp_server import bind

        try:
            return bind(args.host, args.port), None
        except OSError as exc:
            return None, f"cannot listen on {args.host}:{args.port} ({exc.strerror or exc})"
    return None, None


def _written_token(token_file: Path, output: Path) -> tuple[str | None, str | None]:
    """(the bearer token written to --token-file, or None; why it cannot be, or None)."""
    if token_file.resolve().is_relative_to(output.resolve()):
        return None, f"--token-file {token_file}: not inside the evidence folder (a token is never evidence)"
    try:
        return write_token(token_file), None
    except OSError as exc:
        return None, f"--token-file {token_file}: cannot write it ({exc.strerror or exc})"


def write_token(path: Path) -> str:
    """A fresh bearer token for this trial, written to `path` readable by its owner only (never printed,
    logged or written to the evidence: the result says only that one was required)."""
    import os
    import secrets

    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, token.encode() + b"\n")
    finally:
        os.close(fd)
    return token


def _transport_fault(exc: BaseException) -> str:
    """One line for a failure of the serving: the StdioFault's own words, else the exception's kind."""
    from sessions.execute.mcp_server import StdioFault

    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, StdioFault):
        return f"the tool server's transport failed: {exc}"
    return f"the tool server failed: {type(exc).__name__}: {exc}"[:500]


def _host(sock) -> str:
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ToolSession:
    """One trial served: the runner and the server on one event loop (see the module doc)."""

    def __init__(self, prepared, folder, position: int, *, transport: str, token: str | None = None):
        from engine.loop.control import RunControl
        from engine.loop.trial import trial_key
        from engine.policies.rulesets import served_tools
        from engine.policies.tools import ToolCallPolicy, ToolDesk
        from sessions.execute.mcp_server import build_server, sdk_version
        from sessions.execute.runner import ExperimentRunner
        from sessions.execute.trial_factory import battle_settings

        m = prepared.manifest
        self.trial_key = trial_key(*prepared.schedule[position])
        self.control = RunControl()
        self.desk = ToolDesk(self.control)
        ruleset = m.agent.ruleset
        self.record = {"ruleset": ruleset, "tools": None, "transport": transport, "sdk": f"mcp {sdk_version()}",
                       "client": None}
        self.sessions = None
        if transport == "http":
            from sessions.execute.mcp_server import HttpSessions

            self.sessions = HttpSessions(self.desk, token=token, record=self.record, say=_say)
        wall = m.budgets.wall_time_minutes
        wall_seconds = wall * 60 if wall is not None else None
        self.server = build_server(self.desk, ruleset=ruleset, image_scale=m.agent.image_scale,
                                   allowed=tuple(m.agent.allowed_actions), max_actions=m.agent.max_actions_per_decision,
                                   press_frames=m.emulator.press_frames, settle_frames=m.emulator.settle_frames,
                                   instruction=m.agent.instruction,
                                   on_session=self.sessions.saw if self.sessions else None,
                                   record=self.record, shortcuts=tuple(m.agent.shortcuts),
                                   battle=(rules := battle_settings(prepared)) and rules.model_dump(mode="json"))
        import anyio

        from sessions.execute.mcp_server import exposed_tools

        self.tools = anyio.run(exposed_tools, self.server)
        if sorted(served_tools(ruleset, m.agent.shortcuts)) != self.tools:  # never serve a list verify would refuse
            raise RuntimeError(f"the server exposes {self.tools}, not the {ruleset} ruleset's tools")
        self.record["tools"] = self.tools
        self.runner = ExperimentRunner(
            prepared, folder, sinks=[self.desk], control=self.control, positions=[position],
            policy_factories={"mcp": lambda c, n: ToolCallPolicy(self.desk, ruleset, self.record, wall_seconds,
                                                                   m.agent.max_reply_bytes)})
        self.summary = None

    async def _play(self) -> None:
        try:
            self.summary = await self.runner.run_async()
        finally:
            self.desk.trial_over(self.runner.stop_reason or "run-stopped")  # no-op once the trial sealed

    @contextlib.asynccontextmanager
    async def playing(self, gone: str = "the client left"):
        """The trial plays on the running loop while the body serves it. Leaving, the client is gone
        (`gone`: an unfinished trial ends as agent-disconnected) and the trial is awaited to its record."""
        trial = asyncio.ensure_future(self._play())
        try:
            yield trial
        finally:
            self.desk.disconnect(gone)
            await trial

    def serve(self, sock) -> int:
        import anyio

        anyio.run(self._serve, sock)
        return self._report()

    async def _serve(self, sock) -> None:
        interrupted: list[str] = []  # the signal that stops an HTTP server (stdio's serving is cancelled)
        if sock is None:
            from sessions.execute.mcp_server import serve_stdio

            serving, gone = serve_stdio(self.server, self.record, _say), "the client closed stdin"  # ends at EOF
        else:
            from sessions.execute.mcp_server import after_the_trial, serve_http

            after = after_the_trial(self.desk, self.sessions)
            serving = serve_http(self.server, sock, self.sessions, stop_when=lambda: bool(interrupted) or after())
            gone = "the HTTP server stopped"
        server = asyncio.ensure_future(serving)

        def interrupt(name: str) -> None:  # the trial ends truthfully (signal:NAME), the serving stops; once-only
            self.control.stop_run("signal", name, f"signal:{name}")
            self.desk.disconnect("the server was interrupted")
            if sock is None:
                server.cancel()
            else:  # uvicorn stops as at a trial's end: cancelled, its lifespan would log a traceback
                interrupted.append(name)

        loop = asyncio.get_running_loop()
        handled = []
        for sig in STOP_SIGNALS:  # SIGTERM too: the SDK's stdio clients send it 2 s after closing stdin
            try:
                loop.add_signal_handler(sig, interrupt, sig.name)
                handled.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
                pass
        try:
            async with self.playing(gone):
                try:
                    await server
                except asyncio.CancelledError:
                    pass
                except Exception as exc:  # the wire failed on our side: the trial ends as a harness fault, saying so
                    from engine.loop.outcomes import EndRequest

                    self.control.end_trial_as(EndRequest("harness-error", _transport_fault(exc), "tool-server"))
        finally:
            for sig in handled:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(sig)
                # the folder is finished: a later signal changes nothing, the exit status is the run's
                with contextlib.suppress(ValueError):
                    signal.signal(sig, signal.SIG_IGN)

    def _report(self) -> int:
        from sessions.analysis.summary import exit_status

        result = self.desk.result
        if result is not None:
            _say(f"trial {result.trial_key} ended: {result.outcome} ({result.termination_reason}); "
                 f"evidence: {self.runner.folder.root} (check with: oakwatch verify {self.runner.folder.root})")
        if self.summary is None:
            _say(f"error: the run could not write its final records ({self.runner.fatal})")
            return EXIT_BAD_INPUT
        return exit_status(self.summary)
