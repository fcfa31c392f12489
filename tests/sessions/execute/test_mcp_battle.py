"""The battle ruleset (seed 004, issues 18.1 and 22.6): the bundled rival-battle task served episodic
through `oakwatch mcp`; an agent on the official MCP SDK's client applies a team, leads, fights, resets,
applies another team and wins, every battle call a decision. The folder verifies and replays (the
team's RAM writes re-applied where the trace says); each rule violation is refused with its reason and
charged; the battle ruleset needs an episodic manifest."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.tasks.tasks import PolicyChoice, load_task, write_task_inputs
from tests.conftest import read_jsonl
from tests.sessions.execute.test_mcp_server import OAKWATCH, ROOT, mcp_manifest, result_of

TASK = ROOT / "assets" / "tasks" / "rival-battle.yaml"
BATTLE_AGENT = ROOT / "tests" / "fakes" / "mcp_battle_agent.py"
BATTLE_TOOLS = ["action", "apply_team", "get_screen", "lead", "observe", "reset"]


def battle_manifest(tmp_path: Path, budget: int, **rules) -> Path:
    """The task's derived manifest (sessions.tasks.tasks, as `oakwatch tasks run` writes it), its condition an
    agent on the tool server under the battle ruleset; `rules` replace the task's battle settings."""
    path = write_task_inputs(load_task(TASK), PolicyChoice("scripted"), tmp_path / "inputs" / "rival", 1, None, None)
    data = yaml.safe_load(path.read_text())
    data["conditions"] = [{"id": "agent", "policy": "mcp"}]
    data["agent"]["ruleset"] = "battle"
    data["episodes"]["budget"] = budget
    data["emulator"]["speed_multiplier"] = 0
    data["battle"] |= rules
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def play(tmp_path: Path, manifest: Path, plan: list[dict]) -> dict:
    report, plan_file = tmp_path / "report.json", tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, str(BATTLE_AGENT), "--plan", str(plan_file), "--report", str(report),
                           "--stdio", "--", *OAKWATCH, "mcp", str(manifest), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(report.read_text())


def team(*species: str, **fields) -> dict:
    return {"tool": "apply_team", "args": {"team": [{"species": s, **fields} for s in species]}}


VIOLATIONS = [  # (the call, what its refusal says)
    (team("SPROUTLE", "EMBERPUP"), "2 members is over the task's party limit of 1"),
    (team("SPROUTLE", level=6), "level 6 is over the task's level cap of 5"),
    (team("DRIPLET"), "species DRIPLET is not in the task's pool"),
    (team("EMBERPUP", moves=["LEAF JAB"]), "EMBERPUP cannot learn LEAF JAB"),
    ({"tool": "action", "args": {"kind": "RUN"}}, "unknown kind 'RUN'"),
]
AFTER_LEAD = [
    (team("SPROUTLE"), "a team can only be applied before lead"),
    ({"tool": "action", "args": {"kind": "SWITCH", "slot": 1}}, "SWITCH needs another creature to send in, and the "
                                                                "party has one"),
    ({"tool": "action", "args": {"kind": "FIGHT", "move": "LEAF JAB"}}, "FIGHT needs move, one the active creature "
                                                                        "knows (FLARE NIP)"),
]


