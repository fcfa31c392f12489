"""How a pane gets its data: it pulls a snapshot from a source, never the other way round."""

from __future__ import annotations


def start_pulling(pane, interval: float | None) -> None:
    """Show the source's snapshot now; then pull on the pane's own timer, or, with no interval,
    whenever the pane's holder calls pull() (the console drives all panes from one tick)."""
    if pane.source is None:
        return
    pane.pull()
    if interval:
        pane.set_interval(interval, pane.pull, name=f"{type(pane).__name__}-pull")
