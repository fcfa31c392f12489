"""Preflight for conditions played through oakwatch's tool server (policy mcp and cli).

Refused before anything is written: an mcp condition outside `oakwatch mcp`; the human ruleset on
the structured track (seed 002: the human ruleset receives no game state); a cost or token budget
(what each call cost is unknown to the server: every decision would end the trial as
usage-unknown); a cli client that cannot be started, or whose `--version` is not the one pinned.
"""

from __future__ import annotations

import shutil
import subprocess

from sessions.preflight.manifest import Condition, Manifest

VERSION_TIMEOUT_S = 20


class ToolConditionError(ValueError):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field  # the manifest field at fault, when one is


def check_tool_condition(manifest: Manifest, c: Condition, index: int, *, allow_mcp: bool, game=None) -> None:
    if c.policy == "mcp" and not allow_mcp:
        raise ToolConditionError("policy 'mcp' is played by an agent connecting to `oakwatch mcp MANIFEST` "
                                 "(not by `oakwatch run`); policy 'cli' launches a client for you")
    agent = manifest.agent
    if agent.ruleset == "human" and agent.information_track == "structured":
        raise ToolConditionError("the human ruleset shows the screen only: it does not go with "
                                 "information_track structured (use ruleset standard)", "agent.ruleset")
    if agent.ruleset == "battle" and manifest.episodes is None:  # its reset tool starts a new episode
        raise ToolConditionError("the battle ruleset's reset starts a new episode: it needs an episodic manifest "
                                 "(add episodes, or serve an episodic task: docs/tasks.md)", "agent.ruleset")
    if agent.ruleset == "battle" and game is not None and game.battle is None:
        raise ToolConditionError(f"the battle ruleset plays through the game's battle adapter, and {game.id} has "
                                 "none (its game definition's battle section: docs/mcp.md)", "agent.ruleset")
    b = manifest.budgets
    if b.total_cost_usd is not None or b.tokens is not None:
        raise ToolConditionError(f"policy {c.policy!r}: the tool server does not know what each call cost, so "
                                 "budgets.total_cost_usd and budgets.tokens cannot be kept (leave them out; a cli "
                                 "client's own reported usage is recorded with the result)",
                                 "budgets.total_cost_usd" if b.total_cost_usd is not None else "budgets.tokens")
    if c.policy == "cli":
        found = client_version(c, index)
        if c.client_version is not None and c.client_version != found:
            raise ToolConditionError(f"pins client version {c.client_version!r}, but `{c.command[0]} --version` "
                                     f"says {found!r}", f"conditions.{index}.client_version")


def client_version(c: Condition, index: int | None = None) -> str:
    """The client's own `--version` line (its first line of output)."""
    where = f"conditions.{index}.command" if index is not None else None
    exe = shutil.which(c.command[0])
    if exe is None:
        raise ToolConditionError(f"client {c.command[0]!r} not found (not on PATH, or not executable)", where)
    try:
        done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolConditionError(f"`{c.command[0]} --version` failed: {exc}", where) from None
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not lines:
        raise ToolConditionError(f"`{c.command[0]} --version` exited {done.returncode} without a version", where)
    return lines[0].strip()[:200]