def test_an_agent_applies_teams_fights_resets_and_wins_and_the_folder_verifies_and_replays(tmp_path):
    manifest = battle_manifest(tmp_path, budget=3, level_cap=5, pool={"species": ["SPROUTLE", "EMBERPUP"],
                                                                      "moves": None, "items": []})
    lead = {"tool": "lead", "args": {"slot": 0}}
    plan = ([{"tool": "observe"}] + [c for c, _ in VIOLATIONS] + [team("EMBERPUP"), lead]
            + [c for c, _ in AFTER_LEAD] + [{"tool": "action", "args": {"kind": "FIGHT", "move": "FLARE NIP"}},
                                            {"tool": "get_screen"}, {"tool": "reset"}, {"tool": "observe"},
                                            team("SPROUTLE", moves=["LEAF JAB"]), {"tool": "lead", "args": {"slot": 0}},
                                            {"fight": "LEAF JAB"}])
    seen = play(tmp_path, manifest, plan)
    assert seen["tools"] == BATTLE_TOOLS  # exactly the battle ruleset's tools
    assert "party limit 1, level cap 5 and pool: species SPROUTLE, EMBERPUP; no items; only" in seen["instructions"]
    assert seen["instructions"].startswith("Your task in this game: Win the battle against your rival.\n\n")
    calls = seen["calls"]
    first = calls[0]["result"]
    # the start state is KIT's challenge, the battle not started: no HP on screen yet
    assert first["party"] == [{"slot": 0, "species": "SPROUTLE", "type": "GRASS", "moves": ["LEAF JAB"], "level": None,
                               "hp": None}]
    assert first["enemy"] == {"species": "EMBERPUP", "type": "FIRE", "hp": None}
    assert (first["phase"], first["battle_state"]) == ("before-battle", "none")
    refused = [c for c in calls if c["error"]]
    assert len(refused) == len(VIOLATIONS) + len(AFTER_LEAD)
    for c, (_, why) in zip(refused, VIOLATIONS + AFTER_LEAD, strict=True):
        assert "refused, charged as an invalid output of decision" in c["result"] and why in c["result"], c
    applied = next(c for c in calls if c["tool"] == "apply_team" and not c["error"])["result"]
    assert applied["battle"]["writes"] == [{"address": 0xD010, "bytes": [1]}, {"address": 0xD011, "bytes": [2]}]
    reset = next(c for c in calls if c["tool"] == "reset")["result"]
    assert (reset["episode"], reset["episode_end"]) == (1, "reset")
    again = next(c for c in calls[calls.index(next(c for c in calls if c["tool"] == "reset")):]
                 if c["tool"] == "observe")["result"]
    assert again["party"][0]["species"] == "SPROUTLE" and not again["team_applied"]  # the start state again
    last = calls[-1]["result"]
    assert last["trial_over"] and last["ending"] == "final-milestone"
    result, trial = result_of(tmp_path / "out")
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert result["provenance"]["tool_server"]["tools"] == BATTLE_TOOLS
    assert result["provenance"]["battle"]["level_cap"] == 5 and result["provenance"]["battle"]["difficulty"] == {
        "enemy_levels": "fixed", "mode": "set"}
    assert result["telemetry"]["invalid_outputs"] >= 1
    charged = sum(not a["valid"] for r in read_jsonl(trial / "responses.jsonl") for a in r["attempts"])
    assert charged == len(refused)  # every refusal is an attempt, charged
    # the change log: the team of each episode
    assert [(e["episode"], e["ended"], [m["species"] for m in e["team"]]) for e in result["episodes"]] == \
        [(1, "reset", ["EMBERPUP"]), (2, "final-milestone", ["SPROUTLE"])]
    trace = read_jsonl(trial / "trace.jsonl")
    tools = [t["battle"]["tool"] for t in trace if "battle" in t]
    assert tools[:2] == ["apply_team", "lead"] and tools.count("apply_team") == 2
    assert all(t["accepted_actions"] == 0 for t in trace if t.get("battle", {}).get("tool") == "apply_team")
    assert verify_experiment(tmp_path / "out") == []
    assert replay_trial(trial)["actions"] == result["telemetry"]["accepted_actions"]
    # verify holds the result to the manifest's battle rules, recorded verbatim
    tampered = json.loads((trial / "result.json").read_text())
    tampered["provenance"]["battle"]["level_cap"] = 100
    (trial / "result.json").write_text(json.dumps(tampered))
    assert any("provenance.battle is not the manifest's battle rules" in p for p in verify_experiment(tmp_path / "out"))


def _screen_text(emulator, col: int, row: int, length: int) -> str:
    """BG map tiles at 0x9800 + row*32 + col as text: the cartridge's font tiles are ASCII (RAM.md Screen)."""
    return "".join(map(chr, emulator.read_range(0x9800 + row * 32 + col, length)))


def _pic_tile(species: str) -> int:
    """The first tile of a species' picture (assets/cartridge/src/data.h), as draw_pic puts it."""
    text = (ROOT / "assets" / "cartridge" / "src" / "data.h").read_text()
    return int(re.search(rf"#define T_{species} (0x[0-9A-Fa-f]+)", text).group(1), 16)


