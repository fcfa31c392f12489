"""The battle ruleset (seed 004, issue 18.1): the bundled rival-battle task served episodic through
`oakwatch mcp`; an agent on the official MCP SDK's client presses, calls `reset` (a new episode from
the task's start state), then plays the task's reference winning presses. The folder verifies and
replays; a reset with no episode left, or under a manifest that is not episodic, is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from engine.script import parse_script
from sessions.replay import replay_trial
from sessions.tasks import PolicyChoice, load_task, write_task_inputs
from sessions.verify import verify_experiment
from tests.conftest import read_jsonl
from tests.sessions.test_mcp_server import AGENT, OAKWATCH, ROOT, mcp_manifest, result_of

TASK = ROOT / "assets" / "tasks" / "rival-battle.yaml"
SCRIPT = ROOT / "assets" / "tasks" / "rival-battle.txt"
BATTLE_TOOLS = ["get_observation", "get_screen", "press_keys", "reset"]
LOSING = 15  # the reference script's first episode (it loses); the rest wins from the start state


def battle_manifest(tmp_path: Path, budget: int) -> Path:
    """The task's derived manifest (sessions.tasks, as `oakwatch tasks run` writes it), its condition an
    agent on the tool server under the battle ruleset."""
    path = write_task_inputs(load_task(TASK), PolicyChoice("scripted"), tmp_path / "inputs" / "rival", 1, None, None)
    data = yaml.safe_load(path.read_text())
    data["conditions"] = [{"id": "agent", "policy": "mcp"}]
    data["agent"]["ruleset"] = "battle"
    data["episodes"]["budget"] = budget
    data["emulator"]["speed_multiplier"] = 0
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def play(tmp_path: Path, manifest: Path, *agent_args: str) -> dict:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(AGENT), "--report", str(report), "--script", str(SCRIPT),
                           *agent_args, "--stdio", "--", *OAKWATCH, "mcp", str(manifest), "--output",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(report.read_text())


def test_an_agent_resets_then_wins_the_rival_battle_and_the_folder_verifies_and_replays(tmp_path):
    seen = play(tmp_path, battle_manifest(tmp_path, budget=2), "--reset-after", "3", "--resets", "2",
                "--start", str(LOSING))
    assert seen["tools"] == BATTLE_TOOLS  # exactly the battle ruleset's tools
    first, second = seen["resets"]
    assert (first["pressed"], first["episode"], first["episode_end"], first["trial_over"]) == ([], 1, "reset", False)
    # the second reset is in the last of the two episodes: refused, charged, the episode goes on
    assert "reset refused, charged as an invalid output" in second and "no episode is left" in second
    assert seen["ending"] == "final-milestone"
    result, trial = result_of(tmp_path / "out")
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert [(e["episode"], e["ended"], e["goal_reached"]) for e in result["episodes"]] == \
        [(1, "reset", False), (2, "final-milestone", True)]
    assert result["provenance"]["tool_server"]["tools"] == BATTLE_TOOLS
    assert result["telemetry"]["invalid_outputs"] == 1  # the refused reset
    trace = read_jsonl(trial / "trace.jsonl")
    reset_line = next(t for t in trace if t["episode_end"] == "reset")
    assert reset_line["accepted_actions"] == 0 and reset_line["parsed_actions"] == []
    after = trace[trace.index(reset_line) + 1]
    assert after["episode"] == 2 and after["frame_sha256"] == trace[0]["frame_sha256"]  # the start state again
    (reset_reply,) = [a["reply"] for r in read_jsonl(trial / "responses.jsonl") for a in r["attempts"]
                      if a["reply"] and a["reply"]["tool"] == "reset" and a["valid"]]
    assert reset_reply["ruleset"] == "battle"
    wins = parse_script(SCRIPT.read_text(), SCRIPT.name)[LOSING:]
    accepted = result["telemetry"]["accepted_actions"]
    assert 3 + len(wins) - 2 <= accepted <= 3 + len(wins)  # the goal may be met before the closing presses
    assert verify_experiment(tmp_path / "out") == []
    assert replay_trial(trial)["actions"] == accepted


def test_the_battle_ruleset_is_refused_on_a_manifest_that_is_not_episodic(tmp_path):
    manifest = mcp_manifest(tmp_path, agent={"ruleset": "battle"})
    done = subprocess.run([*OAKWATCH, "mcp", str(manifest), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "battle ruleset's reset starts a new episode: it needs an episodic manifest" in line
    assert not (tmp_path / "out").exists()
