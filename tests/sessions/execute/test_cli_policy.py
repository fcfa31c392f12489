"""`policy: cli`: oakwatch launches a coding-agent CLI against its own tool server. The CLI here is
tests/fakes/mcp_agent.py behind an executable named like Claude Code's: it reads the MCP config
oakwatch wrote, plays through the real SDK client over streamable HTTP and prints Claude Code's
`--output-format json` result, whose usage and cost oakwatch records."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.execute.cli_client import client_report
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import PreflightError, prepare
from sessions.preflight.manifest import load_manifest
from tests.sessions.execute.test_mcp_server import AGENT, mcp_manifest, result_of

LEAKY = Path(__file__).resolve().parents[2] / "fakes" / "leaky_client.py"


def client_exe(tmp_path: Path, install: Path, *extra: str, script: str = "mcp_agent.py") -> Path:
    """An executable named like Claude Code's that starts a fake from `install` (beside, not under,
    the manifest's folder: the client may not reach that)."""
    exe = tmp_path / "client-bin" / "claude"
    exe.parent.mkdir(exist_ok=True)
    if script == "mcp_agent.py":
        extra = ("--script", str(install / "walkthrough.json"), *extra)
    python = os.path.realpath(sys.executable)
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={install / 'site'} exec {python} {install / script} \"$@\" "
                   f"{' '.join(extra)}\n")
    exe.chmod(0o755)
    return exe


def cli_manifest(tmp_path: Path, install: Path, cmd: list[str], **changes) -> Path:
    """A manifest in its own folder whose cli condition may read the client's installation and Python."""
    exp = tmp_path / "exp"
    exp.mkdir(exist_ok=True)
    condition = {"client_reads": [str(install), sys.base_prefix]} | changes
    return mcp_manifest(exp, policy="cli", command=cmd, **condition)


def command(exe: Path) -> list[str]:
    return [str(exe), "-p", "Play the game to the end.", "--mcp-config", "{mcp_config}", "--output-format", "json",
            "--tools", ""]


def run(tmp_path: Path, manifest: Path):
    out = tmp_path / "out"
    prepared = prepare(manifest, out)
    runner = ExperimentRunner(prepared, create_folder(prepared, out))
    return out, runner.run()


