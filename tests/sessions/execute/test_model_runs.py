"""Models play the cartridge through the official SDKs, against a local server speaking each
provider's wire format (the network edge is the only fake): every call charged and classified."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import engine.games.cartridge_tables as ct
from engine.loop.script import parse_script
from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.evidence.records import Summary
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from tests.conftest import find_trial, read_jsonl, write_manifest
from tests.fakes.provider_server import FakeProviderServer, ok, sleep, status, text

PRICES = ASSETS / "pricing" / "prices-2026-11-30.yaml"
PRICING = {"file": "bundled:prices-2026-11-30.yaml", "sha256": hashlib.sha256(PRICES.read_bytes()).hexdigest()}
WALK = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")
KEY = "sk-proj-PLANTEDtestkey-5150-oakwatchXYZW"


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def answer(actions: list[str], note: str = "walking on") -> dict:
    return {"reasoning_summary": note, "observed": {"screen": "overworld", "location_guess": "town",
                                                   "objective_guess": "deliver the parcel", "certainty": 0.8},
            "memory_read": [], "memory_write": [], "actions": actions}


def model_condition(server, provider: str, **extra) -> dict:
    api = {"anthropic": "messages", "openai": "chat", "openai-compatible": "chat"}[provider]
    model = extra.pop("model", "claude-sonnet-4-6")
    condition = {"id": "agent", "policy": "model", "provider": provider, "model": model,
                 "base_url": server.url if provider == "anthropic" else server.base_url(api),
                 "request": {"timeout_seconds": 2, "max_attempts": 3, "backoff_seconds": 0.01,
                             "backoff_cap_seconds": 0.5}}
    if provider != "openai-compatible":
        condition["api_key_env"] = "OAKWATCH_TEST_KEY"
        condition["pricing"] = PRICING
    condition.update(extra)
    return condition


def run(tmp_path: Path, condition: dict | list[dict], **sections):
    manifest = write_manifest(tmp_path, conditions=condition if isinstance(condition, list) else [condition],
                              **sections)
    out = tmp_path / "out"
    prepared = prepare(manifest, out)
    runner = ExperimentRunner(prepared, create_folder(prepared, out))
    summary = runner.run()
    return out, summary, runner.results


@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_a_model_plays_the_cartridge_to_the_dex(tmp_path, server, monkeypatch, provider):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", "sk-ant-test-not-a-real-key-0000")
    chunks = [WALK[i:i + 4] for i in range(0, len(WALK), 4)]
    server.script(*[ok(answer(c), model="model-that-answered-2026-10-01") for c in chunks])
    out, summary, (result,) = run(tmp_path, model_condition(server, provider))
    assert (result.outcome, result.termination_reason) == ("success", "final-milestone")
    assert summary.all_succeeded and verify_experiment(out) == []
    trial = out / "trials" / result.trial_key
    replay_trial(trial)
    trace = read_jsonl(trial / "trace.jsonl")
    assert len(trace) == len(server.requests) <= len(chunks)
    first = trace[0]
    assert first["model_id"] == "model-that-answered-2026-10-01"  # the model that answered, not the one asked
    assert first["response_id"] and first["paid_calls"] == 1 and first["latency_ms"] > 0
    assert first["reasoning_summary"] == "walking on"
    # The hash is of the exact body that left the process.
    assert first["prompt_sha256"] == hashlib.sha256(json.dumps(
        server.requests[0].json, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    t = result.telemetry
    assert t.model_calls == len(trace) and t.input_tokens == sum(line["input_tokens"] for line in trace)
    if provider == "anthropic":  # priced: derived from the dated schedule, and labelled so
        assert t.cost_usd is not None and t.cost_usd > 0 and t.cost_source == ["derived"]
        assert result.provenance["model"]["seed"].startswith("not supported")
    else:  # no price and no cost from the server: unknown, never 0
        assert t.cost_usd is None and first["provider_cost_usd"] is None
    responses = read_jsonl(trial / "responses.jsonl")
    attempt = responses[0]["attempts"][0]
    assert attempt["reply"] and attempt["identity"] and attempt["stop_reason"]


def probe_names() -> set[str]:
    game = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
    return set(game["fields"])


def test_no_probed_field_or_address_reaches_a_request(tmp_path, server):
    server.script(*[ok(answer(c)) for c in [WALK[i:i + 4] for i in range(0, 40, 4)]])
    out, _, (result,) = run(tmp_path, model_condition(server, "openai-compatible"),
                            budgets={"accepted_actions": 40, "model_decisions": None, "wall_time_minutes": None})
    assert result.milestones_reached  # it got far enough for the probe to have seen something
    for request in server.requests:
        body = request.body.decode()
        for name in probe_names():
            assert f'"{name}"' not in body and f" {name}:" not in body, name
        for address in ("0xD0", "0xd0", "53248", "D000"):
            assert address not in body
    assert result.provenance["information_track"] == "visual"  # the default, recorded in the result
    assert result.provenance["information_allowlist"] is None


def test_a_structured_track_request_shows_only_the_allowlist_and_never_a_ladder_field(tmp_path, server):
    game = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
    allowed = set(game["tracks"]["structured"]["fields"]) | {"dialogue"}
    ladder = {c["field"] for m in game["milestones"] for c in m["all"]}
    hidden = probe_names() - allowed
    # to the clerk's page after M5: the walk passes boxes, a battle and six rungs
    server.script(*[ok(answer(c)) for c in [WALK[i:i + 4] for i in range(0, 120, 4)]])
    agent = yaml.safe_load(DEFAULT_MANIFEST.read_text())["agent"] | {"information_track": "structured"}
    out, _, (result,) = run(tmp_path, model_condition(server, "openai-compatible"), agent=agent,
                            budgets={"accepted_actions": 120, "model_decisions": None, "wall_time_minutes": None})
    assert len(result.milestones_reached) >= 5 and result.provenance["information_track"] == "structured"
    assert result.provenance["information_allowlist"] == [*game["tracks"]["structured"]["fields"], "dialogue"]
    marker = "The game's state as read for you (structured track):\n"
    shown = []
    for request in server.requests:
        body = request.body.decode()
        prompt = next(p["text"] for m in request.json["messages"] if isinstance(m["content"], list)
                      for p in m["content"] if p.get("type") == "text")
        state = json.loads(prompt.split(marker, 1)[1].split("\n", 1)[0])
        assert set(state) == allowed  # exactly the allowlist, every decision
        shown.append(state)
        for name in hidden | ladder:  # flags0, party_count, battle_state, bag, text_state, ...
            assert f'\\"{name}\\"' not in body and f'"{name}"' not in body, name
        for address in ("0xD0", "0xd0", "53248", "D000"):
            assert address not in body
    # the track is live: positions move and the real dialogue text reaches the model
    assert len({(s["map_id"], s["x"], s["y"]) for s in shown}) > 10
    pages = ct.decode(ct.rom_block((ASSETS / "cartridge" / "parcel-quest.gb").read_bytes()))
    assert pages.text("rival_lost") in [s["dialogue"] for s in shown]  # the game's own words
    assert any(s["dialogue"] is None for s in shown)
    assert verify_experiment(out) == []
    replay_trial(out / "trials" / result.trial_key)


CASES = {
    # case: (replies, expected attempts per decision, expected outcome)
    "not-json": ([text("I will press A now."), ok(answer(["A"]))], ["invalid", "valid"], "game-failure"),
    "schema-break": ([ok({"actions": ["JUMP"]}), ok(answer(["A"]))], ["invalid", "valid"], "game-failure"),
    "too-many-actions": ([ok(answer(["A"] * 9)), ok(answer(["A"]))], ["invalid", "valid"], "game-failure"),
    "429-then-success": ([status(429, retry_after="0.05"), ok(answer(["A"]))], ["rate-limit", "valid"],
                         "game-failure"),
    "500-then-success": ([status(500), ok(answer(["A"]))], ["server", "valid"], "game-failure"),
    "timeout-then-success": ([sleep(5), ok(answer(["A"]))], ["timeout", "valid"], "game-failure"),
    "401": ([status(401)], ["authentication"], "invalid-provider"),
}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("case", list(CASES))
def test_each_fault_is_logged_charged_and_classified(tmp_path, server, monkeypatch, provider, case):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    replies, expected, outcome = CASES[case]
    server.script(*replies)
    model = "claude-sonnet-4-6" if provider == "anthropic" else "gpt-5.4"
    out, summary, results = run(tmp_path, model_condition(server, provider, model=model),
                                budgets={"accepted_actions": 1, "model_decisions": None})
    (r,) = results
    assert r.outcome == outcome, (r.termination_reason, r.error)
    trial = find_trial(out, r.trial_key)
    attempts = read_jsonl(trial / "responses.jsonl")[0]["attempts"]
    kinds = ["valid" if a["valid"] else (a["failure"] or "invalid") for a in attempts]
    assert kinds == expected
    assert len(server.requests) == len(expected)  # every call made is an attempt on record
    trace = read_jsonl(trial / "trace.jsonl")[0]
    assert trace["attempts"] == len(expected) and r.telemetry.model_calls == len(expected)
    failed = [a for a in attempts if a["failure"]]
    for a in failed:
        if a["failure"] in ("rate-limit", "authentication"):  # refused: nothing charged, and known
            assert a["usage"] == {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": 0.0,
                                  "cost_source": None}
        else:  # a server error or a timeout may have been billed: unknown
            assert a["usage"]["cost_usd"] is None
    if case in ("timeout-then-success", "500-then-success"):
        assert r.telemetry.cost_usd is None  # one call of unknown cost makes the total unknown
    elif outcome == "game-failure":
        assert r.telemetry.cost_usd > 0 and r.telemetry.cost_source == ["derived"]
    if case == "429-then-success":
        assert r.telemetry.held_seconds >= 0.05  # waiting out the provider is not the agent's time
    if outcome == "invalid-provider":
        failure = json.loads((trial / "provider-failure.json").read_text())
        assert (failure["kind"], failure["status"], failure["attempts"]) == ("authentication", 401, 1)
        assert summary.stop_reason == "external-provider-failure"
    assert verify_experiment(out) == []
    assert KEY.encode() not in b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())


def test_a_reply_without_usage_under_a_cost_budget_ends_the_trial_as_the_providers(tmp_path, server, monkeypatch):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    server.script(ok(answer(["A"]), usage=None), ok(answer(["A"])))
    out, summary, (r,) = run(tmp_path, model_condition(server, "openai", model="gpt-5.4"),
                             budgets={"accepted_actions": 10, "total_cost_usd": 1.0})
    assert (r.outcome, r.termination_reason, r.invalid_cause) == ("invalid-provider", "budget:cost_unknown",
                                                                  "usage-unknown")
    assert len(server.requests) == 1  # ended before the next call
    failure = json.loads((find_trial(out, r.trial_key) / "provider-failure.json").read_text())
    assert failure["kind"] == "usage-unknown"
    assert verify_experiment(out) == []


def test_a_cost_budget_on_a_model_without_a_price_is_refused_in_preflight(tmp_path, server):
    condition = model_condition(server, "openai-compatible", model="local-llama")
    manifest = write_manifest(tmp_path, conditions=[condition], budgets={"total_cost_usd": 5.0})
    proc = subprocess.run([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no price is known for local-llama" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_bad_key_ends_the_run_invalid_and_appears_nowhere(tmp_path, server):
    """The user's command line, a planted key, a provider that echoes a masked copy of it."""
    server.script(status(401))
    out = tmp_path / "out"
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    proc = subprocess.run([sys.executable, "-m", "app.cli", "run", "--headless", "--provider", "openai", "--model",
                           "gpt-5.4", "--base-url", server.base_url("chat"), "--output", str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "invalid-provider" in proc.stdout and "Traceback" not in proc.stderr
    assert server.requests and server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent...
    everything = proc.stdout + proc.stderr + "".join(
        p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file())
    for fragment in (KEY, KEY[:12], KEY[-8:], KEY[-4:] + ".", KEY[8:20]):
        assert fragment not in everything, fragment  # ...and is nowhere else, whole or in part
    summary = Summary.model_validate_json((out / "summary.json").read_text())
    assert summary.stop_reason == "external-provider-failure" and verify_experiment(out) == []
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    (condition,) = manifest["conditions"]
    assert (condition["provider"], condition["model"], condition["api_key_env"]) == ("openai", "gpt-5.4", None)


def test_the_bundled_model_experiments_pass_preflight_once_keys_are_set(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "x" * 20)
    monkeypatch.setenv("OPENAI_API_KEY", "y" * 20)
    for name in ("parcel-quest-design-a.yaml", "parcel-quest-design-b.yaml"):
        prepared = prepare(ASSETS / "experiments" / name, None)
        assert {c.policy for c in prepared.manifest.conditions} == {"model"}
        assert all(prepared.prices[c.id] is not None for c in prepared.manifest.conditions)
    assert DEFAULT_MANIFEST.name == "dry-run.yaml"


def test_a_refused_memory_write_is_reported_to_the_model_next_turn(tmp_path, server):
    """The store's rules reach the model twice: in the system prompt (as frozen in the manifest)
    and as the reason a write was refused, told on the next turn only."""
    guess = answer(["A"])
    guess["memory_write"] = [{"kind": "objective", "value": "deliver the parcel", "confidence": 0.9,
                              "evidence": "", "status": "completed"}]  # no evidence: a guess cannot complete
    server.script(ok(guess), ok(answer(["A"])), ok(answer(["A"])))
    agent = yaml.safe_load(DEFAULT_MANIFEST.read_text())["agent"]
    agent["memory"] = {"confirm_threshold": 0.85, "possession_predicates": ["carries"]}
    out, _, (result,) = run(tmp_path, model_condition(server, "openai-compatible"), agent=agent,
                            budgets={"accepted_actions": 3, "model_decisions": None, "wall_time_minutes": None})
    system = server.requests[0].json["messages"][0]["content"]
    assert "confidence of at least 0.85" in system and "{" + "confirm_threshold}" not in system
    assert "(the value names the item): carries." in system
    turns = [json.dumps(r.json["messages"][1:]) for r in server.requests]
    assert "refused" not in turns[0] and "refused" not in turns[2]  # only the turn right after
    assert "refused these writes" in turns[1] and "deliver the parcel" in turns[1] and "unconfirmed" in turns[1]
    ops = read_jsonl(out / "trials" / result.trial_key / "memory.jsonl")
    assert [op["op"] for op in ops if op["op"] == "reject"] == ["reject"]
    frozen = (out / "prompts" / "system.txt").read_text()
    assert frozen == system and verify_experiment(out) == []


def test_a_new_provider_is_one_catalog_entry(tmp_path, server, monkeypatch):
    """The seam: an entry in engine.providers.PROVIDERS is all the manifest, preflight and the
    runner need (here a second name for the Chat Completions wire format)."""
    from engine.providers import PROVIDERS, Provider

    monkeypatch.setitem(PROVIDERS, "acme-local", Provider({"chat": "engine.providers.openai_chat:OpenAIChat"},
                                                          None, needs_base_url=True))
    server.script(ok(answer(WALK[:4])))
    condition = {"id": "agent", "policy": "model", "provider": "acme-local", "model": "acme-1",
                 "base_url": server.base_url("chat")}
    out, _, (result,) = run(tmp_path, condition,
                            budgets={"accepted_actions": 4, "model_decisions": None, "wall_time_minutes": None})
    assert result.termination_reason == "budget:accepted_actions", result.error
    assert verify_experiment(out) == []
    assert result.provenance["model"]["provider"] == "acme-local"
    assert result.provenance["model"]["seed"].startswith("not supported")  # it declared no seeded API
    monkeypatch.delitem(PROVIDERS, "acme-local")
    again = tmp_path / "again"
    again.mkdir()
    with pytest.raises(PreflightError, match="one of: anthropic, openai, openai-compatible"):
        run(again, condition)


def _retamper(trial: Path, name: str, change) -> None:
    """Edit one stream's first line in place (its chain and sums break too; the test looks for its own line)."""
    path = trial / name
    lines = path.read_text().splitlines(keepends=True)
    data = json.loads(lines[0])
    change(data)
    lines[0] = json.dumps(data) + "\n"
    path.write_text("".join(lines))


def test_a_retried_decision_carries_the_accepted_latency_and_the_total(tmp_path, server, monkeypatch):
    """Issue 19.5 and 22.1: a timed-out call, then a 429, then an answer. The trace names the
    accepted attempt's latency and, apart, the total over all three; each failed attempt records
    how long it took (a timeout: at least the timeout), and verify holds the trace to them."""
    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    server.script(sleep(5), status(429, retry_after="0.01"), ok(answer(["A"])))
    condition = model_condition(server, "openai", model="gpt-5.4")
    condition["request"]["timeout_seconds"] = 0.5
    out, _, (r,) = run(tmp_path, condition, budgets={"accepted_actions": 1, "model_decisions": None})
    trial = find_trial(out, r.trial_key)
    attempts = read_jsonl(trial / "responses.jsonl")[0]["attempts"]
    assert [a["failure"] for a in attempts] == ["timeout", "rate-limit", None]
    timed_out, limited, accepted = (a["latency_ms"] for a in attempts)
    assert timed_out >= 500 and limited > 0 and accepted > 0  # a failed call took its time, never null
    trace = read_jsonl(trial / "trace.jsonl")[0]
    assert trace["latency_ms"] == accepted
    assert trace["latency_total_ms"] == round(timed_out + limited + accepted, 3)
    assert r.telemetry.model_latency_ms == trace["latency_total_ms"]  # every call is in the latency total
    assert verify_experiment(out) == []
    _retamper(trial, "trace.jsonl", lambda t: t.update(latency_ms=trace["latency_total_ms"]))
    _retamper(trial, "responses.jsonl", lambda line: line["attempts"][0].update(latency_ms=1.0))
    problems = [p for p in verify_experiment(out) if "latency" in p]
    assert any(f"latency_ms {trace['latency_total_ms']} in the trace, the attempts give {accepted}" in p
               for p in problems), problems
    assert any(f"latency_total_ms {trace['latency_total_ms']} in the trace, the attempts give "
               f"{round(1.0 + limited + accepted, 3)}" in p for p in problems), problems


def test_every_result_names_its_prompt_core_and_verify_and_the_report_hold_it_alike(tmp_path, server):
    """Issue 22.1: two model conditions and a scripted one. Each model trial's trace and result
    carry prompt_core_sha256 (the scripted one's is null: it sends no prompt); one that differs
    across the model conditions is a verify problem and a failed checklist row."""
    from sessions.analysis.report import build_report

    server.script(*[ok(answer(WALK[:4])) for _ in range(2)])
    scripted = yaml.safe_load(DEFAULT_MANIFEST.read_text())["conditions"][0]
    models = [model_condition(server, "openai-compatible", model=m) | {"id": m} for m in ("one", "two")]
    out, _, results = run(tmp_path, [*models, scripted],
                          budgets={"accepted_actions": 4, "model_decisions": None, "wall_time_minutes": None})
    by_policy = {("model" if "model" in r.provenance else "scripted") + r.trial_key: r for r in results}
    model_results = [r for k, r in by_policy.items() if k.startswith("model")]
    (scripted_result,) = [r for k, r in by_policy.items() if k.startswith("scripted")]
    assert len(model_results) == 2 and scripted_result.provenance["prompt_core_sha256"] is None
    cores = set()
    for r in model_results:
        trace = read_jsonl(out / "trials" / r.trial_key / "trace.jsonl")
        assert all(line["prompt_core_sha256"] for line in trace)
        assert r.provenance["prompt_core_sha256"] == trace[0]["prompt_core_sha256"]
        cores.add(r.provenance["prompt_core_sha256"])
    assert len(cores) == 1 and verify_experiment(out) == []
    row = "Model conditions were sent the same system prompt, response schema and first screen."
    checks = {c["check"]: c["status"] for c in build_report(out, tmp_path / "report")["checklist"]}
    assert checks[row] == "pass"

    odd = model_results[1].trial_key
    path = out / "trials" / odd / "result.json"
    data = json.loads(path.read_text())
    data["provenance"]["prompt_core_sha256"] = "0" * 64
    path.write_text(json.dumps(data, indent=2) + "\n")
    problems = verify_experiment(out)
    assert any(p.startswith(f"trials/{odd}/result.json: provenance.prompt_core_sha256 0000") and "differs from" in p
               for p in problems), problems
    assert any(p.startswith(f"trials/{odd}/result.json: provenance.prompt_core_sha256 is not the first decision's")
               for p in problems), problems
    checks = {c["check"]: c["status"] for c in build_report(out, tmp_path / "report2")["checklist"]}
    assert checks[row] == "fail"


def test_the_price_schedule_is_kept_in_the_folder_and_the_export(tmp_path, server, monkeypatch):
    """Issue 22.1: the bytes a derived cost came from are evidence: pricing/<sha256>.yaml, in the sums
    and the export; verify holds the copy to the manifest's SHA-256."""
    from sessions.analysis.report import write_package

    monkeypatch.setenv("OAKWATCH_TEST_KEY", KEY)
    server.script(ok(answer(["A"])))
    out, _, (r,) = run(tmp_path, model_condition(server, "anthropic"),
                       budgets={"accepted_actions": 1, "model_decisions": None})
    assert r.telemetry.cost_source == ["derived"]
    rel = f"pricing/{PRICING['sha256']}.yaml"
    assert (out / rel).read_bytes() == PRICES.read_bytes()
    assert f"{PRICING['sha256']}  {rel}" in (out / "SHA256SUMS").read_text()
    assert verify_experiment(out) == []
    package = tmp_path / "package"
    write_package(out, package)
    assert (package / rel).read_bytes() == PRICES.read_bytes()
    (out / rel).write_bytes(PRICES.read_bytes() + b"# cheaper\n")
    assert f"{rel}: its SHA-256 differs from the one the manifest's conditions.0.pricing names" in \
        verify_experiment(out)
    (out / rel).unlink()
    assert any(p.startswith(f"{rel} is missing: the price schedule") for p in verify_experiment(out))


def test_bounded_context_resets_the_history_every_n_turns_and_caps_the_notebook(tmp_path, server):
    """agent.context (docs/context.md): a real trial on the cartridge through the fake server. Each
    request carries its segment's earlier turns (0, 1, 2, then 0 again), the notebook the model last
    wrote cut to 30 characters, one call a decision; the trace's context records say so, the frozen
    schema has the notebook key and the folder verifies."""
    notes = [f"n{i}:" + "w" * (8 * i) for i in range(8)]
    server.script(*[ok(answer(WALK[4 * i:4 * i + 4]) | {"notebook": notes[i]}) for i in range(8)])
    agent = yaml.safe_load(DEFAULT_MANIFEST.read_text())["agent"] | {"context": {"segment_turns": 3,
                                                                                 "notebook_chars": 30}}
    out, _, (result,) = run(tmp_path, model_condition(server, "openai-compatible"), agent=agent,
                            budgets={"accepted_actions": None, "model_decisions": 8, "wall_time_minutes": None})
    assert len(server.requests) == 8 == result.telemetry.decisions  # nothing extra paid
    assistants = [sum(m["role"] == "assistant" for m in r.json["messages"]) for r in server.requests]
    assert assistants == [0, 1, 2, 0, 1, 2, 0, 1]
    for i, request in enumerate(server.requests[1:], 1):
        current = request.json["messages"][-1]["content"][-1]["text"]
        assert "Your notebook" in current and notes[i - 1][:30] in current
        assert len(notes[i - 1]) <= 30 or notes[i - 1] not in current
    trace = read_jsonl(out / "trials" / result.trial_key / "trace.jsonl")
    assert [t["context"]["segment"] for t in trace] == [0, 0, 0, 1, 1, 1, 2, 2]
    assert [t["context"]["turn_in_segment"] for t in trace] == [1, 2, 3, 1, 2, 3, 1, 2]
    assert [t["context"]["notebook_truncated"] for t in trace][1:] == [len(n) > 30 for n in notes[:7]]
    schema = json.loads((out / "prompts" / "action-schema.json").read_text())
    assert schema["properties"]["notebook"]["maxLength"] == 30
    assert verify_experiment(out) == []
    replay_trial(out / "trials" / result.trial_key)  # offline, no model call: the trajectory replays
