"""Operator controls against a live dry-run (real emulator), driven with Pilot."""

from __future__ import annotations

import json

from app.console.console import OakwatchConsole
from panes.dialogs import EndTrialDialog, TagDialog
from panes.status import SummaryScreen
from panes.trial.trace import TracePane
from sessions.analysis.summary import exit_status
from sessions.audit.verify import verify_experiment
from sessions.evidence.records import Summary
from tests.app.conftest import prepare_run, quit_and_wait, settle, wait_for
from tests.conftest import find_trial

SIZE = (160, 50)


def decisions(app) -> int:
    return app.sink.status().decisions


def trial_dirs(folder):
    return sorted(p for p in (folder / "trials").iterdir() if p.is_dir())


async def test_pause_stops_new_decisions_and_step_advances_one(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=4.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 3, what="three decisions")
        await pilot.press("p")
        assert app.control.paused
        await settle(pilot, 0.3)  # a decision already under way finishes; none starts
        held = decisions(app)
        await settle(pilot, 0.5)
        assert decisions(app) == held
        assert app.sink.status().state == "paused"

        await pilot.press("s")
        await wait_for(pilot, lambda: decisions(app) == held + 1, what="one stepped decision")
        await settle(pilot, 0.5)
        assert decisions(app) == held + 1
        await wait_for(pilot, lambda: app.sink.status().state == "paused", what="paused again after the step")

        await pilot.press("p")
        await wait_for(pilot, lambda: decisions(app) > held + 2, what="the run resuming")
        await quit_and_wait(pilot, app)
    assert verify_experiment(folder) == []


async def test_terminate_records_the_operators_reason(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    # 1x: the run must outlast typing the reason key by key on a slow machine (~50 s of run).
    app = OakwatchConsole(prepared, experiment, speed=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 2, what="two decisions")
        trial_key = app.sink.status().trial_key
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, EndTrialDialog), what="the end-trial dialog")
        await pilot.press("enter")  # an empty reason is refused
        assert isinstance(app.screen, EndTrialDialog)
        await pilot.press(*"agent is stuck")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.sink.results, what="the trial's result")
        await quit_and_wait(pilot, app)
    # An operator ending an agent's trial makes it invalid: its block is voided for a rerun.
    data = json.loads((find_trial(folder, trial_key) / "result.json").read_text())
    assert (data["outcome"], data["termination_reason"], data["termination_detail"], data["invalid_cause"]) == \
        ("harness-error", "operator-abort", "agent is stuck", "operator-abort")
    assert (folder / "void-1" / trial_key).is_dir()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["missing_positions"] == [0] and summary["success_rate"] is None
    assert verify_experiment(folder) == []


async def test_tag_appends_an_annotation_at_once(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=4.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 2, what="two decisions")
        await pilot.press("p")
        trial_key = app.sink.status().trial_key
        seen = app.sink.status()
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, TagDialog), what="the tag dialog")
        dialog = app.screen
        dialog.query_one("#tag-type").value = "contradiction"
        dialog.query_one("#tag-severity").value = "material"
        dialog.query_one("#tag-refers").value = "fact-9999"  # never held: refused in the dialog
        dialog.query_one("#tag-note").value = "two locations at once"
        await pilot.click("#tag-ok")
        await settle(pilot, 0.2)
        assert isinstance(app.screen, TagDialog) and "never held" in str(dialog.query_one("#tag-error").content)
        dialog.query_one("#tag-refers").value = "fact-0001"
        await pilot.click("#tag-ok")
        annotations = folder / "trials" / trial_key / "annotations.jsonl"
        await wait_for(pilot, lambda: annotations.read_text().strip() != "", what="an annotation line")
        rows = [json.loads(x) for x in annotations.read_text().splitlines()]
        assert len(rows) == 1
        row = rows[0]
        assert (row["type"], row["severity"], row["refers_to"], row["note"]) == \
            ("contradiction", "material", "fact-0001", "two locations at once")
        assert (row["trial_key"], row["decision_id"], row["frame_sha256"]) == \
            (trial_key, seen.decisions, seen.frame_sha256)
        trace = app.query_one(TracePane)
        await wait_for(pilot, lambda: any("⚑ TAG contradiction" in line for line in trace.lines),
                       what="the tag in the trace stream")
        await quit_and_wait(pilot, app)
    assert verify_experiment(folder) == []


async def test_quit_leaves_a_complete_evidence_folder(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=2.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 3, what="three decisions")
        await quit_and_wait(pilot, app)
    summary = Summary.model_validate_json((folder / "summary.json").read_text())
    assert app.return_code == exit_status(summary) == 2
    assert (summary.stopped_early, summary.stop_reason) == (True, "operator-quit")
    assert summary.invalid == 1 and summary.valid == 0 and summary.missing_positions == [0]
    assert verify_experiment(folder) == []
    result = json.loads((find_trial(folder, "X-01") / "result.json").read_text())
    assert (result["outcome"], result["termination_reason"], result["invalid_cause"]) == \
        ("harness-error", "operator-quit", "operator-quit")


async def test_quit_while_paused(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=4.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 1, what="a decision")
        await pilot.press("p")
        await settle(pilot, 0.2)
        await quit_and_wait(pilot, app)
    assert verify_experiment(folder) == []


async def test_speed_keys_cycle_through_paces(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 1, what="a decision")
        await pilot.press("p")  # paused, so the run cannot finish at max pace mid-test
        seen = []
        for _ in range(4):
            await pilot.press("plus")
            seen.append(app.control.speed)
        assert seen == [2.0, 4.0, None, None]
        await pilot.press("minus")
        assert app.control.speed == 4.0
        await quit_and_wait(pilot, app)
    assert verify_experiment(folder) == []


async def test_command_palette_pauses_the_run(manifest, tmp_path):
    prepared, experiment = prepare_run(manifest, tmp_path)
    folder = experiment.root
    app = OakwatchConsole(prepared, experiment, speed=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: decisions(app) >= 1, what="a decision")
        await pilot.press("ctrl+p")
        await settle(pilot, 0.2)
        await pilot.press(*"Pause / resume")
        await settle(pilot, 0.4)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.control.paused, what="the palette's pause")
        await quit_and_wait(pilot, app)
    assert verify_experiment(folder) == []


async def test_once_the_run_is_over_the_footer_stops_offering_the_controls(tmp_path):
    """Issue 34 item 5: p, s, t and x had nothing left to act on, yet the footer went on offering them."""
    from tests.conftest import write_manifest

    manifest = write_manifest(tmp_path, budgets={"accepted_actions": 5, "model_decisions": None,
                                                 "wall_time_minutes": None})
    prepared, experiment = prepare_run(manifest, tmp_path)
    app = OakwatchConsole(prepared, experiment, speed=None)
    async with app.run_test(size=(80, 24)) as pilot:
        def footer() -> str:
            from tests.app.review.test_attach import screen_text

            return (screen_text(app).splitlines() or [""])[-1]

        await wait_for(pilot, lambda: "Pause" in footer(), what="the footer")  # offered while it runs
        await wait_for(pilot, lambda: app.run_done, timeout=60, what="the run to end")
        await wait_for(pilot, lambda: isinstance(app.screen, SummaryScreen), what="the summary (80x24: a screen)")
        await pilot.press("escape")
        await wait_for(pilot, lambda: "Quit" in footer(), what="the console under it")
        await pilot.pause(0.2)
        words = set(footer().replace("/", " ").split())
        assert not {"Pause", "Step", "Tag", "End"} & words and "Quit" in words, footer()
        await pilot.press("q")
    assert verify_experiment(experiment.root) == []
