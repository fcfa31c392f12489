"""`oakwatch attach DIR`: the console follows an evidence folder as it is written (a finished run's
records copied into a new folder line by line, torn lines and half-written frame records included),
shows every trial in the overview, drills into one with the live panes, never names a model, and
sends operator keys through the run's control channel (read-only without one)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from app.review.attach import AttachApp, TrialScreen
from app.review.attach_data import AttachFolder
from panes.overview import OverviewPane, sparkline
from panes.trial.frame import FramePane, FrameView
from panes.trial.ladder import LadderPane
from sessions.evidence import layout
from sessions.execute.control_socket import ControlServer
from tests.conftest import run_experiment, write_manifest

SECRET = "secret-model-2026-x9"
SIZE = (160, 50)
TOP_FILES = (layout.MANIFEST, layout.SCHEDULE, "scoring/milestones.yaml", "scoring/memory-error-rubric.yaml")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A finished two-trial run (random walkers), with a model id planted in every trace line and
    response attempt (as a model condition records it) so blinding can be checked."""
    tmp = tmp_path_factory.mktemp("attach")
    manifest = write_manifest(
        tmp, budgets={"accepted_actions": 120, "model_decisions": None, "wall_time_minutes": None,
                      "unrecoverable_loop_repeats": None},
        conditions=[{"id": "rnd", "policy": "random", "seed": 9}, {"id": "alt", "policy": "random", "seed": 11}],
        trials={"per_condition": 1, "blinding_seed": 2})
    out, _, results = run_experiment(manifest, tmp / "exp")
    assert len(results) == 2
    for trial in (out / "trials").iterdir():
        for name, plant in ((layout.TRACE, _plant_trace), (layout.RESPONSES, _plant_response)):
            path = trial / name
            path.write_text("".join(json.dumps(plant(json.loads(x))) + "\n" for x in path.read_text().splitlines()))
    return out


def _plant_trace(line: dict) -> dict:
    return {**line, "model_id": SECRET}


def _plant_response(line: dict) -> dict:
    return {**line, "attempts": [{**a, "model_id": SECRET} for a in line["attempts"]]}


