"""The FireRed definition's mechanisms on a real GBA ROM (Parcel Quest Advance, FireRed layout), sampled
decision by decision through the definition's own probe: save blocks that move between two decisions
(the probe follows the pointer; a reader that kept the old address loses the flags), the bag key
redrawn while the parcel is held (the stored quantity changes, the decoded one does not), the ladder in
order, and a skipped required rung through the whole trial loop."""

from __future__ import annotations

import struct

import yaml

from sessions.audit.verify import verify_experiment
from sessions.preflight.assets import ASSETS
from tests.conftest import run_experiment
from tests.gba.conftest import DRY_RUN, FIRERED, needs_mgba

pytestmark = needs_mgba
SB1_LOW, SB1_HIGH = 0x0202552C, 0x0202552C + 124  # gSaveBlock1 + the move range (the definition's `ready`)
VISITED_PALLET = 0x890  # FLAG_WORLD_MAP_PALLET_TOWN
PARCEL = 0x15D  # ITEM_OAKS_PARCEL


def flag(stored: bytes, index: int) -> int:
    return stored[index // 8] >> (index % 8) & 1


def test_the_walkthrough_reaches_every_rung_in_order_and_none_is_lost(walk):
    first_seen = {}
    for i, step in enumerate(walk):
        for rung in step.reached:
            first_seen.setdefault(rung, i)
        # once reached, a rung keeps holding across every save-block move (M6's parcel is the exception:
        # delivering it ends M6's `parcel >= 1`, which is M7)
        earlier = {r for s in walk[:i] for r in s.reached} - {"M6"}
        assert earlier <= set(step.reached), (i, step.action, earlier - set(step.reached))
    assert list(first_seen) == [f"M{i}" for i in range(1, 9)]
    assert not walk[0].reached  # nothing holds at the start


def test_the_save_blocks_move_between_two_decisions_and_the_probe_follows_the_pointer(walk):
    moves = [(a, b) for a, b in zip(walk, walk[1:], strict=False) if a.sample["sb1"] != b.sample["sb1"]]
    assert len(moves) >= 8  # a move on every map load and battle
    followed = 0
    for before, after in moves:
        old, new = before.sample["sb1"], after.sample["sb1"]
        assert SB1_LOW <= new <= SB1_HIGH and new % 4 == 0
        assert after.sample["qty_key"] != before.sample["qty_key"]  # a new bag key at every move, as FireRed draws
        # the probe read the flag where the block is now ...
        assert after.sample["visited_pallet"] == flag(after.flags_at[new], VISITED_PALLET)
        if before.sample["visited_pallet"]:
            assert after.sample["visited_pallet"] == 1  # the flag moved with the block
            # ... and a reader that kept the old address would not have found it
            if flag(after.flags_at[old], VISITED_PALLET) == 0:
                followed += 1
    assert followed >= 3


def test_the_bag_key_changes_while_the_parcel_is_held(walk):
    held = [s for s in walk if s.sample["parcel"] >= 1]
    assert held, "the walkthrough never holds the parcel"
    keys = {s.sample["qty_key"] for s in held}
    assert len(keys) >= 2  # a fresh key at a map load while the parcel is in the bag
    stored = set()
    for s in held:
        slots = [struct.unpack_from("<HH", s.key_pocket, 4 * i) for i in range(30)]
        (quantity,) = [q for item, q in slots if item == PARCEL]
        assert quantity ^ (s.sample["qty_key"] & 0xFFFF) == s.sample["parcel"] == 1
        stored.add(quantity)
    assert len(stored) >= 2  # what is stored changed with the key; what the definition decodes did not


def test_a_required_rung_passed_over_ends_the_trial_as_skipped(tmp_path):
    """A copy of the definition with one more required rung (one the cartridge never sets), before
    M8: the walkthrough reaches M8 past it, which ends the trial as a game-failure naming it."""
    game = yaml.safe_load(FIRERED.read_text())
    rungs = game["milestones"]
    rungs.insert(len(rungs) - 1, {"id": "M7b", "name": "Never happens", "points": 1,
                                  "all": [{"field": "lab_scene", "ge": 200}]})
    game["id"] = "firered-with-an-extra-rung"
    (tmp_path / "game.yaml").write_text(yaml.safe_dump(game, allow_unicode=True))
    manifest = yaml.safe_load(DRY_RUN.read_text())
    manifest["game"]["definition"] = str(tmp_path / "game.yaml")
    manifest["game"]["rom"] = str(ASSETS / manifest["game"]["rom"].removeprefix("bundled:"))
    for entry in manifest["game"]["start_states"].values():
        entry["state"] = str(ASSETS / entry["state"].removeprefix("bundled:"))
    manifest["conditions"][0]["script"] = str(ASSETS / manifest["conditions"][0]["script"].removeprefix("bundled:"))
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(manifest, allow_unicode=True))
    out, _, (result,) = run_experiment(tmp_path / "m.yaml", tmp_path / "out")
    assert (result.outcome, result.termination_reason) == ("game-failure", "final-milestone-skipped-required")
    assert result.skipped_required == ["M7b"] and result.milestones_reached[-1] == "M8"
    assert verify_experiment(out) == []
