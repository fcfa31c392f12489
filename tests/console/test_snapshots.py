"""Whole-layout snapshots from fixed events (no emulator): 160x50 and 100x30, a model-backed agent's trial."""

from __future__ import annotations

from app.console import OakwatchConsole
from app.console_state import ConsoleSink
from tests.console.fixed import feed


def fixed_app(theme: str = "gameboy", **story) -> OakwatchConsole:
    sink = ConsoleSink("dry-run", clock=lambda: 0.0)
    feed(sink, **story)
    return OakwatchConsole(sink=sink, theme=theme)


async def _settle(pilot) -> None:
    await pilot.pause(0.3)


def test_layout_160x50(snap_compare):
    assert snap_compare(fixed_app(), terminal_size=(160, 50), run_before=_settle)


def test_layout_100x30(snap_compare):
    # One call's cost unknown: the trace says so at that decision, the cost and token totals are unknown.
    assert snap_compare(fixed_app("firered", unknown_cost_at=12), terminal_size=(100, 30), run_before=_settle)


def test_tag_dialog_100x30(snap_compare):
    async def open_dialog(pilot):
        from panes.dialogs import TagDialog

        await pilot.app.push_screen(TagDialog({"omission": "A fact is missing.", "other": "Anything else."}, 12))
        await pilot.pause(0.3)

    assert snap_compare(fixed_app("emerald"), terminal_size=(100, 30), run_before=open_dialog)
