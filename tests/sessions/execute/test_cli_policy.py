"""`policy: cli`: oakwatch launches a coding-agent CLI against its own tool server. The CLI here is
tests/fakes/mcp_agent.py behind an executable named like Claude Code's: it reads the MCP config
oakwatch wrote, plays through the real SDK client over streamable HTTP and prints Claude Code's
`--output-format json` result, whose usage and cost oakwatch records."""

from __future__ import annotations

import json
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
from sessions.preflight.experiment import PreflightError, create_folder, prepare
from sessions.preflight.manifest import load_manifest
from tests.sessions.execute.test_mcp_server import AGENT, mcp_manifest, result_of


def fake_claude(tmp_path: Path, *extra: str) -> Path:
    exe = tmp_path / "bin" / "claude"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {AGENT} \"$@\" {' '.join(extra)}\n")
    exe.chmod(0o755)
    return exe


def command(exe: Path) -> list[str]:
    return [str(exe), "-p", "Play the game to the end.", "--mcp-config", "{mcp_config}", "--output-format", "json"]


def run(tmp_path: Path, manifest: Path):
    out = tmp_path / "out"
    prepared = prepare(manifest, out)
    runner = ExperimentRunner(prepared, create_folder(prepared, out))
    return out, runner.run()


def test_a_cli_client_plays_to_the_dex_and_its_reported_usage_is_recorded(tmp_path):
    exe = fake_claude(tmp_path)
    out, summary = run(tmp_path, mcp_manifest(tmp_path, policy="cli", command=command(exe)))
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
    # The per-decision figures stay unknown (the client reports one total), never 0.
    assert result["telemetry"]["cost_usd"] is None
    # The client's version is frozen with the run.
    frozen = load_manifest(out / "manifest.yaml")
    assert frozen.conditions[0].client_version == client["version"]
    assert verify_experiment(out) == [] and summary.all_succeeded
    assert replay_trial(trial)["milestones"][-1] == "M8"


def test_a_client_that_reports_no_usage_leaves_it_null(tmp_path):
    # given the server's address in its command line ({mcp_url}, as Codex takes it) instead of a config file
    exe = fake_claude(tmp_path, "--no-usage")
    cmd = [str(exe), "--url", "{mcp_url}", "--token-env", "OAKWATCH_MCP_TOKEN", "--output-format", "json"]
    out, _ = run(tmp_path, mcp_manifest(tmp_path, policy="cli", command=cmd, budgets={"accepted_actions": 8}))
    result, _ = result_of(out)
    assert result["termination_reason"] == "budget:accepted_actions"
    client = result["provenance"]["tool_server"]["client"]
    assert client["usage"] is None and client["total_cost_usd"] is None and client["num_turns"] is not None
    assert verify_experiment(out) == []


def test_a_client_that_exits_mid_trial_ends_it_as_agent_disconnected(tmp_path):
    exe = fake_claude(tmp_path, "--presses", "2")
    out, _ = run(tmp_path, mcp_manifest(tmp_path, policy="cli", command=command(exe)))
    result, _ = result_of(out)
    assert (result["outcome"], result["termination_reason"]) == ("invalid-provider", "agent-disconnected")
    assert result["last_decision"] == 2
    assert result["provenance"]["tool_server"]["client"]["exit_status"] == 0
    assert verify_experiment(out) == []


def test_a_client_without_the_trials_token_is_refused_and_recorded(tmp_path):
    """Issue 31.1: under policy cli the tool server asks for the trial's bearer token; a client that
    does not send it is refused (recorded in the result) and, never playing, the trial ends as its
    client leaving."""
    exe = fake_claude(tmp_path)
    cmd = [str(exe), "--url", "{mcp_url}", "--output-format", "json"]
    out, _ = run(tmp_path, mcp_manifest(tmp_path, policy="cli", command=cmd))
    result, _ = result_of(out)
    assert result["termination_reason"] == "agent-disconnected" and result["last_decision"] in (0, None)
    server = result["provenance"]["tool_server"]
    assert server["refused_count"] >= 1
    assert server["refused"][0]["reason"] == "no bearer token, or not this trial's (Authorization: Bearer ...)"
    assert verify_experiment(out) == []


def test_a_pinned_client_version_that_differs_is_refused(tmp_path):
    exe = fake_claude(tmp_path)
    manifest = mcp_manifest(tmp_path, policy="cli", command=command(exe), client_version="1.0.0")
    with pytest.raises(PreflightError, match=r"pins client version '1.0.0', but .* says '2.1.999"):
        prepare(manifest, tmp_path / "out")


@pytest.mark.parametrize(("cmd", "message"), [
    (["/nonexistent/claude", "--mcp-config", "{mcp_config}"], "not found"),
    (["claude", "-p", "play"], "put {mcp_config} where"),
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
