"""Scoring by hand, for a game without a memory probe: annotators' milestone labels and route notes.

A milestone label (`oakwatch annotate milestone`) says a rung of the frozen ladder was first reached
at a decision; route notes (`annotate route`) name the room (and landmark) at a decision whose
coordinates no probe reads. Both live in the annotators' layers (sessions.annotations.annotation_layer), and
agreement between annotators is measured the way the memory-error labels' is (Cohen's kappa,
sessions.analysis.metrics):

- milestones: per pair of annotators, over every (trial, rung) of the trials both scored (labelled a
  milestone in): reached or not (kappa), and, where both say reached, whether at the same decision;
  each disagreement listed.
- routes: per pair, over the decisions both noted: the room (kappa), disagreements listed.
- the repeated-route metric from route notes: each annotator's notes of a trial, in decision order,
  become positions (room, landmark) fed to the same RouteTracker the loop uses for probed positions;
  a milestone the same annotator labelled is a progress event (repetition before it is not after it).
  `repeated_route_transitions` is the tracker's repeated count, null without at least two notes.
"""

from __future__ import annotations

from collections import defaultdict

from engine.loop.records import Annotation
from engine.loop.routes import RouteTracker
from sessions.analysis.metrics import _cohen
from sessions.annotations.annotation_layer import ADJUDICATION, OPERATOR

NOTE_ACTION = "NOTE"  # the "action" between two noted positions: notes carry no button


def _annotators(layers: dict[str, list[Annotation]]) -> list[str]:
    return sorted(n for n in layers if n not in (OPERATOR, ADJUDICATION))


def milestone_labels(records: list[Annotation]) -> dict[tuple[str, str], int]:
    """(trial key, rung id) -> the decision it was first reached at, by one annotator."""
    return {(a.trial_key, a.milestone): a.decision_id for a in records if a.kind == "milestone"}


def milestone_agreement(layers: dict[str, list[Annotation]], ladder: list[str]) -> dict:
    names = _annotators(layers)
    labels = {n: milestone_labels(layers[n]) for n in names}
    scored = {n: {k for k, _ in labels[n]} for n in names}
    pairs = [_milestone_pair(x, y, labels, sorted(scored[x] & scored[y]), ladder)
             for i, x in enumerate(names) for y in names[i + 1:]]
    measured = [n for n in names if scored[n]]
    return {"annotators": measured, "pairs": [p for p in pairs if set(p["annotators"]) <= set(measured)],
            "note": None if len(measured) >= 2 else "fewer than two annotators scored milestones: agreement "
                                                      "not measured"}


def _milestone_pair(x: str, y: str, labels: dict[str, dict[tuple[str, str], int]], trials: list[str],
                    ladder: list[str]) -> dict:
    """One pair's agreement over every (trial, rung) of the trials both scored (module docstring)."""
    lx, ly = labels[x], labels[y]
    units = [(t, m) for t in trials for m in ladder]
    k, po = _cohen([str(u in lx) for u in units], [str(u in ly) for u in units])
    both = [u for u in units if u in lx and u in ly]
    same = sum(lx[u] == ly[u] for u in both)
    disagreements = [{"trial_key": t, "milestone": m, x: lx.get((t, m)), y: ly.get((t, m))}
                     for t, m in units if lx.get((t, m)) != ly.get((t, m))]
    return {"annotators": [x, y], "trials": trials, "units": len(units), "kappa": k,
            "observed_agreement": round(po, 6) if units else None,
            "both_reached": len(both), "same_decision": same if both else None,
            "disagreements": disagreements}


def route_notes(records: list[Annotation]) -> dict[str, list[Annotation]]:
    """trial key -> one annotator's route notes in decision order."""
    out: dict[str, list[Annotation]] = defaultdict(list)
    for a in sorted((a for a in records if a.kind == "route"), key=lambda a: (a.trial_key, a.decision_id)):
        out[a.trial_key].append(a)
    return dict(out)


def repeated_routes(records: list[Annotation], loop_repeats: int | None = None) -> dict[str, dict]:
    """trial key -> the repeated-route figures of one annotator's route notes (module docstring)."""
    progress_at = defaultdict(set)
    for a in records:
        if a.kind == "milestone":
            progress_at[a.trial_key].add(a.decision_id)
    out = {}
    for key, notes in route_notes(records).items():
        places: dict[tuple[str, str], int] = {}
        tracker = RouteTracker(loop_repeats)
        previous = None
        transitions = 0
        for note in notes:
            place = (note.room.strip().casefold(), (note.landmark or "").strip().casefold())
            here = (places.setdefault(place[:1] + ("",), len(places)), places.setdefault(place, len(places)), 0)
            if previous is not None:
                if any(previous[1] < d <= note.decision_id for d in progress_at[key]):
                    tracker.progress()  # a rung reached between the two notes
                transitions += previous[0] != here
                tracker.record(previous[0], NOTE_ACTION, here)
            previous = (here, note.decision_id)
        out[key] = {"notes": len(notes), "transitions": transitions,
                    "repeated_route_transitions": tracker.repeated_actions if len(notes) >= 2 else None,
                    "loops": tracker.loops_detected if len(notes) >= 2 else None}
    return out


def route_agreement(layers: dict[str, list[Annotation]]) -> dict:
    names = _annotators(layers)
    rooms = {n: {(a.trial_key, a.decision_id): a.room.strip().casefold() for a in layers[n] if a.kind == "route"}
             for n in names}
    pairs = []
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            units = sorted(set(rooms[x]) & set(rooms[y]))
            k, po = _cohen([rooms[x][u] for u in units], [rooms[y][u] for u in units])
            pairs.append({"annotators": [x, y], "units": len(units), "kappa": k,
                          "observed_agreement": round(po, 6) if units else None,
                          "disagreements": [{"trial_key": u[0], "decision_id": u[1], x: rooms[x][u], y: rooms[y][u]}
                                            for u in units if rooms[x][u] != rooms[y][u]]})
    return {"annotators": [n for n in names if rooms[n]], "pairs": [p for p in pairs if p["units"]]}


def hand_scoring(layers: dict[str, list[Annotation]], ladder: list[str], loop_repeats: int | None = None) -> dict:
    """Everything above, for a report: agreement on milestones and rooms, each annotator's route figures."""
    names = _annotators(layers)
    return {"milestones": milestone_agreement(layers, ladder), "routes": route_agreement(layers),
            "repeated_routes": {n: r for n in names if (r := repeated_routes(layers[n], loop_repeats))}}
