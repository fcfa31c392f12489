#!/usr/bin/env python3
"""Pin Parcel Quest Advance's two builds (FireRed layout, Emerald layout) everywhere that names them,
after build.sh and a commit of the source:

* each build's canonical mGBA start state (power on, 120 frames, no input: `oakwatch make-state`)
  and a mid-game one (that start plus the build's walkthrough: the catch benchmark's start), and
  `start.yaml` beside them;
* the bundled manifests: for the FireRed build the dry-run (the scripted walkthrough), Design A and
  B, the MCP experiment and the catch; for the Emerald build its dry-run (the whole 68-rung ladder)
  and its catch (assets/experiments/parcel-quest-advance-*.yaml), built from the Game Boy
  cartridge's own with the game and emulator sections replaced;
* the conformance record in each definition (its `rom_sha256` and the source `commit`): the only
  lines of those files this touches.

    uv run python assets/gba-cartridge/tools/pin.py [--check]

`--check` writes nothing and exits 1 when a pin is stale (tests/gba/test_firered_layout.py runs it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent.parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

START = HERE / "start.yaml"
GAMES = REPO / "assets" / "games"
EXPERIMENTS = REPO / "assets" / "experiments"
BOOT_FRAMES = 120
PRESS, SETTLE = 4, 12


@dataclass(frozen=True)
class Build:
    name: str  # the manifests' prefix, and the ROM's and states' stem
    build: str  # the conformance record's name
    definition: str  # the bundled definition's file name
    walkthrough: str
    catch: str
    kinds: tuple[str, ...]  # which manifests
    after: str  # the mid-game state's suffix

    @property
    def rom(self) -> Path:
        return HERE / f"{self.name}.gba"

    @property
    def state(self) -> Path:
        return HERE / f"{self.name}.mgba.state"

    @property
    def after_state(self) -> Path:
        return HERE / f"{self.name}-{self.after}.mgba.state"


FIRERED = Build("parcel-quest-advance", "Parcel Quest Advance (FireRed layout)", "pokemon-firered-leafgreen-en.yaml",
                "walkthrough.txt", "catch.txt", ("dry-run", "catch", "design-a", "design-b", "mcp"), "after-dex")
EMERALD = Build("parcel-quest-advance-emerald", "Parcel Quest Advance (Emerald layout)", "pokemon-emerald-en.yaml",
                "walkthrough-emerald.txt", "catch-emerald.txt", ("dry-run", "catch"), "after-hall-of-fame")
BUILDS = (FIRERED, EMERALD)

SOURCES = {"dry-run": "dry-run.yaml", "catch": "dry-run.yaml", "design-a": "parcel-quest-design-a.yaml",
           "design-b": "parcel-quest-design-b.yaml", "mcp": "mcp.yaml"}
PINNED_BY = ("# Pinned by assets/gba-cartridge/tools/pin.py (ROM, start states, first frames): rerun it after a\n"
             "# rebuild. The canonical start is power on + 120 frames with no input, on mGBA:\n"
             "#   oakwatch make-state assets/gba-cartridge/{rom} --frames 120 --output FILE\n")


def header(b: Build, kind: str) -> str:
    layout = "FireRed" if b is FIRERED else "Emerald"
    cartridge = f"the open GBA cartridge, Parcel Quest Advance ({layout} layout)"
    return {
        "dry-run": (f"# A bundled GBA dry-run: the scripted walkthrough of {cartridge}, on mGBA at\n"
                    f"# 240x160, read through the UNCHANGED {layout} definition (its conformance record names this\n"
                    f"# ROM). `oakwatch run bundled:{b.name}-dry-run.yaml` reaches the final rung"
                    + (" (M8).\n" if b is FIRERED else
                       " (M68, every rung\n# of the Emerald ladder, the 8 optional ones too) and the report gives "
                       "its long-horizon score.\n")),
        "catch": (f"# Seed 001's goal benchmark on {cartridge}: catch any critter (the\n"
                  f"# {layout} definition's `catch` goal: one more in the party, a new owned-dex flag, "
                  f"gBattleOutcome 7),\n# from the state after {b.walkthrough}. The scripted {b.catch} meets it; "
                  f"`oakwatch run --goal catch`\n# is the same as game.goal here.\n"),
        "design-a": (f"# Seed 000, Design A on {cartridge} (the {layout}\n# definition): two model products "
                     "under one harness. Runnable once ANTHROPIC_API_KEY and OPENAI_API_KEY are set.\n"),
        "design-b": (f"# Seed 000, Design B on {cartridge} (the {layout}\n# definition): one model, a recent "
                     "window of working memory against the persistent store. Runnable once\n"
                     "# ANTHROPIC_API_KEY is set.\n"),
        "mcp": (f"# Your own agent harness on {cartridge}, through\n# oakwatch's MCP tool server (docs/mcp.md): "
                f"`oakwatch mcp bundled:{b.name}-mcp.yaml` serves one trial (the human ruleset).\n"),
    }[kind]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def source_commit(b: Build, given: str | None = None) -> str:
    """The last commit that changed the build's ROM file: the source at that commit builds these bytes
    (tests/cartridge/test_gba_cartridge.py rebuilds and compares), and a change to the source that leaves
    the ROM as it was (a comment) does not move it."""
    if given:
        return given
    done = subprocess.run(["git", "log", "-1", "--format=%H", "--", str(b.rom.relative_to(REPO))], cwd=REPO,
                          capture_output=True, text=True, check=True)
    commit = done.stdout.strip()
    if not commit:
        raise SystemExit(f"pin: {b.rom.name} is not committed yet: commit it, then pin")
    return commit


def start_state(b: Build) -> tuple[bytes, str, str]:
    from engine.emulators.backends import backend
    from sessions.preflight.startstate import make_start_state

    state, first = make_start_state(b.rom.read_bytes(), BOOT_FRAMES, "mgba", "gba")
    return state, first, backend("mgba").require()


def after_state(b: Build) -> tuple[bytes, str]:
    """The canonical start, then the build's walkthrough with the manifests' timing: (state, first frame)."""
    from engine.emulators.emulator import Timing
    from engine.loop.script import parse_script
    from sessions.preflight.gamedefs import load_game_definition
    from sessions.preflight.romid import identify
    from sessions.preflight.statemaker import Setup, play_prefix

    rom = b.rom.read_bytes()
    game = load_game_definition(GAMES / b.definition)
    setup = Setup(b.rom, rom, game, "", identify(rom, game, force=True), "mgba", "", HERE)
    actions = parse_script((HERE / b.walkthrough).read_text(encoding="utf-8"), b.walkthrough)
    state, first, _ = play_prefix(setup, BOOT_FRAMES, actions, Timing(PRESS, SETTLE))
    return state, first


def game_section(b: Build, rom_sha: str, state_sha: str, first: str, version: str) -> dict:
    controls = {"text_speed": "mid", "battle_style": "shift"}  # the new-game options both builds start with
    return {"title": b.build, "definition": f"bundled:{b.definition}",
            "rom": f"bundled:gba-cartridge/{b.rom.name}", "rom_sha256": rom_sha,
            "start_states": {"mgba": {"state": f"bundled:gba-cartridge/{b.state.name}", "sha256": state_sha,
                                      "first_frame_sha256": first, "emulator_version": version}},
            "language": "English", "starter": "SPROUTLE", **controls}


def manifest_text(b: Build, kind: str, game: dict, after: dict) -> str:
    data = yaml.safe_load((EXPERIMENTS / SOURCES[kind]).read_text(encoding="utf-8"))
    data["experiment_id"] = f"{b.name}-{kind}"
    data["game"] = game = json.loads(json.dumps(game))
    data["emulator"] = {"name": "mgba", "frame_width": 240, "frame_height": 160, "press_frames": PRESS,
                        "settle_frames": SETTLE, "speed_multiplier": data["emulator"].get("speed_multiplier", 0),
                        "frame_skip": 0}
    if kind in ("dry-run", "catch"):
        condition = data["conditions"][0]
        condition["script"] = f"bundled:gba-cartridge/{b.catch if kind == 'catch' else b.walkthrough}"
        condition.pop("script_notes", None)
        if b is EMERALD and kind == "dry-run":
            data["budgets"] = {**data["budgets"], "accepted_actions": 500, "model_decisions": 500}
    if kind == "catch":
        condition["id"] = "catch"
        game["goal"] = "catch"
        game["start_states"]["mgba"].update(after)
        data["budgets"] = {**data["budgets"], "accepted_actions": 100, "model_decisions": 100}
    return header(b, kind) + PINNED_BY.format(rom=b.rom.name) + yaml.safe_dump(data, sort_keys=False,
                                                                               allow_unicode=True)


def start_text(pins: dict[str, dict]) -> str:
    return ("# Canonical starts of Parcel Quest Advance on mGBA (written by tools/pin.py; the harness and tests\n"
            "# read it): power on, boot_frames with no input, save. One entry per build.\n"
            + yaml.safe_dump({"boot_frames": BOOT_FRAMES, "press_frames": PRESS, "settle_frames": SETTLE,
                              "emulator": "mgba", "builds": pins}, sort_keys=False))


def definition_text(b: Build, rom_sha: str, commit: str) -> str:
    path = GAMES / b.definition
    text = path.read_text(encoding="utf-8")
    build = re.escape(b.build)
    text, n = re.subn(rf"(build: {build}\n(?:.*\n)*?\s+rom_sha256: )[0-9a-f]{{64}}", rf"\g<1>{rom_sha}", text,
                      count=1)
    text, m = re.subn(r"(rom_sha256: " + rom_sha + r"\n\s+commit: )[0-9a-f]{7,40}", rf"\g<1>{commit}", text, count=1)
    if n != 1 or m != 1:
        raise SystemExit(f"pin: {path.name} has no conformance record for {b.build} to update")
    return text


TASKS = REPO / "assets" / "tasks"


def deliver_parcel_task(version: str, start: bytes) -> dict[Path, bytes]:
    """A task from a mid-game state: the walkthrough played until the parcel is in the bag (M6), then
    the rest is the task: deliver it and get the Pokédex (goal M8). Its state is the prefix played from
    the canonical start state (restore, then the presses), as the GB cartridge's rival-battle task's."""
    from engine.emulators.backends import backend
    from engine.emulators.emulator import Timing, frame_sha256
    from engine.games.probe import Probe
    from engine.loop.script import parse_script
    from sessions.preflight.gamedefs import load_game_definition

    b = FIRERED
    game = load_game_definition(GAMES / b.definition)
    probe = Probe(game)
    m6 = next(m for m in game.milestones if m.id == "M6")
    actions = parse_script((HERE / b.walkthrough).read_text(encoding="utf-8"), b.walkthrough)
    machine = backend("mgba").open(b.rom.read_bytes(), str(b.rom), "gba")
    try:
        machine.restore(start)  # the canonical start just made (the file on disk may be stale)
        n, held = 0, False
        while not held:  # play until the parcel is in the bag
            held = m6.holds(machine.step(actions[n], Timing(PRESS, SETTLE), probe).ram_last)
            n += 1
        state = machine.save_state()
    finally:
        machine.close()
    check = backend("mgba").open(b.rom.read_bytes(), str(b.rom), "gba")
    try:
        check.restore(state)
        first = frame_sha256(check.frame())
    finally:
        check.close()
    name = "parcel-quest-advance-deliver-parcel"
    prefix, rest = actions[:n], actions[n:]
    task = {"task_id": name, "title": "Deliver the parcel (Parcel Quest Advance, FireRed layout)",
            "instruction": "Take the parcel back to the professor and receive the Pokédex.",  # what the agent is told
            "experiment": f"bundled:{b.name}-dry-run.yaml",
            "start_states": {"mgba": {"state": f"{name}.mgba.state", "sha256": sha256(state),
                                      "first_frame_sha256": first, "emulator_version": version}},
            "start_prefix": f"{name}.prefix.txt", "goal": {"milestones": ["M8"]},
            "budgets": {"accepted_actions": 200, "model_decisions": 200, "wall_time_minutes": 10},
            "track": "visual", "reference_script": f"{name}.txt", "tags": ["navigation", "gba-cartridge", "mid-game"]}
    text = ("# Parcel Quest Advance (FireRed layout, the FireRed definition): from the shop with the parcel in the\n"
            "# bag (M6 just reached), take it back to the professor and get the Pokédex (M8). Start state: the\n"
            f"# prefix ({n} presses of walkthrough.txt) played from the canonical start state; written by\n"
            "# assets/gba-cartridge/tools/pin.py.\n" + yaml.safe_dump(task, sort_keys=False, allow_unicode=True))
    note = "# written by assets/gba-cartridge/tools/pin.py from walkthrough.txt\n"
    return {TASKS / f"{name}.mgba.state": state, TASKS / f"{name}.yaml": text.encode(),
            TASKS / f"{name}.prefix.txt": (note + "\n".join(prefix) + "\n").encode(),
            TASKS / f"{name}.txt": (note + "\n".join(rest) + "\n").encode()}


REORDER = "pqa-reorder-party"


def played_from(after_dex: bytes, prefix: list[str], read=None) -> tuple[bytes, str, object]:
    """The FireRed build from `after_dex` with `prefix` pressed: its state, that state's first frame's
    SHA-256 (restored, as a trial starts from it) and `read(machine)` there (None without one)."""
    from engine.emulators.backends import backend
    from engine.emulators.emulator import Timing, frame_sha256

    machine = backend("mgba").open(FIRERED.rom.read_bytes(), str(FIRERED.rom), "gba")
    try:
        machine.restore(after_dex)
        for action in prefix:
            machine.step(action, Timing(PRESS, SETTLE), lambda read: {})
        state = machine.save_state()
        machine.restore(state)
        return state, frame_sha256(machine.frame()), read(machine) if read is not None else None
    finally:
        machine.close()


def reorder_party_task(version: str, after_dex: bytes) -> dict[Path, bytes]:
    """Issue 32 item 4's manual-menu task on the party menu outside battle: from the after-DEX state plus
    catch.txt (a party of two: the starter, then the critter caught), put the second critter in the lead
    through START, PARTY, SWITCH. Goal: our own var 0x40F2 (switched_lead), the lead's species after a
    switch, equal to the caught critter's; the records are the gameplay track's party view, which a goal
    may not read. No shortcut: every press is the agent's. Its reference script is pqa-reorder-party.txt."""
    from engine.battle.gen3_record import decode
    from engine.loop.script import parse_script

    prefix = parse_script((HERE / FIRERED.catch).read_text(encoding="utf-8"), FIRERED.catch)
    # gPlayerParty 0x02024284, struct Pokemon 100 bytes (pret/pokefirered pokefirered.sym, include/pokemon.h)
    state, first, caught = played_from(after_dex, prefix, lambda machine: decode(
        bytes(machine.read_range(0x02024284 + 100, 100))).mon.growth.species)
    task = {"task_id": REORDER, "title": "Put the caught critter in the lead (Parcel Quest Advance)",
            "instruction": ("Use the START menu's party list to reorder your party so that the critter you just "
                            "caught leads it."),
            "experiment": "bundled:parcel-quest-advance-bosses.yaml",
            "start_states": {"mgba": {"state": f"{REORDER}.mgba.state", "sha256": sha256(state),
                                      "first_frame_sha256": first, "emulator_version": version}},
            "start_prefix": f"{REORDER}.prefix.txt",
            "goal": {"name": "The caught critter leads the party", "probe": [{"field": "switched_lead", "eq": caught}]},
            "budgets": {"accepted_actions": 40, "model_decisions": 40, "wall_time_minutes": 5},
            "track": "gameplay", "reference_script": f"{REORDER}.txt", "tags": ["menu", "gba-cartridge", "pokebench"]}
    text = ("# Parcel Quest Advance (the GBA cartridge; issue 32 item 4, PokeBench's manual menu operation:\n"
            "# every press the agent's, no shortcut): from the after-DEX state plus catch.txt (a party of two:\n"
            "# the starter, then the critter caught), put the caught critter in the lead through START, PARTY,\n"
            "# SWITCH (src/main.c field_party_*: the two gPlayerParty records trade places, as pret/pokefirered\n"
            "# src/party_menu.c SwitchPartyMon swaps them). Goal: the cartridge's own var 0x40F2 (switched_lead,\n"
            "# read by assets/games/parcel-quest-advance-battles.yaml), the lead's species after a switch, is the\n"
            f"# caught critter's ({caught}); the records are the gameplay track's party view, which a goal may\n"
            "# not read. Written by assets/gba-cartridge/tools/pin.py; its own reference script wins it.\n"
            + yaml.safe_dump(task, sort_keys=False, allow_unicode=True, width=120))
    note = "# written by assets/gba-cartridge/tools/pin.py: catch.txt, from the after-DEX state\n"
    return {TASKS / f"{REORDER}.mgba.state": state, TASKS / f"{REORDER}.yaml": text.encode(),
            TASKS / f"{REORDER}.prefix.txt": (note + "\n".join(prefix) + "\n").encode()}


