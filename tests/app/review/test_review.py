"""`oakwatch review`: Pilot tests on a real folder recorded from a model condition (the cartridge,
a local fake provider): scrubbing, milestone/invalid/tag jumps, the memory store as it stood, the
ladder so far, labels through the annotation layer, refusals, blinding, and a still-running trial."""

from __future__ import annotations

import json
import pathlib
import shutil
from pathlib import Path

import pytest

from app.review.review import ReviewApp, annotator_problem
from app.review.review_data import MODEL_MASK, TrialData, list_trials, replay_memory
from engine.loop.records import MemoryOp
from engine.loop.script import parse_script
from panes.review.annotate import AnnotateDialog, ReviewedDialog
from panes.review.response import ResponsePane
from panes.review.review_memory import ReviewMemoryPane
from panes.trial.frame import FrameView
from sessions.audit.verify import verify_experiment
from sessions.evidence.framestore import pixel_sha256
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.assets import ASSETS
from sessions.preflight.experiment import prepare
from tests.conftest import read_jsonl, write_manifest
from tests.fakes.provider_server import FakeProviderServer, ok, text

ANSWERED = "model-that-answered-2026-10-01"
ASKED = "claude-sonnet-4-6"
WALK = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")
SIZE = (160, 50)


def answer(actions, note="walking on", write=(), read=()):
    return {"reasoning_summary": note,
            "observed": {"screen": "overworld", "location_guess": "town", "objective_guess": "deliver the parcel",
                         "certainty": 0.8},
            "memory_read": list(read), "memory_write": list(write), "actions": actions}


def fact(value, kind="location", **extra):
    return {"kind": kind, "value": value, "confidence": 0.9, "evidence": "on screen", **extra}


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    """A model condition that plays 16 decisions of 4 actions: memory writes,
    reads and a supersession, one invalid output (retried), and the model naming itself."""
    tmp = tmp_path_factory.mktemp("review")
    chunks = [WALK[i:i + 4] for i in range(0, len(WALK), 4)]
    with FakeProviderServer() as server:
        replies = []
        for d, chunk in enumerate(chunks[:16], 1):
            write, read, note = (), (), "walking on"
            if d == 1:
                write = [fact("bedroom upstairs"), fact("leave the house", kind="objective")]
            elif d == 3:
                replies.append(text(f"I am {ANSWERED} and I would rather not answer in JSON", model=ANSWERED))
            elif d == 4:
                read = ["fact-0001"]
                write = [fact("ground floor", supersedes="fact-0001")]
                note = f"{ANSWERED} thinks we went down the stairs"
            elif d == 7:
                read = ["fact-0002", "fact-0003"]
                write = [fact("ACORN TOWN", supersedes="fact-0003")]
            replies.append(ok(answer(chunk, note, write, read), model=ANSWERED))
        server.script(*replies)
        condition = {"id": "agent", "policy": "model", "provider": "openai-compatible", "model": ASKED,
                     "base_url": server.base_url("chat"), "memory_policy": "persistent",
                     "request": {"timeout_seconds": 2, "max_attempts": 2, "backoff_seconds": 0.01,
                                 "backoff_cap_seconds": 0.1}}
        budgets = {"accepted_actions": 64, "model_decisions": 400, "wall_time_minutes": 30, "total_cost_usd": None,
                   "tokens": None, "unrecoverable_loop_repeats": 3}
        manifest = write_manifest(tmp, conditions=[condition], budgets=budgets)
        out = tmp / "exp"
        prepared = prepare(manifest, out)
        runner = ExperimentRunner(prepared, create_folder(prepared, out))
        runner.run()
    (result,) = runner.results
    trial = out / "trials" / result.trial_key
    trace = read_jsonl(trial / "trace.jsonl")
    assert trace[0]["model_id"] == ANSWERED and any(t["invalid_output"] for t in trace)
    assert result.milestones, "the run should reach a rung"
    return out, result.trial_key


@pytest.fixture
def folder(model_run, tmp_path):
    dst = tmp_path / "exp"
    shutil.copytree(model_run[0], dst)
    return dst, model_run[1]


