"""Looking closer at a live console: the frame over an image protocol or zoomed, panes maximised,
the help legend, a trace line or memory fact shown whole, the memory following its newest facts,
small terminals, the folder being written and the summary at the end."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from app.console.console import OakwatchConsole
from app.console.console_state import ConsoleSink, MemorySnapshot
from engine.loop.events import FrameCaptured
from panes.help import KEYS, HelpScreen, TextScreen, help_text
from panes.status import SummaryPane
from panes.trial.frame import FramePane, FrameView, sample_indices
from panes.trial.image_frame import IMAGE_FPS, ImageFrameView, frame_protocol, scaled_size
from panes.trial.memory import MemoryPane
from panes.trial.trace import MARKS, TracePane
from tests.app.fixed import SECRET_MODEL, STORY, One, fact, feed, fixed_frame, result, telemetry


def fixed_console(**kwargs) -> OakwatchConsole:
    sink = ConsoleSink("dry-run", clock=lambda: 0.0)
    feed(sink)
    return OakwatchConsole(sink=sink, theme="gameboy", **kwargs)


def screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


# -- the frame over an image protocol ------------------------------------------------------------

class Stream:
    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_half_blocks_off_a_terminal_or_when_asked():
    assert frame_protocol({}, Stream(False), Stream(False)) is None  # tests, snapshots, pipes
    assert frame_protocol({"OAKWATCH_FRAME": "halfblock"}, Stream(True), Stream(True)) is None
    assert frame_protocol({"OAKWATCH_FRAME": "kitty"}, Stream(False), Stream(True)) is None
    assert frame_protocol({"OAKWATCH_FRAME": "kitty"}, Stream(True), Stream(True)) == "tgp"
    assert frame_protocol({"OAKWATCH_FRAME": "sixel"}, Stream(True), Stream(True)) == "sixel"


def test_the_console_uses_half_blocks_unless_given_a_protocol():
    app = fixed_console()
    assert app.frame_protocol is None


def test_image_size_keeps_the_aspect_and_fills_the_pane():
    assert scaled_size(160, 144, 70, 31, (10, 20)) == (688, 620)  # height-bound: 31 rows of 20 px
    w, h = scaled_size(160, 144, 30, 40, (10, 20))
    assert w == 300 and abs(w / h - 160 / 144) < 0.01


async def test_image_view_shows_each_new_frame_version_at_most_at_its_rate():
    # textual-image's half-cell widget stands in for Kitty/Sixel (which write to the real terminal).
    # The rate limit runs on a clock the test steps, so a loaded machine cannot change what it sees.
    sink = ConsoleSink("x")
    pane = FramePane(sink.frame, fps=None, protocol="halfcell")
    now = [1000.0]
    pane.clock = lambda: now[0]
    async with One(pane).run_test(size=(90, 40)) as pilot:
        view = pane.view
        assert isinstance(view, ImageFrameView)
        sink.handle(FrameCaptured(1, fixed_frame(), "a" * 64, 1))
        pane.pull()
        await pilot.pause(0.1)
        shown = view.frames_shown
        assert shown >= 1
        picture = view.image_widget.image
        assert picture.size == scaled_size(160, 144, view.size.width, view.size.height, (10, 20))
        now[0] += 1.5 / IMAGE_FPS
        pane.pull()  # same version: nothing converted
        assert view.frames_shown == shown
        sink.handle(FrameCaptured(2, fixed_frame(2), f"{2:064x}", 2))
        pane.pull()
        assert view.frames_shown == shown + 1
        for i in range(3, 30):  # far faster than IMAGE_FPS: all within one frame interval
            now[0] += 0.2 / IMAGE_FPS / 27
            sink.handle(FrameCaptured(i, fixed_frame(i), f"{i:064x}", i))
            pane.pull()
        assert view.frames_shown == shown + 1  # within 1/IMAGE_FPS of the last one: held, not queued
        now[0] += 1.5 / IMAGE_FPS
        pane.pull()
        await pilot.pause(0.05)
        assert view.frames_shown == shown + 2 and "decision 29" in pane.query_one("#frame-caption").text
        # whole pixels: a frame pixel is a block of equal pixels (nearest neighbour, never blurred)
        arr = np.asarray(view.image_widget.image)
        assert len({tuple(p) for p in arr.reshape(-1, 3)}) <= 4


# -- zoom and maximise --------------------------------------------------------------------------

def test_native_sampling_keeps_whole_pixels_and_the_bottom_rows():
    rows, cols = sample_indices(160, 144, 160, 47, "native")
    assert cols.tolist() == list(range(160))
    assert rows.tolist() == list(range(50, 144))  # 94 rows: the dialogue box (the bottom 48) whole
    rows, cols = sample_indices(160, 144, 100, 27, "native")
    assert cols.tolist() == list(range(30, 130)) and rows.tolist() == list(range(90, 144))
    rows, cols = sample_indices(160, 144, 340, 150, "native")  # room for 2x
    assert len(cols) == 320 and len(rows) == 288 and cols[:4].tolist() == [0, 0, 1, 1]


async def test_zoom_makes_the_frame_readable_at_160x50():
    app = fixed_console()
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.2)
        view = app.query_one(FrameView)
        assert view.shown[:2] == (68, 62)  # before: 68x62 of 160x144 pixels, 2.35 pixels a half cell
        await pilot.press("f")
        await pilot.pause(0.1)
        assert app.screen.maximized is app.query_one(FramePane)
        assert view.shown[:2] == (104, 94)  # the whole frame on the whole screen
        await pilot.press("f")
        await pilot.pause(0.1)
        assert view.shown == (160, 94, 160, 47)  # 1:1, every pixel of the bottom 94 rows
        assert "ZOOM 1:1" in screen_text(app)
        await pilot.press("f")
        await pilot.pause(0.1)
        assert app.screen.maximized is None and view.shown[:2] == (68, 62)
        await pilot.press("f", "f")
        await pilot.press("escape")  # escape restores too, and unzooms
        await pilot.pause(0.1)
        assert app.screen.maximized is None and app.query_one(FramePane).zoom == ""
        assert view.shown[:2] == (68, 62)


async def test_maximise_the_focused_pane_and_restore():
    app = fixed_console()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("m")  # nothing focused: the frame
        assert app.screen.maximized is app.query_one(FramePane)
        await pilot.press("m")
        assert app.screen.maximized is None
        for pane_id in ("#budgets", "#ladder", "#memory", "#trace"):
            app.query_one(pane_id).focus()
            await pilot.press("m")
            await pilot.pause(0.05)
            assert app.screen.maximized is app.query_one(pane_id)
            assert app.query_one(pane_id).size.width >= 96
            assert "condition A" in screen_text(app) or "cond A" in screen_text(app)  # the status bar stays
            await pilot.press("m")
            assert app.screen.maximized is None


# -- help ----------------------------------------------------------------------------------------

async def test_help_explains_every_key_and_glyph():
    text = help_text()
    for glyph in ("✓", "=", "·", "✗ skipped", "█", "░", "no limit", "unknown", "▶", "⚠", "superseded", "completed",
                  "↳", "ABORTED", "INVALID", "cost unknown", "mem r: w:", "‖ paused", "⏯", "elapsed", "wall time"):
        assert glyph in text, glyph
    for mark in MARKS:
        assert mark in text
    app = fixed_console()
    keys = " ".join(k for k, _ in KEYS)
    for binding in app.BINDINGS:
        if binding.action.startswith("human"):
            continue
        for key in binding.key.split(","):
            shown = {"plus": "+", "equals_sign": "+", "minus": "-", "question_mark": "?"}.get(key, key)
            assert shown in keys, key
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


# -- a trace line, a memory fact whole -----------------------------------------------------------

async def test_enter_on_a_trace_line_shows_it_whole():
    app = fixed_console()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        trace = app.query_one(TracePane)
        trace.focus()
        await pilot.pause(0.05)
        last = trace.line_count - 1
        assert trace.cursor == last  # the last line in view
        await pilot.press("up", "up", "up")  # from the tag, past the milestone, to d12's reasoning line
        assert trace.cursor == last - 3
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, TextScreen)
        text = str(app.screen.query_one("#text-body").render())
        assert STORY[12][4] in " ".join(text.split())  # the whole reasoning summary, not cut
        assert "memory" in text and "result frame" in text
        assert SECRET_MODEL not in text and "condition" not in text
        await pilot.press("escape")
        assert not isinstance(app.screen, TextScreen)


async def test_enter_on_a_memory_fact_shows_it_whole():
    app = fixed_console()
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.2)
        memory = app.query_one(MemoryPane)
        memory.focus()
        await pilot.pause(0.05)
        memory.move_cursor(row=3)
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, TextScreen)
        text = str(app.screen.query_one("#text-body").render())
        assert "fact-0004" in app.screen.title_text and "rival / is_at / lab" in text
        assert "contradicts: fact-0005" in text and "confidence: 0.4" in text


# -- the memory follows its newest facts ----------------------------------------------------------

async def test_memory_follows_the_newest_facts_unless_scrolled_up():
    pane = MemoryPane()
    async with One(pane).run_test(size=(120, 12)) as pilot:
        facts = tuple(fact(f"fact-{i:04d}", "event", "x", "is", str(i)) for i in range(1, 31))
        pane.show(MemorySnapshot(facts[:20], (), (), 1))
        await pilot.pause(0.1)
        assert pane.max_scroll_y > 0 and pane.scroll_y == pane.max_scroll_y
        pane.show(MemorySnapshot(facts[:25], (), (), 2))
        await pilot.pause(0.1)
        assert pane.scroll_y == pane.max_scroll_y  # followed
        pane.scroll_home(animate=False, immediate=True)
        await pilot.pause(0.05)
        pane.show(MemorySnapshot(facts, (), (), 3))
        await pilot.pause(0.1)
        assert pane.scroll_y == 0  # the operator scrolled up: left where they were


# -- small terminals ------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(100, 30), (80, 24)])
async def test_small_terminals_keep_the_essentials(size):
    app = fixed_console()
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        for pane_id in ("#status", "#frame", "#budgets", "#ladder", "#trace"):
            widget = app.query_one(pane_id)
            assert widget.size.width > 0 and widget.size.height > 0, pane_id
        text = screen_text(app)
        assert "elapsed 00:00:00" in text and "▶ running" in text and "trial 1/2" in text  # the status
        for meter in ("actions", "decisions", "wall time", "cost", "tokens"):
            assert meter in text
        assert "$0.0648 /" in text and "23,814" in text
        assert "deepest M2 · 2/20 points" in text  # the ladder's subtitle
        assert "⚑ TAG contradiction" in text and "★ M2" in text  # the trace's last lines
        assert "wall" in text and "pause" in text  # the wall-time note
        if size == (100, 30):
            assert "fact-0005" in text  # the newest fact
            for _ in range(30):  # the footer's keys are drawn after the panes: a loaded machine draws them late
                if "? Help" in text:
                    break
                await pilot.pause(0.1)
                text = screen_text(app)
            assert "? Help" in text and "q Quit" in text  # every key in the footer


# -- the folder being written, the summary at the end --------------------------------------------

async def test_folder_while_running_and_the_summary_at_the_end(tmp_path):
    folder = SimpleNamespace(root=tmp_path / "runs" / "exp-1")
    app = fixed_console(folder=folder)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause(0.2)
        trace = app.query_one(TracePane)
        assert trace.border_subtitle.startswith("writing ") and "exp-1" in trace.border_subtitle
        assert "writing" in screen_text(app)
        summary = SimpleNamespace(completed=1, requested=2, successful=0, failed=1, invalid=0, success_rate=0.0,
                                  stopped_early=False, stop_reason=None)
        app.show_summary(summary, [result(telemetry())])
        await pilot.pause(0.2)
        pane = app.query_one(SummaryPane)
        assert pane.display and pane.size.height > 3
        text = screen_text(app)
        assert "A-01" in text and "game-failure" in text and "success rate 0%" in text
        assert "evidence:" in text and "⚑ TAG" in text  # the trace's last lines still in view
