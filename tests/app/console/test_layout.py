"""The console fits the sizes the README promises (80x24, 100x30, 160x50, 200x60): every ladder
rung, the footer's ? and q, memory columns laid out by the width there is (nothing cut with free
space beside it), panes that never overlap, a summary that covers none of them, help and dialogs
that fit without scrolling. Fixed events, no emulator (tests/app/fixed.py)."""

from __future__ import annotations

import re

import pytest
from textual.containers import ScrollableContainer

from app.console.console import OakwatchConsole
from app.console.console_state import ConsoleSink, LadderSnapshot, MemorySnapshot
from panes.dialogs import EndTrialDialog, TagDialog
from panes.help import HelpPages, HelpScreen, help_sections
from panes.status import SummaryPane, SummaryScreen
from panes.trial.budgets import BudgetsPane
from panes.trial.frame import FramePane
from panes.trial.ladder import LadderPane
from panes.trial.memory import MemoryPane
from panes.trial.trace import TracePane, decision_line
from panes.trial.trial_layout import plan_layout
from tests.app.fixed import MILESTONES, One, fact, feed, finish, observed, settled, trace

SIZES = [(80, 24), (100, 30), (160, 50), (200, 60)]
RUNGS = [mid for mid, _, _ in MILESTONES]


def fixed_console(theme: str = "gameboy") -> OakwatchConsole:
    sink = ConsoleSink("dry-run", clock=lambda: 0.0)
    feed(sink)
    return OakwatchConsole(sink=sink, theme=theme)


def screen_lines(app) -> list[str]:
    strips = app.screen._compositor.render_strips()
    return ["".join(segment.text for segment in strip) for strip in strips]


def region_text(app, region) -> str:
    """What the screen shows inside `region` (a widget's region), line by line."""
    lines = screen_lines(app)[region.y:region.bottom]
    return "\n".join(line[region.x:region.right] for line in lines)


def panes(app) -> dict:
    return {"frame": app.query_one(FramePane), "budgets": app.query_one(BudgetsPane),
            "ladder": app.query_one(LadderPane), "memory": app.query_one(MemoryPane),
            "trace": app.query_one(TracePane)}


def rungs_shown(app) -> set[str]:
    ladder = app.query_one(LadderPane).content_region
    return set(re.findall(r"\bM[1-8]\b", region_text(app, ladder)))


# -- the plan (a pure function of the cells there are) ---------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_every_row_is_given_out_once_and_every_rung_has_one(size):
    width, height = size[0], size[1] - 2  # the status bar and the footer
    for summary in (None, 7, 30):
        plan = plan_layout(width, height, summary=summary)
        rows = plan.budgets + plan.ladder + plan.memory + plan.summary + plan.trace
        assert rows == height, plan
        assert (plan.ladder - 2) * plan.ladder_columns >= 8, plan  # all eight rungs
        assert plan.memory >= 5 and plan.trace >= 4, plan  # a header and two facts; two lines
        assert width - plan.frame_width >= 44, plan  # the budgets' meters and figures
        if summary:
            assert plan.summary_in_place == (height >= 38)
            assert plan.top == plan_layout(width, height).top  # the panes above keep their rows


def test_the_frame_column_is_as_wide_as_the_picture_needs():
    plan = plan_layout(160, 48)
    assert plan.frame_width == 71  # 31 rows of half blocks: 68x62 of the 160x144 pixels
    assert plan_layout(160, 48, aspect=240 / 160).frame_width > plan.frame_width  # a GBA frame is wider


