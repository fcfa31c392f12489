"""Whole-layout snapshots from fixed events (no emulator), a model-backed agent's trial, at every
size the README promises (80x24, 100x30, 160x50, 200x60), mid-run and once the run has ended
(with its summary: above the trace where there are rows for it, on a screen of its own where not).
tests/app/console/test_layout.py asserts what these pictures show."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from app.console.console import OakwatchConsole
from app.console.console_state import ConsoleSink
from panes.status import SummaryPane, SummaryScreen
from tests.app.conftest import wait_for
from tests.app.fixed import feed, finish, settled

SIZES = {"80x24": ((80, 24), "emerald"), "100x30": ((100, 30), "firered"), "160x50": ((160, 50), "gameboy"),
         "200x60": ((200, 60), "gameboy")}


def fixed_app(theme: str = "gameboy", **story) -> OakwatchConsole:
    sink = ConsoleSink("dry-run", clock=lambda: 0.0)
    feed(sink, **story)
    return OakwatchConsole(sink=sink, theme=theme, folder=SimpleNamespace(root=Path("/runs/dry-run-2026-11-30")))


def summary_shown(app) -> bool:
    if isinstance(app.screen, SummaryScreen):
        shown = app.screen.query(SummaryPane)  # composed once the screen is up
        return bool(shown) and bool(shown.first().text) and shown.first().region.height > 0
    pane = app.query_one(SummaryPane)
    return pane.display and pane.region.height > 0


@pytest.mark.parametrize("ended", [False, True], ids=["running", "ended"])
@pytest.mark.parametrize("size", list(SIZES))
def test_layout(snap_compare, size, ended):
    terminal, theme = SIZES[size]
    # At 100x30 one call's cost is unknown: the trace says so at that decision, the totals are unknown.
    app = fixed_app(theme, unknown_cost_at=12 if size == "100x30" else None)

    async def run_before(pilot):
        await settled(pilot)
        if ended:
            finish(pilot.app, trials=2)
            await wait_for(pilot, lambda: summary_shown(pilot.app), what="the summary")
            await settled(pilot)

    assert snap_compare(app, terminal_size=terminal, run_before=run_before)


def test_tag_dialog_100x30(snap_compare):
    async def open_dialog(pilot):
        from panes.dialogs import TagDialog

        await settled(pilot)
        await pilot.app.push_screen(TagDialog({"omission": "A fact is missing.", "other": "Anything else."}, 12))
        await pilot.pause(0.3)

    assert snap_compare(fixed_app("emerald"), terminal_size=(100, 30), run_before=open_dialog)
