"""The agent is told what to do (issue 34 item 6): each game definition, goal, task and manifest carries
the instruction every agent is given — the same bytes in every condition, opening a model's system
prompt (so part of its prompt_core_sha256) and the MCP server's instructions — and it names the
objective as the player sees it, never a field of the hidden-state probe."""

from __future__ import annotations

import json

import pytest
import yaml

from app.cli import main
from engine.games.gamedef import TASK_LINE, GameDefinition
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from sessions.preflight.gamedefs import load_game_definition
from sessions.tasks.tasks import TaskError, catalog, load_task
from tests.conftest import write_manifest
from tests.fakes.provider_server import FakeProviderServer

LADDER = "Play the game's story until the professor gives you the Dex."
ONE_DECISION = {"accepted_actions": None, "model_decisions": 1, "wall_time_minutes": None}


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def model(server, cid: str = "agent") -> dict:
    return {"id": cid, "policy": "model", "provider": "openai-compatible", "model": "m-1",
            "base_url": server.base_url("chat")}


def system_of(request) -> str:
    return request.json["messages"][0]["content"]


def test_every_bundled_definition_goal_and_task_says_what_to_do_and_names_no_hidden_state():
    for path in sorted((ASSETS / "games").glob("*.yaml")):
        game = load_game_definition(path)
        told = [game.instruction, *(g.instruction for g in game.goals.values())]
        assert all(told) and not any(game.hidden_in(t) for t in told), path.name
    for task in catalog():
        assert task.file.instruction and not (task.game and task.game.hidden_in(task.file.instruction)), task.id


def test_an_instruction_naming_a_probe_field_is_refused(tmp_path):
    game = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
    game["instruction"] = "Set bit 7 of flags0."
    with pytest.raises(ValueError, match=r"instruction names hidden state \(flags0\)"):
        GameDefinition.model_validate(game)
    game["instruction"] = "Write 0x4F to the magic byte."
    with pytest.raises(ValueError, match=r"names hidden state \(0x4F\)"):
        GameDefinition.model_validate(game)
    task = yaml.safe_load((ASSETS / "tasks" / "leave-house.yaml").read_text())
    task |= {"instruction": "Make party_count rise.", "experiment": str(DEFAULT_MANIFEST),
             "reference_script": str(ASSETS / "cartridge" / "walkthrough.txt")}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(task))
    with pytest.raises(TaskError, match=r"instruction names hidden state \(party_count\)"):
        load_task(tmp_path / "t.yaml")
    agent = yaml.safe_load(DEFAULT_MANIFEST.read_text())["agent"] | {"instruction": "Reach map_id 3."}
    with pytest.raises(PreflightError, match=r"agent.instruction: names hidden state \(map_id\)"):
        prepare(write_manifest(tmp_path, agent=agent), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_model_is_sent_the_instruction_and_it_is_part_of_the_prompt_core(tmp_path, server):
    """Read back from the recorded requests: both conditions' system prompts open with the ladder's
    instruction, byte for byte; the frozen manifest names it; another instruction is another core."""
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path, conditions=[model(server, "a"), model(server, "b")], budgets=ONE_DECISION)
    assert main(["run", str(manifest), "--headless", "--output", str(out)]) == 1  # game-failures (model_decisions)
    systems = {system_of(r) for r in server.requests}
    assert len(server.requests) == 2 and len(systems) == 1
    (system,) = systems
    assert system.startswith("You are playing a Game Boy game") and TASK_LINE.format(instruction=LADDER) in system
    assert yaml.safe_load((out / "manifest.yaml").read_text())["agent"]["instruction"] == LADDER
    assert (out / "prompts" / "system.txt").read_text() == system
    cores = {json.loads(p.read_text())["provenance"]["prompt_core_sha256"] for p in out.glob("*/*/result.json")}
    assert len(cores) == 1 and main(["verify", str(out)]) == 0

    agent = yaml.safe_load(DEFAULT_MANIFEST.read_text())["agent"] | {"instruction": "Leave the house."}
    other = tmp_path / "other"
    other.mkdir()
    manifest = write_manifest(other, conditions=[model(server)], agent=agent, budgets=ONE_DECISION)
    main(["run", str(manifest), "--headless", "--output", str(other / "out")])
    assert TASK_LINE.format(instruction="Leave the house.") in system_of(server.requests[-1])
    (result,) = [json.loads(p.read_text()) for p in (other / "out").glob("*/*/result.json")]
    assert result["provenance"]["prompt_core_sha256"] not in cores


