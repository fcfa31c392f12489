"""A task from a mid-game state of the GBA cartridge (seed 003's catalog): deliver the parcel, from the
shop with the parcel in the bag, to the Pokédex; its state is its prefix played from the canonical
start (tools/pin.py --check, in test_firered_layout, rebuilds it); the batch verifies and replays."""

from __future__ import annotations

import json

from app.cli import main
from tests.gba.conftest import needs_mgba

pytestmark = needs_mgba
TASK = "parcel-quest-advance-deliver-parcel"


def test_the_deliver_parcel_task_runs_from_its_mid_game_state_and_verifies(tmp_path):
    out = tmp_path / "batch"
    assert main(["tasks", "run", TASK, "--output", str(out)]) == 0
    (entry,) = json.loads((out / "batch.json").read_text())["tasks"]
    assert entry["task_id"] == TASK and entry["trials"][0]["outcome"] == "success"
    result = json.loads((out / "runs" / TASK / "trials" / "X-01" / "result.json").read_text())
    assert result["pre_satisfied"] == ["M1", "M2", "M3", "M4", "M5", "M6"]  # the state holds the parcel
    assert result["milestones_reached"] == ["M7", "M8"]
    assert result["provenance"]["rom_identity"]["conformance_build"] == "Parcel Quest Advance (FireRed layout)"
    assert main(["verify", str(out)]) == 0
    assert main(["replay", str(out / "runs" / TASK / "trials" / "X-01")]) == 0