def test_a_cli_client_plays_to_the_dex_and_its_reported_usage_is_recorded(tmp_path, client_install):
    exe = client_exe(tmp_path, client_install)
    out, summary = run(tmp_path, cli_manifest(tmp_path, client_install, command(exe)))
    result, trial = result_of(out)
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert result["milestones_reached"][-1] == "M8"
    server = result["provenance"]["tool_server"]
    assert server["tools"] == ["get_screen", "press_keys"] and server["transport"] == "http"
    client = server["client"]
    assert client["version"] == "2.1.999 (fake Claude Code for oakwatch tests)"  # from its --version
    assert client["command"] == command(exe) and client["exit_status"] == 0
    config = client["mcp_config"]["mcpServers"]["oakwatch"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", config["url"])
    # the client was given the trial's bearer token; the record shows only that it was (issue 31.1)
    assert config["headers"] == {"Authorization": "Bearer [this trial's token]"} and server["auth"] == "bearer"
    assert server["refused_count"] == 0
    for path in out.rglob("*"):
        assert not path.is_file() or not re.search(rb"Bearer (?!\[this trial's token\])", path.read_bytes()), path
    assert client["total_cost_usd"] == 0.0123 and client["usage"]["input_tokens"] == 1200
    assert client["usage"]["output_tokens"] == 345 and client["num_turns"] > 40 and client["session_id"]
    # Where it ran and which of its own tools it had are recorded.
    from sessions.execute.cli_sandbox import isolation_kind

    assert client["isolation"]["kind"] == isolation_kind() and client["isolation"]["working_folder"] == "empty"
    assert client["tools"] | {"allowed_by_manifest": None} == {
        "kind": "claude-code", "tools": [], "allowed_tools": None, "disallowed_tools": None, "permission_mode": None,
        "skip_permissions": False, "add_dirs": None, "file_and_shell": [], "allowed_by_manifest": None}
    # The per-decision figures stay unknown (the client reports one total), never 0.
    assert result["telemetry"]["cost_usd"] is None
    # The client's version is frozen with the run.
    frozen = load_manifest(out / "manifest.yaml")
    assert frozen.conditions[0].client_version == client["version"]
    assert verify_experiment(out) == [] and summary.all_succeeded
    assert replay_trial(trial)["milestones"][-1] == "M8"
    # The client's own totals reach the report's condition table and trial table, labelled as its own.
    from sessions.analysis.report import build_report

    build_report(out, replay=False)
    md = (out / "reports" / "report.md").read_text()
    assert "| cost: the client's own total, median USD | $0.0123 ($0.0123 to $0.0123) |" in md
    assert "| tokens: the client's own total, median | 1645 (1645 to 1645) |" in md  # 1200 + 345 + 100 cached
    assert "unknown (client's own: $0.0123)" in md  # oakwatch's own per-decision cost stays unknown
    assert "client_cost_usd" in (out / "reports" / "trials.csv").read_text()
    # Its own transcript is kept in the trial's evidence, its hash in the result; verify covers it.
    kept = (trial / "client-transcript.jsonl").read_bytes()
    assert client["transcript"]["sha256"] == hashlib.sha256(kept).hexdigest()
    stdout, stderr = (json.loads(line) for line in kept.splitlines())
    assert (stdout["source"], stderr["source"]) == ("stdout", "stderr")
    assert json.loads(stdout["text"])["num_turns"] == client["num_turns"] and not stdout["truncated"]
    (trial / "client-transcript.jsonl").write_bytes(kept.replace(b"played", b"player"))
    assert any("client-transcript.jsonl: does not hash to the SHA-256 result.json records" in p
               for p in verify_experiment(out))
    cap = load_manifest(out / "manifest.yaml").agent.max_reply_bytes
    over = json.dumps({"source": "stdout", "text": "x" * (cap + 1)}).encode() + b"\nnot json\n"
    (trial / "client-transcript.jsonl").write_bytes(over)
    problems = verify_experiment(out)
    assert any(f"client-transcript.jsonl:1: keeps {cap + 1:,} bytes of stdout, over the manifest's "
               "agent.max_reply_bytes" in p for p in problems)
    assert any("client-transcript.jsonl:2: not a transcript line" in p for p in problems)


def test_a_client_that_reports_no_usage_leaves_it_null(tmp_path, client_install):
    # given the server's address in its command line ({mcp_url}, as Codex takes it) instead of a config file
    exe = client_exe(tmp_path, client_install, "--no-usage")
    cmd = [str(exe), "--url", "{mcp_url}", "--token-env", "OAKWATCH_MCP_TOKEN", "--output-format", "json",
           "--tools", ""]
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, cmd, budgets={"accepted_actions": 8}))
    result, _ = result_of(out)
    assert result["termination_reason"] == "budget:accepted_actions"
    client = result["provenance"]["tool_server"]["client"]
    assert client["usage"] is None and client["total_cost_usd"] is None and client["num_turns"] is not None
    assert verify_experiment(out) == []


def test_a_client_that_exits_mid_trial_ends_it_as_agent_disconnected(tmp_path, client_install):
    exe = client_exe(tmp_path, client_install, "--presses", "2")
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, command(exe)))
    result, _ = result_of(out)
    assert (result["outcome"], result["termination_reason"]) == ("invalid-provider", "agent-disconnected")
    assert result["last_decision"] == 2
    assert result["provenance"]["tool_server"]["client"]["exit_status"] == 0
    assert result["provenance"]["tool_server"]["client"]["last_lines"] is None  # kept for a failing client only
    assert verify_experiment(out) == []


def test_a_client_without_the_trials_token_is_refused_and_recorded(tmp_path, client_install):
    """Issue 31.1: under policy cli the tool server asks for the trial's bearer token; a client that
    does not send it is refused (recorded in the result) and, never playing, the trial ends as its
    client leaving."""
    exe = client_exe(tmp_path, client_install)
    cmd = [str(exe), "--url", "{mcp_url}", "--output-format", "json", "--tools", ""]
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, cmd))
    result, _ = result_of(out)
    assert result["termination_reason"] == "agent-disconnected" and result["last_decision"] in (0, None)
    server = result["provenance"]["tool_server"]
    assert server["refused_count"] >= 1
    assert server["refused"][0]["reason"] == "no bearer token, or not this trial's (Authorization: Bearer ...)"
    assert verify_experiment(out) == []