# -- mid-run, at each size ---------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_mid_run_every_pane_fits(size):
    app = fixed_console()
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        assert rungs_shown(app) == set(RUNGS)  # every rung, whatever the height
        footer = screen_lines(app)[-1]
        assert "? Help" in footer and "q Quit" in footer
        shown = panes(app)
        regions = {name: pane.region for name, pane in shown.items()}
        for name, region in regions.items():
            assert region.area > 0 and app.screen.region.contains_region(region), name
            for other, there in regions.items():
                assert other == name or not region.overlaps(there), (name, other)
        memory = shown["memory"]
        assert memory.virtual_size.width <= memory.scrollable_content_region.width  # no column lost
        text = region_text(app, memory.region)
        assert "fact-0005" in text  # the newest fact, in view
        free = memory.scrollable_content_region.width - memory.virtual_size.width
        column = next(c for c in memory.columns.values() if c.key == "fact")
        longest = max(len(memory.get_cell(row, "fact").plain) for row in memory.rows)
        if longest > column.width:  # a fact drawn cut ...
            assert free <= 1, f"... with {free} free cells beside it"


async def test_memory_columns_give_way_kind_first_then_status():
    pane = MemoryPane()
    facts = (fact("fact-0004", "event", "rival", "is_at", "lab"), fact("fact-0005", "event", "rival", "is_at", "r1"))
    async with One(pane).run_test(size=(58, 10)) as pilot:
        pane.show(MemorySnapshot(facts, (("fact-0004", "fact-0005"),), (), 1))
        await pilot.pause()
        assert pane.shown_columns == ("read", "id", "fact", "conf", "confirmed")
        assert pane.get_cell("fact-0004", "read").plain == "⚠"  # the status's ⚠ kept
        await pilot.resize_terminal(74, 10)
        await pilot.pause(0.1)
        assert pane.shown_columns == ("read", "id", "fact", "status", "conf", "confirmed")
        await pilot.resize_terminal(120, 10)
        await pilot.pause(0.1)
        assert "kind" in pane.shown_columns
        assert pane.virtual_size.width <= pane.scrollable_content_region.width


async def test_the_ladder_in_columns_shows_every_rung():
    pane = LadderPane()
    pane.columns = 2
    award = {"id": "M1", "points": 1, "decision_id": 5, "frame_sha256": "c0ffee" * 10}
    async with One(pane).run_test(size=(50, 8)) as pilot:
        pane.show(LadderSnapshot(MILESTONES, (), {"M1": award}, 1))
        await pilot.pause()
        lines = str(pane.render()).splitlines()
        assert len(lines) == 4 and set(re.findall(r"M[1-8]", "\n".join(lines))) == set(RUNGS)
        assert "d5" in lines[0] and lines[0].startswith("✓ M1")
        assert all(len(line) <= pane.content_region.width for line in lines)


def test_the_footer_keeps_help_and_quit_however_narrow():
    from app.console.console import KEY_PRIORITY, SHORT_KEYS
    from panes.key_footer import fit_keys

    keys = [("pause", "p", "Pause/resume", False), ("step", "s", "Step", False), ("tag", "t", "Tag", False),
            ("end_trial", "x", "End trial", False), ("faster", "+", "Faster", False),
            ("slower", "-", "Slower", False), ("zoom", "f", "Zoom", True), ("maximise", "m", "Max", True),
            ("help", "?", "Help", True), ("summary", "r", "Summary", True), ("quit", "q", "Quit", True)]
    shown, compact, palette = fit_keys(keys, 200, SHORT_KEYS, KEY_PRIORITY, 12)
    assert len(shown) == len(keys) and not compact and palette  # room for everything
    shown, compact, palette = fit_keys(keys, 80, SHORT_KEYS, KEY_PRIORITY, 12)
    assert ("pause", "Pause") in shown and compact and not palette  # shorter, and ctrl+p is in help
    for width in (60, 40, 24):
        actions = [action for action, _ in fit_keys(keys, width, SHORT_KEYS, KEY_PRIORITY, 12)[0]]
        assert {"help", "quit"} <= set(actions), width
        assert actions == [a for a, *_ in keys if a in actions]  # in their own order
    actions = [action for action, _ in fit_keys(keys, 60, SHORT_KEYS, KEY_PRIORITY, 12)[0]]
    dropped = {action for action, *_ in keys} - set(actions)
    assert dropped and all(not enabled for action, _, _, enabled in keys if action in dropped)  # greyed first


