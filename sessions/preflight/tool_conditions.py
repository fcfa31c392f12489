"""Preflight for conditions played through oakwatch's tool server (policy mcp and cli).

Refused before anything is written: an mcp condition outside `oakwatch mcp`; the human ruleset on
the structured track (seed 002: the human ruleset receives no game state); a cost or token budget
(what each call cost is unknown to the server: every decision would end the trial as
usage-unknown); a cli client that cannot be started, or whose `--version` is not the one pinned.

Whatever a cli client prints (its version line here, its report and output in sessions.execute.cli_client)
passes through `scrub` before it is kept: a client holds API keys and may print them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from engine.providers.base import redact
from sessions.preflight.manifest import Condition, Manifest

VERSION_TIMEOUT_S = 20
# A variable whose name holds one of these is a key variable (as sessions.analysis.report's package export).
KEY_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")


def key_values(env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The values of the environment's key variables (longest first: a key containing another)."""
    env = os.environ if env is None else env
    found = {v for k, v in env.items() if any(w in k.upper() for w in KEY_WORDS) and len(v) >= 8}
    return tuple(sorted(found, key=len, reverse=True))


def scrub(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """A client's text with every key removed: each key variable's value and its ends (as a provider's
    error is redacted, engine.providers.base.redact), and anything shaped like a key."""
    return redact(text, key_values() if secrets is None else secrets)


class ToolConditionError(ValueError):
    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field  # the manifest field at fault, when one is


def check_tool_condition(manifest: Manifest, c: Condition, index: int, *, allow_mcp: bool, game=None,
                         protected: list[tuple[str, Path]] | None = None, base: Path | None = None) -> None:
    """`protected`: what the client must not reach (what it is, its path); `base`: the manifest's folder."""
    if c.policy == "mcp" and not allow_mcp:
        raise ToolConditionError("policy 'mcp' is played by an agent connecting to `oakwatch mcp MANIFEST` "
                                 "(not by `oakwatch run`); policy 'cli' launches a client for you")
    _check_agent(manifest, game)
    b = manifest.budgets
    if b.total_cost_usd is not None or b.tokens is not None:
        raise ToolConditionError(f"policy {c.policy!r}: the tool server does not know what each call cost, so "
                                 "budgets.total_cost_usd and budgets.tokens cannot be kept (leave them out; a cli "
                                 "client's own reported usage is recorded with the result)",
                                 "budgets.total_cost_usd" if b.total_cost_usd is not None else "budgets.tokens")
    if c.policy == "cli":
        _check_cli_client(c, index, protected or [], base or Path.cwd())


def _check_agent(manifest: Manifest, game) -> None:
    """The agent section fits the tool server: its ruleset, track and the game's battle adapter (permitted shortcuts
    are one more tool: engine.policies.rulesets.served_tools)."""
    agent = manifest.agent
    if agent.ruleset == "human" and agent.information_track != "visual":
        raise ToolConditionError("the human ruleset shows the screen only: it does not go with "
                                 f"information_track {agent.information_track} (use ruleset standard)", "agent.ruleset")
    if agent.ruleset == "battle" and manifest.episodes is None:  # its reset tool starts a new episode
        raise ToolConditionError("the battle ruleset's reset starts a new episode: it needs an episodic manifest "
                                 "(add episodes, or serve an episodic task: docs/tasks.md)", "agent.ruleset")
    if agent.ruleset == "battle" and game is not None and game.battle is None:
        raise ToolConditionError(f"the battle ruleset plays through the game's battle adapter, and {game.id} has "
                                 "none (its game definition's battle section: docs/mcp.md)", "agent.ruleset")


def _check_cli_client(c: Condition, index: int, protected: list[tuple[str, Path]], base: Path) -> None:
    """A cli client: its own file and shell tools closed (or allowed in so many words), nothing protected in
    its reach (what it reads, its own program), and its version as pinned."""
    from sessions.execute.cli_sandbox import overlap

    tools = client_tools(c.command)
    if tools["file_and_shell"] and not c.allow_file_and_shell_tools:
        raise ToolConditionError(f"{tools['kind']}'s own file and shell tools are open to it "
                                 f"({', '.join(tools['file_and_shell'])}): {CLOSE_THEM[tools['kind']]}, or say "
                                 "in so many words that it may use them (allow_file_and_shell_tools: true)",
                                 f"conditions.{index}.command")
    for j, path in enumerate(client_reads(c, base)):
        if not path.exists():  # bwrap would refuse to start the client
            raise ToolConditionError(f"{path} does not exist", f"conditions.{index}.client_reads.{j}")
        if (hit := overlap(path, protected)) is not None:
            raise ToolConditionError(f"{path} would put {hit} in the client's reach", f"conditions.{index}."
                                     f"client_reads.{j}")
    exe = shutil.which(c.command[0])
    if exe is not None and (hit := overlap(Path(exe), protected)) is not None:
        raise ToolConditionError(f"the client {exe} lies in {hit}: it would be in the client's reach "
                                 "(install the client elsewhere)", f"conditions.{index}.command")
    found = client_version(c, index)
    if c.client_version is not None and c.client_version != found:
        raise ToolConditionError(f"pins client version {c.client_version!r}, but `{c.command[0]} --version` "
                                 f"says {found!r}", f"conditions.{index}.client_version")


def client_version(c: Condition, index: int | None = None) -> str:
    """The client's own `--version` line (its first line of output, scrubbed of keys), asked as the trial
    will run it: in an empty folder (its HOME too) with only PATH and the variables the condition names."""
    import tempfile

    from sessions.execute.cli_sandbox import client_env

    where = f"conditions.{index}.command" if index is not None else None
    exe = shutil.which(c.command[0])
    if exe is None:
        raise ToolConditionError(f"client {c.command[0]!r} not found (not on PATH, or not executable)", where)
    try:
        with tempfile.TemporaryDirectory(prefix="oakwatch-cli-version-") as empty:
            done = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, cwd=empty, env=client_env(c.env or [], Path(empty)))
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolConditionError(f"`{c.command[0]} --version` failed: {exc}", where) from None
    lines = (done.stdout or done.stderr).strip().splitlines()
    if done.returncode != 0 or not lines:
        raise ToolConditionError(f"`{c.command[0]} --version` exited {done.returncode} without a version", where)
    return scrub(lines[0].strip())[:200]


