"""`oakwatch export DIR --format inspect`: each trial as an Inspect AI eval log, read back with
inspect_ai's own reader. Real runs: the bundled dry-run (scripted, to the Dex), a model through
its SDK against a local fake provider (the network edge), one of whose replies reports no usage, and
an agent playing through `oakwatch mcp` with the MCP SDK's own client (its tool calls, not a reply)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS
from tests.conftest import read_jsonl, run_experiment, write_manifest
from tests.fakes.provider_server import FakeProviderServer, ok
from tests.sessions.execute.test_mcp_server import mcp_manifest, play_stdio

read_eval_log = pytest.importorskip("inspect_ai.log").read_eval_log
WALK = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")
PRICES = ASSETS / "pricing" / "prices-2026-11-30.yaml"
CHAIN = {"prev_sha256", "response_sha256", "inputs_sha256", "memory_sha256"}  # the evidence's own links
PRICING = {"file": "bundled:prices-2026-11-30.yaml", "sha256": hashlib.sha256(PRICES.read_bytes()).hexdigest()}


def answer(actions: list[str], n: int) -> dict:
    return {"reasoning_summary": f"step {n}", "memory_read": [],
            "observed": {"screen": "overworld", "location_guess": "house", "objective_guess": "leave",
                         "certainty": 0.8},
            "memory_write": [], "actions": actions}


def export(folder: Path, out: Path) -> int:
    return main(["export", str(folder), "--format", "inspect", "--output", str(out)])


def sample_of(out: Path, name: str):
    log = read_eval_log(str(out / f"{name}.eval"), resolve_attachments=True)
    assert len(log.samples) == 1
    return log, log.samples[0]


def model_condition(server, **extra) -> dict:
    return {"id": "agent", "policy": "model", "provider": "openai-compatible", "model": "local-llama",
            "base_url": server.base_url("chat"),
            "request": {"timeout_seconds": 5, "max_attempts": 2, "backoff_seconds": 0.01,
                        "backoff_cap_seconds": 0.1}, **extra}


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory):
    """A valid model trial (game-failure at its action budget) whose third reply reports no usage, and an
    invalid one (a reply without usage under a cost budget: invalid-provider, usage-unknown)."""
    tmp = tmp_path_factory.mktemp("inspect-model")
    chunks = [WALK[i:i + 4] for i in range(0, 16, 4)]
    with FakeProviderServer() as server:
        server.script(*[ok(answer(c, n), usage=None) if n == 2 else ok(answer(c, n), model="local-llama-2026")
                        for n, c in enumerate(chunks)])
        manifest = write_manifest(tmp, conditions=[model_condition(server)],
                                  budgets={"accepted_actions": 16, "model_decisions": None,
                                           "wall_time_minutes": None})
        valid, _, (valid_result,) = run_experiment(manifest, tmp / "valid")
    tmp2 = tmp / "second"
    tmp2.mkdir()
    with FakeProviderServer() as server:
        server.script(ok(answer(["A"], 0), usage=None), ok(answer(["A"], 1)))
        manifest = write_manifest(tmp2, conditions=[model_condition(server, provider="openai", model="gpt-5.4",
                                                                    api_key_env="OAKWATCH_TEST_KEY",
                                                                    pricing=PRICING)],
                                  budgets={"accepted_actions": 10, "total_cost_usd": 1.0})
        with pytest.MonkeyPatch.context() as env:
            env.setenv("OAKWATCH_TEST_KEY", "sk-test-not-a-real-key-0000")
            invalid, _, (invalid_result,) = run_experiment(manifest, tmp2 / "invalid")
    assert (valid_result.outcome, valid_result.termination_reason) == ("game-failure", "budget:accepted_actions")
    assert (invalid_result.outcome, invalid_result.invalid_cause) == ("invalid-provider", "usage-unknown")
    return valid, valid_result, invalid, invalid_result


# -- a scripted trial to the Dex ------------------------------------------------------------------

def test_the_dry_run_reads_back_with_its_outcome_milestones_scores_and_every_decision(dry_run, tmp_path, capsys):
    folder, _, (result,) = dry_run
    out = tmp_path / "inspect"
    assert export(folder, out) == 0
    assert "1 trial(s) written" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == [f"{result.trial_key}.eval"]
    log, sample = sample_of(out, result.trial_key)
    assert log.status == "success" and log.error is None
    assert log.eval.task == result.experiment_id and log.eval.model == "oakwatch/scripted"
    assert sample.id == result.trial_key and sample.target == "M8"
    assert sample.metadata["outcome"] == "success" and sample.metadata["termination_reason"] == "final-milestone"
    assert sample.scores["success"].value == 1
    assert sample.scores["progress"].value == result.progress_points == 20
    assert sample.scores["milestones"].value == {f"M{i}": 1 for i in range(1, 9)}
    assert {s.name: next(iter(s.metrics.values())).value for s in log.results.scores} == {"success": 1.0,
                                                                                          "progress": 20.0}
    trial = folder / "trials" / result.trial_key
    trace = read_jsonl(trial / "trace.jsonl")
    responses = read_jsonl(trial / "responses.jsonl")
    # one user/assistant pair per decision; the assistant's text is the recorded raw response
    assert len(sample.messages) == 2 * len(trace) == 2 * result.last_decision
    for n, (user, reply) in enumerate(zip(sample.messages[::2], sample.messages[1::2], strict=True), 1):
        assert user.role == "user" and trace[n - 1]["frame_sha256"] in user.text
        assert reply.role == "assistant" and reply.text == responses[n - 1]["attempts"][-1]["raw"]
        assert reply.metadata["parsed_actions"] == trace[n - 1]["parsed_actions"]
    # every decision is a span holding its trace line; each award is a score event where it was reached
    spans = [e for e in sample.events if e.event == "span_begin"]
    assert [e.name for e in spans] == [f"decision {n}" for n in range(1, len(trace) + 1)]
    lines = [e.data for e in sample.events if e.event == "info" and e.source == "oakwatch/trace"]
    assert lines == [{k: v for k, v in t.items() if k not in CHAIN} for t in trace]
    awarded = [(e.span_id, e.score.answer) for e in sample.events if e.event == "score" and e.intermediate]
    assert awarded == [(f"decision-{m.decision_id}", m.id) for m in result.milestones]
    # a scripted policy made no model call: no ModelUsage, and the measured zeros stay zeros in the metadata
    assert sample.model_usage == {} and not [e for e in sample.events if e.event == "model"]
    assert sample.metadata["usage"]["input_tokens"] == 0 and sample.metadata["usage"]["cost_source"] is None


# -- model trials: usage with its nulls, and an invalid trial -------------------------------------

def test_a_model_trial_keeps_unknown_usage_missing_and_each_call_as_a_model_event(model_runs, tmp_path):
    folder, result, _, _ = model_runs
    out = tmp_path / "inspect"
    assert export(folder, out) == 0
    log, sample = sample_of(out, result.trial_key)
    assert log.status == "success" and log.eval.model == "openai-compatible/local-llama"
    assert sample.scores["success"].value == 0 and sample.metadata["outcome"] == "game-failure"
    assert sample.limit is not None and (sample.limit.limit, sample.limit.reason) == (16, "budget:accepted_actions")
    # one reply had no usage: the trial's tokens are unknown, so no ModelUsage (whose counts would read 0)
    assert result.telemetry.input_tokens is None
    assert sample.model_usage == {} and log.stats.model_usage == {}
    assert sample.metadata["usage"]["input_tokens"] is None and sample.metadata["usage"]["tokens"] is None
    trace = read_jsonl(folder / "trials" / result.trial_key / "trace.jsonl")
    calls = [e for e in sample.events if e.event == "model"]
    assert len(calls) == len(trace) == 4
    for call, line in zip(calls, trace, strict=True):
        if line["input_tokens"] is None:  # the reply without usage
            assert call.output.usage is None and call.metadata["usage"]["input_tokens"] is None
        else:
            assert (call.output.usage.input_tokens, call.output.usage.output_tokens) == (
                line["input_tokens"], line["output_tokens"])
    responses = read_jsonl(folder / "trials" / result.trial_key / "responses.jsonl")
    assert [c.output.completion for c in calls] == [r["attempts"][-1]["raw"] for r in responses]
    assert json.loads(calls[0].output.completion)["reasoning_summary"] == "step 0"
    assert [line["input_tokens"] is None for line in trace] == [False, False, True, False]
    # the model was shown each screen: the user message holds it, the PNG it was sent, losslessly
    users = [m for m in sample.messages if m.role == "user"]
    assert [pixels_sha256(image_of(u)[0]) for u in users] == [line["frame_sha256"] for line in trace]


def test_an_invalid_trial_is_an_error_log_with_no_success_score(model_runs, tmp_path):
    _, _, folder, result = model_runs
    out = tmp_path / "inspect"
    assert export(folder, out) == 0
    # the invalid attempt voided its block: it is exported from void-1/, tagged so
    assert sorted(p.name for p in out.iterdir()) == [f"void-1-{result.trial_key}.eval"]
    log, sample = sample_of(out, f"void-1-{result.trial_key}")
    assert "voided" in log.eval.tags and sample.metadata["evidence"] == f"void-1/{result.trial_key}"
    assert log.status == "error" and "usage-unknown" in log.error.message
    assert sample.error is not None and "invalid-provider" in sample.error.message
    assert "success" not in sample.scores  # nothing measured about the agent: not a 0
    assert [s.name for s in log.results.scores] == ["progress"]
    assert sample.model_usage == {} and sample.metadata["usage"]["cost_usd"] is None


# -- a tool-server trial: the agent's tool calls and the screens it was served ----------------------

def image_of(message) -> list[bytes]:
    """The PNG bytes of every image in a message (data URIs: the attachments resolved)."""
    found = []
    for part in message.content if isinstance(message.content, list) else []:
        if part.type == "image":
            head, _, data = part.image.partition(",")
            assert head == "data:image/png;base64"
            found.append(base64.b64decode(data))
    return found


def pixels_sha256(png: bytes) -> str:
    """The pixel SHA-256 of the frame an enlarged screen shows (each pixel a square block)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        assert image.format == "PNG"
        rgb = np.asarray(image.convert("RGB"))
    scale = rgb.shape[1] // 160  # the Game Boy's screen, enlarged by agent.image_scale
    return hashlib.sha256(np.ascontiguousarray(rgb[::scale, ::scale]).data).hexdigest()


