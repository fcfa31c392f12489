"""The mGBA backend on real files: the bundled cartridge to M8 through the CLI (verify and replay
pass), deterministic frames, reproducible start states, the pinned clock, bus reads."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing, frame_sha256
from engine.loop.script import parse_script
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST

pytestmark = pytest.mark.skipif(BACKENDS["mgba"].version() is None, reason=BACKENDS["mgba"].missing_message())

ROM = ASSETS / "cartridge" / "parcel-quest.gb"
STATE = ASSETS / "cartridge" / "parcel-quest.mgba.state"
START = yaml.safe_load((ASSETS / "cartridge" / "start.yaml").read_text())
WALK = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")
TIMING = Timing(START["press_frames"], START["settle_frames"])


def no_probe(read_range):
    return {"magic": read_range(0xD000, 1)[0]}


def oakwatch(*args, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def tiny_gba_rom() -> bytes:
    """A valid GBA header and one instruction (`b .`): enough for mGBA to boot a GBA core."""
    rom = bytearray(0x200)
    rom[0:4] = struct.pack("<I", 0xEAFFFFFE)
    rom[4:8] = bytes([0x24, 0xFF, 0xAE, 0x51])  # the logo's first bytes
    rom[0xA0:0xB0] = b"OAKWATCHTESTAOWE"
    rom[0xB2] = 0x96
    check = 0
    for b in rom[0xA0:0xBD]:
        check = (check - b) & 0xFF
    rom[0xBD] = (check - 0x19) & 0xFF
    return bytes(rom)


def test_dry_run_reaches_m8_on_mgba_and_verifies_and_replays(tmp_path):
    out = tmp_path / "exp"
    t0 = time.monotonic()
    run = oakwatch("run", "--headless", "--emulator", "mgba", "--output", out)
    assert run.returncode == 0, run.stderr
    wall = time.monotonic() - t0
    frozen = yaml.safe_load((out / "manifest.yaml").read_text())
    assert frozen["emulator"]["name"] == "mgba" and frozen["emulator"]["version"] == "0.10.2"
    (result_file,) = out.glob("trials/*/result.json")
    result = json.loads(result_file.read_text())
    assert result["outcome"] == "success" and [m["id"] for m in result["milestones"]][-1] == "M8"
    assert result["provenance"]["emulator"]["name"] == "mgba"
    assert result["provenance"]["initial_state_sha256"] == hashlib.sha256(STATE.read_bytes()).hexdigest()
    verify = oakwatch("verify", out)
    assert verify.returncode == 0, verify.stderr
    replay = oakwatch("replay", result_file.parent)
    assert replay.returncode == 0, replay.stderr
    assert "M8" in replay.stdout
    print(f"mgba dry-run: {wall:.1f} s wall")


def play(emulator, actions):
    emulator.restore(STATE.read_bytes())
    hashes = [frame_sha256(emulator.frame())]
    for action in actions:
        step = emulator.step(action, TIMING, no_probe)
        hashes.append((step.frame_sha256, step.frame_index, step.press_frame, step.ram_last["magic"]))
    return hashes


def test_frames_are_deterministic():
    rom = ROM.read_bytes()
    a = BACKENDS["mgba"].open(rom, "a", "gb")
    b = BACKENDS["mgba"].open(rom, "b", "gb")
    try:
        b.boot(37)  # a different history before the restore: the screen buffer and frame count differ
        for action in ["A", "START", "LEFT"]:
            b.step(action, TIMING, no_probe)
        first, second = play(a, WALK[:40]), play(b, WALK[:40])
        assert [h[0] for h in first[1:]] == [h[0] for h in second[1:]]
        assert first[0] == second[0] == START["mgba"]["first_frame_sha256"]
        assert len({h[0] for h in first[1:]}) > 10  # the walk moves the picture
        # frame numbers count as PyBoy's: frames run by this emulator since it was made
        assert first[1][1:3] == (16, 0) and first[2][1:3] == (32, 16)
        assert {h[3] for h in first[1:]} == {0x4F}
        frame = a.frame()
        assert frame.shape == (144, 160, 3) and frame.dtype.name == "uint8" and a.frame_size == (160, 144)
    finally:
        a.close()
        b.close()


def test_make_state_is_reproducible_and_is_the_bundled_one(tmp_path):
    for name in ("one.state", "two.state"):
        proc = oakwatch("make-state", ROM, "--frames", START["boot_frames"], "--emulator", "mgba",
                        "--output", tmp_path / name)
        assert proc.returncode == 0, proc.stderr
        assert "emulator_version: 0.10.2" in proc.stdout
    assert (tmp_path / "one.state").read_bytes() == (tmp_path / "two.state").read_bytes() == STATE.read_bytes()
    assert hashlib.sha256(STATE.read_bytes()).hexdigest() == START["mgba"]["state_sha256"]
    entry = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]["start_states"]["mgba"]
    assert entry["sha256"] == START["mgba"]["state_sha256"]
    assert entry["first_frame_sha256"] == START["mgba"]["first_frame_sha256"]
    assert entry["emulator_version"] == BACKENDS["mgba"].version()


def test_a_pyboy_state_is_refused_cleanly():
    emulator = BACKENDS["mgba"].open(ROM.read_bytes(), "cart", "gb")
    try:
        with pytest.raises(Exception, match="not an mGBA state"):
            emulator.restore((ASSETS / "cartridge" / "parcel-quest.state").read_bytes())
    finally:
        emulator.close()


def test_the_clock_is_pinned():
    from engine.emulators.mgba_backend import RTC_FIELDS, rtc_seconds

    assert time.gmtime(rtc_seconds("gb"))[:6] == RTC_FIELDS
    assert time.localtime(rtc_seconds("gba"))[:6] == RTC_FIELDS  # mGBA reads a GBA clock through localtime()
    for rom, platform in [(ROM.read_bytes(), "gb"), (tiny_gba_rom(), "gba")]:
        emulator = BACKENDS["mgba"].open(rom, "cart", platform)
        try:
            from mgba._pylib import lib

            assert emulator._native.rtc.override == lib.RTC_FIXED
            assert emulator.clock_seconds() == rtc_seconds(platform)
            state = emulator.save_state()
            emulator.boot(600)  # ten emulated seconds: a fixed clock does not move
            assert emulator.clock_seconds() == rtc_seconds(platform)
            emulator.restore(state)
            assert emulator.clock_seconds() == rtc_seconds(platform)
        finally:
            emulator.close()


def test_gba_frames_and_bus_reads():
    emulator = BACKENDS["mgba"].open(tiny_gba_rom(), "tiny.gba", "gba")
    try:
        assert emulator.frame_size == (240, 160) == BACKENDS["mgba"].frame_size("gba")
        emulator.boot(5)
        assert emulator.frame().shape == (160, 240, 3)
        assert emulator.read_range(0x08000000, 4) == [0xFE, 0xFF, 0xFF, 0xEA]  # the cartridge, on the bus
        assert len(emulator.read_range(0x02000000, 16)) == 16  # EWRAM
        assert len(emulator.read_range(0x03007FF0, 16)) == 16  # IWRAM
        assert len(emulator.read_range(0x10000000, 8)) == 8  # unmapped: open bus, no crash
        assert emulator.read_range(0xFFFFFFFE, 4)[2:] == [0, 0]  # past the 32-bit space: zeros
        a = emulator.save_state()
        emulator.boot(3)
        emulator.restore(a)
        assert emulator.save_state() == a
    finally:
        emulator.close()


def test_gb_reads_and_the_rom_is_read_from_bytes_only(tmp_path):
    rom_path = tmp_path / "cart.gb"
    rom_path.write_bytes(ROM.read_bytes())
    (tmp_path / "cart.sav").write_bytes(b"\xAA" * 8192)  # a battery file beside the ROM is never read
    before = sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.iterdir())
    emulator = BACKENDS["mgba"].open(rom_path.read_bytes(), str(rom_path), "gb")
    try:
        emulator.restore(STATE.read_bytes())
        assert emulator.read_range(0xD000, 1) == [0x4F]
        assert emulator.read_range(0xFFFF, 3)[1:] == [0, 0]  # past 0xFFFF: zeros, no crash
        emulator.step("DOWN", TIMING, no_probe)
    finally:
        emulator.close()
    assert sorted((p.name, p.stat().st_mtime_ns) for p in tmp_path.iterdir()) == before


def test_a_gba_rom_is_refused_for_a_gb_game():
    from engine.emulators.emulator import EmulatorError

    with pytest.raises(EmulatorError, match="gba ROM, but the game is for gb"):
        BACKENDS["mgba"].open(tiny_gba_rom(), "tiny.gba", "gb")
    with pytest.raises(EmulatorError, match="cannot load"):
        BACKENDS["mgba"].open(b"\0" * 0x8000, "zeros.gb", "gb")


def test_work_ram_read_straight_from_mgba_equals_bus_reads():
    from engine.emulators.emulator import Timing

    emu = BACKENDS["mgba"].open(tiny_gba_rom(), "tiny.gba", "gba")
    try:
        assert sorted(start for start, _, _ in emu._direct) == [0x02000000, 0x03000000]
        ewram = next(buf for start, _, buf in emu._direct if start == 0x02000000)
        ewram[0x100:0x104] = bytes([1, 2, 3, 4])  # the game's RAM, as the core sees it
        emu.step("A", Timing(2, 8), lambda read_range: {})
        bus = [emu._bus_read(emu._native, a) for a in range(0x020000FE, 0x02000106)]
        assert list(emu.read_range(0x020000FE, 8)) == bus == [0, 0, 1, 2, 3, 4, 0, 0]
        for start in (0x0203FF00, 0x03000000, 0x03007F00):
            bus = [emu._bus_read(emu._native, a) for a in range(start, start + 256)]
            assert list(emu.read_range(start, 256)) == bus
        # across the end of EWRAM: the bus (its mirror and open bus), not the buffer
        across = emu.read_range(0x0203FFFE, 4)
        assert list(across) == [emu._bus_read(emu._native, a) for a in range(0x0203FFFE, 0x02040002)]
    finally:
        emu.close()


def test_the_first_frame_runs_when_the_capsule_type_was_looked_at_first():
    """A fresh process that first does an attribute lookup on PyCapsule's type (which is what
    importing trio did under pytest) must still run mGBA frames, not spin in cffi's start-up lock."""
    import subprocess
    import sys

    code = ("import datetime; type(datetime.datetime_CAPI).__name__; getattr(datetime.datetime_CAPI, 'x', None)\n"
            "from engine.emulators.backends import BACKENDS\n"
            "from engine.emulators.emulator import Timing\n"
            f"emu = BACKENDS['mgba'].open(open({str(ROM)!r}, 'rb').read(), 'cart', 'gb')\n"
            "emu.boot(10); emu.step('A', Timing(4, 12), lambda read_range: {}); print('ran', emu.frame_index)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran 26"


def test_the_structured_track_reads_alike_on_both_backends():
    """The dialogue text is read through the backend's bus (GB VRAM on mGBA, PyBoy's memory view)."""
    from engine.games.probe import Probe
    from engine.games.tracks import structured_view
    from sessions.preflight.gamedefs import load_game_definition

    game = load_game_definition(ASSETS / "games" / "parcel-quest.yaml")
    views = []
    for name, state in (("mgba", "parcel-quest.mgba.state"), ("pyboy", "parcel-quest.state")):
        emu = BACKENDS[name].open(ROM.read_bytes(), name, "gb")
        try:
            emu.restore((ASSETS / "cartridge" / state).read_bytes())
            probe, view = Probe(game), structured_view(game, "structured")
            for action in WALK[:29]:  # to the professor stopping you (M2)
                step = emu.step(action, TIMING, probe)
            views.append(view(step.ram_last, emu.read_range))
        finally:
            emu.close()
    assert views[0] == views[1] and views[0]["dialogue"].startswith("PROF. HAZEL:\nHEY! WAIT!")


@pytest.mark.parametrize("backend", ["mgba", "pyboy"])
def test_bus_writes_change_what_the_game_reads_and_shows(backend):
    """The battle ruleset's apply_team writes the party into RAM (engine.battle.battle): on both backends a write
    reads back and holds while the game runs on; a write outside the address space is refused."""
    rom = ROM.read_bytes()
    emu = BACKENDS[backend].open(rom, str(ROM), "gb")
    try:
        state = STATE.read_bytes() if backend == "mgba" else (ASSETS / "cartridge" / "parcel-quest.state").read_bytes()
        emu.restore(state)
        before = emu.read_range(0xD010, 2)
        emu.write(0xD010, bytes([1, 3]))  # party_count 1, species DRIPLET (RAM.md)
        assert emu.read_range(0xD010, 2) == [1, 3] != before
        emu.step("A", TIMING, no_probe)  # the game runs on with the written bytes in place
        assert emu.read_range(0xD011, 1) == [3]
        from engine.emulators.emulator import EmulatorError

        with pytest.raises(EmulatorError, match="outside"):
            emu.write(0xFFFF, bytes([1, 2]))
    finally:
        emu.close()