def test_an_objective_takes_the_room_its_line_leaves():
    objective = "deliver the PARCEL to PROF. HAZEL in the lab"
    t = trace(1, observed=observed(objective=objective), reasoning_summary=None).model_dump()
    assert objective in decision_line(t, 200)
    narrow = decision_line(t, 90)
    assert len(narrow) == 90 and narrow.endswith("…")  # as much as the line has room for
    assert decision_line(t, 40).endswith("obj: deliver the PARCEL to P…")  # 24 characters kept however narrow


# -- when the run ends -----------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_the_summary_covers_no_pane(size):
    app = fixed_console()
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        before = {name: pane.region for name, pane in panes(app).items()}
        finish(app, trials=8)  # a long table: it must still take only rows of its own
        await pilot.pause(0.2)
        summary = app.query_one(SummaryPane)
        if size[1] >= 40:
            assert summary.display and summary.region.height >= 5
            after = {name: pane.region for name, pane in panes(app).items()}
            for name in ("frame", "budgets", "ladder", "memory"):
                assert after[name] == before[name], name  # not one row taken from the panes above
            assert after["trace"].height >= 6 and not summary.region.overlaps(after["trace"])
            assert not isinstance(app.screen, SummaryScreen)
        else:  # no rows to spare: a screen of its own, and escape gives every pane back whole
            assert isinstance(app.screen, SummaryScreen)
            assert "A-01" in str(app.screen.query_one(SummaryPane).render())
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert not isinstance(app.screen, SummaryScreen) and not summary.display
            assert {name: pane.region for name, pane in panes(app).items()} == before
            assert "r Summary" in screen_lines(app)[-1]
            await pilot.press("r")
            await pilot.pause(0.1)
            assert isinstance(app.screen, SummaryScreen)
            await pilot.press("escape")
            await pilot.pause(0.1)
        assert rungs_shown(app) == set(RUNGS)


async def test_the_summary_table_fits_a_narrow_screen():
    app = fixed_console()
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot)
        finish(app)
        await pilot.pause(0.2)
        body = app.screen.query_one(SummaryPane)
        lines = str(body.render()).splitlines()
        assert all(len(line) <= body.content_region.width for line in lines)
        assert "budget:model_decisions" in "\n".join(lines)  # the end reason, on a line of its own


# -- help and dialogs -----------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_help_fits_without_scrolling(size):
    app = fixed_console()
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        for widget in screen.query("*"):
            if isinstance(widget, ScrollableContainer) or widget.virtual_size.height:
                assert widget.virtual_size.height <= max(widget.scrollable_content_region.height,
                                                         widget.size.height), widget
                assert widget.max_scroll_y == 0, widget
        pages = screen.query_one(HelpPages)
        seen = ""
        for page in range(len(pages.pages)):
            assert pages.page == page
            lines = str(pages.render()).splitlines()
            assert len(lines) <= pages.size.height
            assert all(len(line.rstrip()) <= pages.size.width for line in lines)
            seen += " ".join(region_text(app, pages.region).split()) + " "
            await pilot.press("right")
            await pilot.pause(0.05)
        for title, entries in help_sections():
            assert title in seen
            for _, _, text in entries:
                assert " ".join(text.split()[:3]) in seen, text  # every entry, on some page
        if size[0] >= 160:
            assert len(pages.pages) == 1  # one screen holds it all


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_dialogs_fit_and_say_their_message_whole(size):
    app = fixed_console()
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        await app.push_screen(EndTrialDialog("A-01"))
        await pilot.pause(0.2)
        message = "It is recorded as operator-abort with your reason: an invalid trial, rerun later."
        label = app.screen.query_one(".dialog-help")
        assert " ".join(region_text(app, label.region).split()) == message
        app.screen.dismiss(None)
        await pilot.pause(0.1)
        await app.push_screen(TagDialog({"omission": "A previously verified, still-relevant fact is unavailable "
                                                     "when required.", "other": ""}, 12, "A-01"))
        await pilot.pause(0.2)
        dialog = app.screen.query_one(".dialog")
        assert dialog.max_scroll_y == 0  # every field and both buttons without scrolling
        assert "when required." in region_text(app, dialog.region)


