"""The one thing the runner knows about whoever watches a run: the Display protocol.

As in Inspect AI's `_display/`, the runner (sessions.execute.runner and its workers) is handed
displays and talks to them only through this protocol: `handle` for each event, and four flags
saying which costly events to build at all. Implementations: the headless printer
(app.console.headless.HeadlessPrinter), the Textual console's sink (app.console.console_state.ConsoleSink,
which `oakwatch serve` hosts in a browser), the MCP tool desk (engine.policies.tools.ToolDesk) and the
bench's timers. `oakwatch attach` watches a run from outside the runner's process: it reads the
evidence folder and the control socket, so it is not handed events (app.review.attach_data).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from engine.loop.events import Event


@runtime_checkable
class Display(Protocol):
    """Subclass it explicitly to inherit the defaults below (a Protocol's class attributes are
    inherited by explicit subclasses); a display that only shows trial lines pays for nothing more."""

    # The loop builds frames, budget updates and memory-store reads only when a display shows them.
    wants_frames: bool = False
    wants_budgets: bool = False
    wants_memory_store: bool = False
    # Decisions are shipped from a worker to the driver unless every display declines them: pickling
    # each decision's records for nobody costs the driver a tenth of a core (sessions.execute.workers).
    wants_decisions: bool = True

    def handle(self, event: Event) -> None: ...


FLAGS = ("wants_frames", "wants_budgets", "wants_memory_store", "wants_decisions")


def wanted(displays: Iterable[object], flag: str) -> bool:
    """Whether any display asks for `flag`; one that does not say takes the protocol's default."""
    if flag not in FLAGS:
        raise ValueError(f"not a display flag: {flag}")
    default = getattr(Display, flag)
    return any(getattr(d, flag, default) for d in displays)
