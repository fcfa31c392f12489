"""Milestones and routes scored by hand (a game without a memory probe): `annotate milestone` labels in
the annotators' layers, checked like every label, agreement between annotators as for memory errors,
and route notes fed to the repeated-route tracker. On a copy of the bundled dry-run (PyBoy)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from sessions.analysis.hand_scoring import hand_scoring, milestone_agreement, repeated_routes, route_agreement
from sessions.annotations.annotation_layer import read_layers
from sessions.audit.verify import verify_experiment

LADDER = [f"M{i}" for i in range(1, 9)]


def annotate(root, *args) -> int:
    return main(["annotate", *args[:1], str(root), *args[1:]])


def milestone(root, who: str, key: str, decision: int, rung: str) -> int:
    return annotate(root, "milestone", "--annotator", who, "--trial", key, "--decision", str(decision),
                    "--milestone", rung)


def route(root, who: str, key: str, decision: int, room: str, landmark: str | None = None) -> int:
    extra = ["--landmark", landmark] if landmark else []
    return annotate(root, "route", "--annotator", who, "--trial", key, "--decision", str(decision), "--room", room,
                    *extra)


@pytest.fixture
def scored(dry_run_copy, dry_run):
    key = dry_run[2][0].trial_key
    for who, labels in {"alice": [(18, "M1"), (29, "M2"), (36, "M3")],
                        "bob": [(18, "M1"), (30, "M2"), (52, "M4")]}.items():
        for decision, rung in labels:
            assert milestone(dry_run_copy, who, key, decision, rung) == 0
    return dry_run_copy, key


def test_milestone_labels_stand_in_the_layer_and_verify_accepts_them(scored, capsys):
    root, key = scored
    layers = read_layers(root)
    assert [(a.kind, a.milestone, a.decision_id) for a in layers["alice"]] == [
        ("milestone", "M1", 18), ("milestone", "M2", 29), ("milestone", "M3", 36)]
    assert verify_experiment(root) == []
    capsys.readouterr()
    assert annotate(root, "list", "--annotator", "alice") == 0
    assert f"{key} decision 36: M3 reached" in capsys.readouterr().out


def test_a_milestone_label_that_cannot_stand_is_refused(scored, capsys):
    root, key = scored
    before = (root / "annotations" / "alice" / "annotations.jsonl").read_bytes()
    assert milestone(root, "alice", key, 40, "M9") == 2
    assert "not a rung of the frozen ladder" in capsys.readouterr().err
    assert milestone(root, "alice", key, 40, "M1") == 2
    assert "M1 of X-01 is labelled already (alice-1, decision 18)" in capsys.readouterr().err
    assert milestone(root, "alice", key, 10_000, "M5") == 2
    assert "not a recorded decision" in capsys.readouterr().err
    assert (root / "annotations" / "alice" / "annotations.jsonl").read_bytes() == before


def test_milestone_agreement_is_kappa_over_every_rung_of_the_trials_both_scored(scored):
    root, key = scored
    result = milestone_agreement(read_layers(root), LADDER)
    (pair,) = result["pairs"]
    # units: 8 rungs of one trial. alice reached {M1,M2,M3}, bob {M1,M2,M4}: 6 of 8 agree.
    # p_o = 0.75; p_e = (3*3 + 5*5) / 64 = 34/64; kappa = (0.75 - 34/64) / (1 - 34/64) = 14/30
    assert pair["units"] == 8 and pair["observed_agreement"] == 0.75
    assert pair["kappa"] == pytest.approx(14 / 30, abs=1e-6)
    assert (pair["both_reached"], pair["same_decision"]) == (2, 1)  # M1 both at 18; M2 at 29 vs 30
    assert [(d["milestone"], d["alice"], d["bob"]) for d in pair["disagreements"]] == [
        ("M2", 29, 30), ("M3", 36, None), ("M4", None, 52)]


def test_route_notes_feed_the_repeated_route_metric_and_their_agreement(scored):
    root, key = scored
    # alice walks house -> town -> lab -> town -> house -> town -> lab -> town -> house: the second lap
    # repeats every 4-transition segment of the first; bob notes the same decisions, one room differently
    laps = ["house", "town", "lab", "town"] * 2 + ["house"]
    for n, room in enumerate(laps, 1):
        assert route(root, "alice", key, 2 + n, room) == 0
        assert route(root, "bob", key, 2 + n, "lab" if n == 3 else room if n != 7 else "shop") == 0
    layers = read_layers(root)
    alice = repeated_routes([a for a in layers["alice"] if a.kind == "route"])[key]
    assert (alice["notes"], alice["transitions"]) == (9, 8)
    assert alice["repeated_route_transitions"] == 1  # (house,town,lab,town,house)... seen again once
    # a milestone labelled between the laps is progress: nothing after it repeats what came before
    reset = repeated_routes(layers["alice"])  # alice's M1 at 18 is after the notes: no reset inside
    assert reset[key]["repeated_route_transitions"] == 1
    assert milestone(root, "carol", key, 7, "M1") == 0
    for n, room in enumerate(laps, 1):
        assert route(root, "carol", key, 2 + n, room) == 0
    carol = repeated_routes(read_layers(root)["carol"])[key]
    assert carol["repeated_route_transitions"] == 0
    rooms = route_agreement(read_layers(root))
    ab = next(p for p in rooms["pairs"] if p["annotators"] == ["alice", "bob"])
    assert ab["units"] == 9 and ab["observed_agreement"] == round(8 / 9, 6)
    assert [(d["decision_id"], d["alice"], d["bob"]) for d in ab["disagreements"]] == [(9, "lab", "shop")]


def test_the_report_carries_the_hand_scoring(scored, tmp_path):
    root, key = scored
    assert main(["report", str(root), "--no-replay", "--output", str(tmp_path / "rep")]) == 0
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["hand_scoring"] == json.loads(json.dumps(hand_scoring(read_layers(root), LADDER)))
    assert doc["hand_scoring"]["milestones"]["pairs"][0]["annotators"] == ["alice", "bob"]


def test_one_annotator_measures_no_agreement(dry_run_copy, dry_run):
    key = dry_run[2][0].trial_key
    assert milestone(dry_run_copy, "alice", key, 18, "M1") == 0
    result = milestone_agreement(read_layers(dry_run_copy), LADDER)
    assert result["pairs"] == [] and "fewer than two" in result["note"]
