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

The client runs out of reach of the answers (sessions.execute.cli_sandbox: an empty folder, the named
environment, a namespace holding only the system and its own installation), and its own tool
settings are recorded (sessions.preflight.tool_conditions.client_tools). Nothing it prints is kept unscrubbed
(sessions.preflight.tool_conditions.scrub): its report, a failing client's last lines, and its transcript (its
output and session logs, kept in the trial's folder, hashed in the result, sessions.evidence.recorder).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from engine.policies.tools import ToolCallPolicy, ToolDesk
from sessions.evidence import layout
from sessions.execute.cli_sandbox import client_env, isolation_kind, wrapped
from sessions.preflight.manifest import Condition, Manifest
from sessions.preflight.tool_conditions import client_tools, key_values, scrub

CLIENT_EXIT_S = 60.0  # how long a client has, once the trial is over, to print its result and exit
SERVER_START_S = 30.0
OUTPUT_CAP = 1 << 20  # the most of the client's output read for its usage report
TAIL_LINES, TAIL_LINE_CHARS, TAIL_BYTES = 20, 400, 64 << 10  # a failing client's last lines, kept
SESSION_ID_CHARS = 200
SESSION_LOGS = (".claude/projects", ".codex/sessions")  # where Claude Code and Codex log a session
MAX_LOGS = 6
SCRUB_SLACK = 4096
SERVER_NAME = "oakwatch"
TOKEN_VARIABLE = "OAKWATCH_MCP_TOKEN"  # the trial's bearer token, in the client's environment
TOKEN_SHOWN = "[this trial's token]"  # what the recorded MCP config shows in its place