def test_the_applied_species_is_the_one_the_battle_screen_draws(tmp_path):
    """The task opens on KIT's challenge, before battle_start: a team applied there is drawn by the
    cartridge (picture at column 2, name at column 9, row 7: draw_battle), and observe says the same."""
    from engine.emulators.backends import BACKENDS
    from sessions.audit.replay import load_trial, replay_records
    from sessions.preflight.gamedefs import load_game_definition

    manifest = battle_manifest(tmp_path, budget=2)
    fight = {"tool": "action", "args": {"kind": "FIGHT", "move": "BUBBLE POP"}}
    seen = play(tmp_path, manifest, [{"tool": "observe"}, team("DRIPLET"), {"tool": "observe"}, fight,
                                     {"tool": "observe"}, {"tool": "get_screen"}])
    before, applied, after_team, fought, after = (c["result"] for c in seen["calls"][:5])
    assert not any(c["error"] for c in seen["calls"])
    assert (before["phase"], before["battle_state"], before["party"][0]["species"]) == (
        "before-battle", "none", "SPROUTLE")
    assert (after_team["phase"], after_team["party"][0]["species"]) == ("before-battle", "DRIPLET")
    assert applied["battle"]["writes"] == [{"address": 0xD010, "bytes": [1]}, {"address": 0xD011, "bytes": [3]}]
    # the first FIGHT starts the battle (A: battle_start, A: intro text -> menu), then plays one round
    adapter = load_game_definition(ROOT / "assets" / "games" / "parcel-quest.yaml").battle
    assert fought["pressed"] == [adapter.advance] * adapter.before.to_menu + adapter.fight
    assert (fought["battle"]["lead"], fought["episode_end"]) == (0, None)
    assert (after["phase"], after["battle_state"]) == ("menu", "in-battle")
    own, enemy = after["party"][0], after["enemy"]
    assert (own["species"], own["moves"]) == ("DRIPLET", ["BUBBLE POP"]) and enemy["species"] == "EMBERPUP"
    assert 0 < own["hp"] < 20 and 0 < enemy["hp"] < 20  # both took a hit: the round was fought
    # the screen the agent was served, reproduced frame for frame by the replay, draws DRIPLET
    _, trial = result_of(tmp_path / "out")
    loaded = load_trial(trial)
    emulator = BACKENDS[loaded.manifest.emulator.name].open(loaded.rom, str(loaded.rom_path), loaded.game.platform)
    try:
        replay_records(emulator, loaded)
        name = _screen_text(emulator, 9, 7, len("DRIPLET") + 1)
        assert name[:-1] == "DRIPLET" and not name[-1].isalpha(), name  # the whole name (SPROUTLE is longer)
        assert emulator.read_range(0x9800 + 7 * 32 + 2, 1)[0] == _pic_tile("DRIPLET") != _pic_tile("SPROUTLE")
        assert _screen_text(emulator, 1, 2, len("EMBERPUP")) == "EMBERPUP"  # the rival's, picked at KIT's turn
    finally:
        emulator.close()


def test_replay_needs_the_recorded_writes(tmp_path):
    """The applied team changes what the game shows (its move's name): replay without the writes diverges."""
    from sessions.audit.replay import Divergence

    manifest = battle_manifest(tmp_path, budget=2)
    play(tmp_path, manifest, [team("DRIPLET"), {"tool": "action", "args": {"kind": "FIGHT", "move": "BUBBLE POP"}}])
    _, trial = result_of(tmp_path / "out")
    assert replay_trial(trial)["decisions"] == 2
    path = trial / "trace.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["battle"]["writes"] = []
    lines[0] = json.dumps(first)
    path.write_text("\n".join(lines) + "\n")
    try:
        replay_trial(trial)
    except Divergence as exc:
        assert "decision 2" in str(exc)
    else:
        raise AssertionError("a replay without the team's writes reproduced the frames")


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
        from engine.loop.records import Usage
        from engine.policies.base import contract_json
        from engine.policies.policy import PolicyReply

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
    from engine.policies.rulesets import tools_for
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare

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


