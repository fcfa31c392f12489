"""What the console shows of a model-backed agent: its observation and reasoning beside the
action, cost and tokens per decision, per trial and as meters, with unknown read as unknown
(never 0 or $0) and the model's identity never shown."""

from __future__ import annotations

from textual.app import App

from app.console.console import OakwatchConsole
from app.console.console_state import MODEL_REDACTED, ConsoleSink
from engine.figures import money
from engine.loop.events import DecisionRecorded, StateChanged, TrialEnded
from engine.loop.records import Attempt, ResponseLine
from panes.lines import trial_ended_line
from panes.trial.budgets import BudgetsPane
from panes.trial.trace import MAX_LINES, REASONING, REASONING_MAX, TracePane, decision_line, format_item
from tests.app.fixed import (
    SECRET_MODEL,
    One,
    aborted,
    budgets,
    decision,
    feed,
    fixed_frame,
    observed,
    paid,
    result,
    telemetry,
    trace,
)

LONG_WHY = ("The rival is standing by the left table and the professor is at the back, so walk up to the "
            "three balls, take the left one before the rival does, then talk to the professor again. ") * 3


def shown(item) -> list[str]:
    return format_item("decision", item).split("\n")


def screen_text(app: App) -> str:
    """Every character on the screen, row by row (the compositor's last frame)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


# -- the trace line ------------------------------------------------------------------------------

def test_decision_shows_observation_cost_tokens_and_reasoning_below():
    line, why = shown(trace(7, ("UP", "A"), **paid(0.0123, 1840, 96, 912.0), reasoning_summary="Head for the lab.",
                            observed=observed("overworld", "Pallet Town", "find the lab", 0.6)))
    assert line.startswith("  d00007 │ UP,A ")
    assert "overworld  @ Pallet Town (60% sure)" in line and "obj: find the lab" in line
    assert "│ $0.0123 │" in line and "tok 1,840/96" in line and "912ms" in line
    assert why == REASONING + "Head for the lab."
    assert SECRET_MODEL not in line + why and "acme" not in line + why


def test_unknown_cost_and_tokens_read_unknown_never_zero():
    line, _ = shown(trace(8, **paid(None, None, None, latency_ms=None)))
    assert "cost unknown" in line and "tok unknown" in line
    assert "$0" not in line and "tok 0" not in line
    # Tokens known, cost not (a model without a price): each figure for itself.
    line, _ = shown(trace(9, **paid(None, 1200, 80)))
    assert "cost unknown" in line and "tok 1,200/80" in line
    # A known cost under a hundredth of a cent is not shown as zero either.
    assert "$0.000042" in shown(trace(10, **paid(0.000042)))[0]


def test_a_policy_that_pays_nothing_shows_no_cost():
    line, why = shown(trace(1, ("RIGHT",), reasoning_summary="script step 1/40"))
    assert "$" not in line and "unknown" not in line and "tok" not in line
    assert why == REASONING + "script step 1/40"


def test_aborted_decision_reads_clearly():
    lines = shown(trace(12, **aborted()))
    assert lines == ["  d00012 │ —            │ ABORTED: call cancelled │ cost unknown │ tok unknown │ "
                     "end: operator-abort"]  # no INVALID for the cancelled call itself, no reasoning line
    line = shown(trace(13, **aborted(attempts=2)))[0]
    assert "ABORTED: call cancelled │ INVALID │ retries 1" in line


def test_reasoning_is_one_capped_line_and_absent_when_there_is_none():
    line, why = shown(trace(3, reasoning_summary="first line\nsecond line\u2028third\r\n  fourth"))
    assert why == REASONING + "first line second line third fourth"
    _, why = shown(trace(4, reasoning_summary=LONG_WHY))
    assert len(why) == len(REASONING) + REASONING_MAX and why.endswith("…")
    assert len(shown(trace(5, reasoning_summary=None))) == 1
    assert len(shown(trace(6, reasoning_summary="  "))) == 1


def test_observation_without_a_location_or_observation():
    line = decision_line(trace(2, observed=observed("transition", "unknown", "", 0.2)).model_dump())
    assert "transition (20% sure)" in line and "@" not in line and "obj:" not in line
    line = decision_line(trace(2, observed=None, invalid_output=True, reasoning_summary=None).model_dump())
    assert "│ INVALID │ ?" in line


# -- the trial's end -----------------------------------------------------------------------------

def test_trial_end_shows_cost_and_tokens_with_unknown_as_unknown():
    assert trial_ended_line(result(telemetry(0.0123, 12_345)).model_dump(mode="json")).endswith(
        "ended: game-failure (budget:model_decisions), cost $0.0123, tokens 12,345")
    line = trial_ended_line(result(telemetry(None, 12_345)).model_dump())
    assert "cost unknown, tokens 12,345" in line and "$0" not in line
    line = trial_ended_line(result(None, recovered=True).model_dump())  # no loop counters survived
    assert "cost unknown, tokens unknown" in line


# -- the meters ----------------------------------------------------------------------------------

async def test_budget_meters_for_cost_and_tokens():
    pane = BudgetsPane()
    async with One(pane).run_test(size=(90, 10)) as pilot:
        pane.show(budgets(100, cost=0.0123, tokens=23_814, cost_limit=0.5))
        await pilot.pause()
        rows = {line.split()[0]: line for line in str(pane.render()).splitlines()}
        assert "$0.0123 / $0.50" in rows["cost"] and "█" in rows["cost"] and "2%" in rows["cost"]
        assert "23,814" in rows["tokens"] and "no limit" in rows["tokens"]
        assert "█" not in rows["tokens"] and "░" not in rows["tokens"] and "/" not in rows["tokens"]
        assert "100 / 400" in rows["actions"] and "100 / 330" in rows["decisions"]

        pane.show(budgets(100, cost=None, tokens=None, cost_limit=0.5, tokens_limit=50_000))
        await pilot.pause()
        rows = {line.split()[0]: line for line in str(pane.render()).splitlines()}
        assert "unknown / $0.50" in rows["cost"] and "$0.0" not in rows["cost"]
        assert "unknown / 50,000" in rows["tokens"] and " 0 " not in rows["tokens"]


# -- the whole console ---------------------------------------------------------------------------

def test_the_sink_redacts_model_ids_from_free_text():
    sink = ConsoleSink("x")
    frame = fixed_frame()
    resolved = SECRET_MODEL + "-v2"  # the provider's own, longer name for the same model
    attempt = Attempt(raw=None, valid=False, error="timeout", model_id=resolved, response_id=None,
                      latency_ms=None, usage=None)
    sink.handle(DecisionRecorded(trace(1, **paid()), ResponseLine(decision_id=1, attempts=[attempt]), (), frame))
    sink.handle(StateChanged("paused", f"waiting out {SECRET_MODEL}"))
    assert sink.status().detail == f"waiting out {MODEL_REDACTED}"
    sink.handle(TrialEnded(result(telemetry(), outcome="invalid-provider", termination_reason="provider-failure",
                                  invalid_cause="provider-failure",
                                  error=f"not-found: model {resolved} does not exist ({SECRET_MODEL})")))
    assert sink.status().error == f"not-found: model {MODEL_REDACTED} does not exist ({MODEL_REDACTED})"
    sink.note("error", f"run failed: {SECRET_MODEL}")
    text = "\n".join(format_item(kind, payload) for kind, payload in sink.drain_trace())
    assert SECRET_MODEL not in text and "acme" not in text
    assert f"■ trial A-01 ended: invalid-provider (provider-failure, invalid: provider-failure), cost $0.0123, " \
           f"tokens 12,345 — not-found: model {MODEL_REDACTED}" in text
    assert sink.results[-1]["error"].startswith(f"not-found: model {resolved}")  # the record itself is untouched


async def test_console_shows_reasoning_and_never_the_model():
    sink = ConsoleSink("dry-run", clock=lambda: 0.0)
    feed(sink, unknown_cost_at=12)
    sink.handle(decision(13, fixed_frame(), **aborted(), attempts=1))
    sink.handle(TrialEnded(result(telemetry(None, None), outcome="invalid-provider",
                                  termination_reason="operator-abort", error=f"{SECRET_MODEL} call cancelled")))
    app = OakwatchConsole(sink=sink, theme="gameboy")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.3)
        text = screen_text(app)
        trace_pane = app.query_one(TracePane)
    assert SECRET_MODEL not in text and "acme" not in text and not any("acme" in x for x in trace_pane.lines)
    assert REASONING + "In the lab; the starters are on the table." in text
    assert "cost unknown │ tok unknown" in text and "ABORTED: call cancelled" in text
    assert "cost unknown, tokens unknown" in text
    assert "unknown / $0.50" in text  # the cost meter, once one call's cost was unknown


async def test_long_lines_end_in_an_ellipsis_at_the_pane_width():
    line = trace(12, ("UP", "A"), **paid(), reasoning_summary=LONG_WHY,
                 observed=observed("overworld", "Oak's lab", "get a starter from the professor", 0.8),
                 memory_reads=["fact-0002"], memory_writes=["fact-0003"])
    # A busy decision's line fits at 160 columns (156 inside the console's borders); at 100 it is cut too.
    for width, cut in ((158, {1}), (100, {0, 1})):
        pane = TracePane(interval=None)
        async with One(pane).run_test(size=(width, 6)) as pilot:
            pane.add_items([("decision", line), ("error", "short")])
            await pilot.pause()
            inner = pane.scrollable_content_region.width  # the last cells are under the scrollbar
            strips = [pane.render_line(y) for y in range(3)]
            assert {strip.cell_length for strip in strips} == {pane.size.width}
            rendered = [strip.text[:inner] for strip in strips]
            for y, text in enumerate(rendered):
                assert text.endswith("…") == (y in cut), (width, y, text)
            assert rendered[1].startswith(REASONING + "The rival is standing")
            assert pane.lines[1] == REASONING + LONG_WHY.strip()[: REASONING_MAX - 1] + "…"  # kept whole for copying
            italic = [seg.style.italic for seg in pane.render_line(1) if seg.text.strip()]
            assert italic and all(italic)  # the reasoning line is muted


async def test_trace_keeps_the_last_lines_of_two_line_decisions():
    sink = ConsoleSink("x")
    pane = TracePane(sink.drain_trace, interval=0.05)
    async with One(pane).run_test(size=(120, 20)) as pilot:
        frame = fixed_frame()
        last = 0
        for _ in range(2):  # 8,000 decisions, 16,000 lines, in two drains
            for did in range(last + 1, last + 4_001):
                sink.handle(decision(did, frame))
            last += 4_000
            await pilot.pause(0.3)
        assert pane.line_count == MAX_LINES
        assert pane.lines[-2].startswith(f"  d{last:05d}") and pane.lines[-1] == REASONING + "walk on"


async def test_wide_characters_are_cut_by_cells():
    pane = TracePane(interval=None)
    async with One(pane).run_test(size=(60, 4)) as pilot:
        pane.add_items([("decision", trace(1, reasoning_summary="東京の研究所へ行く。" * 8))])
        await pilot.pause()
        inner = pane.scrollable_content_region.width
        strip = pane.render_line(1)
        assert strip.cell_length == pane.size.width
        assert strip.crop(0, inner).text.rstrip().endswith("…")


def test_a_policy_that_sees_nothing_claims_no_certainty():
    line = decision_line(trace(1, observed=observed("unknown", "unknown", "", 0.0)).model_dump()).split("\n")[0]
    assert line == "  d00001 │ UP           │ unknown"


def test_the_manifest_models_are_redacted_before_any_reply_names_them():
    sink = ConsoleSink("x")
    sink.blind([SECRET_MODEL])
    sink.handle(TrialEnded(result(telemetry(), outcome="invalid-provider", termination_reason="provider-failure",
                                  invalid_cause="provider-failure", error=f"not-found: {SECRET_MODEL}")))
    assert sink.status().error == f"not-found: {MODEL_REDACTED}"  # no reply ever named it
    assert sink.redact(f"RuntimeError: {SECRET_MODEL} refused") == f"RuntimeError: {MODEL_REDACTED} refused"


# -- end to end: a model plays in the live console ------------------------------------------------

async def test_a_model_plays_in_the_live_console_its_cost_shown_its_name_never(tmp_path, monkeypatch):
    """The issue's "done when", on PyBoy: the official OpenAI SDK against a local server, the
    console live, each call's cost in the trace and the meter, the model named nowhere on screen."""
    import hashlib

    from engine.loop.script import parse_script
    from sessions.audit.verify import verify_experiment
    from sessions.evidence.records import Summary
    from sessions.preflight.assets import ASSETS
    from tests.app.conftest import prepare_run, quit_and_wait, wait_for
    from tests.conftest import read_jsonl, write_manifest
    from tests.fakes.provider_server import FakeProviderServer, ok

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-console-key-000000")
    walk = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")
    prices = ASSETS / "pricing" / "prices-2026-11-30.yaml"
    answered = "gpt-5.4-2026-03-05"
    with FakeProviderServer() as server:
        server.script(*[ok({"reasoning_summary": f"step {i}: follow the road", "memory_read": [], "memory_write": [],
                            "observed": {"screen": "overworld", "location_guess": "bedroom",
                                         "objective_guess": "leave the house", "certainty": 0.7},
                            "actions": walk[i:i + 4]}, model=answered) for i in range(0, 12, 4)])
        condition = {"id": "agent", "policy": "model", "provider": "openai", "model": "gpt-5.4",
                     "base_url": server.base_url("chat"),
                     "pricing": {"file": "bundled:prices-2026-11-30.yaml",
                                 "sha256": hashlib.sha256(prices.read_bytes()).hexdigest()}}
        manifest = write_manifest(tmp_path, conditions=[condition],
                                  budgets={"accepted_actions": 12, "model_decisions": None, "wall_time_minutes": None,
                                           "total_cost_usd": 1.0})
        prepared, experiment = prepare_run(manifest, tmp_path)
        app = OakwatchConsole(prepared, experiment, speed=None)
        async with app.run_test(size=(160, 50)) as pilot:
            await wait_for(pilot, lambda: app.sink.results, timeout=60, what="the trial to end")
            await wait_for(pilot, lambda: "trial X-01 ended" in screen_text(app) and "finished" in screen_text(app)
                           and "$1.00" in screen_text(app), what="the console to show it")
            text = screen_text(app)
            await quit_and_wait(pilot, app)
    root = experiment.root
    assert verify_experiment(root) == []
    (trial,) = [p for p in (root / "trials").iterdir() if p.is_dir()]
    trace = read_jsonl(trial / "trace.jsonl")
    assert len(trace) == 3 and all(t["cost_source"] == ["derived"] and t["provider_cost_usd"] > 0 for t in trace)
    assert "step 8: follow the road" in text and "bedroom" in text
    assert money(trace[0]["provider_cost_usd"]) in text
    total = sum(t["provider_cost_usd"] for t in trace)
    assert f"{money(total)} / $1.00" in text  # the live cost meter
    assert "gpt-5.4" not in text and "gpt" not in text.lower()  # blinded: the label only
    summary = Summary.model_validate_json((root / "summary.json").read_text())
    assert summary.stop_reason is None and summary.stopped_early is False
