"""`oakwatch mcp`: an agent harness plays the cartridge through the official MCP SDK's client, over
stdio and streamable HTTP (tests/fakes/mcp_agent.py presses the walkthrough); the evidence is the
usual folder, which verify and replay accept; bad calls, calls after the end and a client that
leaves mid-trial each end in a truthful record."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.preflight.experiment import PreflightError, prepare
from tests.conftest import read_jsonl, write_manifest

ROOT = Path(__file__).resolve().parents[3]
AGENT = ROOT / "tests" / "fakes" / "mcp_agent.py"
OAKWATCH = [sys.executable, "-m", "app.cli"]


def mcp_manifest(tmp_path: Path, *, agent: dict | None = None, budgets: dict | None = None, policy: str = "mcp",
                 **condition) -> Path:
    data = yaml.safe_load((ROOT / "assets" / "experiments" / "dry-run.yaml").read_text())
    data["emulator"]["speed_multiplier"] = 0
    data["agent"].update(agent or {})
    data["budgets"].update(budgets or {})
    return write_manifest(tmp_path, emulator=data["emulator"], agent=data["agent"], budgets=data["budgets"],
                          conditions=[{"id": "agent", "policy": policy, **condition}])


def play_stdio(tmp_path: Path, manifest: Path, *agent_args: str) -> tuple[dict, subprocess.CompletedProcess]:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(AGENT), "--report", str(report), *agent_args, "--stdio", "--",
                           *OAKWATCH, "mcp", str(manifest), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(report.read_text()), done


def result_of(out: Path) -> tuple[dict, Path]:
    (trial,) = [p for p in [*out.glob("trials/*"), *out.glob("void-*/*")] if p.is_dir()]
    return json.loads((trial / "result.json").read_text()), trial


def test_an_agent_plays_to_the_dex_over_stdio_and_the_folder_verifies_and_replays(tmp_path):
    seen, done = play_stdio(tmp_path, mcp_manifest(tmp_path), "--bad-first", "--bad-args", "--after-end", "1")
    out = tmp_path / "out"
    assert seen["tools"] == ["get_screen", "press_keys"]  # the human ruleset: exactly its two tools
    assert seen["ending"] == "final-milestone"
    # The MCP initialize result tells the agent what to do, first: the frozen manifest's instruction, in the
    # same line a model's system prompt opens with.
    told = yaml.safe_load((out / "manifest.yaml").read_text())["agent"]["instruction"]
    assert told == "Play the game's story until the professor gives you the Dex."
    assert seen["instructions"].startswith(f"Your task in this game: {told}\n\nYou are playing a Game Boy game")
    result, trial = result_of(out)
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert result["milestones_reached"][-1] == "M8"
    assert result["provenance"]["tool_server"]["tools"] == ["get_screen", "press_keys"]
    assert result["provenance"]["tool_server"]["transport"] == "stdio"
    assert verify_experiment(out) == []
    report = replay_trial(trial)
    assert report["milestones"][-1] == "M8"
    # A call whose keys are not even a list, then one with a button the game lacks: each an invalid output
    # of decision 1, charged like a model's and answered with the reason; the second uses up the
    # decision's retry (invalid_output_retries: 1), so decision 1 closes with no press.
    assert "decision 1: actions: Input should be a valid list" in seen["errors"][0]["text"]
    assert "decision 1" in seen["errors"][1]["text"] and "'UP', 'DOWN'" in seen["errors"][1]["text"]
    first = read_jsonl(trial / "responses.jsonl")[0]["attempts"]
    assert [a["valid"] for a in first] == [False, False] and '"JUMP"' in first[1]["raw"]
    assert first[0]["reply"]["arguments"] == {"keys": 5}  # logged exactly as the client sent it
    assert result["telemetry"]["invalid_outputs"] == 2
    assert read_jsonl(trial / "trace.jsonl")[0]["accepted_actions"] == 0
    # Usage unknown to the server: null, never 0.
    assert result["telemetry"]["cost_usd"] is None and result["telemetry"]["input_tokens"] is None
    # Each decision logs the call (its arguments, timing) and the screens it looked at first.
    attempt = read_jsonl(trial / "responses.jsonl")[1]["attempts"][0]
    assert attempt["reply"]["tool"] == "press_keys" and attempt["reply"]["arguments"]["keys"]
    assert attempt["latency_ms"] is not None
    (screen,) = attempt["reply"]["screens"]
    trace = read_jsonl(trial / "trace.jsonl")
    assert screen["frame_sha256"] == trace[1]["frame_sha256"]  # the screen the decision was made on
    # Once over, every call is refused, saying why.
    assert "has ended (final-milestone)" in seen["errors"][-1]["text"]
    assert len(trace) == seen["press_calls"] + 1 and sum(t["accepted_actions"] for t in trace) > 100  # + decision 1


def serve_http(tmp_path: Path, manifest: Path) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen([*OAKWATCH, "mcp", str(manifest), "--transport", "http", "--port", "0",
                               "--output", str(tmp_path / "out")], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = server.stderr.readline()
    found = re.search(r"on (http://\S+/mcp)", line)
    assert found, line
    return server, found.group(1)


def play_http(tmp_path: Path, url: str, *agent_args: str) -> dict:
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, str(AGENT), "--url", url, "--report", str(report), *agent_args],
                   check=True, timeout=120, cwd=ROOT)
    return json.loads(report.read_text())


def test_an_agent_plays_to_the_dex_over_streamable_http(tmp_path):
    server, url = serve_http(tmp_path, mcp_manifest(tmp_path))
    try:
        assert url.startswith("http://127.0.0.1:")  # local only, unless --host says otherwise
        seen = play_http(tmp_path, url)
        assert server.wait(timeout=60) == 0  # the trial succeeded and the client left: the server exits
    finally:
        server.kill()
    out = tmp_path / "out"
    result, trial = result_of(out)
    assert seen["ending"] == "final-milestone" and result["milestones_reached"][-1] == "M8"
    assert result["provenance"]["tool_server"]["transport"] == "http"
    assert verify_experiment(out) == []
    assert replay_trial(trial)["milestones"][-1] == "M8"


def test_a_client_that_leaves_mid_trial_ends_it_as_agent_disconnected(tmp_path):
    server, url = serve_http(tmp_path, mcp_manifest(tmp_path))
    try:
        seen = play_http(tmp_path, url, "--presses", "3")
        assert server.wait(timeout=60) == 2  # an invalid trial
    finally:
        server.kill()
    out = tmp_path / "out"
    result, trial = result_of(out)
    assert seen["press_calls"] == 3
    assert (result["outcome"], result["termination_reason"], result["invalid_cause"]) == \
        ("invalid-provider", "agent-disconnected", "agent-disconnected")
    assert result["last_decision"] == 3  # the three decisions it made are the evidence
    assert trial.parent.name.startswith("void-")  # invalid: its block is void, rerun with --resume
    assert verify_experiment(out) == []
    # The docs' replay command names trials/*-01 (the shell leaves the glob as it is: nothing matches);
    # replay says where the attempt went, and replays it there.
    done = subprocess.run([*OAKWATCH, "replay", str(out / "trials" / "*-01")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "that attempt was voided" in done.stderr and f"give {trial} (invalid-provider: agent-disconnected)" \
        in done.stderr, done.stderr
    assert subprocess.run([*OAKWATCH, "replay", str(trial)], cwd=ROOT, timeout=120).returncode == 0


def test_a_stdio_client_that_leaves_mid_trial_ends_it_too(tmp_path):
    seen, _ = play_stdio(tmp_path, mcp_manifest(tmp_path), "--presses", "2")
    result, _ = result_of(tmp_path / "out")
    assert seen["press_calls"] == 2
    assert result["termination_reason"] == "agent-disconnected" and result["last_decision"] == 2
    assert verify_experiment(tmp_path / "out") == []


def test_the_budget_ends_the_trial_and_later_calls_are_refused(tmp_path):
    manifest = mcp_manifest(tmp_path, budgets={"accepted_actions": 10})
    seen, _ = play_stdio(tmp_path, manifest, "--after-end", "2")
    result, trial = result_of(tmp_path / "out")
    assert (result["outcome"], result["termination_reason"]) == ("game-failure", "budget:accepted_actions")
    assert result["telemetry"]["accepted_actions"] == 10
    assert seen["ending"] == "budget:accepted_actions"
    refusals = seen["errors"][-2:]
    assert all("has ended (budget:accepted_actions)" in e["text"] for e in refusals)
    assert verify_experiment(tmp_path / "out") == []
    assert replay_trial(trial)["actions"] == 10


def test_the_standard_ruleset_adds_the_observation_and_never_a_ladder_field(tmp_path):
    manifest = mcp_manifest(tmp_path, agent={"ruleset": "standard", "information_track": "structured"},
                            budgets={"accepted_actions": 8})
    seen, _ = play_stdio(tmp_path, manifest)
    assert seen["tools"] == ["get_observation", "get_screen", "press_keys"]
    assert seen["instructions"].startswith("Your task in this game: Play the game's story until the professor")
    result, _ = result_of(tmp_path / "out")
    assert result["provenance"]["tool_server"]["tools"] == seen["tools"]
    assert verify_experiment(tmp_path / "out") == []


@pytest.mark.parametrize(("changes", "message"), [
    ({"policy": "mcp"}, "oakwatch mcp MANIFEST"),  # `oakwatch run` does not serve it
    ({"agent": {"information_track": "structured"}}, "human ruleset shows the screen only"),
    ({"budgets": {"total_cost_usd": 1.0}}, "does not know what each call cost"),
    ({"agent": {"ruleset": "battle"}}, "needs an episodic manifest"),
    ({"agent": {"ruleset": "expert"}}, "no ruleset 'expert'"),
])
def test_refusals_before_anything_is_written(tmp_path, changes, message):
    manifest = mcp_manifest(tmp_path, agent=changes.get("agent"), budgets=changes.get("budgets"))
    with pytest.raises(PreflightError, match=re.escape(message)):
        prepare(manifest, tmp_path / "out", allow_mcp="policy" not in changes)
    assert not (tmp_path / "out").exists()


def test_mcp_refuses_a_manifest_without_an_mcp_condition_in_one_line(tmp_path):
    done = subprocess.run([*OAKWATCH, "mcp", str(ROOT / "assets" / "experiments" / "dry-run.yaml"),
                           "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "oakwatch: error: the manifest has no condition with policy 'mcp' (add one: docs/mcp.md)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("tools", "found"), [
    (["get_screen", "press_keys", "read_ram"], "(more: read_ram)"),  # a hidden-state tool slipped in
    (["press_keys"], "(missing: get_screen)"),
    (["get_screen", "press_keys", "press_keys"], "not exactly the human ruleset's"),
])
def test_verify_refuses_a_trial_whose_server_exposed_other_tools(tmp_path, tools, found):
    play_stdio(tmp_path, mcp_manifest(tmp_path, budgets={"accepted_actions": 4}))
    out = tmp_path / "out"
    _, trial = result_of(out)
    path = trial / "result.json"
    result = json.loads(path.read_text())
    result["provenance"]["tool_server"]["tools"] = tools
    path.write_text(json.dumps(result))
    problems = verify_experiment(out)
    assert any("the tool server exposed" in p and found in p for p in problems), problems


def test_verify_refuses_a_recorded_ruleset_other_than_the_manifests(tmp_path):
    from sessions.audit.verify import Report
    from sessions.audit.verify_tools import check_tools

    play_stdio(tmp_path, mcp_manifest(tmp_path, budgets={"accepted_actions": 4}))
    out = tmp_path / "out"
    from engine.loop.records import TrialResult
    from sessions.preflight.manifest import load_manifest

    raw, trial = result_of(out)
    raw["provenance"]["tool_server"]["ruleset"] = "standard"
    result = TrialResult.model_validate(raw)
    manifest = load_manifest(out / "manifest.yaml")
    report = Report()
    check_tools(manifest, {result.condition: "agent"}, {result.trial_key: (result, "")}, report)
    assert report.problems == [f"trials/{result.trial_key}/result.json: played under ruleset 'standard', but the "
                               f"manifest's is 'human'"]
    report = Report()
    raw["provenance"]["tool_server"]["ruleset"] = "human"
    check_tools(manifest, {result.condition: "agent"}, {result.trial_key: (TrialResult.model_validate(raw), "")},
                report)
    assert report.problems == []


def test_the_bundled_mcp_experiment_is_served_and_plays_to_the_dex(tmp_path):
    from sessions.preflight.assets import ASSETS

    seen, _ = play_stdio(tmp_path, ASSETS / "experiments" / "mcp.yaml")
    result, _ = result_of(tmp_path / "out")
    assert seen["tools"] == ["get_screen", "press_keys"] and result["milestones_reached"][-1] == "M8"
    assert verify_experiment(tmp_path / "out") == []


@pytest.mark.parametrize("template", ["firered-mcp", "red-mcp"])
def test_the_own_rom_mcp_templates_are_filled_in_by_state_new(template, tmp_path):
    from sessions.preflight.assets import ASSETS
    from sessions.preflight.gamedefs import load_game_definition
    from sessions.preflight.manifest import parse_manifest
    from sessions.preflight.romid import identify
    from sessions.preflight.statemaker import Setup, fill_experiment, load_template
    from sessions.preflight.tool_conditions import check_tool_condition

    path = ASSETS / "experiments" / f"{template}.yaml"
    ref = yaml.safe_load(path.read_text())["game"]["definition"]
    game = load_game_definition(ASSETS / "games" / ref.removeprefix("bundled:"))
    emulator = {"gb": "pyboy", "gba": "mgba"}[game.platform]
    rom = b"not this game"
    s = Setup(tmp_path / "own.rom", rom, game, ref, identify(rom, game, force=True), emulator, "9.9", tmp_path / "o")
    data, _ = load_template(f"bundled:{template}.yaml", s)
    record = {"state": "mine.state", "state_sha256": "a" * 64, "first_frame_sha256": "b" * 64}
    manifest = parse_manifest(fill_experiment(s, record, data), "filled")
    assert [c.policy for c in manifest.conditions] == ["mcp"] and manifest.agent.ruleset == "human"
    assert manifest.trials_per_label() == 1
    check_tool_condition(manifest, manifest.conditions[0], 0, allow_mcp=True)  # raises if oakwatch mcp would refuse


def test_operator_pause_step_tag_and_end_reach_a_served_trial(tmp_path):
    """The run's control (what `oakwatch attach` and `serve --operator` drive) holds the served trial
    like any other: a call made while paused waits for a step, a tag is recorded, an end refuses the
    calls after it. In-process: the SDK's Client connected straight to the server object."""
    import anyio
    from mcp import Client

    from app.commands.mcp_cli import ToolSession
    from sessions.execute.start import create_folder

    out = tmp_path / "out"
    prepared = prepare(mcp_manifest(tmp_path), out, allow_mcp=True)
    session = ToolSession(prepared, create_folder(prepared, out), 0, transport="stdio")
    control = session.control
    got: dict = {}

    async def main():
        async with Client(session.server) as client:
            assert not (await client.call_tool("press_keys", {"keys": ["RIGHT"]})).is_error  # decision 1
            control.pause()

            async def held():
                got["held"] = await client.call_tool("press_keys", {"keys": ["RIGHT"]})

            async with anyio.create_task_group() as tg:
                tg.start_soon(held)
                await anyio.sleep(0.5)
                assert "held" not in got  # paused: the loop does not take the call
                with anyio.fail_after(5):  # ... but the server, on the trial's event loop, still answers
                    listed = await client.list_tools()
                assert "press_keys" in {t.name for t in listed.tools} and "held" not in got
                control.step()
            assert json.loads(got["held"].content[0].text)["decision_id"] == 2
            control.tag({"trial_key": session.trial_key, "decision_id": 2, "type": "misread-screen",
                         "severity": "minor", "note": "walked into the wall"})
            control.end_trial("enough for this test")
            with anyio.fail_after(10):
                while not session.desk.finished.is_set():
                    await anyio.sleep(0.02)
            got["after"] = await client.call_tool("press_keys", {"keys": ["A"]})

    _play_in_process(session, main)
    assert got["after"].is_error and "has ended (operator-abort)" in got["after"].content[0].text
    result, trial = result_of(out)
    assert (result["termination_reason"], result["termination_detail"]) == ("operator-abort", "enough for this test")
    assert result["last_decision"] == 2
    (tag,) = read_jsonl(trial / "annotations.jsonl")
    assert (tag["decision_id"], tag["note"]) == (2, "walked into the wall")
    assert verify_experiment(out) == []


