"""Parcel Quest Advance, the open GBA cartridge (assets/gba-cartridge): the shipped ROM equals a fresh
build, the header is ours, and on real mGBA the bundled FireRed definition, unchanged, reads the
errand M1..M8 from the RAM the cartridge keeps where FireRed keeps it (RAM.md): moving save blocks,
a re-keyed bag, encrypted party records, the in-battle bit and the battle outcome, a wild catch."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.emulators.emulator import Timing
from engine.games.gamedef import GameDefinition
from engine.games.ladder import Ladder
from engine.games.probe import Probe
from engine.loop.script import parse_script

REPO = Path(__file__).resolve().parents[2]
CART = REPO / "assets" / "gba-cartridge"
ROM = CART / "parcel-quest-advance.gba"
DEFINITION = REPO / "assets" / "games" / "pokemon-firered-leafgreen-en.yaml"
TIMING = Timing(press_frames=4, settle_frames=12)
BOOT = 120
PARTY, SB1_BASE, SB2_BASE = 0x02024284, 0x0202552C, 0x02024588  # pret/pokefirered pokefirered.sym

mgba = pytest.importorskip("mgba.core", reason="mGBA's binding is not installed")


def firered() -> GameDefinition:
    return GameDefinition.model_validate(yaml.safe_load(DEFINITION.read_text(encoding="utf-8")))


def emulator():
    from engine.emulators.mgba_backend import MGBAEmulator

    emu = MGBAEmulator(ROM.read_bytes(), name=ROM.name, platform="gba")
    emu.boot(BOOT)
    return emu


# ---------------------------------------------------------------- build and header


@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="gcc-arm-none-eabi is not installed")
def test_build_is_reproducible(tmp_path):
    subprocess.run(["sh", str(CART / "build.sh"), str(tmp_path)], check=True, capture_output=True)
    built = (tmp_path / ROM.name).read_bytes()
    assert hashlib.sha256(built).hexdigest() == hashlib.sha256(ROM.read_bytes()).hexdigest()


def test_generated_gfx_matches_art(tmp_path):
    subprocess.run([sys.executable, str(CART / "tools" / "gen_gfx.py"), str(tmp_path)], check=True,
                   capture_output=True)
    for name in ("gfx.c", "gfx.h"):
        assert (tmp_path / name).read_bytes() == (CART / "src" / name).read_bytes(), name


def test_header_is_ours_and_valid():
    rom = ROM.read_bytes()
    assert rom[0x04:0xA0] == b"PQA!" * 39  # our own pattern where cartridges carry the boot logo
    assert rom[0xA0:0xAC] == b"PARCELQUESTA" and rom[0xAC:0xB0] == b"OPQE" and rom[0xB2] == 0x96
    assert rom[0xBD] == (-(0x19 + sum(rom[0xA0:0xBD]))) & 0xFF  # gbafix's HeaderComplement
    assert len(rom) % 1024 == 0


# ---------------------------------------------------------------- the errand through FireRed's definition


def decode_party_record(raw: bytes) -> dict:
    """struct Pokemon (pret/pokefirered include/pokemon.h, src/pokemon.c), decoded here on its own:
    the 48 secure bytes XORed with personality ^ otId, substructures placed by personality % 24."""
    personality = int.from_bytes(raw[0:4], "little")
    key = personality ^ int.from_bytes(raw[4:8], "little")
    plain = b"".join((int.from_bytes(raw[0x20 + i:0x24 + i], "little") ^ key).to_bytes(4, "little")
                     for i in range(0, 48, 4))
    orders = ["0123", "0132", "0213", "0312", "0231", "0321", "1023", "1032", "2013", "3012", "2031", "3021",
              "1203", "1302", "2103", "3102", "2301", "3201", "1230", "1320", "2130", "3120", "2310", "3210"]
    pos = [int(c) for c in orders[personality % 24]]
    growth = plain[12 * pos[0]:12 * pos[0] + 12]
    words = [int.from_bytes(plain[i:i + 2], "little") for i in range(0, 48, 2)]
    checksum = int.from_bytes(raw[0x1C:0x1E], "little")
    return {"species": int.from_bytes(growth[0:2], "little"), "checksum_ok": sum(words) & 0xFFFF == checksum,
            "level": raw[0x54], "hp": int.from_bytes(raw[0x56:0x58], "little")}


def play(emu, probe, actions, ladder=None, seen=None):
    decision = 0
    r = None
    for action in actions:
        decision += 1
        r = emu.step(action, TIMING, probe)
        if ladder is not None:
            ladder.update(r.ram_before_last, r.ram_last, decision_id=decision, frame_index=r.frame_index,
                          frame_sha256=r.frame_sha256)
        if seen is not None:
            seen.append(r.ram_last)
    return r


@pytest.fixture(scope="module")
def errand():
    """The walkthrough played once: (game, ladder, samples after every action, emulator at the end)."""
    game = firered()
    probe = Probe(game)
    emu = emulator()
    start = probe(emu.read_range)
    ladder = Ladder(game, start)
    seen = [start]
    play(emu, probe, parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8")), ladder, seen)
    return game, ladder, seen, emu


def test_walkthrough_reaches_m8_through_the_unchanged_firered_definition(errand):
    game, ladder, seen, _ = errand
    assert game.is_ready(seen[0]) and not ladder.pre_satisfied
    assert ladder.reached == [m.id for m in game.milestones]
    assert ladder.reached[-1] == game.final_id == "M8"
    decisions = [ladder.awards[m].decision_id for m in ladder.reached]
    assert decisions == sorted(decisions)


def test_save_blocks_move_within_fireRed_range_and_together(errand):
    _, _, seen, _ = errand
    offsets = set()
    for s in seen:
        off1, off2 = s["sb1"] - SB1_BASE, s["sb2"] - SB2_BASE
        assert off1 == off2 and 0 <= off1 <= 124 and off1 % 4 == 0  # src/load_save.c SetSaveBlocksPointers
        offsets.add(off1)
    moves = sum(1 for a, b in zip(seen, seen[1:], strict=False) if a["sb1"] != b["sb1"])
    assert len(offsets) >= 8 and moves >= 10  # every map load and battle draws a new offset


def test_bag_key_changes_while_the_parcel_is_held(errand):
    _, _, seen, _ = errand
    held = [s for s in seen if s["parcel"] == 1]
    assert len({s["qty_key"] for s in held}) >= 3  # the decrypted quantity stays 1 under new keys
    assert seen[-1]["parcel"] == 0 and seen[-1]["mart_scene"] == 2 and seen[-1]["lab_scene"] == 6


def test_battle_bit_outcome_and_options(errand):
    _, _, seen, _ = errand
    in_battle = [i for i, s in enumerate(seen) if s["in_battle"]]
    assert in_battle, "the rival battle never set gMain.inBattle"
    first, last = in_battle[0], in_battle[-1]
    assert in_battle == list(range(first, last + 1))  # one battle, bit held from start to end
    assert seen[first]["battle_outcome"] == 0 and seen[last + 1]["battle_outcome"] == 1  # B_OUTCOME_WON
    assert seen[last + 1]["beat_rival_lab"] == 0  # EndRivalBattle's flag comes after the battle
    assert all(s["options"] == 0x0001 for s in seen)  # new_game.c: text speed MID, battle style SHIFT


def test_party_record_is_fireRed_encrypted(errand):
    _, _, seen, emu = errand
    assert seen[-1]["party_count"] == 1 and seen[-1]["starter_mon"] == 0 and seen[-1]["party_level"] == 5
    mon = decode_party_record(bytes(emu.read_range(PARTY, 100)))
    assert mon == {"species": 1, "checksum_ok": True, "level": 5, "hp": 20}
    assert bytes(emu.read_range(PARTY + 100, 100)) == bytes(100)


def test_field_text_is_fireRed_encoded_and_hidden_in_battle():
    from engine.games.tracks import decode_string

    game = firered()
    dialogue = game.tracks.structured.dialogue
    probe = Probe(game)
    emu = emulator()
    assert decode_string(dialogue, emu.read_range) is None  # no box at power-on
    actions = parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8"))
    play(emu, probe, actions[:29])  # to the tall grass: the professor's first page
    text = decode_string(dialogue, emu.read_range)
    assert text is not None and "Hey! Wait!" in text and "Don't go out there!" in text
    play(emu, probe, actions[29:42])  # through the lab scene to the battle's first message
    assert probe(emu.read_range)["in_battle"] == 1
    assert decode_string(dialogue, emu.read_range) is None  # battle text is not a field message


def test_wild_catch_passes_the_catch_goal():
    from engine.games.goals import met_at, room_problems

    game = firered()
    goal = game.goals["catch"]
    probe = Probe(game)
    emu = emulator()
    play(emu, probe, parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8")))
    start = probe(emu.read_range)
    assert room_problems(goal, start) == [] and start["party_count"] == 1
    r = play(emu, probe, parse_script((CART / "catch.txt").read_text(encoding="utf-8")))
    met = met_at(goal, game, start, r.ram_before_last, r.ram_last)
    after = r.ram_last
    assert after["battle_outcome"] == 7 and after["party_count"] == 2 and not after["in_battle"]
    species = decode_party_record(bytes(emu.read_range(PARTY + 100, 100)))
    assert species["checksum_ok"] and species["species"] in (16, 19)
    assert met is not None and met["species"] == [species["species"]] and met["counts"] == 2


# ---------------------------------------------------------------- the Emerald build

EMERALD_ROM = CART / "parcel-quest-advance-emerald.gba"
EMERALD = REPO / "assets" / "games" / "pokemon-emerald-en.yaml"
EM_SB1, EM_SB2, EM_PARTY = 0x02025A00, 0x02024A54, 0x020244EC  # pret/pokeemerald pokeemerald.sym


def emerald():
    from engine.emulators.mgba_backend import MGBAEmulator

    game = GameDefinition.model_validate(yaml.safe_load(EMERALD.read_text(encoding="utf-8")))
    emu = MGBAEmulator(EMERALD_ROM.read_bytes(), name=EMERALD_ROM.name, platform="gba")
    emu.boot(BOOT)
    return game, Probe(game), emu


def run_ladder(script: str):
    from engine.games.ladder import skipped_required

    game, probe, emu = emerald()
    start = probe(emu.read_range)
    ladder = Ladder(game, start)
    seen = [start]
    play(emu, probe, parse_script((CART / script).read_text(encoding="utf-8")), ladder, seen)
    return game, ladder, seen, skipped_required(game, ladder.awards, ladder.pre_satisfied), emu


@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="gcc-arm-none-eabi is not installed")
def test_emerald_build_is_reproducible(tmp_path):
    subprocess.run(["sh", str(CART / "build.sh"), str(tmp_path)], check=True, capture_output=True,
                   env={**os.environ, "LAYOUT": "emerald"})
    assert (tmp_path / EMERALD_ROM.name).read_bytes() == EMERALD_ROM.read_bytes()


def test_emerald_walkthrough_reaches_every_rung_of_the_unchanged_emerald_definition():
    game, ladder, seen, skipped, emu = run_ladder("walkthrough-emerald.txt")
    assert game.is_ready(seen[0]) and not ladder.pre_satisfied
    assert ladder.reached == [m.id for m in game.milestones] and len(ladder.reached) == 68
    assert skipped == [] and ladder.reached[-1] == game.long_horizon.final_milestone
    decisions = [ladder.awards[m].decision_id for m in ladder.reached]
    assert decisions == sorted(decisions)
    for s in seen:  # pokeemerald src/load_save.c: both blocks at one 4-aligned offset 0..124
        assert s["sb1"] - EM_SB1 == s["sb2"] - EM_SB2 and 0 <= s["sb1"] - EM_SB1 <= 124 and s["sb1"] % 4 == 0
    assert len({s["sb1"] for s in seen}) >= 8
    assert seen[-1]["party_level"] == 45 <= game.long_horizon.level_full  # full discipline
    mon = decode_party_record(bytes(emu.read_range(EM_PARTY, 100)))
    assert mon["checksum_ok"] and mon["species"] == 1 and mon["level"] == 45


def test_emerald_branch_that_skips_required_rungs():
    game, ladder, _, skipped, _ = run_ladder("walkthrough-emerald-skip.txt")
    assert skipped == ["M19", "M20"]
    assert "M18" not in ladder.reached and ladder.reached[-1] == "M68"


def test_emerald_wild_catch_passes_the_catch_goal():
    from engine.games.goals import met_at, room_problems

    game, probe, emu = emerald()
    play(emu, probe, parse_script((CART / "walkthrough-emerald.txt").read_text(encoding="utf-8")))
    start = probe(emu.read_range)
    assert room_problems(game.goals["catch"], start) == []
    r = play(emu, probe, parse_script((CART / "catch-emerald.txt").read_text(encoding="utf-8")))
    met = met_at(game.goals["catch"], game, start, r.ram_before_last, r.ram_last)
    assert met is not None and met["counts"] == 2 and r.ram_last["battle_outcome"] == 7
    assert decode_party_record(bytes(emu.read_range(EM_PARTY + 100, 100)))["species"] == met["species"][0]


def test_start_menu_sets_fireRed_options_the_preflight_reads():
    """START opens the options; LEFT/RIGHT change the row's value, DOWN the row, B closes: the
    values land in SaveBlock2's option bits (text speed bits 0-2, battle style bit 9)."""
    game = firered()
    probe = Probe(game)
    emu = emulator()
    assert probe(emu.read_range)["options"] == 0x0001  # MID, SHIFT (src/new_game.c)
    r = play(emu, probe, parse_script("START RIGHT DOWN RIGHT B"))
    assert r.ram_last["options"] == 0x0202  # FAST, SET
    r = play(emu, probe, parse_script("START LEFT LEFT LEFT B"))
    assert r.ram_last["options"] == 0x0200  # SLOW (clamped), SET
    assert r.ram_last["map"] == 0x0104 and (r.ram_last["x"], r.ram_last["y"]) == (10, 7)  # nobody moved


