"""Hand-made events for console tests: a fixed frame and a short, fixed story."""

from __future__ import annotations

import numpy as np

from app.console_state import ConsoleSink
from engine.events import (
    AnnotationAdded,
    BudgetUpdated,
    DecisionRecorded,
    MemoryChanged,
    MilestoneReached,
    StateChanged,
    TrialStarted,
)
from engine.records import Annotation, MemoryOp, MilestoneAward, ResponseLine, TraceLine

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


def budgets(decisions: int, cost=None) -> dict:
    return {"accepted_actions": {"used": decisions, "limit": 400},
            "model_decisions": {"used": decisions, "limit": 330},
            "wall_time_minutes": {"used": 0.75, "limit": 1.0},
            "total_cost_usd": {"used": cost, "limit": None},
            "tokens": {"used": None, "limit": None}}


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
            "accepted_actions": len(actions), "invalid_output": False,
            "observed": {"screen": "overworld", "location_guess": "town", "objective_guess": "find the lab",
                         "certainty": 0.5},
            "memory_reads": [], "memory_writes": [], "milestones_before": [], "milestones_after": [],
            "result_frame_sha256": f"{did + 1:064x}", "result_frame_index": 1000 + 16 * did,
            "termination_reason": None}
    line.update(extra)
    return TraceLine.model_validate(line)


def decision(did: int, frame, actions=("UP",), **extra) -> DecisionRecorded:
    return DecisionRecorded(trace(did, actions, **extra), ResponseLine(decision_id=did, attempts=[]), (), frame)


def award(mid: str, name: str, points: int, did: int, index: int, sha: str) -> MilestoneAward:
    return MilestoneAward(id=mid, name=name, points=points, decision_id=did, frame_index=index,
                          frame_sha256=sha, probe={})


def feed(sink: ConsoleSink, decisions: int = 12) -> None:
    frame = fixed_frame()
    sink.handle(TrialStarted("A-01", "A", 1, 0, 2, frame, "ab" * 32, 1000, MILESTONES, (), budgets(0)))
    sink.handle(StateChanged("running"))
    for did in range(1, decisions + 1):
        extra = {}
        if did == 3:
            extra = {"memory_writes": ["fact-0001", None], "invalid_output": True, "attempts": 2}
        if did == 5:
            extra = {"memory_reads": ["fact-0001", "fact-0002"], "milestones_after": ["M1"]}
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
    sink.handle(BudgetUpdated(budgets(decisions * 25)))
