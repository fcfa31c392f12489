#!/usr/bin/env python3
"""A battle agent for tests: plays a plan of battle-tool calls through oakwatch's MCP server (stdio) with
the official SDK's client, and reports what each call returned.

  mcp_battle_agent.py --plan PLAN.json --report FILE --stdio -- oakwatch mcp MANIFEST ...

PLAN.json is a list of steps: {"tool": NAME, "args": {...}} calls one tool once; {"fight": MOVE} calls
action FIGHT with MOVE until its episode ends or the trial is over (at most 40 calls).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio

TIMEOUT_S = 120


async def play(session, plan: list[dict], instructions: str | None = None) -> dict:
    seen: dict = {"tools": sorted(t.name for t in (await session.list_tools()).tools), "calls": [],
                  "instructions": instructions}

    async def call(name: str, arguments: dict) -> dict:
        result = await session.call_tool(name, arguments, read_timeout_seconds=TIMEOUT_S)
        text = "".join(getattr(c, "text", "") for c in result.content)
        entry = {"tool": name, "args": arguments, "error": result.is_error,
                 "result": text if result.is_error or name == "get_screen" else json.loads(text)}
        if name == "get_screen":
            entry["result"] = [c.type for c in result.content]
        seen["calls"].append(entry)
        return entry

    for step in plan:
        if "fight" in step:
            for _ in range(40):
                entry = await call("action", {"kind": "FIGHT", "move": step["fight"]})
                r = entry["result"]
                if entry["error"] or r.get("trial_over") or r.get("episode_end"):
                    break
        else:
            await call(step["tool"], step.get("args", {}))
    return seen


async def run_stdio(command: list[str], plan: list[dict]) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(Path.cwd()))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        started = await session.initialize()
        return await play(session, plan, started.instructions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plan", type=Path, required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    seen = anyio.run(run_stdio, args.command, json.loads(args.plan.read_text()))
    args.report.write_text(json.dumps(seen, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