def trace_of(root: Path, key: str) -> list[dict]:
    return read_jsonl(root / "trials" / key / "trace.jsonl")


async def opened(pilot, app) -> None:
    await pilot.pause()
    assert app.trial is not None and app.decision == 1


async def test_scrubbing_moves_the_decision_and_the_frame(folder):
    root, key = folder
    trace = trace_of(root, key)
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        view = app.query_one(FrameView)

        def frame_in_view() -> str:
            return pixel_sha256(view._frame)

        assert app.shown_frame_sha256 == trace[0]["frame_sha256"] == frame_in_view()
        await pilot.press("right")
        assert app.decision == 2
        assert app.shown_frame_sha256 == trace[1]["frame_sha256"] == frame_in_view() != trace[0]["frame_sha256"]
        assert f"decision 2 · frame {trace[0]['result_frame_index']} · {trace[1]['frame_sha256'][:12]}" in str(
            app.query_one("#frame-caption").render())
        await pilot.press("pagedown")
        assert app.decision == 12 and frame_in_view() == trace[11]["frame_sha256"]
        await pilot.press("end")
        assert app.decision == len(trace) and frame_in_view() == trace[-1]["frame_sha256"]
        await pilot.press("right")
        assert app.decision == len(trace)  # the end stays the end
        await pilot.press("pageup")
        assert app.decision == len(trace) - 10
        await pilot.press("left")
        assert app.decision == len(trace) - 11 and frame_in_view() == trace[len(trace) - 12]["frame_sha256"]
        await pilot.press("home")
        assert app.decision == 1 and frame_in_view() == trace[0]["frame_sha256"]
        # The response in view is that decision's, raw text and parsed actions in full.
        await pilot.press("right", "right", "right")
        pane = app.query_one(ResponsePane)
        assert "Decision 4" in pane.text.plain and " ".join(trace[3]["parsed_actions"]) in pane.text.plain
        assert '"supersedes": "fact-0001"' in pane.text.plain  # the raw response, as produced


async def test_milestone_and_invalid_jumps_land_on_their_decisions(folder):
    root, key = folder
    result = json.loads((root / "trials" / key / "result.json").read_text())
    awards = sorted({m["decision_id"] for m in result["milestones"]})
    invalid = [t["decision_id"] for t in trace_of(root, key) if t["invalid_output"]]
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        landed = []
        for _ in awards:
            await pilot.press("m")
            landed.append(app.decision)
        assert landed == awards
        ladder = app.ladder_view
        assert set(ladder.awards) == {m["id"] for m in result["milestones"] if m["decision_id"] <= app.decision}
        await pilot.press("m")  # no further milestone: stays
        assert app.decision == awards[-1]
        back = []
        for _ in awards[:-1]:
            await pilot.press("M")
            back.append(app.decision)
        assert back == awards[-2::-1]
        # The ladder so far: nothing before the first award.
        await pilot.press("home")
        first = min(result["milestones"], key=lambda m: m["decision_id"])
        if first["decision_id"] > 1:
            assert first["id"] not in app.ladder_view.awards
        await pilot.press("i")
        assert app.decision == invalid[0]
        assert "INVALID OUTPUT" in app.query_one(ResponsePane).text.plain
        assert "Attempt 1 of 2: invalid" in app.query_one(ResponsePane).text.plain
        await pilot.press("end", "I")
        assert app.decision == invalid[-1]


def replayed(root: Path, key: str, n: int) -> dict[str, str]:
    """The store after decision n, worked out here from memory.jsonl: fact id -> status."""
    store: dict[str, str] = {}
    for op in read_jsonl(root / "trials" / key / "memory.jsonl"):
        if op["decision_id"] > n:
            break
        if op["op"] in ("write", "update", "supersede", "complete"):
            store[op["fact_id"]] = op["fact"]["status"]
        elif op["op"] == "evict":
            store.pop(op["fact_id"], None)
    return store