def client_reads(c: Condition, base: Path) -> list[Path]:
    """The condition's client_reads as absolute paths (relative ones from the manifest's folder)."""
    return [p if p.is_absolute() else base / p for p in (Path(r).expanduser() for r in c.client_reads or [])]


# Claude Code's built-in tools that read or write files or run commands (its MCP tools are mcp__*).
CLAUDE_FILE_AND_SHELL = ("Bash", "BashOutput", "KillShell", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep",
                         "LS", "NotebookRead", "NotebookEdit", "Task", "Agent")
CLOSE_THEM = {"claude-code": 'close them (--tools "", or --disallowedTools naming each)',
              "codex": "codex exec always has its shell, even in its read-only sandbox",
              "unknown": "oakwatch cannot tell which tools this client has (it knows Claude Code's and Codex's flags)"}
_TOOL_NAME = re.compile(r"[^,\s()]+(?:\([^)]*\))?")


def client_tools(command: list[str]) -> dict:
    """The client's own tool settings as its command line gives them, and which of its own file and
    shell tools that leaves open (`file_and_shell`). Claude Code (`claude`): --tools (the built-ins it
    has; all by default), --allowedTools / --disallowedTools, --permission-mode,
    --dangerously-skip-permissions, --add-dir. Codex (`codex`): its sandbox mode (--sandbox / -s, -c
    sandbox_mode=, --full-auto, --dangerously-bypass-approvals-and-sandbox) and approval policy; its
    shell is always there. Any other client: unknown, taken as open."""
    name = Path(command[0]).name.lower()
    args = command[1:]
    if name.startswith("claude"):
        return _claude_tools(args)
    if name.startswith("codex"):
        return _codex_tools(args)
    return {"kind": "unknown", "file_and_shell": ["unknown"]}


def _options(args: list[str], names: tuple[str, ...], variadic: bool = False) -> list[str] | None:
    """Every value given to one of `names` (`--x V`, `--x=V`; variadic: every argument up to the next option)."""
    found: list[str] | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        head, eq, value = arg.partition("=")
        if head in names:
            found = found if found is not None else []
            if eq:
                found.append(value)
            else:
                j = i + 1
                while j < len(args) and not args[j].startswith("-") and (variadic or j == i + 1):
                    found.append(args[j])
                    j += 1
                i = j - 1
        i += 1
    return found


def _tool_names(values: list[str] | None) -> list[str] | None:
    return None if values is None else [t for v in values for t in _TOOL_NAME.findall(v)]


def _claude_tools(args: list[str]) -> dict:
    allowed = _tool_names(_options(args, ("--allowedTools", "--allowed-tools"), variadic=True))
    disallowed = _tool_names(_options(args, ("--disallowedTools", "--disallowed-tools"), variadic=True))
    tools = _tool_names(_options(args, ("--tools",), variadic=True))
    mode = _options(args, ("--permission-mode",))
    skip = "--dangerously-skip-permissions" in args
    add_dirs = _options(args, ("--add-dir",), variadic=True)
    others = [v for v in _options(args, ("--mcp-config",), variadic=True) or [] if v != "{mcp_config}"]
    has = set(CLAUDE_FILE_AND_SHELL) if tools is None or "default" in tools else set(tools)
    # A tool disallowed by its bare name is gone; `Bash(rm:*)` only narrows it.
    open_ = sorted(t for t in has - set(disallowed or []) if t.split("(")[0] in CLAUDE_FILE_AND_SHELL)
    return {"kind": "claude-code", "tools": tools, "allowed_tools": allowed, "disallowed_tools": disallowed,
            "permission_mode": mode[-1] if mode else None, "skip_permissions": skip, "add_dirs": add_dirs,
            "file_and_shell": open_ + (["--add-dir"] if add_dirs else []) + [f"MCP config {v}" for v in others]}


def _codex_tools(args: list[str]) -> dict:
    sandbox = _options(args, ("--sandbox", "-s"))
    approval = _options(args, ("--ask-for-approval", "-a"))
    others = []
    for item in _options(args, ("-c", "--config")) or []:
        key, _, value = item.partition("=")
        server = re.match(r"\s*mcp_servers\.([^.=\s]+)", key)
        if server and server.group(1) != "oakwatch":
            others.append(f"MCP server {server.group(1)}")
        if key.strip() == "sandbox_mode":
            sandbox = [value.strip().strip("\"'")]
        elif key.strip() == "approval_policy":
            approval = [value.strip().strip("\"'")]
    bypass = bool({"--dangerously-bypass-approvals-and-sandbox", "--yolo"} & set(args))
    mode = ("danger-full-access" if bypass else sandbox[-1] if sandbox
            else "workspace-write" if "--full-auto" in args else "read-only")  # codex exec's default: read-only
    return {"kind": "codex", "sandbox": mode, "approval": approval[-1] if approval else None,
            "bypass": bypass, "full_auto": "--full-auto" in args,
            "file_and_shell": ["shell"] + (["file writes"] if mode != "read-only" else []) + sorted(set(others))}
