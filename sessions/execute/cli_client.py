"""`policy: cli`: oakwatch launches a coding-agent CLI headless against its own tool server.

For each trial the policy starts the MCP server (sessions.execute.mcp_server) on streamable HTTP at
127.0.0.1 on a free port, writes an MCP config file naming it (Claude Code's `--mcp-config` format,
`{"mcpServers": {"oakwatch": {"type": "http", "url": ...}}}`), and runs the condition's frozen
command line with `{mcp_config}` replaced by that file's path and `{mcp_url}` by the server's address
and `{instruction}` by the frozen agent.instruction (docs/mcp.md has Claude Code's and
Codex CLI's). The client plays through press_keys like any agent on the server; when the trial ends
its calls are refused, it is given CLIENT_EXIT_S to finish (then terminated), and what it printed
is parsed for its own usage report: Claude Code's `--output-format json` object (total_cost_usd,
usage, num_turns, session_id) or Codex's `--json` event lines (turn.completed usage). That goes into
the result (provenance.tool_server.client.usage); what it did not report is null, never 0. A client
that exits, or whose session ends, before the trial is over ends it as agent-disconnected.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import tempfile
import threading
from pathlib import Path

from engine.policies.tools import ToolCallPolicy, ToolDesk
from sessions.preflight.manifest import Condition, Manifest

CLIENT_EXIT_S = 60.0  # how long a client has, once the trial is over, to print its result and exit
SERVER_START_S = 30.0
OUTPUT_CAP = 1 << 20  # the most of the client's output read for its usage report
SERVER_NAME = "oakwatch"
TOKEN_VARIABLE = "OAKWATCH_MCP_TOKEN"  # the trial's bearer token, in the client's environment
TOKEN_SHOWN = "[this trial's token]"  # what the recorded MCP config shows in its place


class CliPolicy(ToolCallPolicy):
    name = "cli"

    def __init__(self, condition: Condition, manifest: Manifest):
        from sessions.execute.mcp_server import HttpSessions, bind, build_server, sdk_version

        m = manifest
        ruleset = m.agent.ruleset
        self.record: dict = {"ruleset": ruleset, "tools": None, "transport": "http", "sdk": f"mcp {sdk_version()}",
                             "client": None}
        wall = m.budgets.wall_time_minutes
        super().__init__(ToolDesk(), ruleset, self.record, wall * 60 if wall is not None else None,
                         m.agent.max_reply_bytes)
        # one client per trial, and only with this trial's bearer token (never written, printed or logged)
        token = secrets.token_urlsafe(32)
        self.sessions = HttpSessions(self.desk, token=token, record=self.record)
        self.server = build_server(self.desk, ruleset=ruleset, image_scale=m.agent.image_scale,
                                   allowed=tuple(m.agent.allowed_actions), max_actions=m.agent.max_actions_per_decision,
                                   press_frames=m.emulator.press_frames, settle_frames=m.emulator.settle_frames,
                                   instruction=m.agent.instruction,
                                   on_session=self.sessions.saw, record=self.record,
                                   battle=m.battle.model_dump(mode="json") if m.battle is not None else None)
        self._stop = threading.Event()
        self._sock = bind("127.0.0.1", 0)
        host, port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{port}/mcp"
        self._ready = threading.Event()
        self._server_error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="oakwatch-cli-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(SERVER_START_S) or self._server_error is not None:
            raise RuntimeError(f"the tool server did not start: {self._server_error}")
        self._dir = tempfile.TemporaryDirectory(prefix="oakwatch-cli-")
        work = Path(self._dir.name)
        config = {"mcpServers": {SERVER_NAME: {"type": "http", "url": self.url,
                                               "headers": {"Authorization": f"Bearer {token}"}}}}
        self.config_path = work / "mcp-config.json"
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the client's only
        with open(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2) + "\n")
        shown = {"mcpServers": {SERVER_NAME: {"type": "http", "url": self.url,
                                              "headers": {"Authorization": f"Bearer {TOKEN_SHOWN}"}}}}
        told = m.agent.instruction or ""  # `{instruction}`: the prompt says what the system prompt would
        argv = [arg.replace("{mcp_config}", str(self.config_path)).replace("{mcp_url}", self.url)
                .replace("{instruction}", told) for arg in condition.command]
        self._out = open(work / "stdout", "w+b")  # noqa: SIM115 - read back at the end, closed in aclose
        self._err = open(work / "stderr", "w+b")  # noqa: SIM115
        self.record["client"] = {"command": list(condition.command), "version": condition.client_version,
                                 "mcp_config": shown, "exit_status": None, "usage": None, "total_cost_usd": None,
                                 "num_turns": None, "session_id": None}
        # The client gets the environment (its own API key lives there, never in a file of ours), and the
        # trial's token for clients that read it from a variable (Codex: bearer_token_env_var).
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                        cwd=work, env=dict(os.environ) | {TOKEN_VARIABLE: token})
        threading.Thread(target=self._watch_client, name="oakwatch-cli-client", daemon=True).start()

    def _serve(self) -> None:
        from sessions.execute.mcp_server import exposed_tools, serve_http

        async def main():
            self.record["tools"] = await exposed_tools(self.server)
            self._ready.set()
            await serve_http(self.server, self._sock, self.sessions, stop_when=self._stop.is_set)

        try:
            asyncio.run(main())
        except BaseException as exc:  # recorded for __init__ (or lost after the trial: nothing waits then)
            self._server_error = exc
            self._ready.set()

    def _watch_client(self) -> None:
        status = self.process.wait()
        self.desk.disconnect(f"the client exited with status {status} before the trial was over")

    async def aclose(self) -> None:
        """The trial is over: refuse the client's calls, let it report, stop the server."""
        self.desk.trial_over(self.desk.ended or "trial-over")
        try:
            await asyncio.to_thread(self.process.wait, CLIENT_EXIT_S)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                await asyncio.to_thread(self.process.wait, 5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                await asyncio.to_thread(self.process.wait)
        client = self.record["client"]
        client["exit_status"] = self.process.returncode
        self._out.seek(0)
        client.update(client_report(self._out.read(OUTPUT_CAP).decode("utf-8", "replace")))
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 10)

    def close(self) -> None:
        if self.process.poll() is None:  # aclose never ran (the trial failed early): don't leave it behind
            self.process.kill()
            self.process.wait()
        self._stop.set()
        for f in (self._out, self._err):
            f.close()
        self._dir.cleanup()