@pytest.fixture(scope="module")
def mcp_run(tmp_path_factory):
    """An agent through `oakwatch mcp` over stdio: one rejected press_keys (a button the game lacks), then
    get_screen and press_keys per decision until the action budget ends the trial."""
    tmp = tmp_path_factory.mktemp("inspect-mcp")
    play_stdio(tmp, mcp_manifest(tmp, budgets={"accepted_actions": 12}), "--bad-first")
    return tmp / "out"


def test_a_tool_server_trial_is_its_tool_calls_and_screens_and_no_invented_reply(mcp_run, tmp_path):
    out = tmp_path / "inspect"
    assert export(mcp_run, out) == 0
    log, sample = sample_of(out, "X-01")
    trial = mcp_run / "trials" / "X-01"
    trace = read_jsonl(trial / "trace.jsonl")
    responses = read_jsonl(trial / "responses.jsonl")
    # what the server received, in order: per attempt its screens, then the call that was the decision
    received = [(c["tool"], c.get("arguments", {})) for r in responses for a in r["attempts"]
                for c in [*a["reply"]["screens"], a["reply"]]]
    assistants = [m for m in sample.messages if m.role == "assistant"]
    assert [(m.tool_calls[0].function, m.tool_calls[0].arguments) for m in assistants] == received
    assert received[0] == ("press_keys", {"keys": ["JUMP"]}) and ("get_screen", {}) in received
    # no message was invented: every assistant message is one tool call and says nothing; no model call
    assert all(len(m.tool_calls) == 1 and m.text == "" for m in assistants)
    assert not [m for m in sample.messages if m.role in ("user", "system")]
    assert not [e for e in sample.events if e.event == "model"]
    dumped = json.dumps([m.model_dump(mode="json") for m in sample.messages])
    assert "tool call" not in dumped and "certainty" not in dumped
    for event in (e for e in sample.events if e.event == "info" and e.source == "oakwatch/trace"):
        assert "reasoning_summary" not in event.data and "observed" not in event.data
    # each call is answered: the rejected one with the loop's reason as an error, the rest as the server did
    tools = [m for m in sample.messages if m.role == "tool"]
    assert [t.tool_call_id for t in tools] == [m.tool_calls[0].id for m in assistants]
    assert tools[0].error is not None and "charged as an invalid output of decision 1" in tools[0].text
    presses = [json.loads(t.text) for t in tools if t.function == "press_keys" and t.error is None]
    assert [p["decision_id"] for p in presses] == [line["decision_id"] for line in trace]
    inputs = read_jsonl(trial / "inputs.jsonl")
    assert [p["pressed"] for p in presses] == [[i["action"] for i in inputs if i["decision_id"] == line["decision_id"]]
                                               for line in trace]
    assert presses[-1]["ending"] == "budget:accepted_actions" and presses[-1]["trial_over"] is True
    # the screens it was served, as images: the very bytes (their recorded SHA-256), the frame's pixels
    served = [s for r in responses for a in r["attempts"] for s in a["reply"]["screens"]]
    shown = [m for m in tools if m.function == "get_screen"]
    assert len(shown) == len(served) == len(trace)
    for message, screen in zip(shown, served, strict=True):
        (png,) = image_of(message)
        assert hashlib.sha256(png).hexdigest() == screen["png_sha256"]
        assert pixels_sha256(png) == screen["frame_sha256"]
    # the calls are in the transcript too, one ToolEvent each in its decision's span
    tool_events = [e for e in sample.events if e.event == "tool"]
    assert [(e.function, e.span_id) for e in tool_events] == [
        (c["tool"], f"decision-{r['decision_id']}") for r in responses for a in r["attempts"]
        for c in [*a["reply"]["screens"], a["reply"]]]
    # tokens unknown to the server: no ModelUsage anywhere (its counts would read 0), nulls in the metadata
    assert sample.model_usage == {} and log.stats.model_usage == {}
    assert sample.metadata["usage"]["input_tokens"] is None and sample.metadata["usage"]["cost_usd"] is None