def test_goal_option_changes_what_the_agent_is_told(tmp_path, server):
    game = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
    game["goals"] = {"creature": {"name": "Obtain any creature", "instruction": "Get a creature of your own.",
                                  "counts": ["party_count"], "owned": "party", "owned_kind": "ids",
                                  "room": [{"field": "party_count", "le": 0}]}}
    (tmp_path / "game.yaml").write_text(yaml.safe_dump(game, sort_keys=False))
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data["game"]["definition"] = str(tmp_path / "game.yaml")
    data["agent"]["instruction"] = "Explore."  # the manifest's own, for the ladder: --goal replaces it
    manifest = write_manifest(tmp_path, game=data["game"], agent=data["agent"], conditions=[model(server)],
                              budgets=ONE_DECISION)
    out = tmp_path / "out"
    main(["run", str(manifest), "--goal", "creature", "--headless", "--output", str(out)])
    told = TASK_LINE.format(instruction="Get a creature of your own.")
    assert told in system_of(server.requests[0]) and "Explore." not in server.requests[0].body.decode()
    assert yaml.safe_load((out / "manifest.yaml").read_text())["agent"]["instruction"] == \
        "Get a creature of your own."


def test_a_task_tells_the_model_its_own_objective(tmp_path, server):
    out = tmp_path / "batch"
    main(["tasks", "run", "leave-house", "--policy", "model", "--provider", "openai-compatible", "--model", "m-1",
          "--base-url", server.base_url("chat"), "--output", str(out)])
    assert server.requests
    system = system_of(server.requests[0])
    assert TASK_LINE.format(instruction="Leave your house and step outside.") in system and LADDER not in system
    frozen = yaml.safe_load(next(out.glob("runs/leave-house/manifest.yaml")).read_text())
    assert frozen["agent"]["instruction"] == "Leave your house and step outside."


def test_a_manifest_without_an_instruction_hashes_as_before_instructions_existed():
    """Folders frozen before instructions keep their manifest hash (and resume tells their agents none)."""
    from sessions.preflight.manifest import load_manifest

    manifest = load_manifest(DEFAULT_MANIFEST)
    assert manifest.agent.instruction is None and '"instruction"' not in manifest.canonical_json()
    told = manifest.model_copy(update={"agent": manifest.agent.model_copy(update={"instruction": LADDER})})
    assert told.sha256() != manifest.sha256() and f'"instruction":"{LADDER}"' in told.canonical_json()


def test_a_cli_client_is_told_in_its_prompt_and_by_the_server(tmp_path, client_install):
    """`{instruction}` in a `policy: cli` command becomes the frozen instruction; the server says it too."""
    from tests.sessions.execute.test_cli_policy import cli_manifest, client_exe, run
    from tests.sessions.execute.test_mcp_server import result_of

    exe = client_exe(tmp_path, client_install, "--report", "-")  # what it saw, in its transcript
    cmd = [str(exe), "-p", "{instruction} Use the oakwatch tools.", "--mcp-config", "{mcp_config}",
           "--output-format", "json", "--tools", ""]
    out, _ = run(tmp_path, cli_manifest(tmp_path, client_install, cmd, budgets={"accepted_actions": 4}))
    _, trial = result_of(out)
    stderr = json.loads((trial / "client-transcript.jsonl").read_bytes().splitlines()[1])["text"]
    seen = json.loads(stderr.split("report: ", 1)[1])
    assert seen["prompt"] == f"{LADDER} Use the oakwatch tools."
    assert seen["instructions"].startswith(TASK_LINE.format(instruction=LADDER))
