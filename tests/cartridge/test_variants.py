"""Parcel Quest variants: fixed table offsets, deterministic generation, the solver's plans played in
the real emulators, and `oakwatch cartridge variant`'s folder."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing
from engine.emulators.romheader import gb_header_checksum
from engine.games import cartridge_tables as ct
from engine.loop.script import parse_script
from sessions.preflight.gamedefs import load_game_definition
from sessions.variants.variant_solver import RUNGS, Unsolvable, battle, lfsr, rng_after, solve
from sessions.variants.variants import VariantError, make_variant

from .conftest import BOOT, PRESS, ROM, SETTLE

SEED64 = 0xC0FFEE_1234_5678_9ABC  # a 64-bit seed, as a held-out one would be
TIMING = Timing(PRESS, SETTLE)


def play(backend: str, rom: bytes, actions: list[str]) -> dict[str, int]:
    """Press index (1-based) at which each flags0 bit (M1..M8) first appears, in a real emulator."""
    machine = BACKENDS[backend].open(rom, "variant.gb", "gb")
    reached: dict[str, int] = {}
    try:
        machine.boot(BOOT)
        for i, a in enumerate(actions, start=1):
            machine.step(a, TIMING, lambda read: {})
            f0 = machine.read_range(0xD005, 1)[0]
            for bit in range(8):
                if f0 >> bit & 1:
                    reached.setdefault(f"M{bit + 1}", i)
    finally:
        machine.close()
    return reached


def test_bundled_tables_round_trip_at_the_fixed_offset():
    rom = ROM.read_bytes()
    block = ct.rom_block(rom)
    assert block[:4] == b"PQT1" and rom[0x4000:0x4004] == b"PQT1"
    t = ct.decode(block)
    assert ct.encode(t) == block
    assert ct.with_block(rom, block) == rom  # the checksums are what the build wrote
    assert (t.start.map, t.start.x, t.start.y) == (0, 10, 7)
    assert t.text("stop1").startswith("PROF. HAZEL:")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, ct.OFF_TILES - 1), st.integers(0, 255)), min_size=1, max_size=8))
def test_a_corrupted_block_is_refused_in_one_line_or_read_as_valid_tables(edits):
    """The reader never crashes on a damaged table block: a TableError, or tables that obey every rule
    the game relies on (and write back to a block that reads the same)."""
    block = bytearray(ct.rom_block(ROM.read_bytes()))
    for offset, value in edits:
        block[offset] = value
    try:
        t = ct.decode(bytes(block))
    except ct.TableError as exc:
        assert "\n" not in str(exc)
        return
    assert ct.decode(ct.encode(t)) == t


def test_seed_zero_is_the_bundled_cartridge():
    v = make_variant(0)
    assert v.rom == ROM.read_bytes()


def test_same_seed_same_bytes_and_seeds_differ():
    a, b, c = make_variant(SEED64), make_variant(SEED64), make_variant(SEED64 + 1)
    assert a.rom == b.rom and a.solution.actions == b.solution.actions
    assert a.rom != c.rom != ROM.read_bytes()
    # only the table block (and the checksums) change: the code is the bundled code
    bundled = ROM.read_bytes()
    outside = [i for i in range(len(bundled)) if a.rom[i] != bundled[i]
               and not (ct.TABLE_ADDR <= i < ct.TABLE_ADDR + ct.TABLE_SIZE) and i not in (0x14D, 0x14E, 0x14F)]
    assert outside == []


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=1, max_value=2**64 - 1))
def test_every_sampled_seed_gives_a_valid_solvable_variant(seed):
    v = make_variant(seed)
    rom = v.rom
    assert rom[0x14D] == gb_header_checksum(rom)
    assert int.from_bytes(rom[0x14E:0x150], "big") == (sum(rom) - rom[0x14E] - rom[0x14F]) & 0xFFFF
    t = ct.decode(ct.rom_block(rom))
    assert t == v.tables and ct.encode(t) == ct.rom_block(rom)
    sol = v.solution
    assert len(sol.actions) == sol.optimal["M8"] == sol.reached_at["M8"]
    assert [sol.optimal[r] for r in RUNGS] == sorted(sol.optimal[r] for r in RUNGS)
    assert all(sol.reached_at[r] >= sol.optimal[r] for r in RUNGS)
    assert all(page and ct.page_fits(page) for page in t.texts)


def test_the_solver_beats_the_hand_walkthrough_on_the_bundled_cartridge(walkthrough_trace):
    sol = solve(ct.decode(ct.rom_block(ROM.read_bytes())))
    hand = len(walkthrough_trace) - 1
    assert sol.optimal["M8"] <= hand
    # the bundled definition records the same yardstick
    game = load_game_definition(Path(ct.WORLD_YAML).parents[2] / "games" / "parcel-quest.yaml")
    assert game.optimal_presses == sol.optimal
    assert game.optimal_presses_for == hashlib.sha256(ROM.read_bytes()).hexdigest()


@pytest.mark.parametrize("seed", [0, 7, SEED64])
def test_the_plan_reaches_every_rung_when_the_solver_says_in_pyboy(seed):
    v = make_variant(seed)
    assert play("pyboy", v.rom, v.solution.actions) == v.solution.reached_at


def test_the_plan_reaches_m8_in_mgba():
    if BACKENDS["mgba"].version() is None:
        pytest.skip("mGBA is not installed")
    v = make_variant(SEED64)
    assert play("mgba", v.rom, v.solution.actions) == v.solution.reached_at


def test_one_press_fewer_does_not_reach_m8():
    """The plan has no slack at its end: without its last press the emulator stops short of M8."""
    v = make_variant(7)
    reached = play("pyboy", v.rom, v.solution.actions[:-1])
    assert "M8" not in reached and "M7" in reached


def test_battle_search_matches_the_game_rules():
    assert rng_after(0) == 0xA5 and rng_after(1) == lfsr(0xA5) and rng_after(255) == 0xA5
    lengths = {len(battle(r)) for r in range(1, 256)}
    assert min(lengths) >= 5 and len(lengths) > 1  # the RNG decides how long the battle takes


def test_an_unreachable_lab_is_refused():
    t = ct.decode(ct.rom_block(ROM.read_bytes()))
    no_lab = t.model_copy(update={"warps": tuple(w for w in t.warps if w.to.map != 3)})
    with pytest.raises(Unsolvable):
        solve(no_lab)


def test_a_seed_that_never_solves_is_refused(monkeypatch):
    import sessions.variants.variants as variants

    def unsolvable(*args, **kwargs):
        raise Unsolvable("no path from the start to M8")

    monkeypatch.setattr(variants, "solve", unsolvable)
    with pytest.raises(VariantError, match="no solvable variant"):
        make_variant(5)
    with pytest.raises(VariantError):
        make_variant(-1)


def oakwatch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).resolve().parents[2])


def test_cli_writes_a_variant_folder_that_names_no_seed(tmp_path):
    import os

    out = tmp_path / "v"
    env = {**os.environ, "HELD_OUT": str(SEED64)}
    r = oakwatch("cartridge", "variant", "--seed-env", "HELD_OUT", "--output", str(out), env=env)
    assert r.returncode == 0, r.stderr
    v = make_variant(SEED64)
    rom = (out / "parcel-quest-variant.gb").read_bytes()
    assert rom == v.rom
    assert parse_script((out / "walkthrough.txt").read_text(), "walkthrough.txt") == v.solution.actions
    game = load_game_definition(out / "parcel-quest-variant.yaml")
    assert game.optimal_presses == v.solution.optimal
    assert game.rom_sha256 == game.optimal_presses_for == hashlib.sha256(rom).hexdigest()
    manifest = yaml.safe_load((out / "manifest.yaml").read_text())
    assert manifest["game"]["rom_sha256"] == game.rom_sha256
    state = (out / "parcel-quest-variant.state").read_bytes()
    assert manifest["game"]["start_states"]["pyboy"]["sha256"] == hashlib.sha256(state).hexdigest()
    for f in out.iterdir():
        if f.suffix in (".yaml", ".txt"):
            text = f.read_text().lower()
            assert str(SEED64) not in text and f"{SEED64:x}" not in text, f.name


def test_cli_refuses_bad_input_in_one_line(tmp_path):
    for args in (["--seed", "-3"], ["--seed", "twelve"], ["--seed-env", "OAKWATCH_NO_SUCH_VAR"]):
        r = oakwatch("cartridge", "variant", *args, "--output", str(tmp_path / "x"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "error" in r.stderr, r.stderr
        assert not (tmp_path / "x").exists()
    (tmp_path / "exists").mkdir()
    r = oakwatch("cartridge", "variant", "--seed", "1", "--output", str(tmp_path / "exists"))
    assert r.returncode == 2 and "already exists" in r.stderr


def test_the_written_manifest_runs_the_walkthrough_to_m8(tmp_path):
    out = tmp_path / "v"
    assert oakwatch("cartridge", "variant", "--seed", "7", "--output", str(out)).returncode == 0
    run = tmp_path / "run"
    r = oakwatch("run", str(out / "manifest.yaml"), "--headless", "--output", str(run))
    assert r.returncode == 0, r.stderr
    result = next(run.rglob("result.json"))
    data = yaml.safe_load(result.read_text())
    assert data["deepest_milestone"] == "M8"


def test_the_battle_search_agrees_with_the_emulator_for_many_rng_states():
    """From the battle's first text, wasted presses (a direction: only A and B act on text) shift the
    RNG; for each shift the searched battle ends (M4) exactly at its last press, never before."""
    sol = solve(ct.decode(ct.rom_block(ROM.read_bytes())))
    start = sol.reached_at["M3"] + 3  # YES, then two pages and the press that starts the battle
    machine = BACKENDS["pyboy"].open(ROM.read_bytes(), "pq.gb", "gb")
    try:
        machine.boot(BOOT)
        for a in sol.actions[:start]:
            machine.step(a, TIMING, lambda read: {})
        assert machine.read_range(0xD014, 1)[0] == 1  # in battle
        at_battle = machine.save_state()
        lengths = set()
        for waste in (0, 1, 2, 3, 5, 8, 13):
            machine.restore(at_battle)
            fight = battle(rng_after(start + waste))
            lengths.add(len(fight))
            for a in ["LEFT"] * waste + fight:
                assert not machine.read_range(0xD005, 1)[0] & 0x08, f"battle over early (waste {waste})"
                machine.step(a, TIMING, lambda read: {})
            assert machine.read_range(0xD005, 1)[0] & 0x08 and machine.read_range(0xD014, 1)[0] == 0, waste
        assert len(lengths) > 1  # the shifts really gave different battles
    finally:
        machine.close()
