"""Hand-made events for console tests: a fixed frame and a short, fixed story."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from textual.app import App, ComposeResult

from app.console.console_state import ConsoleSink
from engine.loop.events import (
    AnnotationAdded,
    BudgetUpdated,
    DecisionRecorded,
    MemoryChanged,
    MilestoneReached,
    StateChanged,
    TrialEnded,
    TrialStarted,
)
from engine.loop.records import Annotation, MemoryOp, MilestoneAward, ResponseLine, Telemetry, TraceLine, TrialResult

GB = np.array([[0x0F, 0x38, 0x0F], [0x30, 0x62, 0x30], [0x8B, 0xAC, 0x0F], [0x9B, 0xBC, 0x0F]], np.uint8)
MILESTONES = (("M1", "Left the player's house", 1), ("M2", "Professor's interruption", 1),
              ("M3", "Starter obtained", 2), ("M4", "Rival battle completed", 2),
              ("M5", "Maple City reached", 2), ("M6", "Parcel received", 3),
              ("M7", "Parcel delivered", 4), ("M8", "Dex received", 5))


def fixed_frame(shift: int = 0) -> np.ndarray:
    """A deterministic 160x144 four-shade picture: tiles, a border and a diagonal band."""
    y, x = np.mgrid[0:144, 0:160]
    shade = ((x + shift) // 8 + y // 8) % 2 + 2 * (((x + shift + y) // 24) % 2)
    shade[(y < 4) | (y >= 140) | (x < 4) | (x >= 156)] = 0
    shade[60:84, 64:96] = 3 - shade[60:84, 64:96]
    return GB[shade]


SECRET_MODEL = "acme-frontier-7b-2026-11-30"  # a model id: the console must never show it


def budgets(decisions: int, cost=None, tokens=None, cost_limit=None, tokens_limit=None) -> dict:
    """A Budgets.snapshot(): None used is unknown, None limit is no limit."""
    return {"accepted_actions": {"used": decisions, "limit": 400},
            "model_decisions": {"used": decisions, "limit": 330},
            "wall_time_minutes": {"used": 0.75, "limit": 1.0},
            "total_cost_usd": {"used": cost, "limit": cost_limit},
            "tokens": {"used": tokens, "limit": tokens_limit}}


def paid(cost: float | None = 0.0123, tokens_in: int | None = 1840, tokens_out: int | None = 96,
         latency_ms: float | None = 912.0, **extra) -> dict:
    """A trace's fields for one paid model call (cost or tokens None: the provider did not say)."""
    return {"model_id": SECRET_MODEL, "response_id": "resp-1", "paid_calls": 1, "input_tokens": tokens_in,
            "output_tokens": tokens_out, "cached_tokens": None if tokens_in is None else 0,
            "provider_cost_usd": cost, "cost_source": None if cost is None else ["provider"],
            "latency_ms": latency_ms, **extra}


def aborted(reason: str = "operator-abort", **extra) -> dict:
    """A paid call cancelled in flight: no response, cost and tokens unknown, the trial ends."""
    return paid(cost=None, tokens_in=None, tokens_out=None, latency_ms=None, aborted=True, invalid_output=True,
                parsed_actions=[], accepted_actions=0, reasoning_summary=None, observed=None,
                termination_reason=reason, **extra)


def observed(screen="overworld", where="town", objective="find the lab", certainty=0.5) -> dict:
    return {"screen": screen, "location_guess": where, "objective_guess": objective, "certainty": certainty}


def fact(fid, kind, subject, predicate, obj, status="active", conf=0.9, last=3):
    return {"fact_id": fid, "kind": kind, "subject": subject, "predicate": predicate, "object": obj,
            "status": status, "confidence": conf, "confirmed": conf >= 0.7, "first_seen_decision": 1,
            "last_confirmed_decision": last, "evidence_frame_sha256": None, "evidence": "",
            "supersedes": None}


def trace(did: int, actions=("UP",), **extra) -> TraceLine:
    line = {"experiment_id": "dry-run", "condition_id": "A", "trial_id": 1, "decision_id": did,
            "timestamp_utc": "2026-11-30T10:00:00.000Z", "frame_sha256": f"{did:064x}", "prompt_sha256": None,
            "model_id": None, "response_id": None, "input_tokens": None, "output_tokens": None,
            "cached_tokens": None, "provider_cost_usd": None, "cost_source": None, "latency_ms": None,
            "attempts": 1, "paid_calls": 0, "aborted": False, "parsed_actions": list(actions),
            "accepted_actions": len(actions), "invalid_output": False, "reasoning_summary": "walk on",
            "observed": {"screen": "overworld", "location_guess": "town", "objective_guess": "find the lab",
                         "certainty": 0.5},
            "memory_reads": [], "memory_writes": [], "milestones_before": [], "milestones_after": [],
            "result_frame_sha256": f"{did + 1:064x}", "result_frame_index": 1000 + 16 * did,
            "termination_reason": None}
    line.update(extra)
    return TraceLine.model_validate(line)


