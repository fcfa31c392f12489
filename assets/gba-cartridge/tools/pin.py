#!/usr/bin/env python3
"""Pin Parcel Quest Advance (FireRed layout) everywhere that names it, after build.sh and a commit of
its source:

* its canonical mGBA start state, `parcel-quest-advance.mgba.state` (power on, 120 frames, no
  input: `oakwatch make-state`), and `start.yaml` beside it;
* the bundled manifests: the dry-run (the scripted walkthrough), Design A and B, and the MCP
  experiment (assets/experiments/parcel-quest-advance-*.yaml), built from the Game Boy cartridge's
  own with the game and emulator sections replaced;
* the conformance record in the FireRed definition (its `rom_sha256` and the source `commit`): the
  only lines of that file this touches.

    uv run python assets/gba-cartridge/tools/pin.py [--check]

`--check` writes nothing and exits 1 when a pin is stale (tests/gba/test_pins.py runs the same check).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent.parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

ROM = HERE / "parcel-quest-advance.gba"
STATE = HERE / "parcel-quest-advance.mgba.state"
# a mid-game start: the walkthrough played from the canonical start (M8 reached, five balls): the catch
# benchmark's start (seed 001, `--goal catch`)
AFTER_DEX = HERE / "parcel-quest-advance-after-dex.mgba.state"
START = HERE / "start.yaml"
DEFINITION = REPO / "assets" / "games" / "pokemon-firered-leafgreen-en.yaml"
EXPERIMENTS = REPO / "assets" / "experiments"
BOOT_FRAMES = 120
PRESS, SETTLE = 4, 12
NAME = "parcel-quest-advance"
SOURCE = ("assets/gba-cartridge/src", "assets/gba-cartridge/build.sh", "assets/gba-cartridge/art",
          "assets/gba-cartridge/tools/gen_gfx.py")

HEADERS = {
    "dry-run": ("# The bundled GBA dry-run: the scripted walkthrough of the open GBA cartridge, Parcel Quest Advance,\n"
                "# on mGBA at 240x160, read through the UNCHANGED FireRed definition (its conformance record names\n"
                "# this ROM). `oakwatch run bundled:parcel-quest-advance-dry-run.yaml` reaches M8.\n"),
    "design-a": ("# Seed 000, Design A on the open GBA cartridge (FireRed layout, the FireRed definition): two model\n"
                 "# products under one harness. Runnable once ANTHROPIC_API_KEY and OPENAI_API_KEY are set.\n"),
    "design-b": ("# Seed 000, Design B on the open GBA cartridge (FireRed layout, the FireRed definition): one\n"
                 "# model, a recent window of working memory against the persistent store. Runnable once\n"
                 "# ANTHROPIC_API_KEY is set.\n"),
    "catch": ("# Seed 001's goal benchmark on the open GBA cartridge: catch any critter (the FireRed\n"
              "# definition's `catch` goal: one more in the party, a new owned-dex flag, gBattleOutcome 7), from\n"
              "# the state after the walkthrough (M8 reached, five balls). The scripted catch.txt meets it;\n"
              "# `oakwatch run --goal catch` is the same as game.goal here.\n"),
    "mcp": ("# Your own agent harness on the open GBA cartridge through oakwatch's MCP tool server (docs/mcp.md):\n"
            "# `oakwatch mcp bundled:parcel-quest-advance-mcp.yaml` serves one trial (the human ruleset).\n"),
}
SOURCES = {"dry-run": "dry-run.yaml", "catch": "dry-run.yaml", "design-a": "parcel-quest-design-a.yaml",
           "design-b": "parcel-quest-design-b.yaml", "mcp": "mcp.yaml"}
PINNED_BY = ("# Pinned by assets/gba-cartridge/tools/pin.py (ROM, start states, first frames): rerun it after a\n"
             "# rebuild. The canonical start is power on + 120 frames with no input, on mGBA:\n"
             "#   oakwatch make-state assets/gba-cartridge/parcel-quest-advance.gba --frames 120 --output FILE\n")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_commit(given: str | None = None) -> str:
    """The last commit that changed the cartridge's source (what the ROM is built from)."""
    if given:
        return given
    done = subprocess.run(["git", "log", "-1", "--format=%H", "--", *SOURCE], cwd=REPO, capture_output=True,
                          text=True, check=True)
    commit = done.stdout.strip()
    if not commit:
        raise SystemExit("pin: the cartridge's source is not committed yet: commit it, then pin")
    return commit


def start_state() -> tuple[bytes, str, str]:
    from engine.backends import backend
    from sessions.startstate import make_start_state

    state, first = make_start_state(ROM.read_bytes(), BOOT_FRAMES, "mgba", "gba")
    return state, first, backend("mgba").require()