BOSSES = TASKS / "gba-bosses"


def battles_manifest(game: dict, after: dict) -> str:
    """The boss tasks' base experiment: the dry-run's sections on the after-DEX state, read through
    parcel-quest-advance-battles.yaml (the FireRed definition's RAM, the cartridge's battle tables)."""
    text = manifest_text(FIRERED, "dry-run", game, after)
    data = yaml.safe_load(text)
    data["experiment_id"] = "parcel-quest-advance-bosses"
    data["game"]["definition"] = "bundled:parcel-quest-advance-battles.yaml"
    data["game"]["start_states"]["mgba"].update(after)
    data["conditions"][0]["script"] = "bundled:gba-cartridge/walkthrough.txt"
    return ("# The base experiment of the GBA cartridge's boss-battle tasks (assets/tasks/gba-bosses/): the FireRed\n"
            "# build after the DEX, read through parcel-quest-advance-battles.yaml (FireRed's battle RAM, the\n"
            "# cartridge's own species, moves and items). The tasks replace its start state, budgets and condition.\n"
            + PINNED_BY.format(rom=FIRERED.rom.name) + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def boss_tasks(version: str, after_dex: bytes) -> dict[Path, bytes]:
    """Seed 004's task set: one task per boss of the professor's boss hall (tools/battle_data.py TASKS),
    each from the moment before its battle (the after-DEX state, then A at the professor, DOWN to the
    boss, A: its challenge text is showing, the battle starts at the next A)."""
    sys.path.insert(0, str(HERE / "tools"))
    import battle_data as d

    files: dict[Path, bytes] = {}
    for tid, slug, cap, species, items, team in d.TASKS:
        trainer = d.TRAINERS[tid - 1]
        prefix = ["A"] + ["DOWN"] * (tid - 1) + ["A"]
        state, first, _ = played_from(after_dex, prefix)
        name = f"pqa-boss-{tid}-{slug}"
        moves = sorted({m for s in species for m in d.learnset(d.SPECIES_BY_NAME[s][2], d.SPECIES_BY_NAME[s][5])})
        task = {"task_id": name, "title": f"Beat {trainer[1]} (Parcel Quest Advance boss {tid} of {len(d.TASKS)})",
                "instruction": (f"Win the battle against {trainer[1]}: build a team within the rules (party limit, "
                                "level cap, pool), lead, fight; reset to try again with a new team."),
                "experiment": "bundled:parcel-quest-advance-bosses.yaml",
                "start_states": {"mgba": {"state": f"{name}.mgba.state", "sha256": sha256(state),
                                          "first_frame_sha256": first, "emulator_version": version}},
                "start_prefix": f"{name}.prefix.txt",
                "goal": {"name": f"{trainer[1]} beaten", "probe": [{"field": f"beat_boss_{tid}", "eq": 1}]},
                "episodes": {"budget": 10, "failure": [{"field": "battle_outcome", "eq": 2}], "actions": 1500},
                "battle": {"party_limit": len(trainer[3]), "level_cap": cap,
                           "pool": {"species": species, "moves": moves, "items": items},
                           "difficulty": {"mode": "set", "bag": "none", "enemy_levels": "fixed", "tier": tid}},
                "budgets": {"accepted_actions": 15000, "model_decisions": 3000, "wall_time_minutes": 60},
                "track": "visual", "tags": ["battle", "boss", "gba-cartridge", "episodic", f"tier-{tid}"]}
        text = (f"# Seed 004 on the open GBA cartridge: beat {trainer[1]} ({len(trainer[3])} critters, up to level "
                f"{max(m['level'] for m in trainer[3])}),\n# boss {tid} of the professor's boss hall, with a team "
                f"of at most {len(trainer[3])} at level {cap} or below from the pool. Written by\n"
                "# assets/gba-cartridge/tools/pin.py from tools/battle_data.py; the start state is the prefix "
                "played from\n# the after-DEX state (the challenge text showing: apply_team and lead come before the "
                "battle).\n"
                + yaml.safe_dump(task, sort_keys=False, allow_unicode=True, width=120))
        note = "# written by assets/gba-cartridge/tools/pin.py: from the after-DEX state to the boss's challenge\n"
        ref = ("# The reference team (tools/battle_data.py TASKS): with tests/gba/test_boss_tasks.py's greedy play\n"
               "# (the strongest move by the type chart, the next critter in party order when one faints) it wins.\n"
               + yaml.safe_dump({"team": team}, sort_keys=False, width=120))
        files[BOSSES / f"{name}.mgba.state"] = state
        files[BOSSES / f"{name}.yaml"] = text.encode()
        files[BOSSES / f"{name}.prefix.txt"] = (note + "\n".join(prefix) + "\n").encode()
        files[BOSSES / f"{name}.reference.yml"] = ref.encode()
    return files


def wanted(commit: str | None = None) -> dict[Path, bytes]:
    files: dict[Path, bytes] = {}
    pins = {}
    for b in BUILDS:
        rom_sha = sha256(b.rom.read_bytes())
        state, first, version = start_state(b)
        later, later_first = after_state(b)
        pins[b.name] = {"state": b.state.name, "state_sha256": sha256(state), "first_frame_sha256": first,
                        "emulator_version": version, "after": {"walkthrough": b.walkthrough,
                                                               "state": b.after_state.name,
                                                               "state_sha256": sha256(later),
                                                               "first_frame_sha256": later_first}}
        game = game_section(b, rom_sha, sha256(state), first, version)
        after = {"state": f"bundled:gba-cartridge/{b.after_state.name}", "sha256": sha256(later),
                 "first_frame_sha256": later_first}
        files[b.state], files[b.after_state] = state, later
        files[GAMES / b.definition] = definition_text(b, rom_sha, source_commit(b, commit)).encode()
        for kind in b.kinds:
            files[EXPERIMENTS / f"{b.name}-{kind}.yaml"] = manifest_text(b, kind, game, after).encode()
    files[START] = start_text(pins).encode()
    files.update(deliver_parcel_task(pins[FIRERED.name]["emulator_version"], files[FIRERED.state]))
    f_game = game_section(FIRERED, sha256(FIRERED.rom.read_bytes()), pins[FIRERED.name]["state_sha256"],
                          pins[FIRERED.name]["first_frame_sha256"], pins[FIRERED.name]["emulator_version"])
    f_after = {"state": f"bundled:gba-cartridge/{FIRERED.after_state.name}",
               "sha256": pins[FIRERED.name]["after"]["state_sha256"],
               "first_frame_sha256": pins[FIRERED.name]["after"]["first_frame_sha256"]}
    files[EXPERIMENTS / "parcel-quest-advance-bosses.yaml"] = battles_manifest(f_game, f_after).encode()
    files.update(boss_tasks(pins[FIRERED.name]["emulator_version"], files[FIRERED.after_state]))
    files.update(reorder_party_task(pins[FIRERED.name]["emulator_version"], files[FIRERED.after_state]))
    # the battles definition is the FireRed one (its conformance record just pinned) with the cartridge's tables
    sys.path.insert(0, str(HERE / "tools"))
    import gen_battle
    files[gen_battle.DEFINITION] = gen_battle.definition_text(files[GAMES / FIRERED.definition].decode()).encode()
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a pin is stale")
    parser.add_argument("--commit", help="the source commit to record (default: the last that changed the ROM)")
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