class Copier:
    """Writes a finished folder's records into a new one step by step, as a run would."""

    def __init__(self, source: Path, dest: Path):
        self.source, self.dest = source, dest
        for rel in TOP_FILES:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / rel, dest / rel)
        self.run_log = (source / layout.RUN_LOG).read_bytes().splitlines(keepends=True)
        self._append(layout.RUN_LOG, self.run_log[0])  # run-started
        (dest / layout.TRIALS).mkdir()
        self.keys = json.loads((source / layout.SCHEDULE).read_text())["order"]

    def _append(self, rel: str, data: bytes) -> None:
        path = self.dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as f:
            f.write(data)

    def lines(self, key: str, name: str) -> list[bytes]:
        return (self.source / layout.TRIALS / key / name).read_bytes().splitlines(keepends=True)

    def start(self, key: str) -> None:
        rel = layout.trial_dir(key)
        (self.dest / rel / "frames").mkdir(parents=True)
        shutil.copy(self.source / rel / layout.TRIAL, self.dest / rel / layout.TRIAL)
        for name in layout.STREAMS:
            (self.dest / rel / name).touch()
        (self.dest / rel / layout.FRAMES).touch()

    def decisions(self, key: str, upto: int, *, torn: bool = False) -> None:
        """Decisions 1..upto of `key` written (streams, then the trace line); `torn`: and half of the next
        trace line. The frame store gets the matching share of its bytes, cut wherever that falls."""
        rel = layout.trial_dir(key)
        for name in (layout.RESPONSES, layout.INPUTS, layout.MEMORY):
            keep = [x for x in self.lines(key, name) if json.loads(x)["decision_id"] <= upto]
            (self.dest / rel / name).write_bytes(b"".join(keep))
        trace = self.lines(key, layout.TRACE)
        data = b"".join(trace[:upto])
        if torn and upto < len(trace):
            data += trace[upto][: len(trace[upto]) // 2]
        (self.dest / rel / layout.TRACE).write_bytes(data)
        pack = (self.source / rel / layout.FRAMES).read_bytes()
        (self.dest / rel / layout.FRAMES).write_bytes(pack[: len(pack) * upto // len(trace)])

    def finish(self, key: str) -> None:
        rel = layout.trial_dir(key)
        for name in (*layout.STREAMS, layout.FRAMES, layout.RESULT):
            shutil.copy(self.source / rel / name, self.dest / rel / name)
        n = 1 + self.keys.index(key)
        self._append(layout.RUN_LOG, self.run_log[n])  # trial-sealed

    def end_run(self) -> None:
        """The run log's last lines (run-finished), then the summary, as the run writes them."""
        (self.dest / layout.RUN_LOG).write_bytes(b"".join(self.run_log))
        shutil.copy(self.source / layout.SUMMARY, self.dest / layout.SUMMARY)


def screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


async def test_follows_a_folder_as_it_is_written_torn_lines_included(recorded, tmp_path):
    copier = Copier(recorded, tmp_path / "live")
    first, second = copier.keys
    folder = AttachFolder(copier.dest)
    await folder.poll()
    assert [(r.key, r.status) for r in folder.rows()] == [(first, "waiting"), (second, "waiting")]

    copier.start(first)
    copier.decisions(first, 5, torn=True)
    await folder.poll()
    row = folder.rows()[0]
    assert (row.status, row.decisions) == ("running", 5)
    assert folder.followers[first].problems == []  # the half line is not a problem: it waits
    copier.decisions(first, 6)  # the torn line completed
    await folder.poll()
    assert folder.rows()[0].decisions == 6
    actions = folder.rows()[0].actions
    assert actions == sum(json.loads(x)["accepted_actions"] for x in copier.lines(first, layout.TRACE)[:6])

    copier.finish(first)
    copier.start(second)
    copier.decisions(second, 3)
    await folder.poll()
    rows = folder.rows()
    result = json.loads((recorded / "trials" / first / layout.RESULT).read_text())
    assert rows[0].status == "ended" and rows[0].outcome == result["outcome"]
    assert rows[0].actions == result["telemetry"]["accepted_actions"]
    assert rows[0].deepest == result["deepest_milestone"]
    assert rows[0].cost_text() == "$0.00"  # no paid call: a known zero
    assert (rows[1].status, rows[1].decisions) == ("running", 3)
    copier.finish(second)
    copier.end_run()
    await folder.poll()
    assert folder.run_state.startswith("finished")
    assert [r.status for r in folder.rows()] == ["ended", "ended"]


def test_sparkline_of_points_over_actions():
    assert sparkline([], 4, 10) == "    "
    line = sparkline([(10, 0), (20, 5), (40, 10)], 8, 10, max_x=80)
    assert len(line) == 8 and line.endswith("    ") and line[3] == "█"
    assert sparkline([(10, 0)], 4, 10, max_x=10) == "▁▁▁▁"


async def test_overview_updates_and_drill_in_shows_frame_and_ladder_without_a_model_id(recorded, tmp_path):
    copier = Copier(recorded, tmp_path / "live")
    first, second = copier.keys
    app = AttachApp(copier.dest, poll_seconds=None, theme="gameboy")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(OverviewPane)
        assert table.row_count == 2
        assert "waiting" in screen_text(app)
        copier.start(first)
        copier.decisions(first, 20, torn=True)
        await app.poll()
        await pilot.pause()
        text = screen_text(app)
        assert "running" in text and first in text
        assert "read-only: no control channel" in text

        await pilot.press("p")  # no socket: refused politely
        await pilot.pause()
        assert any("read-only" in n.message for n in app._notifications)

        await pilot.press("enter")  # the first row: drill in
        await pilot.pause()
        assert isinstance(app.screen, TrialScreen) and app.screen.key == first
        await app.poll()  # frames are decoded for the trial in view
        await pilot.pause(0.2)
        frame = app.screen.query_one(FramePane)
        assert isinstance(frame.view, FrameView)
        snap = app.screen.follower.sink.frame()
        assert snap is not None and snap.decision_id > 0 and snap.frame.any()
        assert "decision" in str(frame.query_one("#frame-caption").render())
        ladder = app.screen.query_one(LadderPane)
        assert ladder.border_subtitle and "points" in ladder.border_subtitle
        copier.finish(first)
        await app.poll()
        await pilot.pause(0.3)
        text = screen_text(app)
        assert SECRET not in text
        assert "M1" in text  # the ladder's rungs
        svg = app.export_screenshot()
        assert SECRET not in svg

        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, TrialScreen)
        text = screen_text(app)
        assert "ended" in text and SECRET not in text


async def test_operator_keys_go_through_the_control_channel(recorded, tmp_path):
    copier = Copier(recorded, tmp_path / "live")
    first, _ = copier.keys
    copier.start(first)
    copier.decisions(first, 4)
    got: list[dict] = []
    state = {"paused": False}

    def handle(message: dict) -> dict:
        got.append(message)
        if message["op"] == "status":
            return {"ok": True, "trial": first, "paused": state["paused"], "state": "running"}
        if message["op"] == "pause":
            state["paused"] = True
        elif message["op"] == "resume":
            state["paused"] = False
        return {"ok": True}

    with ControlServer(copier.dest, handle):
        app = AttachApp(copier.dest, poll_seconds=None, theme="gameboy")
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert "control channel" in screen_text(app)
            await pilot.press("p")
            await pilot.pause(0.2)
            await pilot.press("s")
            await pilot.pause(0.2)
            await pilot.press("p")
            await pilot.pause(0.2)
            ops = [(m["op"], m.get("trial")) for m in got if m["op"] != "status"]
            assert ops == [("pause", first), ("step", first), ("resume", first)]
            await pilot.press("x")
            await pilot.pause()
            await pilot.press(*"stuck")
            await pilot.press("enter")
            await pilot.pause(0.2)
            ends = [m for m in got if m["op"] == "end"]
            assert ends and ends[0]["trial"] == first and ends[0]["reason"] == "stuck"


def row_line(app, key: str) -> str:
    """The overview's row of `key` as drawn on screen."""
    region = app.query_one(OverviewPane).region
    shown = screen_text(app).splitlines()[region.y:region.bottom]
    lines = [x for x in shown if f"│ {key} " in x]
    assert len(lines) == 1, "\n".join(shown)
    return lines[0]


async def test_ended_rows_show_outcome_and_cost_and_the_summary_sits_under_them(recorded, tmp_path):
    """The first rows drawn are waiting (narrow cells); what the trials end with must still show whole."""
    copier = Copier(recorded, tmp_path / "live")
    app = AttachApp(copier.dest, poll_seconds=None, theme="gameboy")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "waiting" in row_line(app, copier.keys[0])
        for key in copier.keys:
            copier.start(key)
            copier.decisions(key, 3)
        await app.poll()
        await pilot.pause()
        for key in copier.keys:
            copier.finish(key)
        await app.poll()
        await pilot.pause()
        for key in copier.keys:
            result = json.loads((recorded / "trials" / key / layout.RESULT).read_text())
            assert result["telemetry"]["cost_usd"] == 0.0  # random walkers pay nothing: a known zero
            cells = row_line(app, key).split()
            # The end line's words: outcome (reason[, invalid: cause]); the cost as the console shows it.
            assert f"{result['outcome']} ({result['termination_reason']})" in row_line(app, key)
            assert "$0.00" in cells
        assert app.query_one("#summary").display is False  # every trial ended, the run not yet
        copier.end_run()
        await app.poll()
        await pilot.pause()
        summary = app.query_one("#summary")
        assert summary.display is True
        text = screen_text(app)
        assert "runs: 2/2 positions hold a valid trial" in text
        overview = app.query_one(OverviewPane)
        assert not overview.region.overlaps(summary.region)  # under the rows, not over them
        table = [x for x in summary.text.splitlines() if x.startswith(tuple(copier.keys))]
        assert [x.split()[6] for x in table] == ["$0.00", "$0.00"]  # the table's cost column, the same


async def test_a_paused_and_a_stepping_trial_read_so(recorded, tmp_path):
    copier = Copier(recorded, tmp_path / "live")
    first, second = copier.keys
    for key in (first, second):
        copier.start(key)
        copier.decisions(key, 4)
    states = {first: "running", second: "running"}

    def handle(message: dict) -> dict:
        if message["op"] == "status":  # as a run of many trials at once answers
            return {"ok": True, "running": sorted(states), "trial_states": dict(states),
                    "paused_trials": sorted(k for k, v in states.items() if v != "running")}
        return {"ok": True}

    with ControlServer(copier.dest, handle):
        for read_only in (False, True):  # status changes nothing: a read-only console asks too
            app = AttachApp(copier.dest, poll_seconds=None, theme="gameboy", read_only=read_only)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.pause()
                assert "running" in row_line(app, first)
                for state in ("paused", "stepping"):
                    states[first] = state
                    app._last_status = 0.0  # ask the channel at the next poll
                    await app.poll()
                    await pilot.pause()
                    assert state in row_line(app, first).split()
                    assert "running" in row_line(app, second).split()
                states[first] = "running"


async def test_at_80x24_the_footer_keeps_quit_and_the_way_back(recorded, tmp_path):
    copier = Copier(recorded, tmp_path / "live")
    app = AttachApp(copier.dest, poll_seconds=None, theme="gameboy")
    async with app.run_test(size=(80, 24)) as pilot:
        copier.start(copier.keys[0])
        copier.decisions(copier.keys[0], 5)
        await app.poll()
        await pilot.pause()
        assert "q Quit" in screen_text(app).splitlines()[-1]
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, TrialScreen)
        footer = screen_text(app).splitlines()[-1]
        assert "q Quit" in footer and "esc Overview" in footer
