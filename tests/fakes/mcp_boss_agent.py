#!/usr/bin/env python3
"""A seed-004 agent for tests: plays a battle task through oakwatch's MCP server (stdio) with the official
SDK's client, episode after episode: at each episode's start it applies a team and leads with slot 0, then
FIGHTs with the strongest move by the type chart and SENDs the next critter when one faints.

  mcp_boss_agent.py (--team-dir DIR | --random SEED) [--log FILE] --mcp-config {mcp_config}   (policy: cli)
  mcp_boss_agent.py (--team-dir DIR | --random SEED) [--log FILE] --stdio -- oakwatch mcp MANIFEST ...

The task it plays is named by OAKWATCH_TASK_ID and its sandbox data (`oakwatch tasks data`: species,
moves, items, task.json) is the folder OAKWATCH_TASK_DATA, as `oakwatch tasks run --policy cli` sets
them. --team-dir: the team is DIR/<task id>.team.json's (or .reference.yml's); --random: a random
legal team from the data.
The type chart is the GBA cartridge's (assets/gba-cartridge/tools/battle_data.py): a fake's knowledge.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

import anyio

TIMEOUT_S = 120
HERE = Path(__file__).resolve().parent
# installed as a client is (outside oakwatch's tree), battle_data.py is copied beside it
sys.path[:0] = [str(HERE), str(HERE.parents[1] / "assets" / "gba-cartridge" / "tools")]
import battle_data  # noqa: E402


def _team(args, data: Path, task_id: str) -> list[dict]:
    if args.team_dir is not None:
        if (args.team_dir / f"{task_id}.team.json").is_file():  # what a client installation carries
            return json.loads((args.team_dir / f"{task_id}.team.json").read_text())
        import yaml

        return yaml.safe_load((args.team_dir / f"{task_id}.reference.yml").read_text())["team"]
    rng = random.Random(args.random)
    rules = json.loads((data / "task.json").read_text())
    species = json.loads((data / "species.json").read_text())
    picks = rng.sample(species, min(rules["party_limit"], len(species)))
    return [{"species": s["name"], "level": rules["level_cap"],
             "moves": rng.sample(s["moves"], min(4, len(s["moves"])))} for s in picks]


def _effect(move_type: str, types: list[str]) -> float:
    out = 1.0
    for a, b, x in battle_data.CHART:
        if a == move_type and b in types:
            out *= x / 10
    return out


async def play(session, team: list[dict], moves: dict[str, dict], log: list) -> None:
    async def call(name: str, arguments: dict) -> dict:
        result = await session.call_tool(name, arguments, read_timeout_seconds=TIMEOUT_S)
        text = "".join(getattr(c, "text", "") for c in result.content)
        entry = {"tool": name, "args": arguments, "error": result.is_error,
                 "result": text if result.is_error else json.loads(text)}
        log.append(entry)
        return entry

    for _ in range(3000):
        seen = await call("observe", {})
        if seen["error"]:
            return
        s = seen["result"]
        if s.get("trial_over"):
            return
        if s.get("phase") == "before-battle" and not s.get("team_applied"):
            await call("apply_team", {"team": team})
            await call("lead", {"slot": 0})
            continue
        if s.get("phase") == "send":
            for p in s["party"]:
                if p["slot"] != s["active"]:
                    entry = await call("action", {"kind": "SEND", "slot": p["slot"]})
                    if not entry["error"]:
                        break
            continue
        own, enemy = s.get("own"), s.get("enemy")
        if own and enemy:
            usable = [m for m in own["moves"] if m["pp"]] or own["moves"]
            move = max(usable, key=lambda m: (moves[m["move"]]["power"] or 0) * (moves[m["move"]]["accuracy"] or 100)
                       * _effect(moves[m["move"]]["type"], enemy["types"] or []))["move"]
        else:
            move = team[0]["moves"][0]
        entry = await call("action", {"kind": "FIGHT", "move": move})
        if entry["error"] and "no battle" in str(entry["result"]):
            await call("reset", {})
        elif not entry["error"] and entry["result"].get("trial_over"):
            return


async def run_stdio(command: list[str], team: list[dict], moves: dict[str, dict], log: list) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(Path.cwd()))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await play(session, team, moves, log)


async def run_http(url: str, headers: dict | None, team: list[dict], moves: dict[str, dict], log: list) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(url, http_client=http) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        await play(session, team, moves, log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", action="store_true")
    parser.add_argument("--mcp-config", type=Path)  # policy: cli's config file: the url and the trial's token
    parser.add_argument("--team-dir", type=Path)
    parser.add_argument("--random", type=int)
    parser.add_argument("--log", type=Path)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args(argv)
    if args.version:
        print("mcp_boss_agent 1.0 (oakwatch test fake)")
        return 0
    task_id, data = os.environ["OAKWATCH_TASK_ID"], Path(os.environ["OAKWATCH_TASK_DATA"])
    team = _team(args, data, task_id)
    moves = {m["name"]: m for m in json.loads((data / "moves.json").read_text())}
    log: list = []
    if args.mcp_config is not None:
        (entry,) = json.loads(args.mcp_config.read_text(encoding="utf-8"))["mcpServers"].values()
        anyio.run(run_http, entry["url"], entry.get("headers"), team, moves, log)
    else:
        anyio.run(run_stdio, args.command, team, moves, log)
    print(json.dumps({"type": "result", "num_turns": len(log), "result": "done"}))
    if args.log is not None:
        args.log.write_text(json.dumps(log, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
