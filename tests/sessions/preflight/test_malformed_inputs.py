"""A corpus of malformed experiments: each is refused with one line naming the file (and, in a
YAML file, the line and the field), exit status 2, and nothing written; never a traceback or a hang.

Real files and the real PyBoy throughout. Most cases run in-process through `prepare` (the whole
preflight, fast); a handful run the real command line, all at once, in subprocesses.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.emulators.romheader import gb_header_checksum as header_checksum
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from sessions.preflight.gamedefs import load_game_definition
from sessions.preflight.romcheck import (
    PYBOY_CART_TYPES,
    RomCheckError,
    check_rom_and_state,
    check_rom_header,
)

ROOT = Path(__file__).resolve().parents[3]
DRY = DEFAULT_MANIFEST.read_text(encoding="utf-8")
ROM = ASSETS / "cartridge" / "parcel-quest.gb"
STATE = ASSETS / "cartridge" / "parcel-quest.state"
GAME = ASSETS / "games" / "parcel-quest.yaml"
NOTES = ASSETS / "cartridge" / "walkthrough-notes.yaml"
ROM_SHA = hashlib.sha256(ROM.read_bytes()).hexdigest()
STATE_SHA = hashlib.sha256(STATE.read_bytes()).hexdigest()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fixed_header(rom: bytearray) -> bytes:
    rom[0x14D] = header_checksum(bytes(rom))
    return bytes(rom)


def mutated_state(seed: int) -> bytes:
    """The bundled state with some bytes changed at random (seed 26: restores, then PyBoy's
    tick never returns)."""
    r = random.Random(seed)
    b = bytearray(STATE.read_bytes())
    for _ in range(r.choice([50, 500, 5000])):
        b[r.randrange(len(b))] = r.getrandbits(8)
    return bytes(b)


# -- building a case -----------------------------------------------------------------------------------

Make = Callable[[Path], Path]


def manifest(tmp: Path, text: str | bytes, name: str = "m.yaml") -> Path:
    path = tmp / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def replaced(old: str, new: str, base: str = DRY) -> str:
    assert base.count(old) == 1, old
    return base.replace(old, new)


def edit(old: str, new: str) -> Make:
    return lambda tmp: manifest(tmp, replaced(old, new))


def add(extra: str) -> Make:
    """The dry-run with lines appended (top-level keys: later duplicates are errors themselves,
    so only keys the dry-run does not have)."""
    return lambda tmp: manifest(tmp, DRY + extra)


def raw(body: bytes | str) -> Make:
    return lambda tmp: manifest(tmp, body)


def with_file(ref_key: str, sha_key: str | None, old_ref: str, old_sha: str | None,
              content: bytes | Callable[[Path], None], name: str) -> Make:
    """The dry-run with one referenced file replaced: `content` bytes (its real hash put in the
    manifest, so the hash check passes and the file's content is what gets tested) or a maker."""
    def make(tmp: Path) -> Path:
        path = tmp / name
        if callable(content):
            content(path)
            digest = "0" * 64
        else:
            path.write_bytes(content)
            digest = sha(content)
        text = replaced(f"{ref_key}: {old_ref}", f"{ref_key}: {name}")
        if sha_key is not None:
            text = replaced(f"{sha_key}: {old_sha}", f'{sha_key}: "{digest}"', text)
        return manifest(tmp, text)
    return make


def rom(content) -> Make:
    return with_file("rom", "rom_sha256", "bundled:parcel-quest.gb", ROM_SHA, content, "cart.gb")


def state(content) -> Make:
    return with_file("state", "sha256", "bundled:parcel-quest.state", STATE_SHA,
                     content, "start.state")


def script(content) -> Make:
    return with_file("script", None, "bundled:walkthrough.txt", None, content, "walk.txt")


def notes(content) -> Make:
    return with_file("script_notes", None, "bundled:walkthrough-notes.yaml", None, content, "notes.yaml")


def game(content) -> Make:
    return with_file("definition", None, "bundled:parcel-quest.yaml", None, content, "game.yaml")


def fifo(path: Path) -> None:
    os.mkfifo(path)


def sparse(size: int) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        with path.open("wb") as f:
            f.truncate(size)
    return make


def directory(path: Path) -> None:
    path.mkdir()


def dev_zero(key: str, old: str) -> Make:
    return edit(f"{key}: {old}", f"{key}: /dev/zero")


GAME_TEXT = GAME.read_text(encoding="utf-8")
NOTES_TEXT = NOTES.read_text(encoding="utf-8")


@dataclass
class Case:
    id: str
    make: Make
    expect: tuple[str, ...]  # fragments of the message
    at: str | None = None  # the YAML (or script) file whose name must be followed by `:LINE: `
    field: str | None = None  # the field named right after the line


def c(id: str, make: Make, *expect: str, at: str | None = None, field: str | None = None) -> Case:
    return Case(id, make, expect, at, field)


DEEP = "x: " + "[" * 1000 + "]" * 1000 + "\n"
BOMB = "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6))
RANDOM_ROM = random.Random(1).randbytes(32768)
UNSUPPORTED_CART = bytearray(ROM.read_bytes())
UNSUPPORTED_CART[0x147] = 0x20  # MBC6: not in PyBoy

CASES = [
    # -- bytes and text -----------------------------------------------------------------------------
    c("non-utf8-byte", raw(DRY.encode().replace(b"Parcel Quest\n", b"Parcel Qu\xe9st\n", 1)), "not UTF-8",
      at="m.yaml"),
    c("latin1-file", raw("experiment_id: caf\xe9\n".encode("latin-1") + DRY.encode()), "not UTF-8", at="m.yaml"),
    c("utf16-file", raw(DRY.encode("utf-16")), "not UTF-8", at="m.yaml"),
    c("nul-in-text", raw(DRY.replace("title: Parcel Quest", "title: Parcel\0Quest")), "NUL byte", at="m.yaml"),
    c("control-char", edit("title: Parcel Quest", "title: Parcel\x01Quest"), "not valid YAML", at="m.yaml"),
    c("nul-in-rom-path", edit("rom: bundled:parcel-quest.gb", 'rom: "cart\\0.gb"'), "NUL byte",
      at="m.yaml", field="game.rom"),
    c("newline-in-path", edit("rom: bundled:parcel-quest.gb", 'rom: "cart\\n.gb"'), "control character",
      at="m.yaml", field="game.rom"),
    c("nul-in-script-path", edit("script: bundled:walkthrough.txt", 'script: "walk\\0.txt"'), "NUL byte",
      at="m.yaml", field="conditions.0.script"),
    c("empty-file", raw(""), "must be a YAML mapping", at="m.yaml"),
    c("top-level-list", raw("- a\n- b\n"), "must be a YAML mapping", at="m.yaml"),
    c("top-level-scalar", raw("just text\n"), "must be a YAML mapping", at="m.yaml"),
    c("two-documents", raw(DRY + "---\nexperiment_id: again\n"), "not valid YAML", at="m.yaml"),
    c("unclosed-bracket", edit("allowed_actions: [UP,", "allowed_actions: [[UP,"), "not valid YAML", at="m.yaml"),
    c("bad-indent", edit("  title: Parcel Quest", "    title: Parcel Quest"), "not valid YAML", at="m.yaml"),
    c("tab-indent", edit("  title: Parcel Quest", "\ttitle: Parcel Quest"), "not valid YAML", at="m.yaml"),
    # -- structure -------------------------------------------------------------------------------------------
    c("deep-nesting", add(DEEP), "nested deeper than 64", at="m.yaml"),
    c("deep-mappings", add("x: " + "{a: " * 200 + "1" + "}" * 200 + "\n"), "nested deeper than 64", at="m.yaml"),
    c("recursive-alias", add("x: &r [*r]\n"), "nested deeper than 64", at="m.yaml"),
    c("alias-bomb", add(BOMB), "more than 250,000 values", at="m.yaml"),
    c("merge-key", add("base: &b {accepted_actions: 5}\nbudgets2:\n  <<: *b\n"), "merge keys", at="m.yaml"),
    c("python-tag", add("x: !!python/object/apply:os.system [echo hi]\n"), "not supported", at="m.yaml"),
    c("custom-tag", edit("title: Parcel Quest", "title: !shout Parcel Quest"), "bad value", at="m.yaml"),
    c("bool-tag-maybe", edit("frame_skip: 0", "frame_skip: !!bool maybe"), "bad value", at="m.yaml",
      field="emulator.frame_skip"),
    c("too-many-values", add("x: [" + "1, " * 300_000 + "1]\n"), "more than 250,000 values", at="m.yaml"),
    c("complex-key", add("? [a, b]\n: 1\n"), "a key must be a plain value", at="m.yaml"),
    c("duplicate-top-key", edit("protocol_version: 1", "protocol_version: 1\nexperiment_id: again"),
      "duplicate key (first at line 4)", at="m.yaml", field="experiment_id"),
    c("duplicate-nested-key", edit("  accepted_actions: 400", "  accepted_actions: 400\n  accepted_actions: 500"),
      "duplicate key", at="m.yaml", field="budgets.accepted_actions"),
    c("duplicate-flow-key", edit("frame_skip: 0", "frame_skip: 0\n  press_frames: 5"), "duplicate key",
      at="m.yaml", field="emulator.press_frames"),
    # -- numbers ------------------------------------------------------------------------------------------
    c("seed-5001-digits", edit("trials:\n", "trials:\n  blinding_seed: " + "7" * 5001 + "\n"),
      "number too large", at="m.yaml", field="trials.blinding_seed"),
    c("budget-5001-digits", edit("accepted_actions: 400", "accepted_actions: " + "9" * 5001),
      "number too large", at="m.yaml", field="budgets.accepted_actions"),
    c("seed-negative", edit("trials:\n", "trials:\n  blinding_seed: -1\n"), "greater than or equal to 0",
      at="m.yaml", field="trials.blinding_seed"),
    c("seed-2-63", edit("trials:\n", f"trials:\n  blinding_seed: {2**63}\n"), "less than",
      at="m.yaml", field="trials.blinding_seed"),
    c("settle-1e9", edit("settle_frames: 12", "settle_frames: 1e9"), "valid integer, not text",
      at="m.yaml", field="emulator.settle_frames"),
    c("settle-billion", edit("settle_frames: 12", "settle_frames: 1000000000"), "less than or equal to 600",
      at="m.yaml", field="emulator.settle_frames"),
    c("settle-float", edit("settle_frames: 12", "settle_frames: 1.0e+9"), "valid integer, not a number",
      at="m.yaml", field="emulator.settle_frames"),
    c("press-zero", edit("press_frames: 4", "press_frames: 0"), "greater than or equal to 1",
      at="m.yaml", field="emulator.press_frames"),
    c("press-61", edit("press_frames: 4", "press_frames: 61"), "less than or equal to 60",
      at="m.yaml", field="emulator.press_frames"),
    c("actions-true", edit("accepted_actions: 400", "accepted_actions: true"), "valid integer, not true/false",
      at="m.yaml", field="budgets.accepted_actions"),
    c("actions-string", edit("accepted_actions: 400", 'accepted_actions: "400"'), "not text",
      at="m.yaml", field="budgets.accepted_actions"),
    c("actions-zero", edit("accepted_actions: 400", "accepted_actions: 0"), "greater than or equal to 1",
      at="m.yaml", field="budgets.accepted_actions"),
    c("actions-huge", edit("accepted_actions: 400", "accepted_actions: 10000001"), "less than or equal to",
      at="m.yaml", field="budgets.accepted_actions"),
    c("decisions-negative", edit("model_decisions: 400", "model_decisions: -5"), "greater than",
      at="m.yaml", field="budgets.model_decisions"),
    c("wall-nan", edit("wall_time_minutes: 30", "wall_time_minutes: .nan"), "finite number",
      at="m.yaml", field="budgets.wall_time_minutes"),
    c("wall-inf", edit("wall_time_minutes: 30", "wall_time_minutes: .inf"), "finite number",
      at="m.yaml", field="budgets.wall_time_minutes"),
    c("wall-overflow", edit("wall_time_minutes: 30", "wall_time_minutes: 1.0e+400"), "finite number",
      at="m.yaml", field="budgets.wall_time_minutes"),
    c("wall-too-long", edit("wall_time_minutes: 30", "wall_time_minutes: 20000"), "less than or equal to 10080",
      at="m.yaml", field="budgets.wall_time_minutes"),
    c("wall-bool", edit("wall_time_minutes: 30", "wall_time_minutes: yes"), "not true/false",
      at="m.yaml", field="budgets.wall_time_minutes"),
    c("cost-negative", edit("total_cost_usd: null", "total_cost_usd: -1"), "greater than 0",
      at="m.yaml", field="budgets.total_cost_usd"),
    c("cost-zero", edit("total_cost_usd: null", "total_cost_usd: 0"), "greater than 0",
      at="m.yaml", field="budgets.total_cost_usd"),
    c("cost-huge", edit("total_cost_usd: null", "total_cost_usd: 1.0e+7"), "less than or equal to",
      at="m.yaml", field="budgets.total_cost_usd"),
    c("tokens-huge", edit("tokens: null", "tokens: 10000000000000"), "less than or equal to",
      at="m.yaml", field="budgets.tokens"),
    c("per-condition-1001", edit("per_condition: 1", "per_condition: 1001"), "less than or equal to 1000",
      at="m.yaml", field="trials.per_condition"),
    c("per-condition-float", edit("per_condition: 1", "per_condition: 2.5"), "valid integer",
      at="m.yaml", field="trials.per_condition"),
    c("actions-per-decision-65", edit("actions_per_decision: 1", "actions_per_decision: 65"),
      "less than or equal to 64", at="m.yaml", field="conditions.0.actions_per_decision"),
    c("actions-per-decision-over-max", edit("actions_per_decision: 1", "actions_per_decision: 5"),
      "exceeds agent.max_actions_per_decision", at="m.yaml"),
    c("speed-tiny", edit("speed_multiplier: 1", "speed_multiplier: 0.0001"), "between 0.1 and 64",
      at="m.yaml", field="emulator.speed_multiplier"),
    c("frame-skip", edit("frame_skip: 0", "frame_skip: 1"), "less than or equal to 0",
      at="m.yaml", field="emulator.frame_skip"),
    c("screenshot-one", edit("screenshot_every_decision: true", "screenshot_every_decision: 1"),
      "valid boolean", at="m.yaml", field="agent.screenshot_every_decision"),
    c("screenshot-false", edit("screenshot_every_decision: true", "screenshot_every_decision: false"),
      "must be true", at="m.yaml", field="agent.screenshot_every_decision"),
    c("protocol-2", edit("protocol_version: 1", "protocol_version: 2"), "only protocol_version 1",
      at="m.yaml", field="protocol_version"),
    c("protocol-true", edit("protocol_version: 1", "protocol_version: true"), "not true/false",
      at="m.yaml", field="protocol_version"),
    c("blinding-seed-text", edit("trials:\n", "trials:\n  blinding_seed: x\n"), "valid integer",
      at="m.yaml", field="trials.blinding_seed"),
    # -- keys -----------------------------------------------------------------------------------------------
    c("typo-budget", edit("  accepted_actions: 400", "  acepted_actions: 400"),
      "unknown key (did you mean 'accepted_actions'?)", at="m.yaml", field="budgets.acepted_actions"),
    c("typo-game", edit("  rom_sha256:", "  rom_sha: x\n  rom_sha256:"), "did you mean 'rom_sha256'?",
      at="m.yaml", field="game.rom_sha"),
    c("typo-top", edit("conditions:\n", "condition: []\nconditions:\n"), "did you mean 'conditions'?",
      at="m.yaml", field="condition"),
    c("typo-emulator", edit("  settle_frames: 12", "  setle_frames: 12"), "did you mean 'settle_frames'?",
      at="m.yaml", field="emulator.setle_frames"),
    c("typo-condition", edit("    memory_policy: persistent", "    memory_polcy: persistent"),
      "did you mean 'memory_policy'?", at="m.yaml", field="conditions.0.memory_polcy"),
    c("missing-game", edit("game:\n  title", "gamex:\n  title"), "unknown key (did you mean 'game'?)",
      at="m.yaml", field="gamex"),
    c("missing-section", edit("budgets:\n  accepted_actions: 400", "budgets:\n  accepted_actions: 400\n"
                              "  emulator: 1"), "unknown key", at="m.yaml", field="budgets.emulator"),
    c("missing-conditions", raw(DRY[:DRY.index("conditions:")]), "required key missing",
      at="m.yaml", field="conditions"),
    c("weird-key", add('"a\\u2028b\\nc": 1\n'), "unknown key", at="m.yaml"),
    # -- types ------------------------------------------------------------------------------------------------
    c("budgets-list", edit("budgets:\n  accepted_actions: 400",
                           "budgets: [1, 2]\nbudgets_old:\n  accepted_actions: 400"),
      "should be a mapping", at="m.yaml", field="budgets"),
    c("conditions-mapping", raw(DRY[:DRY.index("conditions:")] + "conditions: {id: a, policy: random, seed: 1}\n"),
      "valid list", at="m.yaml", field="conditions"),
    c("conditions-empty", raw(DRY[:DRY.index("conditions:")] + "conditions: []\n"), "at least 1",
      at="m.yaml", field="conditions"),
    c("actions-string-not-list", edit("allowed_actions: [UP, DOWN, LEFT, RIGHT, A, B, START, SELECT, NOOP]",
                                      "allowed_actions: UP"), "valid list", at="m.yaml", field="agent.allowed_actions"),
    c("action-unknown", edit("allowed_actions: [UP,", "allowed_actions: [JUMP, UP,"), "Input should be",
      at="m.yaml", field="agent.allowed_actions.0"),
    c("action-twice", edit("allowed_actions: [UP,", "allowed_actions: [UP, UP,"), "listed twice",
      at="m.yaml", field="agent.allowed_actions"),
    c("version-float", edit('emulator_version: "2.8.1"', "emulator_version: 2.8"), "valid string, not a number",
      at="m.yaml", field="game.start_states.pyboy.emulator_version"),
    c("bad-experiment-id", edit("experiment_id: parcel-quest-dry-run", 'experiment_id: "bad id!"'),
      "should match pattern", at="m.yaml", field="experiment_id"),
    c("created-list", edit("protocol_version: 1", "protocol_version: 1\ncreated_utc: [1]"), "valid string",
      at="m.yaml", field="created_utc"),
    c("order-bad-list", edit("order: counterbalanced", "order: [X, X]"), "exactly 1 times", at="m.yaml",
      field="trials.order"),
    c("version-mismatch", edit('emulator_version: "2.8.1"', 'emulator_version: "2.7.0"'), "2.8.1 is installed",
      at="m.yaml", field="game.start_states.pyboy.emulator_version"),
    c("version-pin-mismatch", edit("  name: pyboy\n", '  name: pyboy\n  version: "2.7.0"\n'), "2.8.1 is installed",
      at="m.yaml", field="emulator.version"),
    c("frame-size", edit("frame_width: 160", "frame_width: 320"), "must be 160x144", at="m.yaml",
      field="emulator.frame_width"),
    c("config-hash", edit("frame_skip: 0", 'frame_skip: 0\n  config_sha256: "' + "a" * 64 + '"'),
      "does not match", at="m.yaml", field="emulator.config_sha256"),
    c("unknown-policy", edit("policy: scripted", "policy: telepathy"), "Input should be",
      at="m.yaml", field="conditions.0.policy"),
    c("home-of-nobody", edit("rom: bundled:parcel-quest.gb", "rom: ~no-such-user-oakwatch/cart.gb"),
      "game.rom", "cannot use path"),
    # -- the ROM ---------------------------------------------------------------------------------------------
    c("rom-missing", edit("rom: bundled:parcel-quest.gb", "rom: no-such.gb"), "ROM not found", "no-such.gb"),
    c("rom-directory", rom(directory), "ROM unreadable", "cart.gb", "Is a directory"),
    c("rom-dev-zero", dev_zero("rom", "bundled:parcel-quest.gb"), "ROM is not a regular file: /dev/zero",
      "character device"),
    c("rom-fifo", rom(fifo), "ROM is not a regular file", "cart.gb", "a FIFO"),
    c("rom-too-large", rom(sparse(33 << 20)), "ROM is too large", "cart.gb", "at most 33,554,432"),
    c("rom-empty-matching-hash", rom(b""), "ROM", "cart.gb", "is empty"),
    c("rom-random-matching-hash", rom(RANDOM_ROM), "cart.gb", "not a Game Boy ROM", "header checksum"),
    c("rom-one-bank", rom(ROM.read_bytes()[:0x4000]), "cart.gb", "at least 32,768"),
    c("rom-odd-size", rom(ROM.read_bytes() + b"\0" * 100), "cart.gb", "16 KiB banks"),
    c("rom-unsupported-cart", rom(fixed_header(UNSUPPORTED_CART)), "cart.gb", "cartridge type 0x20"),
    # -- the start state ---------------------------------------------------------------------------------
    c("state-empty-matching-hash", state(b""), "initial state", "start.state", "is empty"),
    c("state-random-matching-hash", state(random.Random(2).randbytes(150_000)), "initial state",
      "start.state", "PyBoy cannot restore this state"),
    c("state-truncated", state(STATE.read_bytes()[:1000]), "initial state", "start.state", "cannot restore"),
    c("state-fifo", state(fifo), "initial state is not a regular file", "start.state", "a FIFO"),
    c("state-dev-zero", dev_zero("state", "bundled:parcel-quest.state"), "initial state",
      "/dev/zero", "character device"),
    c("state-too-large", state(sparse(17 << 20)), "initial state is too large", "start.state"),
    c("first-frame-wrong", edit("first_frame_sha256: 90d6", "first_frame_sha256: 00d6"), "initial state",
      "restores to first frame", "game.start_states.pyboy.first_frame_sha256"),
    # -- the input script ------------------------------------------------------------------------------------
    c("script-dev-zero", dev_zero("script", "bundled:walkthrough.txt"), "/dev/zero", "cannot read input script",
      "character device"),
    c("script-fifo", script(fifo), "walk.txt", "cannot read input script", "a FIFO"),
    c("script-huge-repeat", script(b"UP\nUP*999999999999\n"), "too large", at="walk.txt"),
    c("script-non-utf8", script(b"UP\nDOWN \xff\n"), "not UTF-8", at="walk.txt"),
    c("script-unknown-action", script(b"UP\nJUMP\n"), "unknown action 'JUMP'", at="walk.txt"),
    c("script-too-long", script(b"A*100000\n" * 11), "longer than 1,000,000", at="walk.txt"),
    c("script-missing", edit("script: bundled:walkthrough.txt", "script: nope.txt"), "nope.txt",
      "cannot read input script"),
    # -- the script notes --------------------------------------------------------------------------------------
    c("notes-duplicate", notes(b"notes:\n  1: {}\n  1: {}\n"), "duplicate key (first at line 2)",
      at="notes.yaml", field="notes.1"),
    c("notes-certainty-true", notes(NOTES_TEXT.replace("certainty: 0.9}", "certainty: true}", 1).encode()),
      "not true/false", at="notes.yaml", field="notes.1.observed.certainty"),
    c("notes-non-utf8", notes(b"notes:\n  1: {memory_read: [caf\xe9]}\n"), "not UTF-8", at="notes.yaml"),
    c("notes-key-zero", notes(b"notes:\n  0: {}\n"), "greater than or equal to 1", at="notes.yaml", field="notes.0"),
    c("notes-typo", notes(b"notes:\n  1: {memory_wirte: []}\n"), "did you mean 'memory_write'?",
      at="notes.yaml", field="notes.1.memory_wirte"),
    # -- the game definition ---------------------------------------------------------------------------------
    c("game-duplicate", game(GAME_TEXT.replace("platform: gb\n", "platform: gb\nplatform: gbc\n").encode()),
      "duplicate key", at="game.yaml", field="platform"),
    c("game-typo", game(GAME_TEXT.replace("magic:         {address:", "magic:         {adress:").encode()),
      "did you mean 'address'?", at="game.yaml", field="fields.magic.adress"),
    c("game-outside-address-space", game(GAME_TEXT.replace("address: 0xD000", "address: 0x10000").encode()),
      "outside the gb address space", at="game.yaml"),
    c("game-contains-on-number", game(GAME_TEXT.replace("{field: flags0, bit_set: 0}",
                                                         "{field: flags0, contains: 1}").encode()),
      "contains and lacks apply to kind 'bytes'", at="game.yaml"),
    c("game-track-shows-a-ladder-field", game(GAME_TEXT.replace("fields: [map_id, x,", "fields: [map_id, flags0, x,")
                                              .encode()),
      "'flags0' is read by a milestone rung and must stay hidden", at="game.yaml"),
    c("game-points-true", game(GAME_TEXT.replace("points: 1,", "points: true,", 1).encode()), "not true/false",
      at="game.yaml", field="milestones.0.points"),
    c("game-non-utf8", game(GAME_TEXT.encode().replace(b"Parcel Quest", b"Parcel Qu\xe9st", 1)), "not UTF-8",
      at="game.yaml"),
    c("game-dev-zero", dev_zero("definition", "bundled:parcel-quest.yaml"), "/dev/zero",
      "cannot read game definition", "character device"),
    c("game-gba", game(GAME_TEXT.replace("platform: gb\n", "platform: gba\n").encode()), "is for gba",
      "game.yaml"),
    # -- the manifest file itself --------------------------------------------------------------------------
    c("manifest-fifo", lambda tmp: (os.mkfifo(tmp / "m.yaml"), tmp / "m.yaml")[1], "m.yaml",
      "cannot read manifest", "a FIFO"),
    c("manifest-directory", lambda tmp: ((tmp / "m.yaml").mkdir(), tmp / "m.yaml")[1], "m.yaml",
      "cannot read manifest", "Is a directory"),
    c("manifest-too-large", lambda tmp: (sparse(5 << 20)(tmp / "m.yaml"), tmp / "m.yaml")[1], "m.yaml",
      "cannot read manifest", "too large"),
]
CASE_IDS = [case.id for case in CASES]
assert len(set(CASE_IDS)) == len(CASE_IDS) >= 60


def check_message(message: str, case: Case, path: Path) -> None:
    assert "\n" not in message and "\r" not in message and message.isprintable(), repr(message)
    assert "Traceback" not in message
    for fragment in case.expect:
        assert fragment in message, (fragment, message)
    if case.at is not None:
        head = rf"(condition \S+: )?\S*{re.escape(case.at)}:(\d+): "
        m = re.match(head + (re.escape(case.field) + ": " if case.field else ""), message)
        assert m, (case.at, case.field, message)
        assert int(m.group(2)) >= 1
    else:  # names a file: the manifest or the file it refers to
        assert any(name in message for name in ("m.yaml", "cart.gb", "start.state", "walk.txt", "notes.yaml",
                                                "game.yaml", "/dev/zero", "no-such.gb", "nope.txt",
                                                "parcel-quest.state")), message


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_refused_in_preflight(case: Case, tmp_path: Path):
    path = case.make(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(PreflightError) as err:
        prepare(path, out)
    check_message(str(err.value), case, path)
    assert not out.exists()


# -- the real command line, a few cases at once ---------------------------------------------------------------

CLI_CASES = ["non-utf8-byte", "nul-in-rom-path", "deep-nesting", "seed-5001-digits", "rom-dev-zero", "rom-fifo",
             "script-huge-repeat", "settle-1e9", "rom-empty-matching-hash", "rom-random-matching-hash",
             "state-random-matching-hash", "duplicate-top-key", "actions-true", "script-dev-zero"]


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Every CLI case started at once (each is a second or so of interpreter start and PyBoy)."""
    procs = {}
    for case in (c for c in CASES if c.id in CLI_CASES):
        tmp = tmp_path_factory.mktemp(case.id)
        path = case.make(tmp)
        out = tmp / "out"
        procs[case.id] = (case, path, out, subprocess.Popen(
            [sys.executable, "-m", "app.cli", "run", str(path), "--headless", "--output", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT))
    results = {}
    for cid, (case, path, out, proc) in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            results[cid] = (case, path, out, None, stdout, stderr)
            continue
        results[cid] = (case, path, out, proc.returncode, stdout, stderr)
    return results


@pytest.mark.parametrize("cid", CLI_CASES)
def test_refused_by_the_command_line(cid, cli_runs):
    case, path, out, returncode, stdout, stderr = cli_runs[cid]
    assert returncode is not None, f"{cid}: hung"
    text = stderr.decode("utf-8")
    assert returncode == 2, text
    assert b"Traceback" not in stderr + stdout
    lines = text.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("oakwatch: error: "), text
    check_message(lines[0][len("oakwatch: error: "):], case, path)
    assert not out.exists()


# -- the probe itself ---------------------------------------------------------------------------------------------

def test_a_state_that_hangs_pyboy_is_refused_not_waited_for():
    game_def = load_game_definition(GAME)
    t0 = time.monotonic()
    with pytest.raises(RomCheckError, match=r"initial state s\.state: the emulator did not finish .* hangs"):
        check_rom_and_state(ROM, ROM.read_bytes(), mutated_state(26), game_def, state_path=Path("s.state"),
                            timeout=4)
    assert time.monotonic() - t0 < 15


def test_the_probe_returns_the_first_frame():
    game_def = load_game_definition(GAME)
    first = check_rom_and_state(ROM, ROM.read_bytes(), STATE.read_bytes(), game_def)
    assert first == DRY.split("first_frame_sha256: ")[1].split()[0]


def test_header_check_agrees_with_pyboy_on_cartridge_types(tmp_path):
    """What we refuse up front is what PyBoy 2.8.1 cannot load; what we pass, it loads."""
    from engine.emulators.emulator import EmulatorError
    from engine.emulators.pyboy_backend import PyBoyEmulator

    base = bytearray(ROM.read_bytes())
    for cart in (0x00, 0x01, 0x02, 0x11, 0x12, 0x19, 0x04, 0x20, 0xFC, 0xFF):  # no battery: see below
        candidate = bytearray(base)
        candidate[0x147] = cart
        data = fixed_header(candidate)
        try:
            check_rom_header(data, "x.gb")
            ours = True
        except RomCheckError:
            ours = False
        path = tmp_path / f"cart-{cart:02x}.gb"
        path.write_bytes(data)
        try:
            PyBoyEmulator(path).close()
            theirs = True
        except EmulatorError:
            theirs = False
        assert ours == theirs == (cart in PYBOY_CART_TYPES), hex(cart)


@pytest.mark.parametrize("cart", [0x03, 0x13, 0x1B])  # MBC1/MBC3/MBC5 + RAM + BATTERY (Pokemon Red is 0x13)
def test_battery_backed_cartridges_load_with_a_blank_save(tmp_path, cart):
    from engine.emulators.pyboy_backend import PyBoyEmulator

    candidate = bytearray(ROM.read_bytes())
    candidate[0x147] = cart
    candidate[0x149] = 0x03  # 32 KiB of cartridge RAM
    path = tmp_path / "battery.gb"
    path.write_bytes(fixed_header(candidate))
    emulator = PyBoyEmulator(path)  # raised "No data" with an empty RAM file
    try:
        emulator.boot(10)
    finally:
        emulator.close()
    assert list(tmp_path.iterdir()) == [path]  # no .ram written beside the ROM


def test_a_field_name_with_a_newline_still_gives_a_one_line_problem():
    """Found by the annotation-layer fuzz test: an extra key "\\n" broke the message over two lines."""
    from pydantic import BaseModel, ConfigDict

    from sessions.evidence.reader import FormatProblem, parse

    class Strict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n: int = 0

    try:
        parse(Strict, b'{"\\n\\u0007": 1}', "void-1/void.json")
    except FormatProblem as exc:
        assert str(exc) == "void-1/void.json: \\n\\x07: Extra inputs are not permitted"
    else:
        raise AssertionError("a malformed record was accepted")