class CliPolicy(ToolCallPolicy):
    name = "cli"

    def __init__(self, condition: Condition, manifest: Manifest, keys: tuple[str, ...] = ()):
        """`keys`: the run's API keys (the manifest's key variables), cut out of what the client prints
        along with every key variable of the environment and the trial's bearer token."""
        from sessions.execute.mcp_server import sdk_version

        m = manifest
        ruleset = m.agent.ruleset
        self.record: dict = {"ruleset": ruleset, "tools": None, "transport": "http", "sdk": f"mcp {sdk_version()}",
                             "client": None}
        wall = m.budgets.wall_time_minutes
        super().__init__(ToolDesk(), ruleset, self.record, wall * 60 if wall is not None else None,
                         m.agent.max_reply_bytes)
        # one client per trial, and only with this trial's bearer token (never written, printed or logged)
        token = secrets.token_urlsafe(32)
        self._start_server(m, ruleset, token)
        # the keys the client may hold, cut out of anything it prints (longest first)
        self._secrets = tuple(sorted(set(key_values()) | {k for k in (*keys, token) if len(k) >= 8}, key=len,
                                     reverse=True))
        self._cap = m.agent.max_reply_bytes  # each stream of its transcript is kept up to this, as a reply is
        self.evidence_files: dict[str, bytes] = {}  # its transcript, for the trial folder (recorder)
        self._dir = tempfile.TemporaryDirectory(prefix="oakwatch-cli-")
        self._launch(condition, m, token, Path(self._dir.name))

    def _start_server(self, m: Manifest, ruleset: str, token: str) -> None:
        """The trial's tool server on streamable HTTP at 127.0.0.1, a free port, in its own thread."""
        from sessions.execute.mcp_server import HttpSessions, bind, build_server

        self.sessions = HttpSessions(self.desk, token=token, record=self.record)
        self.server = build_server(self.desk, ruleset=ruleset, image_scale=m.agent.image_scale,
                                   allowed=tuple(m.agent.allowed_actions), max_actions=m.agent.max_actions_per_decision,
                                   press_frames=m.emulator.press_frames, settle_frames=m.emulator.settle_frames,
                                   instruction=m.agent.instruction,
                                   on_session=self.sessions.saw, record=self.record,
                                   shortcuts=tuple(m.agent.shortcuts),
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

    def _write_config(self, config_dir: Path, token: str) -> dict:
        """The client's MCP config file (its only copy of the token); returns the config as recorded."""
        config = {"mcpServers": {SERVER_NAME: {"type": "http", "url": self.url,
                                               "headers": {"Authorization": f"Bearer {token}"}}}}
        self.config_path = config_dir / "mcp-config.json"
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the client's only
        with open(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(config, indent=2) + "\n")
        return {"mcpServers": {SERVER_NAME: {"type": "http", "url": self.url,
                                             "headers": {"Authorization": f"Bearer {TOKEN_SHOWN}"}}}}

    def _launch(self, condition: Condition, m: Manifest, token: str, top: Path) -> None:
        """Start the client, sandboxed, in an empty working folder under `top`, and watch it."""
        work, config_dir = top / "work", top / "config"  # work: the client's cwd and HOME, empty at its start
        work.mkdir()
        config_dir.mkdir()
        shown = self._write_config(config_dir, token)
        self.work = work
        told = m.agent.instruction or ""  # `{instruction}`: the prompt says what the system prompt would
        argv = [arg.replace("{mcp_config}", str(self.config_path)).replace("{mcp_url}", self.url)
                .replace("{instruction}", told) for arg in condition.command]
        self._out = open(top / "stdout", "w+b")  # noqa: SIM115 - read back at the end, closed in aclose
        self._err = open(top / "stderr", "w+b")  # noqa: SIM115
        # Only PATH, HOME (the empty folder), what the condition names (its own API key lives there, never
        # in a file of ours) and the trial's token for clients that read it from a variable (Codex:
        # bearer_token_env_var). Out of reach of the repository, the assets and the evidence.
        env = client_env(condition.env or [], work) | {TOKEN_VARIABLE: token}
        reads = [Path(r) for r in condition.client_reads or []]
        exe = shutil.which(condition.command[0], path=env["PATH"])
        if exe is not None:  # the client's own executable (a link and what it names), read-only
            reads += sorted({Path(exe).absolute(), Path(os.path.realpath(exe))} - set(reads))
        kind = isolation_kind()
        tools = client_tools(condition.command)
        self.record["client"] = {"command": list(condition.command), "version": condition.client_version,
                                 "mcp_config": shown, "exit_status": None, "usage": None, "total_cost_usd": None,
                                 "num_turns": None, "session_id": None, "last_lines": None, "transcript": None,
                                 "tools": tools | {"allowed_by_manifest": bool(condition.allow_file_and_shell_tools)},
                                 "isolation": {"kind": kind, "working_folder": "empty", "env": sorted(env),
                                               "reads": [str(r) for r in reads]}}
        (top / "root").mkdir()  # unshare's: where its file system is built, inside its own namespace
        self.process = subprocess.Popen(wrapped(argv, kind=kind, work=work, config_dir=config_dir, reads=reads,
                                                root=top / "root"),
                                        stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err, cwd=work,
                                        env=env)
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
        # What the client printed is its own: scrubbed of every key before any of it is kept.
        # Parsed first (a scrubbed number would no longer parse), then every string scrubbed whole, then cut.
        report = scrubbed(client_report(self._out.read(OUTPUT_CAP).decode("utf-8", "replace")), self._secrets)
        if report["session_id"] is not None:
            report["session_id"] = report["session_id"][:SESSION_ID_CHARS]
        client.update(report)
        client["version"] = scrubbed(client["version"], self._secrets)
        if client["exit_status"] != 0:  # why it failed, in its own words, beside its exit status
            client["last_lines"] = {name: last_lines(f, self._secrets) for name, f in (("stdout", self._out),
                                                                                      ("stderr", self._err))}
        # Its own transcript (what it printed, the session logs it wrote under its HOME), before the
        # temporary folder goes: kept in the trial's evidence, its hash in the result.
        data, sources = transcript({"stdout": self._out, "stderr": self._err}, self.work, self._cap, self._secrets)
        self.evidence_files = {layout.CLIENT_TRANSCRIPT: data}
        client["transcript"] = {"file": layout.CLIENT_TRANSCRIPT, "sha256": hashlib.sha256(data).hexdigest(),
                                "bytes": len(data), "sources": sources}
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


def transcript(streams: dict, home: Path, cap: int, secrets: tuple[str, ...]) -> tuple[bytes, list[str]]:
    """The client's transcript as JSON lines, one per source: its output streams, then the session logs
    Claude Code and Codex write under their HOME (SESSION_LOGS; at most MAX_LOGS). Each line: `source`,
    `bytes` (as the client wrote it), `text` (scrubbed of keys, its first `cap` bytes), `kept_bytes` and
    `truncated`."""
    entries = [_entry(name, f, cap, secrets) for name, f in streams.items()]
    real_home = home.resolve()
    logs = sorted(p for d in SESSION_LOGS for p in (home / d).rglob("*.jsonl")
                  if p.is_file() and not p.is_symlink() and p.resolve().is_relative_to(real_home))
    for path in logs[:MAX_LOGS]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            entries.append(_entry(path.relative_to(home).as_posix(), f, cap, secrets))
    data = b"".join(json.dumps(e, ensure_ascii=False).encode() + b"\n" for e in entries)
    return data, [e["source"] for e in entries]


def _entry(source: str, f, cap: int, secrets: tuple[str, ...]) -> dict:
    f.flush()
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    raw = f.read(cap + SCRUB_SLACK)  # a key cut at the cap is scrubbed whole, then the text is cut
    text = scrub(raw.decode("utf-8", "replace"), secrets).encode()
    kept = text[:cap].decode("utf-8", "ignore")
    return {"source": source, "bytes": size, "kept_bytes": len(kept.encode()),
            "truncated": size > len(raw) or len(text) > cap, "text": kept}


def last_lines(f, secrets: tuple[str, ...]) -> list[str]:
    """The last lines a client printed on one stream, scrubbed of keys, each cut to TAIL_LINE_CHARS."""
    f.flush()
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - TAIL_BYTES))
    text = scrub(f.read().decode("utf-8", "replace"), secrets)
    return [line[:TAIL_LINE_CHARS] for line in text.splitlines()[-TAIL_LINES:]]


