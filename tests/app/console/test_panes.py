"""Panes on their own, fed plain data."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from app.console.console import OakwatchConsole
from app.console.console_state import TRACE_BUFFER, ConsoleSink, MemorySnapshot
from engine.loop.events import FrameCaptured
from panes.trial.budgets import BudgetsPane, level
from panes.trial.frame import FramePane, FrameView, fit_size
from panes.trial.memory import MemoryPane
from panes.trial.trace import MAX_LINES, TracePane
from tests.app.fixed import One, budgets, decision, fact, feed, fixed_frame


def test_fit_size_keeps_aspect_and_even_rows():
    assert fit_size(160, 144, 80, 36) == (80, 72)
    w, h = fit_size(160, 144, 200, 20)
    assert h == 40 and h % 2 == 0 and w == 44
    assert fit_size(160, 144, 0, 10) == (0, 0)


async def test_frame_view_repaints_only_changed_rows():
    view = FrameView()
    async with One(view).run_test(size=(80, 36)) as pilot:
        frame = fixed_frame()
        view.show(frame)
        await pilot.pause()
        before = view.rows_refreshed
        changed = frame.copy()
        changed[10:12, :, :] = 255  # one row pair of pixels
        view.show(changed)
        assert 1 <= view.rows_refreshed - before <= 2
        view.show(changed)  # identical: nothing repainted
        assert view.frames_shown == 2
        await pilot.pause()
        strip = view.render_line(36 // 2)
        assert strip.cell_length == 80
        assert {seg.text[0] for seg in strip if seg.text.strip()} <= {"▀"}


async def test_frame_pane_pulls_latest_and_drops_the_rest():
    sink = ConsoleSink("x")
    pane = FramePane(sink.frame, fps=30)
    async with One(pane).run_test(size=(90, 40)) as pilot:
        for i in range(50):  # far faster than the pane pulls
            sink.handle(FrameCaptured(i, fixed_frame(i), f"{i:064x}", i))
        await pilot.pause(0.2)
        assert pane.view.frames_shown <= 5
        assert "decision 49" in pane.query_one("#frame-caption").text


def test_budget_levels():
    assert level(10, 100) == "success"
    assert level(80, 100) == "warning"
    assert level(95, 100) == "error"
    assert level(None, None) == "unknown"
    assert level(5, None) == "success"


async def test_budgets_show_unknown_and_no_limit():
    pane = BudgetsPane()
    async with One(pane).run_test(size=(90, 10)) as pilot:
        pane.show(budgets(100, cost=None))
        await pilot.pause()
        text = str(pane.render())
        lines = text.splitlines()
        cost = next(x for x in lines if x.startswith("cost"))
        assert "no limit" in cost and cost.rstrip().endswith("unknown") and "$0" not in cost and "░" not in cost
        assert "100 / 400" in text and "0:45 / 1:00" in text


async def test_memory_rows_update_by_key():
    pane = MemoryPane()
    async with One(pane).run_test(size=(120, 20)) as pilot:
        f1 = fact("fact-0001", "location", "player", "is_at", "house")
        pane.show(MemorySnapshot((f1,), (), (), 1))
        await pilot.pause()
        pane.move_cursor(row=0)
        f2 = fact("fact-0002", "location", "player", "is_at", "town")
        superseded = {**f1, "status": "superseded"}
        pane.show(MemorySnapshot((superseded, f2), (), ("fact-0002",), 2))
        await pilot.pause()
        assert pane.row_count == 2
        assert [k.value for k in pane.rows] == ["fact-0001", "fact-0002"]
        status = pane.get_cell("fact-0001", "status")
        assert status.plain == "superseded" and status.style.strike
        assert pane.get_cell("fact-0002", "read").plain == "▶"
        pane.show(MemorySnapshot((f2,), (), (), 3))
        await pilot.pause()
        assert [k.value for k in pane.rows] == ["fact-0002"]


async def test_contradictory_facts_are_highlighted():
    pane = MemoryPane()
    async with One(pane).run_test(size=(120, 20)) as pilot:
        a = fact("fact-0004", "event", "rival", "is_at", "lab")
        b = fact("fact-0005", "event", "rival", "is_at", "route")
        pane.show(MemorySnapshot((a, b), (("fact-0004", "fact-0005"),), (), 1))
        await pilot.pause()
        cell = pane.get_cell("fact-0004", "status")
        assert "⚠" in cell.plain and cell.style.bold


async def test_trace_is_bounded_and_batched():
    sink = ConsoleSink("x")
    pane = TracePane(sink.drain_trace, interval=0.05)
    async with One(pane).run_test(size=(120, 20)) as pilot:
        frame = fixed_frame()
        for did in range(1, MAX_LINES + 301):  # one line each (no reasoning summary)
            sink.handle(decision(did, frame, reasoning_summary=None))
        await pilot.pause(0.3)
        assert pane.line_count == TRACE_BUFFER  # the sink kept the newest items between drains
        assert pane.lines[-1].lstrip().startswith(f"d{MAX_LINES + 300:05d}")


async def test_status_shows_the_blinded_label_only(tmp_path):
    sink = ConsoleSink("dry-run", clock=lambda: 0.0)
    feed(sink)
    app = OakwatchConsole(sink=sink, theme="gameboy")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.2)
        text = str(app.query_one("#status").render())
        assert "condition A" in text and "trial 1/2" in text and "running" in text
        assert "00:00:00" in text


async def test_theme_choice_is_remembered(private_config):
    sink = ConsoleSink("x")
    app = OakwatchConsole(sink=sink)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.theme == "gameboy"
        assert {"gameboy", "firered", "emerald"} <= set(app.available_themes)
        app.theme = "firered"
        await pilot.pause(0.1)
    assert json.loads(private_config.read_text())["theme"] == "firered"
    again = OakwatchConsole(sink=ConsoleSink("x"))
    async with again.run_test(size=(100, 30)):
        assert again.theme == "firered"


async def test_palette_offers_the_operator_commands():
    app = OakwatchConsole(sink=ConsoleSink("x"), theme="gameboy")
    async with app.run_test(size=(100, 30)):
        titles = {c.title for c in app.get_system_commands(app.screen)}
    assert {"Pause / resume", "Step", "Tag a memory error", "End trial", "Faster", "Slower",
            "Quit oakwatch", "Theme: FireRed red", "Theme: Emerald green", "Theme: Game Boy green"} <= titles


def test_headless_path_never_imports_textual():
    code = ("import sys, app.cli, app.console.headless, app.console.console_state, engine.policies.human, "
            "sessions.execute.runner;"
            "assert not any(m == 'textual' or m.startswith('textual.') for m in sys.modules), 'textual imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_frame_capture_copy_is_not_mutated():
    sink = ConsoleSink("x")
    frame = fixed_frame()
    sink.handle(FrameCaptured(1, frame, "a" * 64, 10))
    snap = sink.frame()
    assert snap.frame is frame and np.array_equal(snap.frame, fixed_frame())


async def test_ladder_marks_held_optional_and_skipped_rungs_by_the_engine_rules():
    from app.console.console_state import LadderSnapshot
    from panes.trial.ladder import LadderPane

    rungs = (("M1", "start", 1), ("M2", "side quest", 1), ("M3", "needed", 2), ("M4", "later", 2), ("M5", "end", 3))
    award = {"id": "M4", "points": 2, "decision_id": 7, "frame_sha256": "c0ffee" * 10}
    pane = LadderPane()
    async with One(pane).run_test(size=(90, 10)) as pilot:
        pane.show(LadderSnapshot(rungs, ("M1",), {"M4": award}, 1, ("M2",)))
        await pilot.pause()
        lines = {line.split()[1]: line for line in str(pane.render()).splitlines()}
        assert "held at start" in lines["M1"]
        assert "optional" in lines["M2"] and "skipped" not in lines["M2"]
        assert lines["M3"].startswith("✗") and "skipped" in lines["M3"]
        assert lines["M4"].startswith("✓") and "d7" in lines["M4"]
        assert "optional" not in lines["M5"] and "skipped" not in lines["M5"]
        # M1 held, M2 optional: deepest stops at the skipped M3; 2 points (nothing for a held rung)
        assert "deepest M2" not in pane.border_subtitle and "deepest M1" in pane.border_subtitle
        assert "2/9 points" in pane.border_subtitle