def test_a_pinned_client_version_that_differs_is_refused(tmp_path, client_install):
    exe = client_exe(tmp_path, client_install)
    manifest = cli_manifest(tmp_path, client_install, command(exe), client_version="1.0.0")
    with pytest.raises(PreflightError, match=r"pins client version '1.0.0', but .* says '2.1.999"):
        prepare(manifest, tmp_path / "out")


@pytest.mark.parametrize(("cmd", "message"), [
    (["/nonexistent/claude", "--mcp-config", "{mcp_config}", "--tools", ""], "not found"),
    (["claude", "-p", "play"], "put {mcp_config} where"),
    (["/nonexistent/claude", "--mcp-config", "{mcp_config}", "--allowedTools", "mcp__oakwatch__press_keys"],
     "claude-code's own file and shell tools are open to it (Agent, Bash, BashOutput, Edit, Glob, Grep"),
    (["/nonexistent/codex", "exec", "--json", "-c", "mcp_servers.oakwatch.url=\"{mcp_url}\"", "play"],
     "codex's own file and shell tools are open to it (shell): codex exec always has its shell"),
    (["/nonexistent/my-agent", "--url", "{mcp_url}"], "oakwatch cannot tell which tools this client has"),
])
def test_a_client_command_that_cannot_work_is_refused(tmp_path, cmd, message):
    with pytest.raises(PreflightError, match=re.escape(message)):
        prepare(mcp_manifest(tmp_path, policy="cli", command=cmd), tmp_path / "out")


def test_codex_json_events_are_summed():
    lines = [{"type": "thread.started", "thread_id": "t-1"},
             {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 2, "output_tokens": 3}},
             {"type": "turn.completed", "usage": {"input_tokens": 5, "cached_input_tokens": 1, "output_tokens": 4}}]
    report = client_report("\n".join(json.dumps(line) for line in lines) + "\nnot json\n")
    assert report["usage"] == {"input_tokens": 15, "cached_input_tokens": 3, "output_tokens": 7}
    assert report["num_turns"] == 2 and report["session_id"] == "t-1" and report["total_cost_usd"] is None
    assert client_report("") == {"usage": None, "total_cost_usd": None, "num_turns": None, "session_id": None}


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=300), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["type", "usage", "total_cost_usd", "num_turns", "session_id", "input_tokens",
                         "output_tokens", "thread_id", "x"]), inner, max_size=5),
    max_leaves=12).map(json.dumps)))
def test_whatever_a_client_prints_its_report_is_parsed_or_left_null(text):
    report = client_report(text)
    assert set(report) == {"usage", "total_cost_usd", "num_turns", "session_id"}
    assert report["total_cost_usd"] is None or isinstance(report["total_cost_usd"], float)
    assert report["num_turns"] is None or isinstance(report["num_turns"], int)
    assert report["usage"] is None or all(v is None or isinstance(v, int) for v in report["usage"].values())


def test_manifests_from_before_the_tool_server_keep_their_hash_and_condition_files():
    # Earlier evidence folders hold conditions/<label>.yaml and manifest hashes made before policy cli
    # and agent.ruleset existed: verify re-derives both, so neither may change.
    from sessions.preflight.assets import ASSETS

    m = load_manifest(ASSETS / "experiments" / "dry-run.yaml")
    assert m.sha256() == "ce6167a87e2ac50750a14659536f81d1e40e4c9585bdc20d57ae5ff1b1d1ee17"
    dumped = m.conditions[0].model_dump(mode="json")
    assert "command" not in dumped and "client_version" not in dumped
    assert "ruleset" not in m.canonical_json()


