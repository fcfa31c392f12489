"""verify's check of the tool server's rulesets (seed 002): every trial an agent played through
oakwatch's MCP server records the tools the server exposed (provenance.tool_server.tools), and that
list must be exactly the frozen ruleset's (engine.policies.rulesets) — no tool more, none fewer. A battle task's
rules (the manifest's battle section, seed 004) are recorded verbatim in every result (provenance.battle),
and battle calls (a trace line's battle field) appear only under the battle ruleset."""

from __future__ import annotations

from engine.battle.battle import BATTLE_TOOLS
from engine.policies.rulesets import RULESETS, SHORTCUT_TOOL
from sessions.evidence import layout

TOOL_POLICIES = ("mcp", "cli")


def check_tools(manifest, labels: dict[str, str], results: dict, report) -> None:
    """`results`: trial key -> (TrialResult, sha); `labels`: blinded label -> condition id."""
    if manifest is None:
        return
    policies = {c.id: c.policy for c in manifest.conditions}
    rules = manifest.battle.model_dump(mode="json") if manifest.battle is not None else None
    for key, (r, _sha) in sorted(results.items()):
        if r.provenance.get("battle") != rules:
            report.add(f"{layout.trial_dir(key)}/{layout.RESULT}: provenance.battle is not the manifest's battle rules")
    ruleset = manifest.agent.ruleset
    # the ruleset's tools, and the shortcut tool where the manifest permits shortcuts (engine.policies.rulesets)
    expected = sorted(RULESETS.get(ruleset, ()) + ((SHORTCUT_TOOL,) if manifest.agent.shortcuts else ()))
    for key, (r, _sha) in sorted(results.items()):
        where = f"{layout.trial_dir(key)}/{layout.RESULT}"
        record = r.provenance.get("tool_server")
        if policies.get(labels.get(r.condition, "")) not in TOOL_POLICIES:
            if record is not None:
                report.add(f"{where}: records a tool server, but its condition is not played through one")
        elif record is None:
            if not r.recovered and r.telemetry is not None and r.telemetry.model_calls:
                report.add(f"{where}: an agent played through the tool server, but the tools it exposed are "
                           f"not recorded (provenance.tool_server)")
        else:
            _check_tool_record(record, ruleset, expected, where, report)


def _check_tool_record(record, ruleset: str, expected: list[str], where: str, report) -> None:
    """provenance.tool_server: the manifest's ruleset, and exactly its tools."""
    if not isinstance(record, dict):
        report.add(f"{where}: provenance.tool_server is not an object")
        return
    if record.get("ruleset") != ruleset:
        report.add(f"{where}: played under ruleset {record.get('ruleset')!r}, but the manifest's is {ruleset!r}")
    tools = record.get("tools")
    if isinstance(tools, list) and sorted(map(str, tools)) == expected and len(tools) == len(expected):
        return
    named = set(map(str, tools or [])) if isinstance(tools, list) else None
    extra = sorted(named - set(expected)) if named is not None else []
    missing = sorted(set(expected) - named) if named is not None else expected
    report.add(f"{where}: the tool server exposed {tools!r}, not exactly the {ruleset} ruleset's "
               f"{expected}" + (f" (more: {', '.join(extra)})" if extra else "")
               + (f" (missing: {', '.join(missing)})" if missing else ""))


def check_battle_line(manifest, line, where: str, report) -> None:
    """A trace line's battle call: only under the battle ruleset, and its writes well formed."""
    if line.battle is None:
        return
    if manifest is not None and manifest.agent.ruleset != "battle":
        report.add(f"{where}: a battle call in a trial whose ruleset is {manifest.agent.ruleset!r}")
        return
    writes = line.battle.get("writes")
    ok = isinstance(writes, list) and all(
        isinstance(w, dict) and isinstance(w.get("address"), int) and isinstance(w.get("bytes"), list)
        and all(isinstance(b, int) and 0 <= b <= 255 for b in w["bytes"]) for w in writes)
    if not ok or line.battle.get("tool") not in BATTLE_TOOLS:
        report.add(f"{where}: a malformed battle call (tool, writes of {{address, bytes}})")