def test_battle_rules_that_do_not_fit_the_game_and_a_game_without_an_adapter_are_refused(tmp_path):
    import pytest

    from sessions.preflight.experiment import PreflightError, prepare
    from sessions.preflight.gamedefs import load_game_definition
    from sessions.preflight.manifest import load_manifest
    from sessions.preflight.tool_conditions import ToolConditionError, check_tool_condition

    manifest = battle_manifest(tmp_path, budget=2, party_limit=2)
    with pytest.raises(PreflightError, match="battle: party_limit 2 is more than the game's 1 party slot"):
        prepare(manifest, tmp_path / "out", allow_mcp=True)
    assert not (tmp_path / "out").exists()
    m = load_manifest(manifest)
    bare = load_game_definition(ROOT / "assets" / "games" / "parcel-quest.yaml").model_copy(update={"battle": None})
    with pytest.raises(ToolConditionError, match="parcel-quest has none"):
        check_tool_condition(m, m.conditions[0], 0, allow_mcp=True, game=bare)


def test_the_adapter_s_buttons_must_be_allowed_by_the_manifest(tmp_path):
    """FIGHT presses A; a manifest whose agent may not press A gets every FIGHT refused, with the reason."""
    manifest = battle_manifest(tmp_path, budget=2)
    data = yaml.safe_load(manifest.read_text())
    data["agent"]["allowed_actions"] = ["UP", "DOWN", "LEFT", "RIGHT", "B"]
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    seen = play(tmp_path, manifest, [{"tool": "action", "args": {"kind": "FIGHT", "move": "LEAF JAB"}}])
    (call,) = seen["calls"]
    assert call["error"] and "include A, which the manifest's agent.allowed_actions lacks" in call["result"]


def _walk(schema, path="$"):
    if isinstance(schema, dict):
        yield path, schema
        for key, value in schema.items():
            yield from _walk(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _walk(value, f"{path}[{i}]")


def test_every_tool_schema_is_portable_and_its_defaults_fit_it():
    """Issue 33.4: no `type: [x, null]` list and no default its own schema refuses (the SDK writes
    `default: null` for an optional parameter), which strict validators such as the MCP Inspector's flag."""
    import anyio
    import jsonschema

    from engine.policies.rulesets import RULESETS
    from engine.policies.tools import ToolDesk
    from sessions.execute.mcp_server import build_server

    for ruleset in RULESETS:
        server = build_server(ToolDesk(), ruleset=ruleset, image_scale=2, allowed=("A", "B"), max_actions=4,
                              press_frames=1, settle_frames=1, battle={}, instruction=None)
        for tool in anyio.run(server.list_tools):
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            for where, node in _walk(tool.input_schema):
                assert not isinstance(node.get("type"), list), (tool.name, where, node)
                if "default" in node:
                    jsonschema.validate(node["default"], {k: v for k, v in node.items() if k != "default"})


def test_null_for_an_optional_argument_is_taken_as_left_out(tmp_path):
    """Issue 33.4: a client that sends every optional field, null where unset (`move: null`, the schema's
    default on main; a member's `level`, `moves`, `item`), is judged as if it had left them out."""
    from mcp import Client

    from app.commands.mcp_cli import ToolSession
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare
    from tests.sessions.execute.test_mcp_server import _play_in_process

    out = tmp_path / "out"
    prepared = prepare(battle_manifest(tmp_path, budget=2), out, allow_mcp=True)
    session = ToolSession(prepared, create_folder(prepared, out), 0, transport="stdio")
    got: list = []

    async def main():
        async with Client(session.server) as client:
            for name, args in (("apply_team", {"team": [{"species": "EMBERPUP", "level": None, "moves": None,
                                                         "item": None}]}),
                               ("action", {"kind": "SWITCH", "slot": 1, "move": None}),
                               ("action", {"kind": "FIGHT", "move": "FLARE NIP", "slot": None})):
                got.append(await client.call_tool(name, args))

    _play_in_process(session, main)
    team, switch, fight = got
    assert not team.is_error, team.content[0].text  # main: "member 0: moves: Input should be a valid list"
    assert "SWITCH needs another creature" in switch.content[0].text  # judged on its slot, not its move
    assert not fight.is_error, fight.content[0].text
    assert verify_experiment(out) == []