@pytest.mark.parametrize("shape", ["claude", "codex"])
def test_a_client_that_prints_its_keys_everywhere_leaves_none_in_the_evidence(tmp_path, monkeypatch, shape,
                                                                              client_install):
    import secrets

    anthropic = "sk-ant-api03-" + secrets.token_urlsafe(30)
    plain = secrets.token_hex(24)  # no key shape at all: only its value says it is one
    monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic)
    monkeypatch.setenv("OPENAI_API_KEY", plain)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # whatever the client writes under its home stays here
    exe = client_exe(tmp_path, client_install, script="leaky_client.py")
    cmd = [str(exe), "--shape", shape, "--mcp-config", "{mcp_config}", "--tools", ""]
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, cmd, env=["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]))
    result, _ = result_of(out)
    assert (result["outcome"], result["termination_reason"]) == ("invalid-provider", "agent-disconnected")
    client = result["provenance"]["tool_server"]["client"]
    assert client["exit_status"] == 1
    assert "[redacted]" in client["version"] and "[redacted]" in client["session_id"]
    # Its session log (under its HOME, the empty folder) is in the transcript: scrubbed like the rest.
    log = ".claude/projects/-work/leak.jsonl" if shape == "claude" else ".codex/sessions/2026/01/01/rollout-leak.jsonl"
    assert client["transcript"]["sources"] == ["stdout", "stderr", log]
    # Why it failed, in its own (scrubbed) words, beside its exit status.
    assert client["last_lines"]["stderr"] == ["error: authentication failed for key [redacted] [redacted]"]
    assert len(client["last_lines"]["stdout"]) == (1 if shape == "claude" else 6)
    leaks = [anthropic, plain, anthropic[:8], anthropic[-8:], plain[:8], plain[-8:]]
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found = [leak for leak in leaks if leak.encode() in data]
        assert not found, f"{path.relative_to(out)} holds a key ({len(found)} part(s))"
    assert verify_experiment(out) == []


@pytest.mark.parametrize("kind", ["bwrap", "unshare"])
def test_a_client_cannot_read_the_answers_and_its_attempt_is_recorded(tmp_path, client_install, monkeypatch, kind):
    from sessions.execute.cli_sandbox import bwrap_path, unshare_paths
    from sessions.preflight.assets import ASSETS

    if (bwrap_path() if kind == "bwrap" else unshare_paths()) is None:
        pytest.skip(f"{kind} is not installed here (bwrap: Debian's bubblewrap), or cannot make a user namespace")
    # unshare: as where bwrap is missing
    monkeypatch.setattr("sessions.execute.cli_client.isolation_kind", lambda: kind)
    definition, rom = ASSETS / "games" / "parcel-quest.yaml", ASSETS / "cartridge" / "parcel-quest.gb"
    assert definition.is_file() and rom.is_file()  # there to be read, by anything outside the sandbox
    out = tmp_path / "out"
    exe = client_exe(tmp_path, client_install, "--presses", "3", "--peek", str(definition), "--peek", str(rom),
                     "--peek", str(out / "manifest.yaml"), "--peek", str(Path(__file__)))
    run(tmp_path, cli_manifest(tmp_path, client_install, command(exe)))
    result, trial = result_of(out)
    client = result["provenance"]["tool_server"]["client"]
    assert client["isolation"]["kind"] == kind and client["isolation"]["env"] == ["HOME", "OAKWATCH_MCP_TOKEN", "PATH"]
    stderr = json.loads((trial / "client-transcript.jsonl").read_bytes().splitlines()[1])
    assert stderr["source"] == "stderr"
    for path in (definition, rom, out / "manifest.yaml", Path(__file__)):
        assert f"could not read {path}: No such file or directory" in stderr["text"]
    assert result["last_decision"] == 3  # and it played all the same, through the tool server
    assert verify_experiment(out) == []


def test_a_transcript_is_capped_and_a_key_across_the_cap_is_scrubbed_whole(tmp_path):
    from sessions.execute.cli_client import transcript

    key = "k3y-" + "q" * 40
    out, err = (tmp_path / "stdout").open("w+b"), (tmp_path / "stderr").open("w+b")
    out.write(b"x" * 1010 + key.encode() + b"y" * 4000)
    err.write(b"fine\n")
    data, sources = transcript({"stdout": out, "stderr": err}, tmp_path, 1024, (key,))
    first, second = (json.loads(line) for line in data.splitlines())
    assert sources == ["stdout", "stderr"]
    assert first["bytes"] == 5054 and first["truncated"] and first["kept_bytes"] <= 1024
    assert first["text"].startswith("x" * 1010 + "[redac") and "k3y" not in first["text"]
    assert second == {"source": "stderr", "bytes": 5, "kept_bytes": 5, "truncated": False, "text": "fine\n"}


def test_without_bwrap_the_client_still_gets_an_empty_folder_and_only_the_named_environment(
        tmp_path, client_install, monkeypatch):
    monkeypatch.setattr("sessions.execute.cli_client.isolation_kind", lambda: "none")  # as on a system without bwrap
    monkeypatch.setenv("OAKWATCH_TEST_NAMED", "given")
    monkeypatch.setenv("OAKWATCH_TEST_UNNAMED", "kept back")
    exe = client_exe(tmp_path, client_install, "--presses", "2", "--show-env")
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, command(exe), env=["OAKWATCH_TEST_NAMED"]))
    result, trial = result_of(out)
    isolation = result["provenance"]["tool_server"]["client"]["isolation"]
    assert isolation["kind"] == "none"
    assert isolation["env"] == ["HOME", "OAKWATCH_MCP_TOKEN", "OAKWATCH_TEST_NAMED", "PATH"]
    stderr = json.loads((trial / "client-transcript.jsonl").read_bytes().splitlines()[1])["text"]
    # less what the fake's own launcher sets (PYTHONPATH; the shell's PWD; Python's LC_CTYPE coercion)
    names = set(re.search(r"env: ([^;]*);", stderr).group(1).split()) - {"PYTHONPATH", "PWD", "SHLVL", "_",
                                                                            "LC_CTYPE"}
    assert names == {"HOME", "OAKWATCH_MCP_TOKEN", "OAKWATCH_TEST_NAMED", "PATH"}
    assert "cwd holds: nothing" in stderr
    assert verify_experiment(out) == []


