"""`oakwatch run --workers 2` on a terminal: the run's own console shows every trial of the run at
once while they play in worker processes, drills into one, pauses and steps it through the run's
control socket (the row reads paused), q ends the run cleanly (records written, the folder
verifies), and a finished run shows each trial's outcome and cost and the run's summary table."""

from __future__ import annotations

import asyncio
import time

from app.console.run_watch import RunWatchApp
from app.review.attach import TrialScreen
from panes.overview import OverviewPane
from sessions.audit.verify import verify_experiment
from sessions.execute.control_socket import ControlClient
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.execute.workers import make_pool
from sessions.preflight.experiment import prepare
from tests.app.review.test_attach import row_line, screen_text
from tests.conftest import write_manifest

SIZE = (160, 50)


async def until(pilot, condition, timeout: float = 90.0, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)
        await pilot.pause()


def two_worker_run(tmp_path, *, actions: int, trials: int):
    """A random-walk run of `trials` trials on two workers, its pool started as run_watched starts it
    (before the app takes over stderr)."""
    manifest = write_manifest(
        tmp_path, budgets={"accepted_actions": actions, "model_decisions": None, "wall_time_minutes": None,
                           "unrecoverable_loop_repeats": None},
        conditions=[{"id": "a", "policy": "random", "seed": 1}], trials={"per_condition": trials})
    prepared = prepare(manifest, tmp_path / "exp")
    folder = create_folder(prepared, tmp_path / "exp")
    runner = ExperimentRunner(prepared, folder, workers=2)
    runner.pool = make_pool(runner)
    return folder, runner


async def test_the_run_console_over_two_workers(tmp_path):
    folder, runner = two_worker_run(tmp_path, actions=500_000, trials=3)
    app = RunWatchApp(folder.root, runner, poll_seconds=0.2)
    async with app.run_test(size=SIZE) as pilot:
        overview = app.query_one(OverviewPane)
        await until(pilot, lambda: sum(r.status == "running" for r in app.folder.rows()) == 2,
                    what="two trials running at once")
        rows = {r.key: r.status for r in app.folder.rows()}
        assert sorted(rows.values()) == ["running", "running", "waiting"]  # the schedule, whole
        running = sorted(k for k, s in rows.items() if s == "running")
        assert overview.selected_key in rows

        # pause the selected trial through the socket, from the console's own key
        while overview.selected_key != running[0]:
            await pilot.press("down")
        await pilot.press("p")
        client = ControlClient(folder.root)
        await until(pilot, lambda: client.status().get("paused_trials") == [running[0]], what="the pause")
        # the row says so (the channel's status is asked every second), and the other trial runs on
        await until(pilot, lambda: "paused" in row_line(app, running[0]).split(), what="the row to read paused")
        assert "running" in row_line(app, running[1]).split()
        # a step: one decision, then the trial holds again and reads paused, not stepping for good
        trace = folder.root / "trials" / running[0] / "trace.jsonl"
        held = len(trace.read_bytes().splitlines())
        await pilot.press("s")
        await until(pilot, lambda: len(trace.read_bytes().splitlines()) == held + 1, what="the stepped decision")
        await until(pilot, lambda: client.status().get("trial_states", {}).get(running[0]) == "paused",
                    what="the trial to hold again")
        await until(pilot, lambda: "paused" in row_line(app, running[0]).split(), what="the row to read paused")
        async def drilled_in() -> bool:  # a key pressed while the table redraws on a loaded machine may miss
            if not isinstance(app.screen, TrialScreen):
                overview.focus()
                await pilot.press("enter")
                await pilot.pause(0.5)
            return isinstance(app.screen, TrialScreen)

        deadline = time.monotonic() + 60
        while not await drilled_in():
            assert time.monotonic() < deadline, "timed out waiting for the trial's panes"
        assert app.screen.key == running[0]
        await pilot.press("p")  # resume, from the drilled-in view
        await until(pilot, lambda: client.status().get("paused_trials") == [], what="the resume")
        await pilot.press("escape")

        await pilot.press("q")  # ends the run: the running trials are ended and recorded
        await until(pilot, lambda: app.run_done, what="the run to finish")
        await until(pilot, lambda: not app.is_running, timeout=10, what="the console to close")
    summary = runner.summary
    assert summary is not None and summary.stopped_early and summary.stop_reason == "operator-quit"
    assert verify_experiment(folder.root) == []


async def test_a_finished_two_worker_run_shows_outcomes_costs_and_its_summary(tmp_path):
    folder, runner = two_worker_run(tmp_path, actions=30, trials=2)
    app = RunWatchApp(folder.root, runner, poll_seconds=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.run_done, what="the run to finish")
        await until(pilot, lambda: sorted(r.status for r in app.folder.rows()) == ["ended", "ended"],
                    what="both rows to end")
        await pilot.pause(0.3)
        for key in (r.key for r in app.folder.rows()):
            line = row_line(app, key)
            assert "game-failure (budget:accepted_actions)" in line  # the end line's words
            assert "$0.00" in line.split()  # random walkers pay nothing: a known zero, as the console shows it
        await until(pilot, lambda: app.query_one("#summary").display, what="the summary")
        text = screen_text(app)
        assert "runs: 2/2 positions hold a valid trial, 0 succeeded, 2 failed" in text
        assert not app.query_one(OverviewPane).region.overlaps(app.query_one("#summary").region)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, timeout=10, what="the console to close")
    assert runner.summary is not None and verify_experiment(folder.root) == []


async def test_at_80x24_every_figure_shows_whole_and_a_finished_run_offers_no_controls(tmp_path):
    """Issue 34 item 5: the trial table used to run past the pane, its Cost column cut to `$`; and the
    footer went on offering pause, step, tag and end trial after the run was over."""
    from app.review.attach import AttachApp

    folder, runner = two_worker_run(tmp_path, actions=30, trials=3)
    app = RunWatchApp(folder.root, runner, poll_seconds=0.2)
    async with app.run_test(size=(80, 24)) as pilot:
        footer = screen_text(app).splitlines()[-1]
        assert "Pause" in footer and "Quit" in footer  # while it runs
        await until(pilot, lambda: app.run_done, what="the run to finish")
        await until(pilot, lambda: sorted(r.status for r in app.folder.rows()) == ["ended"] * 3, what="the rows")
        await pilot.pause(0.3)
        table = app.query_one(OverviewPane)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # nothing past the edge
        for row in app.folder.rows():
            cells = row_line(app, row.key).split()
            assert "$0.00" in cells and "game-failure" in cells  # the outcome, its reason in the summary
        footer = screen_text(app).splitlines()[-1]
        assert not {"Pause", "Step", "Tag", "End"} & set(footer.replace("/", " ").split()), footer
        assert "Quit" in footer
        await pilot.press("p")  # not offered, and not done
        await pilot.pause()
        assert not any("Pausing" in n.message for n in app._notifications)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, timeout=10, what="the console to close")
    # attached later to the finished folder: the same
    attached = AttachApp(folder.root, poll_seconds=None)
    async with attached.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        footer = screen_text(attached).splitlines()[-1]
        assert "Quit" in footer and "Pause" not in footer and "Tag" not in footer, footer
        table = attached.query_one(OverviewPane)
        assert table.virtual_size.width <= table.scrollable_content_region.width