def decision(did: int, frame, actions=("UP",), **extra) -> DecisionRecorded:
    return DecisionRecorded(trace(did, actions, **extra), ResponseLine(decision_id=did, attempts=[]), (), frame)


def telemetry(cost: float | None = 0.0123, tokens: int | None = 12_345, **extra) -> Telemetry:
    """A trial's telemetry; cost or tokens None: not known (one call's figure was missing)."""
    fields = {"decisions": 12, "model_calls": 12, "aborted_calls": 0, "accepted_actions": 14, "invalid_outputs": 1,
              "input_tokens": None if tokens is None else tokens - 1_000,
              "output_tokens": None if tokens is None else 1_000, "cached_tokens": None if tokens is None else 0,
              "tokens": tokens, "cost_usd": cost, "cost_source": None if cost is None else ["provider"],
              "model_latency_ms": 10_944.0, "rejected_actions": 0, "ignored_inputs": 0, "repeated_position_loops": 0,
              "repeated_navigation_actions": 0, "wall_time_seconds": 45.0, "held_seconds": 0.0, "frames": 1200}
    return Telemetry.model_validate({**fields, **extra})


def result(telemetry_: Telemetry | None = None, **extra) -> TrialResult:
    """A result.json record for trial A-01 (telemetry None: recovered without the loop's counters)."""
    fields = {"experiment_id": "dry-run", "condition": "A", "trial": 1, "trial_key": "A-01", "position": 0,
              "attempt": 1, "outcome": "game-failure", "termination_reason": "budget:model_decisions",
              "termination_detail": None, "invalid_cause": None, "error": None,
              "started_utc": "2026-11-30T10:00:00.000Z", "ended_utc": "2026-11-30T10:00:45.000Z", "last_decision": 12,
              "milestones": [], "milestones_reached": [], "pre_satisfied": [], "deepest_milestone": None,
              "progress_points": 0, "total_points": 20, "telemetry": telemetry_, "derived": {}, "provenance": {}}
    return TrialResult.model_validate({**fields, **extra})


def award(mid: str, name: str, points: int, did: int, index: int, sha: str) -> MilestoneAward:
    return MilestoneAward(id=mid, name=name, points=points, decision_id=did, frame_index=index,
                          frame_sha256=sha, probe={})


# What a model-backed agent said at each decision of the fixed story: (screen, location, objective,
# certainty, reasoning summary).
STORY = {
    1: ("overworld", "player's house 2F", "leave the house", 0.9, "Bedroom; the stairs are on the right."),
    2: ("overworld", "player's house 1F", "leave the house", 0.8, "Downstairs. Mom is talking; the door is south."),
    3: ("dialogue", "player's house 1F", "leave the house", 0.7, "Close Mom's dialogue, then walk out."),
    4: ("overworld", "Pallet Town", "find the lab", 0.6, "Outside. The lab should be to the south-east."),
    5: ("overworld", "Pallet Town", "find the lab", 0.6, "Memory says Route 1 is north; the lab is south."),
    6: ("overworld", "Pallet Town", "find the lab", 0.55, "Following the fence east."),
    7: ("overworld", "Pallet Town", "find the lab", 0.5, "Still east; a sign ahead."),
    8: ("transition", "unknown", "find the lab", 0.2, "The screen went dark: a map change."),
    9: ("dialogue", "Route 1 edge", "follow the professor", 0.85,
        "The professor stopped us in the grass and wants us to follow him."),
    10: ("dialogue", "Route 1 edge", "follow the professor", 0.85, "Advance his dialogue."),
    11: ("overworld", "Oak's lab", "get a starter", 0.75, "In the lab; the starters are on the table."),
    12: ("overworld", "Oak's lab", "get a starter", 0.8,
         "The professor is at the back of the lab and the rival is waiting by the left table, so walk up "
         "to the three balls on the table, pick the one on the left before the rival takes it, and only then "
         "talk to the professor again so the rival battle can start."),
}


