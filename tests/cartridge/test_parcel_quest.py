"""Parcel Quest, the open test cartridge: build, header, canonical start, milestone ladder,
game mechanics, timing contract, determinism, and mGBA compatibility."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from engine.games import cartridge_tables as ct

from .conftest import (
    BAG,
    BAG_COUNT,
    BATTLE,
    CART,
    DEX,
    FACING,
    FLAGS0,
    MAGIC,
    MAP,
    MENU,
    PARCEL,
    PARTY_COUNT,
    PRESS,
    ROM,
    SETTLE,
    START,
    TEXT,
    X,
    Y,
    act,
    bag,
    boot,
    frame_hash,
    restore,
    run_walkthrough,
    save,
    screen_rows,
    state,
    walkthrough,
)

MILESTONES = [
    ("M1", lambda s: bool(s[FLAGS0] & 0x01)),
    ("M2", lambda s: bool(s[FLAGS0] & 0x02)),
    ("M3", lambda s: bool(s[FLAGS0] & 0x04) and s[PARTY_COUNT] >= 1),
    ("M4", lambda s: bool(s[FLAGS0] & 0x08) and s[BATTLE] == 0),
    ("M5", lambda s: bool(s[FLAGS0] & 0x10) and s[MAP] == 5),
    ("M6", lambda s: bool(s[FLAGS0] & 0x20) and PARCEL in s.bag),
    ("M7", lambda s: bool(s[FLAGS0] & 0x40) and PARCEL not in s.bag),
    ("M8", lambda s: bool(s[FLAGS0] & 0x80)),
]


def spelled(rows: list[bytes], word: str) -> bool:
    return any(word.encode("ascii") in row for row in rows)


# ---------------------------------------------------------------- 1. build


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ("sdcc", "sdasgb", "makebin")), reason="SDCC (sm83) is not installed"
)
def test_build_is_reproducible(tmp_path):
    subprocess.run(["sh", str(CART / "build.sh"), str(tmp_path)], check=True, capture_output=True)
    assert (tmp_path / "parcel-quest.gb").read_bytes() == ROM.read_bytes()


def test_generated_data_matches_art(tmp_path):
    subprocess.run([sys.executable, str(CART / "tools" / "gen_data.py"), str(tmp_path)], check=True)
    for name in ("data.c", "data.h", "tables.s", "tables.h"):
        assert (tmp_path / name).read_bytes() == (CART / "src" / name).read_bytes(), name


# ---------------------------------------------------------------- 2. ROM header


def test_rom_header_and_load():
    rom = ROM.read_bytes()
    assert len(rom) % 0x4000 == 0 and len(rom) <= 0x10000
    assert len(rom) == 0x8000
    assert rom[0x104:0x108] == bytes.fromhex("CEED6666")
    assert rom[0x134:0x13F] == b"PARCELQUEST"
    assert rom[0x147] == 0x00  # ROM only, no MBC
    header = 0
    for b in rom[0x134:0x14D]:
        header = (header - b - 1) & 0xFF
    assert rom[0x14D] == header
    total = (sum(rom) - rom[0x14E] - rom[0x14F]) & 0xFFFF
    assert int.from_bytes(rom[0x14E:0x150], "big") == total
    pb = boot()
    try:
        assert pb.memory[MAGIC] == 0x4F
    finally:
        pb.stop(save=False)


# ---------------------------------------------------------------- 3. canonical start


def test_canonical_start(cart):
    assert START["press_frames"] == 4 and START["settle_frames"] == 12
    assert frame_hash(cart) == START["first_frame_sha256"]
    assert cart.memory[MAGIC] == 0x4F
    assert cart.memory[MAP] == 0
    assert cart.memory[TEXT] == 0 and cart.memory[MENU] == 0 and cart.memory[FLAGS0] == 0
    # idle: nothing changes without input
    before = state(cart)
    act(cart, "NOOP")
    assert frame_hash(cart) == START["first_frame_sha256"]
    assert state(cart) == before


# ---------------------------------------------------------------- 4. milestone ladder


def test_walkthrough_reaches_m8_in_order(walkthrough_trace):
    steps = walkthrough_trace
    assert len(steps) - 1 <= 400
    flags = [s[FLAGS0] for s in steps]
    for a, b in zip(flags, flags[1:], strict=False):
        assert a & ~b == 0, "a story flag was cleared"
    assert flags[0] == 0
    first = []
    for bit, (name, cond) in enumerate(MILESTONES):
        flips = [i for i in range(1, len(steps)) if (flags[i] >> bit) & 1 and not (flags[i - 1] >> bit) & 1]
        assert len(flips) == 1, f"{name} flag flipped {len(flips)} times"
        i = flips[0]
        assert cond(steps[i]), f"{name} condition not true when its flag was set (step {i})"
        assert not any(cond(s) for s in steps[:i]), f"{name} true early"
        first.append(i)
    assert first == sorted(first) and len(set(first)) == len(first), first
    for name, cond in (MILESTONES[0], MILESTONES[1], MILESTONES[2], MILESTONES[3], MILESTONES[7]):
        i = first[[m[0] for m in MILESTONES].index(name)]
        assert all(cond(s) for s in steps[i:]), f"{name} went false again"
    final = steps[-1]
    assert final[FLAGS0] == 0xFF and DEX in final.bag and PARCEL not in final.bag
    assert final[TEXT] == 0 and final[MENU] == 0


# ---------------------------------------------------------------- 5. mechanics


def test_walls_block(cart):
    for _ in range(3):
        act(cart, "UP")
    assert (cart.memory[X], cart.memory[Y]) == (10, 4)
    act(cart, "UP")  # the back wall
    assert (cart.memory[X], cart.memory[Y]) == (10, 4)
    assert cart.memory[FACING] == 1
    for _ in range(3):
        act(cart, "LEFT")
    assert (cart.memory[X], cart.memory[Y]) == (8, 4)  # the TV at (7, 4) blocks the third step
    assert cart.memory[0xD01A] == 5  # steps: only successful moves count


def test_doors_and_stairs_warp(walkthrough_trace):
    steps = walkthrough_trace
    moves = {
        (a[MAP], b[MAP]) for a, b in zip(steps, steps[1:], strict=False) if b.action in ("UP", "DOWN", "LEFT", "RIGHT")
    }
    # stairs, doormat, town -> route, route -> city, city -> shop and back, lab door
    for pair in [(0, 1), (1, 2), (2, 3), (3, 2), (2, 4), (4, 5), (5, 6), (6, 5), (5, 4), (4, 2)]:
        assert pair in moves, pair


def test_npcs_block_and_text_advances_with_a(cart):
    for a in ["RIGHT"] * 6 + ["UP"] * 3:  # bedroom -> stairs
        act(cart, a)
    assert cart.memory[MAP] == 1 and (cart.memory[X], cart.memory[Y]) == (15, 4)
    for a in ["LEFT"] * 4 + ["DOWN"] * 2:
        act(cart, a)
    assert (cart.memory[X], cart.memory[Y]) == (11, 6)
    act(cart, "DOWN")  # MOM stands at (11, 7)
    assert (cart.memory[X], cart.memory[Y]) == (11, 6) and cart.memory[FACING] == 0
    quiet = frame_hash(cart)
    act(cart, "A")
    assert cart.memory[TEXT] == 1
    assert spelled(screen_rows(cart), "MOM:")
    talking = frame_hash(cart)
    assert talking != quiet
    act(cart, "DOWN")  # movement is ignored while a box is open
    assert (cart.memory[Y], cart.memory[TEXT], frame_hash(cart)) == (6, 1, talking)
    act(cart, "A")
    assert cart.memory[TEXT] == 0
    assert frame_hash(cart) == quiet


def _bag_page(pb) -> list[bytes]:
    """Open START -> BAG, return the screen tiles, back out with B twice (checking the menus)."""
    before = frame_hash(pb)
    act(pb, "START")
    assert pb.memory[MENU] == 1
    act(pb, "A")
    assert pb.memory[MENU] == 2
    rows = screen_rows(pb)
    act(pb, "B")
    assert pb.memory[MENU] == 1
    act(pb, "B")
    assert pb.memory[MENU] == 0
    assert frame_hash(pb) == before
    return rows


def test_bag_page_shows_parcel_only_while_held(walkthrough_trace):
    steps = walkthrough_trace
    actions = walkthrough()
    got = next(i for i, s in enumerate(steps) if s[FLAGS0] & 0x20)
    holding = next(i for i in range(got, len(steps)) if steps[i][TEXT] == 0 and steps[i][MENU] == 0)
    assert not steps[holding][FLAGS0] & 0x40
    pb = boot()
    try:
        snap = save(pb)
        rows = _bag_page(pb)
        assert spelled(rows, "NO ITEMS") and not spelled(rows, "PARCEL")
        restore(pb, snap)
        for a in actions[:holding]:
            act(pb, a)
        assert PARCEL in bag(pb)
        snap = save(pb)
        rows = _bag_page(pb)
        assert spelled(rows, "PARCEL") and not spelled(rows, "NO ITEMS")
        restore(pb, snap)
        for a in actions[holding:]:
            act(pb, a)
        assert pb.memory[FLAGS0] == 0xFF and PARCEL not in bag(pb)
        rows = _bag_page(pb)
        assert not spelled(rows, "PARCEL") and spelled(rows, "DEX")
    finally:
        pb.stop(save=False)


def test_select_changes_nothing(walkthrough_trace):
    actions = walkthrough()
    steps = walkthrough_trace

    def first(pred):
        return next(i for i, s in enumerate(steps) if pred(s))

    # canonical start, an open dialogue, the YES/NO box, the battle menu, the overworld (+ START menu)
    overworld = first(lambda s: s[FLAGS0] & 0x08 and s[TEXT] == 0 and s[MENU] == 0)
    stops = [0, first(lambda s: s[TEXT] == 1), first(lambda s: s[MENU] == 3), first(lambda s: s[MENU] == 5)]
    stops.append(overworld)
    pb = boot()
    try:
        done = 0
        for stop in stops:
            for a in actions[done:stop]:
                act(pb, a)
            done = stop
            for extra in ([], ["START"]) if stop == overworld else ([],):
                snap = save(pb)
                for a in extra:
                    act(pb, a)
                h, s = frame_hash(pb), state(pb)
                act(pb, "SELECT")
                assert frame_hash(pb) == h and state(pb) == s, f"SELECT changed something at step {stop}"
                restore(pb, snap)
    finally:
        pb.stop(save=False)


def test_dialogue_lines_fit_the_box():
    """Every dialogue page in the ROM's tables (and every wording in the pool, with the bundled names)
    has at most 4 lines of at most 18 characters (longest creature names substituted)."""
    t = ct.decode(ct.rom_block(ROM.read_bytes()))
    longest = ct.RUNTIME_LONGEST
    assert len(t.texts) == len(ct.TEXT_IDS) > 30
    spec = ct.load_world()
    pages = list(t.texts) + [ct.render_page(w, spec.names) for pool in spec.texts.values() for w in pool]
    for page in pages:
        text = "".join("#" * longest[c] if c in longest else c for c in page)
        lines = text.split("\n")
        assert len(lines) <= 4 and all(len(line) <= 18 for line in lines), lines
    assert "KIT" in t.text("sent_out") and t.species == ("SPROUTLE", "EMBERPUP", "DRIPLET")


# ---------------------------------------------------------------- timing + determinism


def test_timing_contract():
    """Every press is fully handled within 10 frames; the screen and state then stay still."""
    pb = boot()
    try:
        for i, a in enumerate(walkthrough()):
            hashes = []
            pb.button_press(a.lower())
            for _ in range(PRESS):
                pb.tick(1, True)
                hashes.append(frame_hash(pb))
            pb.button_release(a.lower())
            for _ in range(SETTLE):
                pb.tick(1, True)
                hashes.append(frame_hash(pb))
            assert len(set(hashes[10:])) == 1, f"screen still changing after 10 frames at step {i + 1} ({a})"
            s = state(pb)
            act(pb, "NOOP")
            assert frame_hash(pb) == hashes[-1] and state(pb) == s, f"not idle-stable after step {i + 1}"
    finally:
        pb.stop(save=False)


def test_walkthrough_is_deterministic(walkthrough_trace):
    again = run_walkthrough(walkthrough())
    assert [s.hash for s in again] == [s.hash for s in walkthrough_trace]
    assert [s.ram for s in again] == [s.ram for s in walkthrough_trace]


# ---------------------------------------------------------------- 7. mGBA


def _mgba_core():
    """(the core, its video buffer): the binding's set_video_buffer keeps only a pointer into the image, so
    the caller must hold the image for as long as the core draws (a dropped one is freed, and the next
    frames are written into freed memory: a crash a few hundred frames later, now and then)."""
    try:
        import mgba.core
        import mgba.image
        import mgba.log
    except ImportError as exc:  # pragma: no cover - depends on the platform
        pytest.skip(f"mGBA python binding not available: {exc}")
    from engine.emulators.mgba_backend import ready_python_callbacks

    mgba.log.silence()
    ready_python_callbacks()  # see there: else the first frame can hang in cffi's start-up lock
    core = mgba.core.load_path(str(ROM))
    assert core is not None
    core.reset()
    image = mgba.image.Image(*core.desired_video_dimensions())
    core.set_video_buffer(image)
    core.reset()
    return core, image


def test_mgba_boots():
    core, _image = _mgba_core()  # the image held while the core draws into it
    for _ in range(200):
        core.run_frame()
    assert core.memory[0xD000] == 0x4F
    assert core.memory[MAP] == 0


def test_mgba_plays_the_walkthrough():
    core, _image = _mgba_core()  # the image held while the core draws into it
    keys = {
        "A": core.KEY_A,
        "B": core.KEY_B,
        "START": core.KEY_START,
        "SELECT": core.KEY_SELECT,
        "UP": core.KEY_UP,
        "DOWN": core.KEY_DOWN,
        "LEFT": core.KEY_LEFT,
        "RIGHT": core.KEY_RIGHT,
    }
    for _ in range(START["boot_frames"]):
        core.run_frame()
    for a in walkthrough():
        if a != "NOOP":
            core.set_keys(keys[a])
        for _ in range(PRESS):
            core.run_frame()
        core.set_keys()
        for _ in range(SETTLE):
            core.run_frame()
    assert core.memory[FLAGS0] == 0xFF
    assert core.memory[BAG_COUNT] == 1 and core.memory[BAG] == DEX