def test_what_would_put_the_answers_in_the_clients_reach_is_refused(tmp_path, client_install):
    from sessions.preflight.assets import ASSETS

    exe = client_exe(tmp_path, client_install)
    exp = tmp_path / "exp"
    for reads, what in [([str(exp)], "the manifest's folder"), (["/"], "oakwatch's own files"),
                        ([str(ASSETS / "games")], "(?:oakwatch's own files|the bundled assets)"),
                        ([str(client_install), ".."], "the manifest's folder")]:
        manifest = cli_manifest(tmp_path, client_install, command(exe), client_reads=reads)
        with pytest.raises(PreflightError, match=rf"client_reads\.\d+: .* would put {what} .* in the client's reach"):
            prepare(manifest, tmp_path / "out")
    with pytest.raises(PreflightError, match=r"client_reads\.1: .*/nowhere does not exist"):
        prepare(cli_manifest(tmp_path, client_install, command(exe), client_reads=[str(client_install), "nowhere"]),
                tmp_path / "out")
    inside = [str(AGENT), "--mcp-config", "{mcp_config}", "--tools", ""]  # a client inside oakwatch's tree
    with pytest.raises(PreflightError, match=r"command: the client .* lies in oakwatch's own files"):
        prepare(cli_manifest(tmp_path, client_install, inside, allow_file_and_shell_tools=True), tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "expected"), [
    (["claude", "-p", "x", "--allowedTools", "mcp__oakwatch__get_screen,mcp__oakwatch__press_keys"],
     {"allowed_tools": ["mcp__oakwatch__get_screen", "mcp__oakwatch__press_keys"], "open": 14}),
    (["/opt/bin/claude", "--tools=", "--allowedTools", "mcp__a", "mcp__b", "-p", "x"],
     {"tools": [], "allowed_tools": ["mcp__a", "mcp__b"], "open": 0}),
    (["claude", "--tools", "Read,Bash(git:*)", "--disallowedTools", "Read", "--permission-mode", "acceptEdits"],
     {"tools": ["Read", "Bash(git:*)"], "disallowed_tools": ["Read"], "permission_mode": "acceptEdits",
      "file_and_shell": ["Bash(git:*)"]}),
    (["claude", "--tools", "", "--add-dir", "/data", "--mcp-config", "{mcp_config}", "other.json"],
     {"add_dirs": ["/data"], "file_and_shell": ["--add-dir", "MCP config other.json"]}),
    (["codex", "exec", "--json", "-c", 'mcp_servers.oakwatch.url="{mcp_url}"', "P"],
     {"kind": "codex", "sandbox": "read-only", "file_and_shell": ["shell"]}),
    (["codex", "exec", "--full-auto", "-c", "mcp_servers.fs.command=npx", "-a", "never", "P"],
     {"sandbox": "workspace-write", "approval": "never", "file_and_shell": ["shell", "file writes", "MCP server fs"]}),
    (["codex", "exec", "-c", "sandbox_mode='danger-full-access'", "P"], {"sandbox": "danger-full-access"}),
    (["codex", "exec", "--yolo", "-s", "read-only", "P"], {"sandbox": "danger-full-access", "bypass": True}),
    (["my-agent", "--url", "{mcp_url}"], {"kind": "unknown", "file_and_shell": ["unknown"]}),
])
def test_a_clients_own_tool_settings_are_read_from_its_command_line(command, expected):
    from sessions.preflight.tool_conditions import client_tools

    tools = client_tools(command)
    opened = expected.pop("open", None)
    assert {k: tools[k] for k in expected} == expected
    assert opened is None or len(tools["file_and_shell"]) == opened


