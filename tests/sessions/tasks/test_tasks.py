"""The task catalog (seed 003): task files, a batch with its ledger and ceiling, verify, replay, report."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from app.cli import main
from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing, frame_sha256
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from sessions.tasks.tasks import GOAL_ID, TASKS_DIR, TaskError, catalog, derived_game, load_task

RIVAL = TASKS_DIR / "rival-battle.yaml"


def test_catalog_lists_cartridge_tasks_ready_and_red_firered_as_templates(capsys):
    tasks = {t.id: t for t in catalog()}
    assert {"leave-house", "reach-lab", "rival-battle"} <= {i for i, t in tasks.items() if t.template is None}
    templates = {i for i, t in tasks.items() if t.template is not None}
    assert {"red-leave-house", "red-rival-battle", "firered-leave-house"} <= templates
    assert tasks["red-rival-battle"].game.id == "pokemon-red-blue-en"  # its goal was checked on that ladder
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert "rival-battle" in out and "template" in out and "ready" in out
    assert "episodes<=5 party<=1 level-cap=none" in out  # rival-battle's battle rules, in brief


def test_rival_battle_state_is_its_prefix_played_from_the_canonical_start():
    """The committed state is reproducible from what is published: the prefix, the canonical state."""
    task = load_task(RIVAL)
    entry = task.file.start_states["pyboy"]
    rom = (ASSETS / "cartridge" / "parcel-quest.gb").read_bytes()
    machine = BACKENDS["pyboy"].open(rom, "parcel-quest.gb", "gb")
    try:
        machine.restore((ASSETS / "cartridge" / "parcel-quest.state").read_bytes())
        for action in parse_script((TASKS_DIR / "rival-battle.prefix.txt").read_text()):
            machine.step(action, Timing(4, 12), lambda read: {})
        state = machine.save_state()
    finally:
        machine.close()
    assert hashlib.sha256(state).hexdigest() == entry.sha256
    assert hashlib.sha256((TASKS_DIR / "rival-battle.state").read_bytes()).hexdigest() == entry.sha256
    check = BACKENDS["pyboy"].open(rom, "parcel-quest.gb", "gb")
    try:
        check.restore(state)
        assert frame_sha256(check.frame()) == entry.first_frame_sha256
    finally:
        check.close()


def test_goal_becomes_the_ladders_deciding_rungs():
    subset = load_task(TASKS_DIR / "leave-house.yaml")
    game = derived_game(subset.file, subset.game)
    assert game.final_id == "M1"
    assert [m.id for m in game.milestones if m.required] == ["M1"]
    assert game.optimal_presses is None  # solved from the game's own start, not the task's
    probe = load_task(TASKS_DIR / "reach-lab.yaml")
    game = derived_game(probe.file, probe.game)
    assert game.final_id == GOAL_ID and [m.id for m in game.milestones if m.required] == [GOAL_ID]
    # the goal reads map_id: the structured track no longer shows it (a goal's field is the evaluator's)
    assert "map_id" in probe.game.tracks.structured.fields
    assert "map_id" not in game.tracks.structured.fields


def _task(tmp: Path, **changes) -> Path:
    data = yaml.safe_load((TASKS_DIR / "leave-house.yaml").read_text())
    data.update(changes)
    path = tmp / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("changes, words", [
    ({"goal": {"milestones": ["M9"]}}, "M9 not on parcel-quest's ladder"),
    ({"goal": {"probe": [{"field": "nosuch", "eq": 1}]}}, "field 'nosuch'"),
    ({"goal": {"probe": [{"field": "bag", "eq": 1}]}}, "holds bytes"),
    ({"goal": {}}, "exactly one"),
    ({"reference_script": "nosuch.txt"}, "reference_script: no such file"),
    ({"experiment": "nosuch.yaml"}, "experiment: no such file"),
    ({"episodes": {"budget": 3}}, "needs failure"),
    # seed 004's battle rules (engine.battle.battle), checked against the cartridge's battle adapter
    ({"battle": {"party_limit": 0}}, "party_limit"),
    ({"battle": {"party_limit": 2}}, "battle: party_limit 2 is more than the game's 1 party slot"),
    ({"battle": {"party_limit": 1, "pool": {"species": ["MEWTWO"]}}}, "battle: pool.species: MEWTWO not in the game"),
    ({"battle": {"party_limit": 1, "level_cap": 0}}, "level_cap"),
    ({"battle": {"party_limit": 1, "odds": 3}}, "odds"),
    ({"battle": {"party_limit": 1, "difficulty": {"mode": ["set"]}}}, "difficulty"),
    ({"battle": {"party_limit": 1, "team": [{"species": "SPROUTLE"}, {"species": "DRIPLET"}]}},
     "battle: team: 2 members is over the task's party limit of 1"),
    ({"battle": {"party_limit": 1, "pool": {"species": ["DRIPLET"]}, "team": [{"species": "SPROUTLE"}]}},
     "battle: team: member 0: species SPROUTLE is not in the task's pool"),
])
def test_bad_task_file_is_one_line_exit_2_nothing_written(tmp_path, capsys, changes, words):
    path = _task(tmp_path, **changes)
    with pytest.raises(TaskError, match=words):
        load_task(path)
    out = tmp_path / "batch"
    assert main(["tasks", "run", str(path), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words.split(":")[0] in err
    assert not out.exists()


@pytest.fixture(scope="module")
def scripted_batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("tasks") / "batch"
    assert main(["tasks", "run", "leave-house", "reach-lab", "rival-battle", "--output", str(out)]) == 0
    return out


def test_batch_runs_verifies_replays_and_reports(scripted_batch, tmp_path, capsys):
    b = scripted_batch
    ledger = json.loads((b / "batch.json").read_text())
    assert [t["task_id"] for t in ledger["tasks"]] == ["leave-house", "reach-lab", "rival-battle"]
    assert all(t["status"] == "run" and t["trials"][0]["outcome"] == "success" for t in ledger["tasks"])
    result = json.loads((b / "runs/rival-battle/trials/X-01/result.json").read_text())
    assert result["milestones_reached"] == [GOAL_ID] and result["pre_satisfied"] == ["M1", "M2", "M3"]
    assert main(["verify", str(b)]) == 0
    for task in ("leave-house", "reach-lab", "rival-battle"):
        assert main(["replay", str(b / "runs" / task / "trials" / "X-01")]) == 0
    out = tmp_path / "report"
    assert main(["report", str(b), "--output", str(out)]) == 0
    doc = json.loads((out / "tasks.json").read_text())
    assert [t["success_rate"] for t in doc["tasks"]] == [1.0, 1.0, 1.0] and doc["ability_average"] == 1.0
    assert "| rival-battle | run | 1 | 1 | 1.000 |" in (out / "tasks.md").read_text()
    # seed 004's battle rules, verbatim: in the task's every result and in the batch report
    rules = yaml.safe_load((TASKS_DIR / "rival-battle.yaml").read_text())["battle"]
    rival = next(t for t in doc["tasks"] if t["task_id"] == "rival-battle")
    assert rival["battle"]["difficulty"] == rules["difficulty"] == {"enemy_levels": "fixed", "mode": "set"}
    assert result["provenance"]["battle"] == rival["battle"] and rival["battle"]["party_limit"] == 1
    assert "rival-battle's battle rules: party limit 1, level cap none" in (out / "tasks.md").read_text()
    assert "battle" not in next(t for t in doc["tasks"] if t["task_id"] == "leave-house")


def test_verify_finds_a_ledger_that_disagrees_with_the_folders(scripted_batch, tmp_path, capsys):
    b = tmp_path / "b"
    shutil.copytree(scripted_batch, b)
    ledger = json.loads((b / "batch.json").read_text())
    ledger["tasks"][0]["trials"][0]["success"] = False
    (b / "batch.json").write_text(json.dumps(ledger))
    assert main(["verify", str(b)]) == 1
    assert "differ from runs/leave-house's results" in capsys.readouterr().err
    shutil.copytree(scripted_batch, b2 := tmp_path / "b2")
    (b2 / "task-files/reach-lab/task.yaml").write_text("task_id: edited\n")
    assert main(["verify", str(b2)]) == 1
    assert "not the task file the ledger ran" in capsys.readouterr().err


def test_template_task_is_refused_with_one_line(tmp_path, capsys):
    assert main(["tasks", "run", "red-leave-house", "--output", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "is a template" in err and not (tmp_path / "b").exists()


# -- malformed task files (hypothesis), in the style of tests/sessions/preflight/test_fuzz_inputs.py -------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

BASE = yaml.safe_load(RIVAL.read_text())
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
                     st.text(max_size=10), st.sampled_from(["", "bundled:", "/dev/zero", "M4", "GOAL", "a\nb",
                                                            "bundled:../../etc/passwd", "flags1", "bag"]))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["field", "eq", "bit_set", "milestones", "probe", "budget", "failure", "x"]), inner, max_size=3),
    max_leaves=8)
_mutation = st.tuples(st.sampled_from(["delete", "replace", "add"]),
                      st.sampled_from(sorted(BASE) + ["goal.probe", "goal.milestones", "budgets.tokens",
                                                      "start_states.pyboy.sha256", "episodes.budget",
                                                      "battle.party_limit", "battle.pool.species", "battle.team",
                                                      "battle.level_cap", "battle.difficulty"]), _values)


def _mutate(data: dict, mutations) -> dict:
    import copy

    out = copy.deepcopy(data)
    for kind, path, value in mutations:
        *parents, key = path.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        if kind == "delete":
            node.pop(key, None)
        elif kind == "replace" and key in node:
            node[key] = value
        else:
            node[key + ("" if kind == "replace" else "_extra")] = value
    return out


@settings(deadline=3000, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutation, min_size=1, max_size=3), st.booleans())
def test_malformed_task_files_give_one_line_and_write_nothing(mutations, raw_bytes):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "task.yaml"
        shutil.copy(TASKS_DIR / "rival-battle.state", Path(tmp) / "rival-battle.state")
        shutil.copy(TASKS_DIR / "rival-battle.txt", Path(tmp) / "rival-battle.txt")
        shutil.copy(TASKS_DIR / "rival-battle.prefix.txt", Path(tmp) / "rival-battle.prefix.txt")
        text = yaml.safe_dump(_mutate(BASE, mutations))
        path.write_bytes(text.encode()[: len(text) // 2] + b"\xff: [" if raw_bytes else text.encode())
        try:
            load_task(path)
        except TaskError as exc:
            message = str(exc)
            assert message and "\n" not in message and message.isprintable(), repr(message)
            out = Path(tmp) / "batch"
            assert main(["tasks", "run", str(path), "--output", str(out)]) == 2
            assert not out.exists()


# -- episodic tasks (seed 004) ----------------------------------------------------------------------

def test_episodic_rival_battle_scripted_loses_then_wins_and_verifies_and_replays(scripted_batch, tmp_path):
    """The reference loses episode 1 (the failure predicate ends it), wins episode 2 from the restored state."""
    trial = scripted_batch / "runs/rival-battle/trials/X-01"
    result = json.loads((trial / "result.json").read_text())
    assert result["outcome"] == "success"
    assert [(e["episode"], e["ended"], e["goal_reached"]) for e in result["episodes"]] == [
        (1, "failure", False), (2, "final-milestone", True)]
    assert [e["memory_writes"] for e in result["episodes"]] == [["fact-0001"], ["fact-0002"]]
    trace = [json.loads(line) for line in (trial / "trace.jsonl").read_text().splitlines()]
    first = result["episodes"][1]["first_decision"]
    assert trace[first - 2]["episode_end"] == "failure" and trace[first - 1]["episode"] == 2
    assert trace[first - 1]["frame_sha256"] == trace[0]["frame_sha256"]  # the start state again
    out = tmp_path / "r"
    assert main(["report", str(scripted_batch), "--output", str(out)]) == 0
    doc = json.loads((out / "tasks.json").read_text())
    rival = next(t for t in doc["tasks"] if t["task_id"] == "rival-battle")
    assert rival["success_within_episodes"] == [0.0, 1.0, 1.0, 1.0, 1.0]
    md = (out / "tasks.md").read_text()
    assert "X-01 episode 1 (decisions 1-16, ended failure): wrote fact-0001 objective: win the rival battle" in md
    assert "episode 2 (decisions 17-29, ended final-milestone): wrote fact-0002 event: pressing LEFT twice" in md


def test_verify_and_replay_catch_a_forged_episode(scripted_batch, tmp_path, capsys):
    b = tmp_path / "b"
    shutil.copytree(scripted_batch, b)
    trial = b / "runs/rival-battle/trials/X-01"
    result = json.loads((trial / "result.json").read_text())
    result["episodes"][0]["ended"] = "reset"
    (trial / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    assert main(["verify", str(b / "runs/rival-battle")]) == 1
    assert "episodes differ from the episodes of trace.jsonl" in capsys.readouterr().err


def test_random_policy_uses_every_episode_and_the_curve_stays_at_zero(tmp_path):
    out = tmp_path / "b"
    assert main(["tasks", "run", "rival-battle", "--policy", "random", "--seed", "1", "--trials", "2",
                 "--output", str(out)]) == 1
    for trial in sorted((out / "runs/rival-battle/trials").iterdir()):
        result = json.loads((trial / "result.json").read_text())
        assert result["termination_reason"] == "episode-budget" and len(result["episodes"]) == 5
        assert main(["replay", str(trial)]) == 0
    assert main(["verify", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    doc = json.loads((out / "reports/tasks.json").read_text())
    assert doc["tasks"][0]["success_within_episodes"] == [0.0] * 5


def test_model_policy_through_the_demo_server_and_the_token_ceiling(tmp_path, monkeypatch):
    """The model plays through the official openai SDK against the local demo server; the batch's token
    ceiling caps the first task and leaves the second not run."""
    from tests.app.servers.test_demo import _start_server

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    proc, base_url = _start_server()
    try:
        out = tmp_path / "b"
        assert main(["tasks", "run", "rival-battle", "--policy", "model", "--provider", "openai-compatible",
                     "--model", "demo-random", "--base-url", base_url, "--output", str(out)]) == 1
        capped = tmp_path / "capped"
        assert main(["tasks", "run", "rival-battle", "leave-house", "--policy", "model", "--provider",
                     "openai-compatible", "--model", "demo-random", "--base-url", base_url, "--max-tokens", "5000",
                     "--output", str(capped)]) == 1
    finally:
        import signal

        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    result = json.loads(next((out / "runs/rival-battle/trials").glob("*/result.json")).read_text())
    assert result["episodes"] and result["telemetry"]["tokens"] > 0
    assert main(["verify", str(out)]) == 0
    assert main(["replay", str(next((out / "runs/rival-battle/trials").iterdir()))]) == 0
    ledger = json.loads((capped / "batch.json").read_text())
    first, second = ledger["tasks"]
    assert first["status"] == "run" and first["trials"][0]["termination_reason"] == "budget:tokens"
    assert second["status"] == "not-run: ceiling" and ledger["spent_tokens"] >= 5000
    assert main(["verify", str(capped)]) == 0


def test_request_reset_ends_the_episode_and_the_evidence_still_verifies_and_replays(tmp_path):
    """Trial.request_reset(), asked for during decision 3's commit, ends episode 1 with decision 4."""
    from engine.loop.events import DecisionRecorded
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare
    from sessions.tasks.task_batch import TASK_FILES
    from sessions.tasks.tasks import PolicyChoice, write_task_inputs

    task = load_task(RIVAL)
    manifest = write_task_inputs(task, PolicyChoice("scripted"), tmp_path / TASK_FILES / task.id, 1, None, None)
    out = tmp_path / "runs" / task.id
    prepared = prepare(manifest, out)
    runner = None

    class ResetAtThree:
        def handle(self, event):
            if isinstance(event, DecisionRecorded) and event.trace.decision_id == 3:
                runner.current_trial.request_reset()

    runner = ExperimentRunner(prepared, create_folder(prepared, out), sinks=[ResetAtThree()])
    runner.run()
    (result,) = runner.results
    assert (result.episodes[0].ended, result.episodes[0].last_decision) == ("reset", 4)
    assert result.episodes[1].first_decision == 5
    assert main(["verify", str(out)]) == 0
    assert main(["replay", str(out / "trials" / result.trial_key)]) == 0


