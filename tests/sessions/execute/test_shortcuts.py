"""Mechanical shortcuts (issue 32.2) on the real cartridge in PyBoy: a model (behind the fake provider
server) calls advance_dialogue and choose_move; each is pressed as real controller input, every press
in the input log, the name and expansion in the trace, the permissions in the result; replay of the
input log gives the same frames; a shortcut the game lacks or the screen does not offer is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from tests.conftest import read_jsonl
from tests.fakes.provider_server import FakeProviderServer, ok

WALK_TO_PROFESSOR = ["RIGHT"] * 6 + ["UP"] * 3 + ["DOWN"] * 9 + ["RIGHT"] * 6 + ["UP"] * 5  # walkthrough.txt


def answer(actions: list[str] | None = None, shortcut: dict | None = None) -> dict:
    reply = {"reasoning_summary": "on", "observed": {"screen": "overworld", "location_guess": "town",
                                                     "objective_guess": "", "certainty": 0.5},
             "memory_read": [], "memory_write": [], "actions": actions or []}
    if shortcut is not None:
        reply["shortcut"] = shortcut
    return reply


def _manifest(tmp_path: Path, server, shortcuts: list[str], decisions: int = 40, context: dict | None = None) -> Path:
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    if context is not None:
        data["agent"]["context"] = context
    data["agent"].update(shortcuts=shortcuts, information_track="gameplay", max_actions_per_decision=3)
    data["budgets"].update(model_decisions=decisions)
    data["trials"]["per_condition"] = 1
    data["conditions"] = [{"id": "agent", "policy": "model", "provider": "openai-compatible", "model": "m",
                           "base_url": server.base_url("chat"),
                           "request": {"timeout_seconds": 5, "max_attempts": 2, "backoff_seconds": 0.01,
                                       "backoff_cap_seconds": 0.1}}]
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_shortcuts_press_real_input_that_replays_to_the_same_frames(tmp_path):
    walk = [WALK_TO_PROFESSOR[i:i + 3] for i in range(0, len(WALK_TO_PROFESSOR), 3)]
    advance = {"name": "advance_dialogue", "argument": None}
    fight = {"name": "choose_move", "argument": "LEAF JAB"}
    replies = [*(answer(c) for c in walk),
               answer(shortcut=fight),  # refused: no battle menu on screen (an invalid output, retried)
               answer(shortcut=advance),  # the professor's pages, the warp to the lab, his last page
               answer(["LEFT", "UP", "A"]), answer(["A"]),  # the left ball, YES
               answer(shortcut=advance),  # received, KIT picks, KIT challenges, the battle's intro
               *[r for _ in range(6) for r in (answer(shortcut=fight), answer(shortcut=advance))]]
    with FakeProviderServer() as server:
        server.script(*[ok(r) for r in replies])
        out = tmp_path / "out"
        prepared = prepare(_manifest(tmp_path, server, ["advance_dialogue", "choose_move"],
                                     decisions=len(replies) - 1,
                                     context={"segment_turns": 4, "notebook_chars": 100}), out)
        runner = ExperimentRunner(prepared, create_folder(prepared, out))
        runner.run()
        sent = [json.loads(r.body) for r in server.state.requests]
    (result,) = runner.results
    trial = out / "trials" / result.trial_key
    trace, inputs = read_jsonl(trial / "trace.jsonl"), read_jsonl(trial / "inputs.jsonl")
    assert result.provenance["shortcuts"] == ["advance_dialogue", "choose_move"]
    called = [line for line in trace if "shortcut" in line]
    assert called, "no shortcut was taken"
    for line in called:
        pressed = [i["action"] for i in inputs if i["decision_id"] == line["decision_id"]]
        assert pressed == line["shortcut"]["expansion"] and pressed  # each press in the input log
        assert line["parsed_actions"] == []
    first = called[0]
    assert first["shortcut"]["name"] == "advance_dialogue" and set(first["shortcut"]["expansion"]) == {"A"}
    assert max(len(c["shortcut"]["expansion"]) for c in called) > 3  # beyond a decision's own limit of 3
    moves = [c for c in called if c["shortcut"]["name"] == "choose_move"]
    assert moves and moves[0]["shortcut"]["expansion"][-1] == "A"
    assert moves[0]["shortcut"]["argument"] == "LEAF JAB"
    # the refused call was charged as an invalid output, and the retry told why
    refused = next(line for line in trace if line["invalid_output"])
    assert refused["attempts"] == 2
    assert any("choose_move: not available on this screen" in json.dumps(body) for body in sent)
    # the schema sent offers exactly the permitted shortcuts, and the prompt says how to call them
    schema = sent[0]["response_format"]["json_schema"]["schema"]
    assert "shortcut" in schema["properties"] and "advance_dialogue" in json.dumps(schema["properties"]["shortcut"])
    assert "Shortcuts you may give instead of actions" in json.dumps(sent[0])
    assert result.milestones_reached[:4] == ["M1", "M2", "M3", "M4"]  # the battle was won through choose_move
    assert verify_experiment(out) == []
    replay_trial(trial)  # every frame of every press again, from the input log alone
    # the gameplay track reached the prompt: the full party at each segment's first request, changes after
    turns = [_gameplay_view(body) for body in sent]
    assert all(view is not None and "terrain" in view and "action_results" in view for view in turns)
    for n, view in enumerate(turns):
        if n % 4 == 0:  # a segment's first request (segments of 4 answered calls, a rejected one included)
            assert "party" in view and "party_changes" not in view
    hurt = [c for view in turns for c in view.get("party_changes", []) if "hp" in c]
    assert hurt and all(set(c) <= {"slot", "hp", "status", "moves"} for c in hurt)  # the battle's HP, as changes


def _gameplay_view(body: dict) -> dict | None:
    content = body["messages"][-1]["content"]
    text = "\n".join(part["text"] for part in content if part["type"] == "text")
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line == "The game's state as read for you (gameplay track):":
            return json.loads(lines[i + 1])
    return None


def test_a_shortcut_the_game_does_not_define_is_refused_before_anything_is_written(tmp_path):
    with FakeProviderServer() as server:
        with pytest.raises(PreflightError) as info:
            prepare(_manifest(tmp_path, server, ["use_item"]), tmp_path / "out")
    message = str(info.value)
    assert "agent.shortcuts" in message and "use_item is not a shortcut" in message and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_a_task_permitting_a_shortcut_its_game_lacks_is_one_line(tmp_path):
    from sessions.tasks.tasks import TaskError, load_task

    text = (ASSETS / "tasks" / "leave-house.yaml").read_text(encoding="utf-8")
    text = text.replace("experiment: bundled:", "experiment: " + str(ASSETS / "experiments") + "/")
    path = tmp_path / "task.yaml"
    path.write_text(text + "\nshortcuts: [advance_dialogue, switch_to]\n")
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert "shortcuts: switch_to is not a shortcut parcel-quest defines" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_task_freezes_its_shortcuts_and_track_in_the_manifest_it_compiles_to(tmp_path):
    from sessions.tasks.tasks import PolicyChoice, derived_game, load_task, task_manifest

    text = (ASSETS / "tasks" / "reach-lab.yaml").read_text(encoding="utf-8")
    text = text.replace("experiment: bundled:", "experiment: " + str(ASSETS / "experiments") + "/")
    text = text.replace("track: visual", "track: gameplay")
    path = tmp_path / "task.yaml"
    path.write_text(text + "\nshortcuts: [advance_dialogue]\n")
    task = load_task(path)
    manifest = task_manifest(task, PolicyChoice("scripted"), "bundled:parcel-quest.yaml", 1, None, None)
    assert manifest.agent.shortcuts == ["advance_dialogue"] and manifest.agent.information_track == "gameplay"
    assert "shortcuts" in manifest.canonical_json()
    # the goal reads map_id (the position): the derived track keeps its parts but not the press results
    gameplay = derived_game(task.file, task.game).tracks.gameplay
    assert gameplay.outcomes is None and gameplay.terrain is not None and "map_id" not in gameplay.fields