async def test_the_memory_view_at_a_decision_is_the_replay_of_its_ops(folder):
    root, key = folder
    trace = trace_of(root, key)
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        pane = app.query_one(ReviewMemoryPane)
        for n in range(1, len(trace) + 1):
            if n > 1:
                await pilot.press("right")
            assert app.decision == n
            shown = {row[1]: row[4].replace(" ⚠", "") for row in pane.shown_rows}
            assert shown == replayed(root, key, n), f"decision {n}"
            marks = {row[1]: row[0] for row in pane.shown_rows}
            for fid in trace[n - 1]["memory_reads"]:
                assert "▶" in marks[fid], f"decision {n} read {fid}"
            for fid in trace[n - 1]["memory_writes"]:
                if fid is not None:
                    assert "✎" in marks[fid], f"decision {n} wrote {fid}"
        # Decision 4 superseded fact-0001 with fact-0003 and read fact-0001.
        await pilot.press("home", "right", "right", "right")
        marks = {row[1]: row[0] for row in pane.shown_rows}
        assert marks["fact-0001"].startswith("▶") and "↷" in marks["fact-0001"] and marks["fact-0003"] == "✎"
        assert "read fact-0001" in pane.border_subtitle and "wrote" in pane.border_subtitle


def test_replay_memory_is_pure_and_stops_at_the_decision(folder):
    root, key = folder
    ops = [MemoryOp.model_validate(o) for o in read_jsonl(root / "trials" / key / "memory.jsonl")]
    for n in (1, 3, 4, 7, 10):
        view = replay_memory(ops, n)
        assert {f["fact_id"]: f["status"] for f in view.facts} == replayed(root, key, n)


async def test_annotating_writes_a_label_for_the_decision_in_view(folder):
    root, key = folder
    trace = trace_of(root, key)
    sums = (root / "SHA256SUMS").read_bytes()
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        await pilot.press("home", *["right"] * 5)
        assert app.decision == 6
        await pilot.press("a")
        assert isinstance(app.screen, AnnotateDialog)
        await pilot.press(*"fact-0001")  # refers-to has the focus
        app.screen.query_one("#label-recovered").value = "7"
        app.screen.query_one("#label-note").value = "kept the bedroom after leaving it"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, AnnotateDialog)
        layer = root / "annotations" / "alice" / "annotations.jsonl"
        (label,) = read_jsonl(layer)
        assert (label["trial_key"], label["decision_id"], label["annotator"]) == (key, 6, "alice")
        assert label["frame_sha256"] == trace[5]["frame_sha256"]
        assert (label["type"], label["severity"], label["refers_to"]) == ("omission", "minor", "fact-0001")
        assert label["note"] == "kept the bedroom after leaving it"
        for name, value in (("recovered_decision", 7), ("role", "primary"), ("source", "annotator")):
            if name in label:  # the grown record (issue 10) carries these
                assert label[name] == value
        assert (root / "annotations" / "alice" / "SHA256SUMS").is_file()
        assert (root / "SHA256SUMS").read_bytes() == sums  # the evidence is untouched
        # The label is a tag of this annotator now: t finds it.
        await pilot.press("home", "t")
        assert app.decision == 6
        if label.get("id"):  # the layer numbers labels: a consequence names its primary by that id
            assert label["id"] == "alice-1"
            await pilot.press("right", "a")
            dialog = app.screen
            await pilot.press(*"4")
            dialog.query_one("#label-role").value = "consequence"
            await pilot.press("enter")
            assert "names its primary" in dialog.error
            dialog.query_one("#label-primary").value = "alice-1"
            await pilot.press("enter")
            await pilot.pause()
            assert not isinstance(app.screen, AnnotateDialog)
            second = read_jsonl(layer)[1]
            assert (second["decision_id"], second["role"], second["primary_id"], second["refers_to"]) == (
                7, "consequence", "alice-1", "4")


