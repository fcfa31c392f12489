"""Limits shared by every trial of a run: the experiment's cost ceiling and a rate limiter per
provider and key, serial and with workers, against the local fake provider."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from sessions.audit.verify import verify_experiment
from sessions.evidence.reader import read_run_log
from sessions.execute.limits import CEILING, Ask, ExperimentLimits, RateLimiter
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import prepare
from tests.conftest import find_trial, write_manifest
from tests.fakes.provider_server import FakeProviderServer
from tests.sessions.execute.test_model_runs import model_condition


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


def budgets(**extra) -> dict:
    return {"accepted_actions": None, "model_decisions": 6, "wall_time_minutes": 10,
            "unrecoverable_loop_repeats": None, **extra}


def run(tmp_path, conditions, workers=1, per_condition=1, **budget):
    manifest = write_manifest(tmp_path, conditions=conditions, budgets=budgets(**budget),
                              trials={"per_condition": per_condition, "blinding_seed": 3})
    out = tmp_path / f"out-{workers}"
    prepared = prepare(manifest, out)
    runner = ExperimentRunner(prepared, create_folder(prepared, out), workers=workers)
    return out, runner.run(), runner


def test_rate_limiter_spaces_requests_and_charges_tokens():
    limiter = RateLimiter(60, None)
    assert [limiter.reserve(100.0) for _ in range(3)] == [0.0, 1.0, 2.0]
    tokens = RateLimiter(None, 600)  # 10 tokens a second
    assert tokens.reserve(0.0) == 0.0
    tokens.charge(620, 0.0)  # 20 in debt
    assert tokens.reserve(0.0) == pytest.approx(2.0)


def test_the_ceiling_refuses_a_call_once_spend_reaches_it():
    limits = ExperimentLimits(0.01)
    assert limits.ask(Ask("k", "A-01")) == (0.0, None)
    limits.spent("k", 0.02, 100)
    assert limits.ask(Ask("k", "B-01")) == (0.0, CEILING)
    record = limits.record()
    assert record["ceiling_reached"] and record["stopped_by_ceiling"] == ["B-01"] and "before every model call" \
        in record["rule"]


@pytest.mark.parametrize("workers", [1, 2])
def test_cost_ceiling_stops_the_run_and_its_trials_are_invalid(tmp_path, server, monkeypatch, workers):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", "sk-ant-test-not-a-real-key-0000")
    cond = model_condition(server, "anthropic")
    out, summary, runner = run(tmp_path, [cond], workers=workers, per_condition=3, experiment_cost_usd=0.000001)
    assert summary.stopped_early and summary.stop_reason == CEILING
    stopped = [r for r in runner.results if r.termination_reason == CEILING]
    assert stopped and all((r.outcome, r.invalid_cause) == ("harness-error", CEILING) for r in stopped)
    assert len(runner.results) <= workers  # no trial started after the ceiling
    limits = [e.limits for e in read_run_log(out)[0] if e.event == "limits"][0]
    assert limits["ceiling_reached"] and limits["spent_usd"] > 0.000001
    assert verify_experiment(out) == []


@pytest.mark.parametrize("workers", [1, 2])
def test_rate_limit_waits_are_recorded_apart_from_latency(tmp_path, server, monkeypatch, workers):
    monkeypatch.setenv("OAKWATCH_TEST_KEY", "sk-ant-test-not-a-real-key-0000")
    cond = model_condition(server, "anthropic")
    cond["request"]["requests_per_minute"] = 600  # one call every 0.1 s, across both trials
    out, summary, runner = run(tmp_path, [cond], workers=workers, per_condition=2)
    assert verify_experiment(out) == []
    assert sum(r.limiter_wait_s for r in runner.results) > 0
    # However the two trials overlap, their 12 calls are spaced 0.1 s apart: the first and the last
    # decision of the run are at least ~1.1 s apart (how much each trial waited depends on overlap).
    stamps = sorted(datetime.fromisoformat(json.loads(x)["timestamp_utc"].replace("Z", "+00:00")).timestamp()
                    for r in runner.results
                    for x in (find_trial(out, r.trial_key) / "trace.jsonl").read_text().splitlines())
    assert len(stamps) == 12 and stamps[-1] - stamps[0] >= 0.1 * 11 * 0.8
    for r in runner.results:
        trace = [json.loads(x) for x in (find_trial(out, r.trial_key) / "trace.jsonl").read_text().splitlines()]
        assert sum(t["latency_ms"] for t in trace) / 1000 < r.limiter_wait_s + 0.1 * len(trace)
        assert r.telemetry.held_seconds >= r.limiter_wait_s * 0.9  # outside the wall-time budget
    assert runner.limits.record()["limiter_waits"] > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_a_resumed_run_counts_what_the_folder_spent_before(tmp_path, server, monkeypatch, workers):
    from sessions.execute.start import prepare_resume

    monkeypatch.setenv("OAKWATCH_TEST_KEY", "sk-ant-test-not-a-real-key-0000")
    cond = model_condition(server, "anthropic")
    out, summary, runner = run(tmp_path, [cond], workers=workers, per_condition=3, experiment_cost_usd=0.000001)
    assert summary.stop_reason == CEILING and summary.missing_positions
    spent_first = sum(c for r in runner.results if (c := r.telemetry.cost_usd) is not None)  # a trial stopped
    # before its first call has no known cost
    calls = len(server.requests)
    prepared, folder, positions = prepare_resume(out)
    resumed = ExperimentRunner(prepared, folder, positions=positions, resumed=True, workers=workers)
    again = resumed.run()
    assert again.stop_reason == CEILING and resumed.results == []  # no trial starts: the ceiling was spent
    assert len(server.requests) == calls  # and no call is made
    limits = [e.limits for e in read_run_log(out)[0] if e.event == "limits"][-1]
    assert limits["spent_before_resume_usd"] == pytest.approx(spent_first)
    assert limits["spent_usd"] >= limits["spent_before_resume_usd"] > 0
    assert verify_experiment(out) == []
