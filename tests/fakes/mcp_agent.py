#!/usr/bin/env python3
"""A small agent harness that plays through oakwatch's MCP server with the official SDK's client.

It stands in for your own harness in tests, and for a coding-agent CLI under `policy: cli`: given
`--mcp-config FILE` (Claude Code's flag, the file oakwatch writes) it reads the server's address
from it and prints one JSON object in Claude Code's `--output-format json` shape at the end
(`total_cost_usd`, `usage`, `num_turns`, `result`, `session_id`). It does not think: it presses a
script's buttons (the bundled walkthrough by default), a few per call, looking at the screen first.

  mcp_agent.py --stdio -- oakwatch mcp MANIFEST ...   start the server itself, over stdio
  mcp_agent.py --url http://127.0.0.1:P/mcp           a server already listening (streamable HTTP)
  mcp_agent.py -p PROMPT --mcp-config FILE --output-format json   as `claude -p` would be run
Options: --chunk N (buttons per call), --presses N (stop, and disconnect, after N calls),
--bad-first (one invalid call first), --bad-args (one
with arguments of the wrong type), --after-end N (calls made once the trial has ended),
--report FILE (what it saw, as JSON; `-`: on stderr), --token-file FILE or --token-env NAME (send the bearer token it
holds), --no-usage (print no usage fields), --version, --peek FILE (try to read a file first, as an
agent after the answers would; what happened goes on stderr and into the result), --script
FILE.json (the presses as a JSON list: then it needs no oakwatch code), --show-env (its
environment's names and its working folder's contents, on stderr), --shortcut NAME (call the shortcut
tool with NAME before each press_keys call while the screen offers it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2.1.999 (fake Claude Code for oakwatch tests)"
TIMEOUT_S = 120


def walkthrough(path: Path | None = None) -> list[str]:
    if path is not None and path.suffix == ".json":  # a plain list of presses (no oakwatch code needed)
        return json.loads(path.read_text(encoding="utf-8"))
    sys.path.insert(0, str(ROOT))
    from engine.loop.script import parse_script

    path = path or ROOT / "assets" / "cartridge" / "walkthrough.txt"
    return parse_script(path.read_text(encoding="utf-8"), path.name)


async def play(session, args, instructions: str | None = None) -> dict:
    seen: dict = {"tools": sorted(t.name for t in (await session.list_tools()).tools), "calls": [], "errors": [],
                  "instructions": instructions}

    async def call(name: str, arguments: dict | None = None):
        result = await session.call_tool(name, arguments or {}, read_timeout_seconds=TIMEOUT_S)
        text = "".join(getattr(c, "text", "") for c in result.content)
        kinds = [c.type for c in result.content]
        seen["calls"].append({"tool": name, "error": result.is_error, "kinds": kinds})
        if result.is_error:
            seen["errors"].append({"tool": name, "text": text})
        return result, text

    if args.bad_args:  # keys that are not even a list (the schema shown says array): charged all the same
        await call("press_keys", {"keys": 5})
    if args.bad_first:  # a well-formed call with a button the game has not: the contract rejects it
        await call("press_keys", {"keys": ["JUMP"]})
    keys = walkthrough(args.script)
    calls = 0
    over = None
    seen["resets"] = []
    if args.reset_after is not None:  # a first try (the script's opening presses), then a reset, then the script
        for start in range(0, args.reset_after, args.chunk):
            await call("press_keys", {"keys": keys[start:min(start + args.chunk, args.reset_after)]})
        for _ in range(args.resets):
            result, text = await call("reset")
            seen["resets"].append(text if result.is_error else json.loads(text))
    for start in range(args.start, len(keys), args.chunk):
        if args.presses is not None and calls >= args.presses:
            break
        screen, _ = await call("get_screen")
        if screen.is_error:
            over = "refused"
            break
        if args.shortcut is not None:  # taken where the screen offers it, else refused (an invalid output)
            await call("shortcut", {"name": args.shortcut})
        result, text = await call("press_keys", {"keys": keys[start:start + args.chunk]})
        calls += 1
        if result.is_error:
            continue
        outcome = json.loads(text)
        if outcome["trial_over"]:
            over = outcome["ending"]
            break
    seen["ending"] = over
    for _ in range(args.after_end):
        await call("press_keys", {"keys": ["A"]})
    seen["press_calls"] = calls
    return seen


async def run_stdio(command: list[str], args) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(Path.cwd()))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        started = await session.initialize()
        return await play(session, args, started.instructions)


async def run_http(url: str, args, headers: dict | None = None) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        started = await session.initialize()
        return await play(session, args, started.instructions)


def peek(path: Path) -> str:
    """What a coding agent taking answers from its surroundings would see of `path` (also on stderr)."""
    try:
        size = len(path.read_bytes())
        seen = f"read {path}: {size} bytes"
    except OSError as exc:
        seen = f"could not read {path}: {exc.strerror}"
    print(seen, file=sys.stderr)
    return seen


def from_config(path: Path) -> tuple[str | None, list[str] | None, dict | None]:
    """The one server of an MCP config file (Claude Code's format): an HTTP url (and the headers to
    send it: the trial's bearer token) or a command."""
    servers = json.loads(path.read_text(encoding="utf-8"))["mcpServers"]
    (entry,) = servers.values()
    if entry.get("type") == "http" or "url" in entry:
        return entry["url"], None, entry.get("headers")
    return None, [entry["command"], *entry.get("args", [])], None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", action="store_true")
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--url")
    parser.add_argument("-p", "--print", dest="prompt")
    parser.add_argument("--mcp-config", type=Path)
    parser.add_argument("--output-format", default="text")
    parser.add_argument("--chunk", type=int, default=4)
    parser.add_argument("--presses", type=int)
    parser.add_argument("--bad-first", action="store_true")
    parser.add_argument("--bad-args", action="store_true")
    parser.add_argument("--after-end", type=int, default=0)
    parser.add_argument("--script", type=Path)  # the presses to play (default: the cartridge's walkthrough)
    parser.add_argument("--reset-after", type=int)  # press this many of them, then call reset
    parser.add_argument("--resets", type=int, default=1)  # how many reset calls then
    parser.add_argument("--start", type=int, default=0)  # then play the presses from this one on
    parser.add_argument("--report", type=Path)
    parser.add_argument("--token-file", type=Path)  # oakwatch mcp --token-file: send its bearer token
    parser.add_argument("--token-env")  # the bearer token is in this variable (as Codex's bearer_token_env_var)
    parser.add_argument("--no-usage", action="store_true")
    # Claude Code's tool flags: taken and ignored (oakwatch reads them from the command line)
    for flag in ("--tools", "--allowedTools", "--disallowedTools"):
        parser.add_argument(flag)
    parser.add_argument("--peek", type=Path, action="append", default=[])  # files it tries to read first
    parser.add_argument("--show-env", action="store_true")
    parser.add_argument("--shortcut")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args(argv)
    if args.version:
        print(VERSION)
        return 0
    peeked = [peek(path) for path in args.peek]
    if args.show_env:  # what it was given: its environment's names, and what its working folder held
        print(f"env: {' '.join(sorted(os.environ))}; cwd holds: {' '.join(sorted(os.listdir('.'))) or 'nothing'}",
              file=sys.stderr)
    url, command = args.url, args.command if args.stdio else None
    headers = None
    if args.token_file is not None:
        headers = {"Authorization": f"Bearer {args.token_file.read_text(encoding='utf-8').strip()}"}
    if args.token_env is not None:
        headers = {"Authorization": f"Bearer {os.environ.get(args.token_env, '')}"}
    if args.mcp_config is not None:
        url, command, headers = from_config(args.mcp_config)
    seen = anyio.run(run_stdio, command, args) if command else anyio.run(run_http, url, args, headers)
    seen["prompt"] = args.prompt
    if args.report is not None and str(args.report) == "-":  # on stderr (a sandboxed client writes no file of ours)
        print(f"report: {json.dumps(seen)}", file=sys.stderr)
    elif args.report is not None:
        args.report.write_text(json.dumps(seen, indent=2), encoding="utf-8")
    if args.output_format == "json":
        out = {"type": "result", "subtype": "success", "is_error": False, "num_turns": len(seen["calls"]),
               "result": f"played {seen['press_calls']} press_keys calls; ending {seen['ending']}",
               "session_id": str(uuid.uuid4())}
        if peeked:
            out["result"] += "; " + "; ".join(peeked)
        if not args.no_usage:
            out |= {"total_cost_usd": 0.0123, "usage": {"input_tokens": 1200, "output_tokens": 345,
                                                         "cache_read_input_tokens": 100}}
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