# -- a full game's ladder (Emerald: 68 rungs, issue 22.3) ---------------------------------------------

LONG = tuple((f"M{i}", f"Rung number {i} of a long ladder", 1) for i in range(1, 69))


@pytest.mark.parametrize("rungs", [8, 68, 200])
@pytest.mark.parametrize("size", SIZES)
def test_a_long_ladder_never_takes_the_rows_of_other_panes(size, rungs):
    width, height = size[0], size[1] - 2
    plan = plan_layout(width, height, rungs=rungs)
    assert plan.budgets + plan.ladder + plan.memory + plan.summary + plan.trace == height, plan
    assert plan.memory >= 5 and plan.trace >= 4 and plan.ladder >= 3, plan


@pytest.mark.parametrize("size", SIZES)
async def test_a_68_rung_ladder_shows_a_window_around_the_next_rung_and_all_when_maximised(size, monkeypatch):
    import tests.app.fixed as fixed

    monkeypatch.setattr(fixed, "MILESTONES", LONG)  # the fixed trial, on a full game's ladder (M1, M2 reached)
    app = fixed_console()
    async with app.run_test(size=size) as pilot:
        await settled(pilot)
        shown = panes(app)
        regions = {name: pane.region for name, pane in shown.items()}
        for name, region in regions.items():
            assert region.area > 0 and app.screen.region.contains_region(region), name
            for other, there in regions.items():
                assert other == name or not region.overlaps(there), (name, other)
        ladder = shown["ladder"]
        text = region_text(app, ladder.content_region)
        ids = sorted(int(n) for n in re.findall(r"\bM(\d+)\b", text))
        capacity = ladder.rows * ladder.columns
        if capacity >= 68:  # the rows there are hold them all: no window, no note
            assert ids == list(range(1, 69)) and "more" not in text
        else:  # a window of consecutive rungs around M3, the next to reach, and the note in the last cell
            assert len(ids) == capacity - 1 and ids == list(range(ids[0], ids[0] + len(ids))) and 3 in ids
            above, below = ids[0] - 1, 68 - ids[-1]
            assert f"↓{below}" in text and (f"↑{above}" in text) == (above > 0)
        assert all(len(line.rstrip()) <= ladder.content_region.width for line in text.splitlines())
        assert "2/68 reached" in ladder.border_subtitle  # the subtitle counts the whole ladder
        ladder.focus()
        await pilot.press("m")
        await pilot.pause(0.2)
        assert ladder.is_maximized
        full = str(ladder.render())
        assert set(re.findall(r"\bM\d+\b", full)) == {f"M{i}" for i in range(1, 69)} and "more" not in full
        await pilot.press("m")
        await pilot.pause(0.2)
        assert not ladder.is_maximized and ("more" in str(ladder.render())) == (capacity < 68)


async def test_the_ladders_window_follows_the_next_rung_to_reach():
    pane = LadderPane()
    pane.set_columns(2, rows=4)  # room for 7 rungs and the note
    awards = {f"M{i}": {"id": f"M{i}", "points": 1, "decision_id": i, "frame_sha256": "ab" * 32}
              for i in range(1, 41)}
    async with One(pane).run_test(size=(70, 8)) as pilot:
        pane.show(LadderSnapshot(LONG, ("M41",), awards, 1, ("M43",)))  # M41 held at start, M42 next
        await pilot.pause()
        text = str(pane.render())
        ids = sorted(int(n) for n in re.findall(r"\bM(\d+)\b", text))
        assert ids == list(range(41, 48)) and "↑40" in text and "↓21" in text
        assert "deepest M42" not in pane.border_subtitle and "40/68 reached" in pane.border_subtitle