def test_every_text_fits_the_box():
    """Each page the game shows fits its text box: at most 4 lines of 28 characters, with the longest
    names in place of the placeholders (\\1..\\4 a creature, \\5 a course trainer, \\6 a course stop)."""
    import re

    widths = {"\\1": 8, "\\2": 8, "\\3": 8, "\\4": 8, "\\5": 14, "\\6": 16}
    for name in ("main.c", "course_emerald.inc"):
        source = (CART / "src" / name).read_text(encoding="utf-8")
        for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', source):
            if "\\x" in literal or " " not in literal:
                continue  # raw byte strings and single words (names, labels)
            for code, width in widths.items():
                literal = literal.replace(code, "W" * width)
            lines = literal.replace("\\'", "'").split("\\n")
            assert len(lines) <= 4 and all(len(line) <= 28 for line in lines), (name, literal)


def test_the_ram_is_a_function_of_the_buttons_not_the_timing(errand):
    """The random numbers advance only on game events: the walkthrough played with the shortest
    timing mGBA allows (held 1 frame, settled 2) leaves the same save blocks, party and ladder."""
    game, ladder, seen, emu = errand
    from engine.emulators.mgba_backend import MGBAEmulator

    fast = MGBAEmulator(ROM.read_bytes(), name=ROM.name, platform="gba")
    fast.boot(BOOT)
    probe = Probe(game)
    for action in parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8")):
        r = fast.step(action, Timing(press_frames=1, settle_frames=2), probe)
    end = r.ram_last
    assert end["sb1"] == seen[-1]["sb1"] and end["qty_key"] == seen[-1]["qty_key"]
    for address, size in ((end["sb1"], 0x3D68), (end["sb2"], 0xF24), (PARTY, 600)):
        assert bytes(fast.read_range(address, size)) == bytes(emu.read_range(address, size))