def feed(sink: ConsoleSink, decisions: int = 12, unknown_cost_at: int | None = None) -> None:
    """A model-backed trial in progress: one paid call a decision (its cost and tokens unknown at
    `unknown_cost_at`, which makes the totals unknown from then on), two milestones, a tag."""
    frame = fixed_frame()
    sink.handle(TrialStarted("A-01", "A", 1, 0, 2, frame, "ab" * 32, 1000, MILESTONES, (), budgets(0)))
    sink.handle(StateChanged("running"))
    cost, tokens = 0.0, 0
    for did in range(1, decisions + 1):
        screen, where, objective, certainty, why = STORY[(did - 1) % len(STORY) + 1]
        call = paid(round(0.0041 + did * 0.0002, 4), 1840 + 12 * did, 60 + did)
        if did == unknown_cost_at:
            call = paid(None, None, None)
        extra = {**call, "reasoning_summary": why, "observed": observed(screen, where, objective, certainty)}
        if did == 3:
            extra.update(memory_writes=["fact-0001", None], invalid_output=True, attempts=2)
        if did == 5:
            extra.update(memory_reads=["fact-0001", "fact-0002"], milestones_after=["M1"])
        if cost is not None:
            cost = None if call["provider_cost_usd"] is None else cost + call["provider_cost_usd"]
            tokens = None if call["input_tokens"] is None else tokens + call["input_tokens"] + call["output_tokens"]
        sink.handle(decision(did, frame, ("UP", "A") if did % 3 == 0 else ("RIGHT",), **extra))
        if did == 5:
            sink.handle(MilestoneReached(award("M1", "Left the player's house", 1, 5, 1080,
                                               "c0ffee" * 10 + "abcd")))
    sink.handle(MilestoneReached(award("M2", "Professor's interruption", 1, 9, 1144, "beef" * 16)))
    facts = (fact("fact-0001", "location", "player", "is_at", "Pallet house", status="superseded"),
             fact("fact-0002", "location", "player", "is_at", "Route 1"),
             fact("fact-0003", "objective", "player", "current_objective", "get a starter", status="completed"),
             fact("fact-0004", "event", "rival", "is_at", "lab", conf=0.4, last=None),
             fact("fact-0005", "event", "rival", "is_at", "Route 1", conf=0.8))
    sink.handle(MemoryChanged(MemoryOp(op="write", decision_id=decisions), facts, (("fact-0004", "fact-0005"),),
                              ("fact-0002",)))
    sink.handle(AnnotationAdded(Annotation(
        trial_key="A-01", decision_id=decisions, frame_sha256="12" * 32, frame_index=1200,
        opened_utc="2026-11-30T10:00:00.000Z", timestamp_utc="2026-11-30T10:00:01.000Z", annotator="operator",
        type="contradiction", severity="material", refers_to="fact-0004", note="rival in two places")))
    sink.handle(BudgetUpdated(budgets(decisions * 25, cost, tokens, cost_limit=0.5)))


def finish(app, trials: int = 1) -> None:
    """The fixed trial ends and the run is over (the operator quit before the next trial): the end
    line in the trace, the finished state, the summary table (`trials` rows: the ended trial and
    earlier ones of a longer schedule)."""
    record = result(telemetry())
    app.sink.handle(TrialEnded(record))
    app.sink.mark("finished", "operator quit (last trial: budget:model_decisions)")
    earlier = [result(telemetry(), trial_key=f"{'AB'[i % 2]}-{i // 2 + 2:02d}", condition="AB"[i % 2],
                      trial=i // 2 + 2, position=i + 1) for i in range(trials - 1)]
    summary = SimpleNamespace(completed=trials, requested=trials + 1, successful=0, failed=trials, invalid=0,
                              success_rate=0.0, stopped_early=True, stop_reason="operator-quit")
    app.show_summary(summary, [record, *earlier])


async def settled(pilot, timeout: float = 20.0) -> None:
    """Wait until the console shows everything fed to it: the layout planned, the frame drawn, the
    memory and trace filled, the footer's keys laid out (then one more screen update)."""
    import time

    from panes.key_footer import KeyFooter
    from panes.trial.frame import FrameView
    from panes.trial.memory import MemoryPane
    from panes.trial.trace import TracePane
    from panes.trial.trial_layout import TrialPanes

    app = pilot.app

    def ready() -> bool:
        base = app.screen_stack[0]
        footer = base.query(KeyFooter)
        keys = footer.first().children if footer else ()
        views = base.query(FrameView)
        return (base.query_one(TrialPanes).plan is not None and base.query_one(MemoryPane).row_count > 0
                and base.query_one(TracePane).line_count > 0 and bool(keys) and keys[0].region.width > 0
                and (not views or views.first().frames_shown > 0))

    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError("the console did not settle")
        await pilot.pause(0.05)
    await pilot.pause(0.1)
    await pilot.wait_for_scheduled_animations()


class One(App):
    """An app holding one widget, for testing a pane on its own."""

    def __init__(self, widget):
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget
