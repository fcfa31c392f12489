"""The shortcut tool (issue 32.2 on the tool server): an agent on the official MCP SDK's client calls
advance_dialogue and choose_move through `oakwatch mcp`, and the loop takes each exactly as it takes a
model reply's `shortcut`: the same presses in the input log, the same frames, the same trace record
(name, argument, expansion); a shortcut the screen does not offer is the agent's invalid output, with
the reason. The tool is listed only where the frozen manifest permits shortcuts."""

from __future__ import annotations

import json

import anyio

from engine.policies.tools import ToolDesk
from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.execute.mcp_server import build_server, exposed_tools
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import prepare
from tests.conftest import read_jsonl
from tests.fakes.provider_server import FakeProviderServer, ok
from tests.sessions.execute.test_mcp_battle import play
from tests.sessions.execute.test_mcp_server import mcp_manifest, result_of
from tests.sessions.execute.test_shortcuts import WALK_TO_PROFESSOR, _manifest, answer

PERMITTED = ["advance_dialogue", "choose_move"]
ADVANCE = {"name": "advance_dialogue"}
FIGHT = {"name": "choose_move", "argument": "LEAF JAB"}
# One agent's decisions, as (buttons or a shortcut): walk to the professor, a choose_move the screen does
# not offer (refused: retried within its decision by the advance_dialogue after it), his pages, the left
# ball, YES, KIT's challenge and the battle, fought by choose_move with the text between advanced.
DECISIONS = ([WALK_TO_PROFESSOR[i:i + 3] for i in range(0, len(WALK_TO_PROFESSOR), 3)]
             + [FIGHT, ADVANCE, ["LEFT", "UP", "A"], ["A"], ADVANCE] + [FIGHT, ADVANCE] * 4)
BUDGET = len(DECISIONS)  # model calls, the refused one included: the last call ends the trial


def _reply_run(tmp_path):
    """The decisions as a model's replies (the fake provider): the path the tool must match."""
    replies = [answer(d) if isinstance(d, list) else answer(shortcut={"argument": None} | d) for d in DECISIONS]
    with FakeProviderServer() as server:
        server.script(*[ok(r) for r in replies])
        out = tmp_path / "reply"
        prepared = prepare(_manifest(tmp_path, server, PERMITTED, decisions=BUDGET), out)
        runner = ExperimentRunner(prepared, create_folder(prepared, out))
        runner.run()
    return out / "trials" / runner.results[0].trial_key


def test_a_shortcut_call_presses_what_a_replys_shortcut_presses_and_replays(tmp_path):
    plan = [{"tool": "press_keys", "args": {"keys": d}} if isinstance(d, list) else {"tool": "shortcut", "args": d}
            for d in DECISIONS]
    manifest = mcp_manifest(tmp_path, agent={"shortcuts": PERMITTED, "max_actions_per_decision": 3},
                            budgets={"model_decisions": BUDGET})
    seen = play(tmp_path, manifest, plan)
    assert seen["tools"] == ["get_screen", "press_keys", "shortcut"]
    assert "mechanical shortcuts" in seen["instructions"]
    calls = seen["calls"]
    refused = [c for c in calls if c["error"]]
    assert len(refused) == 1 and refused[0]["tool"] == "shortcut"
    assert "charged as an invalid output of decision" in refused[0]["result"]
    assert "choose_move: not available on this screen" in refused[0]["result"]
    taken = [c for c in calls if c["tool"] == "shortcut" and not c["error"]]
    assert taken and all(c["result"]["pressed"] == c["result"]["shortcut"]["expansion"] for c in taken)
    assert max(len(c["result"]["pressed"]) for c in taken) > 3  # past the per-decision limit of 3
    assert calls[-1]["result"]["trial_over"] and calls[-1]["result"]["ending"] == "budget:model_decisions"

    result, trial = result_of(tmp_path / "out")
    assert result["provenance"]["shortcuts"] == PERMITTED
    assert result["provenance"]["tool_server"]["tools"] == ["get_screen", "press_keys", "shortcut"]
    assert result["milestones_reached"][:4] == ["M1", "M2", "M3", "M4"]  # the battle won through choose_move
    trace, inputs = read_jsonl(trial / "trace.jsonl"), read_jsonl(trial / "inputs.jsonl")
    called = [line for line in trace if "shortcut" in line]
    for line in called:  # each press in the input log, and the shortcut's record in the trace
        assert [i["action"] for i in inputs if i["decision_id"] == line["decision_id"]] == \
            line["shortcut"]["expansion"]
        assert line["parsed_actions"] == []
    # the refused call: logged as sent, charged, with the loop's reason
    attempts = [a for r in read_jsonl(trial / "responses.jsonl") for a in r["attempts"]]
    bad = [a for a in attempts if not a["valid"]]
    assert len(bad) == 1 and bad[0]["reply"]["arguments"] == FIGHT and bad[0]["reply"]["tool"] == "shortcut"
    assert "choose_move: not available on this screen" in bad[0]["error"]
    assert result["telemetry"]["invalid_outputs"] == 1
    assert verify_experiment(tmp_path / "out") == []
    replay_trial(trial)  # the input log alone gives every frame again

    # the same decisions as a model's replies: the same presses, frames and shortcut records
    reply_trial = _reply_run(tmp_path)
    reply_trace = read_jsonl(reply_trial / "trace.jsonl")
    assert [i["action"] for i in read_jsonl(reply_trial / "inputs.jsonl")] == [i["action"] for i in inputs]
    assert [t["result_frame_sha256"] for t in reply_trace] == [t["result_frame_sha256"] for t in trace]
    assert [t.get("shortcut") for t in reply_trace] == [t.get("shortcut") for t in trace]


def _listed(shortcuts: tuple[str, ...]) -> tuple[list[str], dict]:
    server = build_server(ToolDesk(), ruleset="human", image_scale=1, allowed=("A", "B"), max_actions=2,
                          press_frames=4, settle_frames=12, instruction=None, shortcuts=shortcuts)

    async def listing():
        return await exposed_tools(server), {t.name: t for t in await server.list_tools()}

    return anyio.run(listing)


def test_the_shortcut_tool_is_listed_only_where_the_manifest_permits_shortcuts():
    names, _ = _listed(())
    assert names == ["get_screen", "press_keys"]
    names, tools = _listed(("advance_dialogue",))
    assert names == ["get_screen", "press_keys", "shortcut"]
    tool = tools["shortcut"]
    assert "advance_dialogue (no argument" in tool.description and "choose_move" not in tool.description
    schema = tool.input_schema
    assert schema["properties"]["name"]["enum"] == ["advance_dialogue"] and schema["required"] == ["name"]
    assert "default" not in json.dumps(schema)  # optional arguments are left out (portable schemas)

