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
    # verify's exposed-tools check holds the trial to the battle list: the standard list is one tool short
    path = trial / "result.json"
    tampered = json.loads(path.read_text())
    tampered["provenance"]["tool_server"]["tools"] = ["get_observation", "get_screen", "press_keys"]
    path.write_text(json.dumps(tampered))
    problems = verify_experiment(tmp_path / "out")
    assert any("not exactly the battle ruleset's" in p and "(missing: reset)" in p for p in problems), problems


def test_the_battle_ruleset_is_refused_on_a_manifest_that_is_not_episodic(tmp_path):
    manifest = mcp_manifest(tmp_path, agent={"ruleset": "battle"})
    done = subprocess.run([*OAKWATCH, "mcp", str(manifest), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "battle ruleset's reset starts a new episode: it needs an episodic manifest" in line
    assert not (tmp_path / "out").exists()


class ResetThenPress:
    """A tool-server agent's decisions as the desk hands them to the loop: a reset call first, then presses."""

    name, model_id, paid, transport = "mcp", None, True, None

    def __init__(self, record: dict):
        self.provenance = {"tool_server": record}
        self.feedback: list[str | None] = []

    async def decide(self, observation):
        from engine.policies.base import contract_json
        from engine.policy import PolicyReply
        from engine.records import Usage

        self.feedback.append(observation.retry_feedback)
        if len(self.feedback) == 1:
            return PolicyReply(text=contract_json([], summary="reset tool call"), usage=Usage(), reset=True,
                               reply={"tool": "reset", "arguments": {}})
        return PolicyReply(text=contract_json(["A"], summary="press_keys tool call"), usage=Usage(),
                           reply={"tool": "press_keys", "arguments": {"keys": ["A"]}})

    def close(self) -> None:
        pass


def test_a_reset_in_a_trial_that_is_not_episodic_is_an_invalid_output_logged_and_charged(tmp_path):
    """The loop's own rule (Trial._reset_response), under the gate that keeps battle to episodic manifests."""
    from engine.rulesets import tools_for
    from sessions.experiment import create_folder, prepare
    from sessions.runner import ExperimentRunner

    manifest = mcp_manifest(tmp_path, agent={"ruleset": "standard"}, budgets={"accepted_actions": 2})
    prepared = prepare(manifest, tmp_path / "out", allow_mcp=True)
    record = {"ruleset": "standard", "tools": sorted(tools_for("standard")), "transport": "stdio", "client": None}
    policy = ResetThenPress(record)
    runner = ExperimentRunner(prepared, create_folder(prepared, tmp_path / "out"), positions=[0],
                              policy_factories={"mcp": lambda c, n: policy})
    runner.run()
    (result,) = runner.results
    assert "reset: this trial is not episodic" in policy.feedback[1]  # the retry says why, as for any output
    assert result.episodes is None
    assert result.telemetry.invalid_outputs == 1 and result.telemetry.accepted_actions == 2
    (trial,) = (tmp_path / "out" / "trials").iterdir()
    first = read_jsonl(trial / "responses.jsonl")[0]["attempts"]
    assert [(a["valid"], a["reply"]["tool"]) for a in first] == [(False, "reset"), (True, "press_keys")]
    assert "not episodic" in first[0]["error"]
    assert "episode" not in read_jsonl(trial / "trace.jsonl")[0]
    assert verify_experiment(tmp_path / "out") == []