async def test_r_marks_the_trial_reviewed_and_the_list_shows_it(folder):
    root, key = folder
    n = len(trace_of(root, key))
    layer = root / "annotations" / "alice" / "annotations.jsonl"
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        options = app.query_one("#trials")
        assert "✓" not in str(options.get_option(key).prompt)
        assert "not reviewed (r)" in str(app.query_one("#review-status").render())
        await pilot.press("r")
        dialog = app.screen
        assert isinstance(dialog, ReviewedDialog)
        assert dialog.values() == {"first": "1", "last": str(n), "note": ""}  # the whole trial by default
        dialog.query_one("#reviewed-to").value = str(n + 1)  # past the trial: refused, nothing written
        await pilot.press("enter")
        assert isinstance(app.screen, ReviewedDialog) and f"not within {key}'s 1..{n}" in dialog.error
        assert not layer.exists()
        dialog.query_one("#reviewed-to").value = "6"
        await pilot.press(*"first part", "enter")
        await pilot.pause()
        assert not isinstance(app.screen, ReviewedDialog)
        (record,) = read_jsonl(layer)
        assert (record["kind"], record["trial_key"], record["decision_id"], record["through_decision"],
                record["note"], record["id"]) == ("reviewed", key, 1, 6, "first part", "alice-1")
        assert "◐ 1..6" in str(options.get_option(key).prompt)
        assert f"reviewed 1..6 of 1..{n}" in str(app.query_one("#review-status").render())
        # the rest of it: the dialog starts where the review stopped
        await pilot.press("r")
        assert app.screen.values()["first"] == "7"
        await pilot.press("enter")
        await pilot.pause()
        assert [(r["decision_id"], r["through_decision"]) for r in read_jsonl(layer)] == [(1, 6), (7, n)]
        await pilot.press("home", "t")  # a review is not a tag: nothing to jump to at decision 7
        assert app.decision == 1 and app.trial.tag_decisions() == []
        assert "✓" in str(options.get_option(key).prompt) and "✓ 1 reviewed" in options.border_subtitle
        assert "✓ reviewed" in str(app.query_one("#review-status").render())
        await pilot.press("r")  # already reviewed whole: said so, nothing written
        await pilot.pause()
        assert not isinstance(app.screen, ReviewedDialog) and len(read_jsonl(layer)) == 2
    assert verify_experiment(root) == []
    # read-only: r records nothing
    app = ReviewApp(root, reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        await pilot.press("r")
        assert not isinstance(app.screen, ReviewedDialog)
    assert len(read_jsonl(layer)) == 2


async def test_a_bad_reference_is_refused_with_a_message(folder):
    root, key = folder
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        await pilot.press("home", "right", "right")
        await pilot.press("a")
        dialog = app.screen
        assert isinstance(dialog, AnnotateDialog)
        await pilot.press(*"fact-9999", "enter")
        assert isinstance(app.screen, AnnotateDialog)
        assert "refused" in dialog.error and "fact-9999" in dialog.error
        # A fact written only later, and a decision that is not earlier, are refused too.
        for refers, words in (("fact-0003", "after decision 3"), ("3", "earlier decisions are 1..2"),
                              ("", "required")):
            dialog.query_one("#label-refers").value = refers
            await pilot.press("enter")
            assert words in dialog.error, dialog.error
        dialog.query_one("#label-refers").value = "1"
        dialog.query_one("#label-recovered").value = "2"
        await pilot.press("enter")
        assert "recovered decision 2 must be after 3" in dialog.error
        await pilot.press("escape")
        assert not isinstance(app.screen, AnnotateDialog)
    assert not (root / "annotations" / "alice").exists()


async def test_read_only_without_an_annotator(folder):
    root, _key = folder
    app = ReviewApp(root, reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        await pilot.press("a")
        assert not isinstance(app.screen, AnnotateDialog)
    assert not (root / "annotations").exists()
    assert annotator_problem("operator") and annotator_problem("../x") and annotator_problem("alice") is None


def _visible(app) -> str:
    return app.export_screenshot()


async def test_no_model_id_appears_and_condition_files_stay_unread(folder, monkeypatch):
    root, key = folder
    opened_paths: list[str] = []
    real_open = pathlib.Path.open

    def spy(self, *args, **kwargs):
        opened_paths.append(str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "open", spy)
    trace = trace_of(root, key)
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        for n in range(1, len(trace) + 1):
            if n > 1:
                await pilot.press("right")
            await pilot.pause()
            screen = _visible(app)
            text = app.query_one(ResponsePane).text.plain
            for model_id in (ANSWERED, ASKED):
                assert model_id not in screen and model_id not in text, f"decision {n}"
            assert "agent" not in app.query_one("#review-status").render().plain  # the condition's id
            if n in (3, 4):
                assert MODEL_MASK in text  # the model naming itself is masked too
        assert f"condition {key[0]} ·" in str(app.query_one("#review-status").render())
    assert not [p for p in opened_paths if "/conditions/" in p or p.endswith("blinding.json")]


async def test_an_unblinded_folder_names_the_condition(folder):
    root, key = folder
    (root / "unblinded").mkdir()
    app = ReviewApp(root, reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        assert f"condition {key[0]} = agent" in str(app.query_one("#review-status").render())
        assert ANSWERED in app.query_one(ResponsePane).text.plain


async def test_a_running_trial_is_reread_and_a_torn_line_waits(folder):
    root, key = folder
    trial = root / "trials" / key
    lines = (trial / "trace.jsonl").read_bytes().splitlines(keepends=True)
    (trial / "result.json").unlink()
    (trial / "trace.jsonl").write_bytes(b"".join(lines[:5]) + lines[5][:40])  # a torn sixth line
    assert [e.outcome for e in list_trials(root)] == ["running"]
    app = ReviewApp(root, annotator="alice", reread_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, app)
        assert app.trial.decisions == 5 and app.trial.problems == []
        await pilot.press("end")
        assert app.decision == 5
        assert "running" in str(app.query_one("#review-status").render())
        (trial / "trace.jsonl").write_bytes(b"".join(lines))
        app.reread()
        await pilot.pause()
        assert app.trial.decisions == len(lines)
        await pilot.press("end")
        assert app.decision == len(lines)


def test_trial_data_labels_and_awards_without_a_result(folder):
    root, key = folder
    result = json.loads((root / "trials" / key / "result.json").read_text())
    sealed = TrialData(root, key)
    (root / "trials" / key / "result.json").unlink()
    running = TrialData(root, key)
    assert running.running and running.milestone_decisions() == sealed.milestone_decisions() == sorted(
        {m["decision_id"] for m in result["milestones"]})
    for d in running.milestone_decisions():
        assert running.ladder_at(d).awards.keys() == sealed.ladder_at(d).awards.keys()
    view = sealed.view(1)
    assert view.model == MODEL_MASK and all(a.model == MODEL_MASK for a in view.attempts)


def test_a_consequence_names_an_existing_primary_label(folder):
    root, key = folder
    layer = root / "annotations" / "alice"
    layer.mkdir(parents=True)
    (layer / "annotations.jsonl").write_text(json.dumps({"id": "alice-1", "trial_key": key, "decision_id": 4}) + "\n")
    trial = TrialData(root, key, annotator="alice")
    label = {"type": "false-persistence", "severity": "material", "refers_to": "fact-0001", "role": "consequence"}
    assert "names its primary" in trial.check_label(6, label)
    assert "not one of your labels" in trial.check_label(6, {**label, "primary_id": "alice-9"})
    assert trial.check_label(6, {**label, "primary_id": "alice-1"}) is None
    assert trial.tag_decisions() == [4]
    assert "needs a note" in trial.check_label(6, {**label, "role": "primary", "type": "other"})
    assert "not one of the rubric's" in trial.check_label(6, {**label, "type": "forgetfulness"})


def test_the_command_refuses_bad_input(tmp_path, folder):
    from app.cli import main

    root, _key = folder
    assert main(["review", str(tmp_path / "nothing")]) == 2
    assert main(["review", str(root), "--annotator", "operator"]) == 2
    assert main(["review", str(root), "--annotator", "a/b"]) == 2
