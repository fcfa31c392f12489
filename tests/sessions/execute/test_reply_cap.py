"""The cap on a stored provider reply (manifest agent.max_reply_bytes), end to end: models play the
cartridge through the official SDKs against the local fake of each wire format, which answers far
over the cap. The read stops at the cap, the attempt is an invalid output kept by size and digest,
the run goes on under the contract's retry rule, the folder stays small and verifies."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from engine.loop.records import ResponseLine, TraceLine
from sessions.audit.verify import Report, _check_response, verify_experiment
from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.conftest import find_trial, read_jsonl, write_manifest
from tests.fakes.provider_server import FakeProviderServer, ok, oversized
from tests.sessions.execute.test_model_runs import KEY, answer, model_condition, run

CAP = 64 * 1024
HUGE = 16_000_000  # a model's runaway reply, 244 times the cap
NETWORK_READ = 64 * 1024  # the most one socket read hands the SDK (httpcore reads 64 KiB at a time)
PROVIDERS = ["openai-compatible", "anthropic"]  # the two wire formats: Chat Completions and Messages


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def agent(**changes) -> dict:
    section = yaml.safe_load(DEFAULT_MANIFEST.read_text())["agent"]
    return {**section, "max_reply_bytes": CAP, **changes}


def folder_bytes(root) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def kinds(attempts: list[dict]) -> list[str]:
    return ["valid" if a["valid"] else "oversized" if a["oversize"] else a["failure"] or "invalid" for a in attempts]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_replies_far_over_the_cap_are_invalid_outputs_kept_by_size_and_digest(tmp_path, server, monkeypatch,
                                                                              provider):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    # Decision 1: two runaway replies (one declaring its size, one chunked without a size) use up the
    # contract's one retry; decision 2 answers and the action budget ends the trial.
    server.script(oversized(HUGE), oversized(HUGE, framing="chunked"), ok(answer(["A"])))
    out, summary, (r,) = run(tmp_path, model_condition(server, provider), agent=agent(),
                             budgets={"accepted_actions": 1, "model_decisions": None})
    assert (r.outcome, r.termination_reason) == ("game-failure", "budget:accepted_actions"), r.error
    assert len(server.requests) == 3  # the run went on: the retry, then the next decision
    trial = find_trial(out, r.trial_key)
    first, second = read_jsonl(trial / "responses.jsonl")
    assert kinds(first["attempts"]) == ["oversized", "oversized"] and kinds(second["attempts"]) == ["valid"]
    declared, chunked = (a["oversize"] for a in first["attempts"])
    assert (declared["size_bytes"], declared["size_source"]) == (HUGE, "content-length")
    assert (chunked["size_bytes"], chunked["size_source"]) == (None, None)  # no size declared: unknown
    for attempt in first["attempts"]:
        over = attempt["oversize"]
        assert over["cap_bytes"] == CAP and over["status"] == 200
        # Read no further than the cap and one network read: the SDK never held the reply.
        assert CAP < over["received_bytes"] <= CAP + NETWORK_READ
        assert len(over["received_sha256"]) == 64
        assert attempt["raw"] is None and attempt["reply"] is None
        assert "oversized reply" in attempt["error"] and f"{CAP:,}-byte cap" in attempt["error"]
        # Nothing of the body was read: who answered and what it cost are unknown, never 0.
        assert attempt["usage"] == {"input_tokens": None, "output_tokens": None, "cached_tokens": None,
                                    "cost_usd": None, "cost_source": None}
        assert attempt["model_id"] is None and attempt["prompt_sha256"]
    assert "16,000,000 bytes declared" in first["attempts"][0]["error"]
    # The retry told the model why, as it tells any invalid output.
    retry_turn = json.dumps(server.requests[1].json)
    assert f"longer than the {CAP:,} bytes a reply may have" in retry_turn
    trace = read_jsonl(trial / "trace.jsonl")
    assert trace[0]["invalid_output"] and trace[0]["paid_calls"] == 2 and trace[0]["accepted_actions"] == 0
    assert trace[0]["provider_cost_usd"] is None and trace[0]["input_tokens"] is None
    assert r.telemetry.invalid_outputs == 2 and r.telemetry.model_calls == 3 and r.telemetry.cost_usd is None
    assert folder_bytes(out) < HUGE // 100  # two 16 MB replies left a folder a hundredth the size of one
    assert verify_experiment(out) == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_reply_at_the_cap_is_accepted_and_one_byte_more_is_not(tmp_path, server, monkeypatch, provider):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    server.script(oversized(CAP, answer(["A"])), oversized(CAP + 1, answer(["B"])), ok(answer(["B"])))
    out, _, (r,) = run(tmp_path, model_condition(server, provider), agent=agent(),
                       budgets={"accepted_actions": 2, "model_decisions": None})
    assert r.termination_reason == "budget:accepted_actions", r.error
    trial = find_trial(out, r.trial_key)
    first, second = read_jsonl(trial / "responses.jsonl")
    (at_cap,) = first["attempts"]
    assert at_cap["valid"] and json.loads(at_cap["raw"])["actions"] == ["A"]
    assert len(at_cap["reply"]["padding"]) > CAP - 2048  # kept whole: the stored copy is the reply
    assert at_cap["usage"]["input_tokens"] is not None and at_cap["model_id"]
    assert kinds(second["attempts"]) == ["oversized", "valid"]
    over = second["attempts"][0]["oversize"]
    # The whole reply arrived in the read that passed the cap: its size is what was received.
    assert (over["size_bytes"], over["size_source"], over["received_bytes"]) == (CAP + 1, "received", CAP + 1)
    assert [line["parsed_actions"] for line in read_jsonl(trial / "trace.jsonl")] == [["A"], ["B"]]
    assert verify_experiment(out) == []


def test_a_replay_plays_an_oversized_reply_as_it_came(tmp_path, server, monkeypatch):
    """A replay condition feeds the recorded attempts back through the loop: the oversized one too,
    so the retry rule takes the same course."""
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    server.script(oversized(HUGE), ok(answer(["A"])))
    out, _, (r,) = run(tmp_path, model_condition(server, "openai-compatible"), agent=agent(),
                       budgets={"accepted_actions": 1, "model_decisions": None})
    recorded = find_trial(out, r.trial_key)
    again = tmp_path / "again"
    again.mkdir()
    _, _, (replayed,) = run(again, {"id": "rp", "policy": "replay", "replay_trace": str(recorded)}, agent=agent(),
                            budgets={"accepted_actions": 1, "model_decisions": None})
    (original,) = read_jsonl(recorded / "responses.jsonl")
    (line,) = read_jsonl(find_trial(again / "out", replayed.trial_key) / "responses.jsonl")
    assert kinds(line["attempts"]) == kinds(original["attempts"]) == ["oversized", "valid"]
    assert line["attempts"][0]["oversize"] == original["attempts"][0]["oversize"]
    assert line["attempts"][0]["error"] == original["attempts"][0]["error"]
    assert replayed.termination_reason == r.termination_reason == "budget:accepted_actions"
    assert verify_experiment(again / "out") == []


def test_verify_checks_an_oversized_replys_record(tmp_path, server, monkeypatch):
    """Each way an oversized attempt's record can stop holding together is a problem, and so is a
    stored reply longer than the manifest's cap."""
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    server.script(oversized(HUGE), oversized(CAP, answer(["A"])))
    out, _, (r,) = run(tmp_path, model_condition(server, "openai-compatible"), agent=agent(),
                       budgets={"accepted_actions": 1, "model_decisions": None})
    trial = find_trial(out, r.trial_key)
    line = (trial / "responses.jsonl").read_text().splitlines()[0]
    trace = TraceLine.model_validate_json((trial / "trace.jsonl").read_text().splitlines()[0])

    def problems(change=None, cap=CAP) -> list[str]:
        data = json.loads(line)
        if change:
            change(data["attempts"][0])
        report = Report()
        _check_response(ResponseLine.model_validate(data), trace, 1, "responses.jsonl:1", report, cap)
        return report.problems

    assert problems() == []

    def edit(field, value, inner=True):
        return lambda a: (a["oversize"] if inner else a).__setitem__(field, value)

    cases = [
        (edit("cap_bytes", CAP // 2), "a cap of 32,768 bytes, not the manifest's 65,536"),
        (edit("size_source", "received"), "sizes do not hold together"),
        (edit("size_bytes", CAP - 1), "sizes do not hold together"),
        (edit("received_bytes", CAP - 1), "sizes do not hold together"),
        (edit("size_bytes", None), "sizes do not hold together"),
        (edit("valid", True, inner=False), "keeps no text"),
        (edit("raw", "{}", inner=False), "keeps no text"),
        (edit("model_id", "gpt-x", inner=False), "never read records a model"),
        (lambda a: a["usage"].__setitem__("cost_usd", 0.0), "never read records a model"),
    ]
    for change, message in cases:
        found = problems(change)
        assert any(message in problem for problem in found), (message, found)
    # The retry's reply, at the cap, kept whole: over a lower cap it is a problem.
    lower = problems(cap=CAP // 2)
    assert any("attempt 2: stores a reply of" in p and f"agent.max_reply_bytes ({CAP // 2:,})" in p
               for p in lower), lower


@pytest.mark.parametrize("value, message", [
    (True, "agent.max_reply_bytes: Input should be a valid integer"),
    (0, "agent.max_reply_bytes: Input should be greater than or equal to 1024"),
])
def test_a_bad_cap_is_refused_in_one_line(tmp_path, value, message):
    manifest = write_manifest(tmp_path, agent=agent(max_reply_bytes=value))
    proc = subprocess.run([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "manifest.yaml" in lines[0] and message in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()