def test_catching_a_species_already_owned_fails_the_catch_goal():
    """From a start that owns species S, a second S caught (outcome 7, one more in the party) is no
    catch goal: no owned-dex flag was clear at the start and set now."""
    from engine.games.goals import met_at

    game = firered()
    goal = game.goals["catch"]
    probe = Probe(game)
    emu = emulator()
    play(emu, probe, parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8")))
    play(emu, probe, parse_script((CART / "catch.txt").read_text(encoding="utf-8")))
    owned = {decode_party_record(bytes(emu.read_range(PARTY + 100, 100)))["species"]}  # the first catch
    outcomes = []
    for _ in range(4):  # four balls left
        start = probe(emu.read_range)  # each episode starts owning every catch so far
        step = 0
        while not probe(emu.read_range)["in_battle"]:
            play(emu, probe, ["RIGHT" if step % 2 == 0 else "LEFT"])  # in and out of the tall grass
            step += 1
            assert step < 60, "no encounter"
        slot = probe(emu.read_range)["party_count"]
        r = play(emu, probe, parse_script("A A RIGHT A A A"))  # BAG (a BALL), caught, back on the path
        assert r.ram_last["battle_outcome"] == 7 and r.ram_last["party_count"] == slot + 1
        species = decode_party_record(bytes(emu.read_range(PARTY + 100 * slot, 100)))["species"]
        outcomes.append((species, species in owned, met_at(goal, game, start, r.ram_before_last, r.ram_last)))
        owned.add(species)
    assert any(again for _, again, _ in outcomes), outcomes  # the wild species repeat within four catches
    for species, again, met in outcomes:
        assert (met is None) if again else (met is not None and met["species"] == [species]), outcomes
