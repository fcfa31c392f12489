"""One figure, one rendering: a trial's cost reads the same in the live console (its cost meter, the
trial's end line, the summary table), in review (the trial list, each decision and attempt) and in
attach (the overview row), for a known $0 (the bundled scripted dry-run) and for an unknown cost (a
model behind an OpenAI-compatible server that prices nothing: tests.fakes.provider_server)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.console.console import OakwatchConsole
from app.review.attach import AttachApp
from app.review.review import ReviewApp
from engine.loop.script import parse_script
from panes.overview import OverviewPane
from panes.review.response import ResponsePane
from panes.status import SummaryPane
from panes.trial.budgets import BudgetsPane
from panes.trial.trace import TracePane
from sessions.evidence import layout
from sessions.preflight.assets import ASSETS
from tests.app.conftest import dry_run_manifest, prepare_run, quit_and_wait, wait_for
from tests.app.review.test_attach import row_line
from tests.conftest import write_manifest
from tests.fakes.provider_server import FakeProviderServer, ok

SIZE = (160, 50)
WALK = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")


def model_manifest(tmp_path: Path, server: FakeProviderServer) -> Path:
    server.script(*[ok({"reasoning_summary": "walking on", "memory_read": [], "memory_write": [],
                        "observed": {"screen": "overworld", "location_guess": "town",
                                     "objective_guess": "deliver the parcel", "certainty": 0.8},
                        "actions": WALK[i:i + 4]}) for i in range(0, 12, 4)])
    condition = {"id": "agent", "policy": "model", "provider": "openai-compatible", "model": "local-model-1",
                 "base_url": server.base_url("chat")}  # no price: each call's cost is unknown
    return write_manifest(tmp_path, conditions=[condition],
                          budgets={"accepted_actions": 12, "model_decisions": None, "wall_time_minutes": None,
                                   "total_cost_usd": None})


async def console_costs(prepared, experiment) -> tuple[str, list[str]]:
    """Run the trial in the live console; (trial key, every cost it shows for the trial)."""
    app = OakwatchConsole(prepared, experiment, speed=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.query_one(SummaryPane).has_class("-shown"), timeout=120,
                       what="the run to finish and its summary")
        await pilot.pause(0.5)  # the meters' last pull
        app.query_one(BudgetsPane).pull()
        meter = [x for x in str(app.query_one(BudgetsPane).render()).splitlines() if x.startswith("cost")]
        (key,) = [r["trial_key"] for r in app.sink.results]
        ended = [m.group(1) for x in app.query_one(TracePane).lines
                 for m in [re.search(r"ended: .*, cost (\S+), tokens", x)] if m]
        table = [re.split(r"\s{2,}", x)[6] for x in app.query_one(SummaryPane).text.splitlines()
                 if x.startswith(key + " ")]
        await quit_and_wait(pilot, app)
    assert len(meter) == 1 and len(ended) == 1 and len(table) == 1
    return key, [meter[0].split()[-1], ended[0], table[0]]


async def review_costs(root: Path, key: str) -> list[str]:
    """The trial list's cost, and the first, second and last decisions' and their attempts'."""
    app = ReviewApp(root, reread_seconds=None)
    shown: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        option = app.query_one("#trials").get_option(key)
        shown.append(str(option.prompt).split()[-1])
        for n in (1, 2, app.trial.decisions):
            app.seek(n)
            await pilot.pause()
            shown += re.findall(r"cost (\S+)", app.query_one(ResponsePane).text.plain)
    return shown


async def attach_costs(root: Path, key: str) -> list[str]:
    app = AttachApp(root, poll_seconds=None, theme="gameboy")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        cell = str(app.query_one(OverviewPane).get_cell(key, "cost"))
        assert cell in row_line(app, key).split()  # drawn whole
    return [cell]


@pytest.mark.parametrize("case", ["known-zero", "unknown"])
async def test_a_cost_reads_the_same_in_console_review_and_attach(tmp_path, case):
    if case == "known-zero":
        prepared, experiment = prepare_run(dry_run_manifest(), tmp_path)
        key, console = await console_costs(prepared, experiment)
    else:
        with FakeProviderServer() as server:
            prepared, experiment = prepare_run(model_manifest(tmp_path, server), tmp_path)
            key, console = await console_costs(prepared, experiment)
    root = experiment.root
    result = json.loads((root / layout.TRIALS / key / layout.RESULT).read_text())
    expected = {"known-zero": "$0.00", "unknown": "unknown"}[case]
    assert result["telemetry"]["cost_usd"] == (0.0 if case == "known-zero" else None)  # what the result records
    review = await review_costs(root, key)
    attach = await attach_costs(root, key)
    assert len(review) > 2
    assert set(console) == set(review) == set(attach) == {expected}, (console, review, attach)
