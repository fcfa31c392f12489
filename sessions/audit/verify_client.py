"""verify's check of a `policy: cli` client against its frozen condition (issue 31 item 4): the result
records what the client was run as (provenance.tool_server.client: its command, its own tool settings,
its isolation). Those must be what the manifest allowed: the command as frozen, the tool settings that
command gives (as sessions.preflight.tool_conditions.client_tools reads them), file and shell
tools open only where the manifest says so in so many words, and no variable in its environment
that the condition does not name. A result edited after the fact, or a harness that drifted from its
manifest, fails here even when its sums were recomputed."""

from __future__ import annotations

from sessions.evidence import layout

ISOLATIONS = ("bwrap", "unshare", "none")


def check_clients(manifest, labels: dict[str, str], results: dict, report) -> None:
    """`results`: trial key -> (TrialResult, sha); `labels`: blinded label -> condition id."""
    if manifest is None:
        return
    conditions = {c.id: c for c in manifest.conditions}
    for key, (r, _sha) in sorted(results.items()):
        condition = conditions.get(labels.get(r.condition, ""))
        if condition is None or condition.policy != "cli":
            continue
        where = f"{layout.trial_dir(key)}/{layout.RESULT}"
        server = r.provenance.get("tool_server")
        client = server.get("client") if isinstance(server, dict) else None
        if client is None:
            if server is not None and not r.recovered:
                report.add(f"{where}: a cli trial whose client is not recorded (provenance.tool_server.client)")
            continue
        if not isinstance(client, dict):
            report.add(f"{where}: provenance.tool_server.client is not an object")
            continue
        for problem in client_problems(client, condition):
            report.add(f"{where}: {problem}")


def client_problems(client: dict, condition) -> list[str]:
    """What in one recorded client differs from what its frozen condition allowed."""
    from sessions.preflight.tool_conditions import client_tools

    problems: list[str] = []
    if client.get("command") != list(condition.command or []):
        problems.append("the client's recorded command is not its condition's frozen command")
    allowed = bool(condition.allow_file_and_shell_tools)
    expected = client_tools(list(condition.command or [""])) | {"allowed_by_manifest": allowed}
    tools = client.get("tools")
    if tools != expected:
        problems.append(f"the client's recorded tool settings {tools!r} are not what its command gives "
                        f"({expected!r})")
    elif tools["file_and_shell"] and not allowed:
        problems.append("the client's own file and shell tools were open, and the manifest does not allow them")
    problems += _isolation_problems(client.get("isolation"), condition)
    return problems


def _isolation_problems(isolation, condition) -> list[str]:
    from sessions.execute.cli_client import TOKEN_VARIABLE

    if not isinstance(isolation, dict):
        return ["the client's isolation is not recorded (provenance.tool_server.client.isolation)"]
    problems: list[str] = []
    if isolation.get("kind") not in ISOLATIONS:
        problems.append(f"the client's isolation {isolation.get('kind')!r} is not one of {', '.join(ISOLATIONS)}")
    if isolation.get("working_folder") != "empty":
        problems.append("the client was not run in an empty working folder")
    env = isolation.get("env")
    named = {"PATH", "HOME", TOKEN_VARIABLE, *(condition.env or [])}
    if not isinstance(env, list) or not all(isinstance(e, str) for e in env):
        problems.append("the client's environment is not recorded as a list of names")
    elif extra := sorted(set(env) - named):
        problems.append(f"the client was given variables its condition does not name: {', '.join(extra)}")
    return problems