def after_dex_state() -> tuple[bytes, str]:
    """The canonical start, then walkthrough.txt with the manifests' timing: (state, first frame)."""
    from engine.emulator import Timing
    from engine.script import parse_script
    from sessions.gamedefs import load_game_definition
    from sessions.romid import identify
    from sessions.statemaker import Setup, play_prefix

    rom = ROM.read_bytes()
    game = load_game_definition(DEFINITION)
    setup = Setup(ROM, rom, game, "", identify(rom, game, force=True), "mgba", "", HERE)
    actions = parse_script((HERE / "walkthrough.txt").read_text(encoding="utf-8"), "walkthrough.txt")
    state, first, _ = play_prefix(setup, BOOT_FRAMES, actions, Timing(PRESS, SETTLE))
    return state, first


def game_section(rom_sha: str, state_sha: str, first: str, version: str) -> dict:
    return {"title": "Parcel Quest Advance (FireRed layout)",
            "definition": "bundled:pokemon-firered-leafgreen-en.yaml",
            "rom": f"bundled:gba-cartridge/{ROM.name}", "rom_sha256": rom_sha,
            "start_states": {"mgba": {"state": f"bundled:gba-cartridge/{STATE.name}", "sha256": state_sha,
                                      "first_frame_sha256": first, "emulator_version": version}},
            "language": "English", "starter": "SPROUTLE", "text_speed": "mid", "battle_style": "shift"}


def manifest_text(kind: str, game: dict, after: dict) -> str:
    data = yaml.safe_load((EXPERIMENTS / SOURCES[kind]).read_text(encoding="utf-8"))
    data["experiment_id"] = f"{NAME}-{kind}"
    data["game"] = game
    data["emulator"] = {"name": "mgba", "frame_width": 240, "frame_height": 160, "press_frames": PRESS,
                        "settle_frames": SETTLE, "speed_multiplier": data["emulator"].get("speed_multiplier", 0),
                        "frame_skip": 0}
    if kind in ("dry-run", "catch"):
        condition = data["conditions"][0]
        condition["script"] = f"bundled:gba-cartridge/{'catch' if kind == 'catch' else 'walkthrough'}.txt"
        condition.pop("script_notes", None)
    if kind == "catch":
        condition["id"] = "catch"
        data["game"] = game = json.loads(json.dumps(game))
        game["goal"] = "catch"
        game["start_states"]["mgba"].update(after)
        data["budgets"] = {**data["budgets"], "accepted_actions": 100, "model_decisions": 100}
    return HEADERS[kind] + PINNED_BY + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def start_text(state_sha: str, first: str, version: str) -> str:
    return ("# Canonical start of Parcel Quest Advance on mGBA (written by tools/pin.py; the harness and tests\n"
            "# read it): power on, boot_frames with no input, save.\n"
            + yaml.safe_dump({"boot_frames": BOOT_FRAMES, "press_frames": PRESS, "settle_frames": SETTLE,
                              "emulator": "mgba", "emulator_version": version, "state": STATE.name,
                              "state_sha256": state_sha, "first_frame_sha256": first}, sort_keys=False))


def definition_text(rom_sha: str, commit: str) -> str:
    text = DEFINITION.read_text(encoding="utf-8")
    text, n = re.subn(r"(build: Parcel Quest Advance \(FireRed layout\)\n(?:.*\n)*?\s+rom_sha256: )[0-9a-f]{64}",
                      rf"\g<1>{rom_sha}", text, count=1)
    text, m = re.subn(r"(rom_sha256: " + rom_sha + r"\n\s+commit: )[0-9a-f]{7,40}", rf"\g<1>{commit}", text, count=1)
    if n != 1 or m != 1:
        raise SystemExit(f"pin: {DEFINITION.name} has no conformance record for Parcel Quest Advance to update")
    return text


def wanted(commit: str | None = None) -> dict[Path, bytes]:
    rom_sha = sha256(ROM.read_bytes())
    state, first, version = start_state()
    game = game_section(rom_sha, sha256(state), first, version)
    later, later_first = after_dex_state()
    after = {"state": f"bundled:gba-cartridge/{AFTER_DEX.name}", "sha256": sha256(later),
             "first_frame_sha256": later_first}
    files = {STATE: state, AFTER_DEX: later, START: start_text(sha256(state), first, version).encode(),
             DEFINITION: definition_text(rom_sha, source_commit(commit)).encode()}
    for kind in SOURCES:
        files[EXPERIMENTS / f"{NAME}-{kind}.yaml"] = manifest_text(kind, game, after).encode()
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a pin is stale")
    parser.add_argument("--commit", help="the source commit to record (default: the last that changed the source)")
    args = parser.parse_args()
    files = wanted(args.commit)
    stale = [path for path, data in files.items() if not path.is_file() or path.read_bytes() != data]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(REPO)}")
        return 1 if stale else 0
    for path in stale:
        path.write_bytes(files[path])
        print(f"wrote {path.relative_to(REPO)}")
    if not stale:
        print("pin: everything already pinned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