def test_a_manifest_whose_failure_test_names_an_unknown_field_is_refused_before_anything_is_written(tmp_path,
                                                                                                  capsys):
    from tests.conftest import write_manifest

    path = write_manifest(tmp_path, episodes={"budget": 2, "failure": [{"field": "nosuch", "eq": 3}]})
    out = tmp_path / "exp"
    assert main(["run", str(path), "--headless", "--output", str(out)]) == 2
    assert "episodes.failure: nosuch is not a field" in capsys.readouterr().err and not out.exists()


def test_the_report_lists_battle_rules_and_each_episode_s_team():
    from sessions.tasks.task_batch import report_markdown

    episode = {"episode": 1, "first_decision": 1, "last_decision": 4, "ended": "reset", "memory_writes": [],
               "writes": [], "team": [{"species": "EMBERPUP", "level": None, "moves": [], "item": None}]}
    doc = {"batch_id": "b", "policy": {}, "ceiling": {}, "spent_tokens": None, "spent_cost_usd": None,
           "ability_average": None, "tasks_counted": 0,
           "tasks": [{"task_id": "t", "status": "run", "trials": 1, "valid_trials": 1, "success_rate": 0.0,
                      "battle": {"party_limit": 1, "level_cap": 5, "difficulty": {"mode": "set"},
                                 "pool": {"species": ["EMBERPUP"]}},
                      "episode_budget": 2, "success_within_episodes": [0.0, 0.0],
                      "change_log": {"X-01": [episode, {**episode, "episode": 2, "team": None}]}}]}
    md = report_markdown(doc)
    assert 't\'s battle rules: party limit 1, level cap 5, difficulty {"mode": "set"}' in md
    assert "X-01 episode 1 (decisions 1-4, ended reset): wrote none; team EMBERPUP" in md
    assert "X-01 episode 2 (decisions 1-4, ended reset): wrote none\n" in md  # no team applied: none listed


def test_a_goal_a_track_view_still_reads_is_one_line_exit_2_nothing_written(tmp_path, capsys):
    """A goal on the party's level: the gameplay track's party view reads that memory, so it cannot be
    hidden by dropping a listed field. Once a pydantic traceback from `tasks run` (exit 1, batch begun)."""
    data = yaml.safe_load((TASKS_DIR / "pqa-buy-a-ball.yaml").read_text())
    data["goal"] = {"name": "a level up", "probe": [{"field": "party_level", "ge": 9}]}
    data["reference_script"] = str(TASKS_DIR / data["reference_script"])
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(TaskError, match="tracks.gameplay.party reads the memory of ladder field 'party_level'"):
        load_task(path)
    out = tmp_path / "batch"
    assert main(["tasks", "run", str(path), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "the goal cannot be hidden from" in err and "Traceback" not in err
    assert not out.exists()