# -- bad input: one line, exit 2, nothing written -------------------------------------------------

def test_refusals_write_nothing(dry_run, tmp_path, capsys):
    folder = dry_run[0]
    assert main(["export", str(folder), "--format", "inspect"]) == 2
    assert "needs --output" in capsys.readouterr().err
    assert main(["export", str(folder), "--format", "inspect", "--for-annotators", "--output",
                 str(tmp_path / "blind")]) == 2 and not (tmp_path / "blind").exists()
    (tmp_path / "taken").mkdir()
    assert export(folder, tmp_path / "taken") == 2 and list((tmp_path / "taken").iterdir()) == []
    assert export(tmp_path, tmp_path / "new") == 2 and not (tmp_path / "new").exists()
    assert "not an oakwatch evidence folder" in capsys.readouterr().err


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["trace.jsonl", "responses.jsonl", "result.json", "trial.json"]),
       junk=st.binary(max_size=200))
def test_a_malformed_trial_file_is_named_in_one_line_and_nothing_is_written(dry_run, tmp_path_factory, name, junk,
                                                                            capsys):
    tmp = tmp_path_factory.mktemp("bad")
    folder = tmp / "exp"
    shutil.copytree(dry_run[0], folder)
    key = dry_run[2][0].trial_key
    path = folder / "trials" / key / name
    if name.endswith(".jsonl"):  # a bad line among good ones
        lines = path.read_bytes().splitlines(keepends=True)
        lines[len(lines) // 2] = junk.replace(b"\n", b"") + b"\n"
        path.write_bytes(b"".join(lines))
    else:
        path.write_bytes(junk)
    capsys.readouterr()
    assert export(folder, tmp / "out") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"{key}/{name}" in err and "Traceback" not in err
    assert not (tmp / "out").exists() and [p.name for p in tmp.iterdir()] == ["exp"]