def client_report(text: str) -> dict:
    """The client's own account of the run: Claude Code's JSON result object, or Codex's JSON event
    lines. Whatever it did not say is None."""
    report = {"usage": None, "total_cost_usd": None, "num_turns": None, "session_id": None}
    objects = []
    try:
        whole = json.loads(text)
        objects = [whole] if isinstance(whole, dict) else []
    except ValueError:
        for line in text.splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                objects.append(item)
    for item in objects:
        if "total_cost_usd" in item or item.get("type") == "result":  # Claude Code
            usage = item.get("usage")
            report["usage"] = _tokens(usage) if isinstance(usage, dict) else None
            report["total_cost_usd"] = _number(item.get("total_cost_usd"))
            report["num_turns"] = item.get("num_turns") if isinstance(item.get("num_turns"), int) else None
            report["session_id"] = str(item["session_id"])[:200] if item.get("session_id") else None
        elif item.get("type") == "turn.completed" and isinstance(item.get("usage"), dict):  # Codex, per turn
            turn = _tokens(item["usage"])
            total = report["usage"] or {}
            report["usage"] = {k: _add(total.get(k), v) if total else v for k, v in turn.items()}
            report["num_turns"] = (report["num_turns"] or 0) + 1
        elif item.get("type") == "thread.started" and item.get("thread_id"):
            report["session_id"] = str(item["thread_id"])[:200]
    return report


TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                "cached_input_tokens")


def _tokens(usage: dict) -> dict:
    return {k: usage[k] if isinstance(usage.get(k), int) and not isinstance(usage.get(k), bool) else None
            for k in TOKEN_FIELDS if k in usage} | {k: None for k in ("input_tokens", "output_tokens")
                                                     if k not in usage}


def _number(value):
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _add(a, b):
    return None if a is None or b is None else a + b
