"""The Display protocol: every display the runner is handed implements it explicitly, the runner's
side reads displays only through it, and sessions/ never imports app/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.bench.bench import _Clock, _MemorySampler, _Progress
from app.bench.bench_console import _Stopwatch
from app.console.console_state import ConsoleSink
from app.console.headless import HeadlessPrinter
from engine.loop.display import Display, wanted
from engine.policies.tools import ToolDesk
from sessions.execute.worker_process import _Forward

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("cls", [HeadlessPrinter, ConsoleSink, ToolDesk, _Forward, _Clock, _MemorySampler,
                                 _Progress, _Stopwatch])
def test_each_display_implements_the_protocol_explicitly(cls):
    assert Display in cls.__mro__
    for flag in ("wants_frames", "wants_budgets", "wants_memory_store", "wants_decisions"):
        assert isinstance(getattr(cls, flag), bool)


def test_flags_the_displays_ask_for():
    # The console draws frames, budgets and the store; the printer and the desk pay for none of them.
    assert ConsoleSink.wants_frames and ConsoleSink.wants_budgets and ConsoleSink.wants_memory_store
    assert not (HeadlessPrinter.wants_frames or ToolDesk.wants_frames or ToolDesk.wants_budgets)
    assert HeadlessPrinter.wants_decisions


def test_wanted_takes_the_protocol_default_for_a_display_that_does_not_say():
    class Bare:
        def handle(self, event) -> None: ...

    assert wanted([Bare()], "wants_decisions") is True  # decisions unless declined
    assert wanted([Bare()], "wants_frames") is False
    assert wanted([], "wants_decisions") is False  # no display: a worker ships no decisions
    assert wanted([Bare(), ConsoleSink()], "wants_frames") is True
    with pytest.raises(ValueError):
        wanted([Bare()], "wants_everything")


def test_sessions_never_import_app():
    offenders = []
    for path in (ROOT / "sessions").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n == "app" or n.startswith("app.")]
    assert offenders == []