def test_mcp_trial_option_names_a_trial_of_the_schedule(tmp_path):
    done = subprocess.run([*OAKWATCH, "mcp", str(mcp_manifest(tmp_path)), "--trial", "Q-07",
                           "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--trial Q-07: not a trial of this schedule" in done.stderr
    assert not (tmp_path / "out").exists()


def test_get_observation_shows_the_allowlist_only_and_the_human_ruleset_has_no_such_tool(tmp_path):
    from mcp import Client

    from app.commands.mcp_cli import ToolSession
    from sessions.execute.start import create_folder

    out = tmp_path / "out"
    manifest = mcp_manifest(tmp_path, agent={"ruleset": "standard", "information_track": "structured"},
                            budgets={"accepted_actions": 3})
    prepared = prepare(manifest, out, allow_mcp=True)
    session = ToolSession(prepared, create_folder(prepared, out), 0, transport="stdio")
    got: dict = {}

    async def main():
        async with Client(session.server) as client:
            got["first"] = json.loads((await client.call_tool("get_observation", {})).content[0].text)
            await client.call_tool("press_keys", {"keys": ["RIGHT", "RIGHT"]})
            got["second"] = json.loads((await client.call_tool("get_observation", {})).content[0].text)
            got["unknown"] = await client.call_tool("read_memory", {"address": 53248})
            await client.call_tool("press_keys", {"keys": ["RIGHT"]})  # the budget's last action

    _play_in_process(session, main)
    game = yaml.safe_load((ROOT / "assets" / "games" / "parcel-quest.yaml").read_text())
    allow = game["tracks"]["structured"]["fields"]
    first, second = got["first"], got["second"]
    assert set(first["structured"]) == {*allow, "dialogue"}  # the allowlist and the dialogue, nothing else
    ladder_fields = {f for m in game["milestones"] for f in json.dumps(m).split('"') if f in game["fields"]}
    assert ladder_fields and not ladder_fields & set(first["structured"])
    assert first["decision_id"] == 1 and second["recent_actions"] == ["RIGHT", "RIGHT"]
    assert got["unknown"].is_error  # no such tool: nothing reads RAM
    result, trial = result_of(out)
    assert result["termination_reason"] == "budget:accepted_actions"
    # get_observation calls are logged with the decision they preceded
    reply = read_jsonl(trial / "responses.jsonl")[0]["attempts"][0]["reply"]
    assert [s["tool"] for s in reply["screens"]] == ["get_observation"]


def test_an_agent_that_stops_calling_is_ended_by_the_wall_time_budget(tmp_path):
    """The loop checks wall time between decisions; the server keeps it while it waits for a call."""
    import anyio
    from mcp import Client

    from app.commands.mcp_cli import ToolSession
    from sessions.execute.start import create_folder

    out = tmp_path / "out"
    prepared = prepare(mcp_manifest(tmp_path, budgets={"wall_time_minutes": 0.04}), out, allow_mcp=True)  # 2.4 s
    session = ToolSession(prepared, create_folder(prepared, out), 0, transport="stdio")
    got: dict = {}

    async def main():
        async with Client(session.server) as client:
            await client.call_tool("press_keys", {"keys": ["RIGHT"]})
            with anyio.fail_after(20):
                while not session.desk.finished.is_set():  # the agent thinks for too long
                    await anyio.sleep(0.05)
            got["late"] = await client.call_tool("press_keys", {"keys": ["RIGHT"]})

    _play_in_process(session, main)
    assert got["late"].is_error and "has ended (budget:wall_time)" in got["late"].content[0].text
    result, _ = result_of(out)
    assert (result["outcome"], result["termination_reason"]) == ("game-failure", "budget:wall_time")
    assert result["last_decision"] == 1 and result["telemetry"]["wall_time_seconds"] >= 2.4
    assert verify_experiment(out) == []


def _play_in_process(session, main) -> None:
    """Run `main` (an SDK Client on the server object) while the session's trial plays on the same loop,
    as `oakwatch mcp` plays it; leaving, the client is gone and the trial is awaited to its record."""
    import anyio

    async def both():
        async with session.playing("the test's client left"):
            await main()

    anyio.run(both)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_ends_a_served_trial_truthfully_and_the_server_exits(tmp_path, name):
    """The trial and the server share one event loop: Ctrl-C stops the serving and the trial waiting
    for its agent's call ends as a signal, with its record, rather than dying with the loop. SIGTERM
    and SIGHUP as well (issue 33.4: on main SIGTERM killed the server, exit 143, a folder to recover)."""
    import signal
    import time

    server, url = serve_http(tmp_path, mcp_manifest(tmp_path))
    try:
        trace = tmp_path / "out" / "trials"
        deadline = time.monotonic() + 30
        while not list(trace.glob("*/frames")) and time.monotonic() < deadline:
            time.sleep(0.05)  # the trial has started and waits for a call
        server.send_signal(getattr(signal, name))
        assert server.wait(timeout=60) == 2  # an invalid trial: nobody played it to an end
        err = server.stderr.read()
    finally:
        server.kill()
    # the HTTP server stops as it stops at a trial's end, its lifespan shut down, not cancelled mid-wait
    assert "Traceback" not in err and "CancelledError" not in err, err
    out = tmp_path / "out"
    result, _ = result_of(out)
    assert (result["termination_reason"], result["termination_detail"]) == ("signal", name)
    assert not (out / ".lock").exists()  # finished: nothing for recover to do
    assert result["last_decision"] in (0, None)
    assert verify_experiment(out) == []


def test_the_mcp_http_server_and_the_demo_server_default_to_different_ports():
    """Both are run side by side (a harness over HTTP against the demo model server): one default each."""
    from app.cli import _parser

    demo = _parser().parse_args(["demo-server"]).port
    mcp = _parser().parse_args(["mcp", "bundled:mcp.yaml", "--transport", "http"]).port
    assert demo == 8765 and mcp != demo
    assert f"127.0.0.1:{mcp}`" in (ROOT / "docs" / "mcp.md").read_text()  # as the docs say
