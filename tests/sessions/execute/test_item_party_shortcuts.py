"""use_item and switch_to (issue 32 item 2) on the GBA cartridge in mGBA, through the pqa-catch-two task: a
model (behind the fake provider server) throws a BALL with use_item and shifts critters with switch_to; each
is pressed as real controller input (every press in the input log), the name and expansion are in the
trace, the permissions in the result, and replaying the input log gives the same frames. A call the moment
cannot take (a slot beyond the party) is refused and retried; a task permitting a shortcut its game lacks is
one line before anything is written."""

from __future__ import annotations

import json

import pytest

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import ASSETS
from sessions.preflight.experiment import prepare
from sessions.tasks.tasks import PolicyChoice, TaskError, load_task, write_task_inputs
from tests.conftest import read_jsonl
from tests.fakes.provider_server import FakeProviderServer, ok
from tests.sessions.execute.test_shortcuts import _gameplay_view, answer

TASK = ASSETS / "tasks" / "pqa-catch-two.yaml"
TO_GRASS = ["DOWN"] * 8 + ["LEFT"] * 6 + ["UP"] * 12 + ["LEFT"] * 3 + ["LEFT", "RIGHT"] * 3  # catch.txt


def _chunks(presses: list[str]) -> list[dict]:
    return [answer(presses[i:i + 4]) for i in range(0, len(presses), 4)]


def test_use_item_and_switch_to_press_real_input_that_replays_to_the_same_frames(tmp_path):
    ball = {"name": "use_item", "argument": "POKE BALL"}
    replies = [*_chunks(TO_GRASS), answer(["A", "A"]),  # the first wild critter, its intro: the action menu
               answer(shortcut={"name": "switch_to", "argument": 2}),  # refused: a party of one
               answer(shortcut=ball), answer(["A", "A"]),  # caught (party 2), back on the path
               answer(["LEFT", "RIGHT", "LEFT", "RIGHT"]), answer(["A", "A"]),  # the next one
               answer(shortcut={"name": "switch_to", "argument": 2}), answer(["A", "A", "A"]),  # shift to slot 2
               answer(shortcut={"name": "switch_to", "argument": 1}), answer(["A", "A", "A"]),  # and back
               answer(shortcut=ball)]  # party 3: the goal
    task = load_task(TASK)
    with FakeProviderServer() as server:
        server.script(*[ok(r) for r in replies])
        choice = PolicyChoice("model", provider="openai-compatible", model="m", base_url=server.base_url("chat"))
        manifest = write_task_inputs(task, choice, tmp_path / "inputs" / "pqa-catch-two", 1, None, None)
        out = tmp_path / "inputs" / "run"
        prepared = prepare(manifest, out)
        runner = ExperimentRunner(prepared, create_folder(prepared, out))
        runner.run()
        sent = [json.loads(r.body) for r in server.state.requests]
    (result,) = runner.results
    trial = out / "trials" / result.trial_key
    trace, inputs = read_jsonl(trial / "trace.jsonl"), read_jsonl(trial / "inputs.jsonl")
    assert result.provenance["shortcuts"] == ["use_item", "switch_to"]
    assert result.milestones_reached[-1] == "GOAL"  # two critters caught through use_item
    called = [line for line in trace if "shortcut" in line]
    for line in called:
        pressed = [i["action"] for i in inputs if i["decision_id"] == line["decision_id"]]
        assert pressed == line["shortcut"]["expansion"] and pressed  # each press in the input log
        assert line["parsed_actions"] == []
    made = [(c["shortcut"]["name"], c["shortcut"]["argument"], c["shortcut"]["expansion"]) for c in called]
    assert made == [("use_item", "POKE BALL", ["UP", "RIGHT", "A"]),
                    ("switch_to", 2, ["LEFT", "DOWN", "A", "DOWN", "A", "A"]),  # PARTY, row 2, SHIFT
                    # the battle's order is now slot 2 first: slot 1 is the list's second row
                    ("switch_to", 1, ["LEFT", "A", "DOWN", "A", "A"]),
                    ("use_item", "POKE BALL", ["UP", "RIGHT", "A"])]
    refused = next(line for line in trace if line["invalid_output"])
    assert refused["attempts"] == 2
    assert any("switch_to: argument is a party slot from 1 to 1" in json.dumps(body) for body in sent)
    assert "use_item (argument: an item name in your inventory)" in json.dumps(sent[0])
    assert verify_experiment(out) == []
    replay_trial(trial)  # every frame of every press again, from the input log alone
    view = _gameplay_view(sent[-1])
    assert view["inventory"] == [{"item": "POKE BALL", "quantity": 4}]  # read through the key, in the moving block
    assert [m["species"] for m in view["party"]][:2] == ["SPROUTLE", "PIPWING"]  # the cartridge's own names


@pytest.mark.parametrize("name", ["use_item", "switch_to"])
def test_a_task_permitting_a_shortcut_its_game_lacks_is_one_line(tmp_path, name):
    text = (ASSETS / "tasks" / "reach-lab.yaml").read_text(encoding="utf-8")
    text = text.replace("experiment: bundled:", "experiment: " + str(ASSETS / "experiments") + "/")
    path = tmp_path / "task.yaml"
    path.write_text(text + f"\nshortcuts: [{name}]\n")
    with pytest.raises(TaskError) as info:
        load_task(path)
    assert f"shortcuts: {name} is not a shortcut parcel-quest defines" in str(info.value)
    assert "\n" not in str(info.value)


def test_the_task_command_refuses_such_a_task_in_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    from app.cli import main

    text = (ASSETS / "tasks" / "reach-lab.yaml").read_text(encoding="utf-8")
    text = text.replace("experiment: bundled:", "experiment: " + str(ASSETS / "experiments") + "/")
    path = tmp_path / "task.yaml"
    path.write_text(text + "\nshortcuts: [use_item]\n")
    out = tmp_path / "out"
    assert main(["tasks", "run", str(path), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "use_item is not a shortcut parcel-quest defines" in err and "\n" not in err
    assert not out.exists()