def scrubbed(value, secrets: tuple[str, ...]):
    """`value` with every string in it scrubbed of keys (sessions.preflight.tool_conditions.scrub)."""
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {scrubbed(k, secrets): scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrubbed(v, secrets) for v in value]
    return value


def client_report(text: str) -> dict:
    """The client's own account of the run: Claude Code's JSON result object, or Codex's JSON event
    lines. Whatever it did not say is None."""
    report = {"usage": None, "total_cost_usd": None, "num_turns": None, "session_id": None}
    for item in _json_objects(text):
        if "total_cost_usd" in item or item.get("type") == "result":  # Claude Code
            _claude_result(report, item)
        elif item.get("type") == "turn.completed" and isinstance(item.get("usage"), dict):  # Codex, per turn
            turn = _tokens(item["usage"])
            total = report["usage"] or {}
            report["usage"] = {k: _add(total.get(k), v) if total else v for k, v in turn.items()}
            report["num_turns"] = (report["num_turns"] or 0) + 1
        elif item.get("type") == "thread.started" and item.get("thread_id"):
            report["session_id"] = str(item["thread_id"])
    return report


def _json_objects(text: str) -> list[dict]:
    """The JSON objects of the client's output: the whole text as one, else each line that is one."""
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
    return objects


def _claude_result(report: dict, item: dict) -> None:
    """Claude Code's result object: its usage, cost, turns and session, each None when not said."""
    usage = item.get("usage")
    report["usage"] = _tokens(usage) if isinstance(usage, dict) else None
    report["total_cost_usd"] = _number(item.get("total_cost_usd"))
    report["num_turns"] = item.get("num_turns") if isinstance(item.get("num_turns"), int) else None
    report["session_id"] = str(item["session_id"]) if item.get("session_id") else None


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