# The run killed (SIGKILL from inside) the moment it would write a trial's result.json: the client's
# transcript, written just before it, is there; its result never is.
DIE_BEFORE_RESULT = r"""
import os, signal, sys
from pathlib import Path
import sessions.evidence.recorder as recorder
real = recorder.write_atomic
def dying(path, data, *args, **kwargs):
    if Path(path).name == "result.json":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(path, data, *args, **kwargs)
recorder.write_atomic = dying
from sessions.preflight.experiment import prepare
from sessions.execute.start import create_folder
from sessions.execute.runner import ExperimentRunner
prepared = prepare(Path(sys.argv[1]), Path(sys.argv[2]))
ExperimentRunner(prepared, create_folder(prepared, Path(sys.argv[2]))).run()
"""


def test_a_run_killed_after_the_transcript_and_before_the_result_recovers_and_verifies(tmp_path, client_install):
    import signal
    import subprocess

    from sessions.audit.recover import recover

    exe = client_exe(tmp_path, client_install)
    out = tmp_path / "out"
    manifest = cli_manifest(tmp_path, client_install, command(exe), budgets={"accepted_actions": 8})  # a valid end
    done = subprocess.run([sys.executable, "-c", DIE_BEFORE_RESULT, str(manifest), str(out)],
                          cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr
    (trial,) = out.glob("trials/*")
    assert (trial / "client-transcript.jsonl").is_file() and not (trial / "result.json").exists()
    recover(out)
    result, trial = result_of(out)
    assert result["recovered"] and (trial / "client-transcript.jsonl").is_file()  # kept: the client's own account
    assert verify_experiment(out) == []


def test_a_cli_client_calls_the_shortcut_tool_its_manifest_permits(tmp_path, client_install):
    """Under `policy: cli` the client's server lists the shortcut tool the frozen manifest permits, and a
    call the screen offers is pressed, recorded and replayed as a reply's shortcut is."""
    exe = client_exe(tmp_path, client_install, "--shortcut", "advance_dialogue")
    manifest = cli_manifest(tmp_path, client_install, command(exe), agent={"shortcuts": ["advance_dialogue"]},
                            budgets={"accepted_actions": 60})
    out, _ = run(tmp_path, manifest)
    result, trial = result_of(out)
    assert result["provenance"]["shortcuts"] == ["advance_dialogue"]
    assert result["provenance"]["tool_server"]["tools"] == ["get_screen", "press_keys", "shortcut"]
    trace = [json.loads(x) for x in (trial / "trace.jsonl").read_text().splitlines()]
    inputs = [json.loads(x) for x in (trial / "inputs.jsonl").read_text().splitlines()]
    taken = [line for line in trace if line.get("shortcut")]
    assert taken and {line["shortcut"]["name"] for line in taken} == {"advance_dialogue"}
    for line in taken:  # each press of the expansion is in the input log under its decision
        assert line["shortcut"]["expansion"] and [i["action"] for i in inputs if i["decision_id"] ==
                                                  line["decision_id"]] == line["shortcut"]["expansion"]
    assert verify_experiment(out) == []
    replay_trial(trial)
