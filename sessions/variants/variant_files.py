"""Write a Parcel Quest variant's folder: ROM, start states, game definition, manifest, walkthrough.

Nothing written names the seed (a held-out seed must not be recoverable from the folder's text);
the ROM's SHA-256 identifies the variant. The start states are made the bundled way (power on,
`boot_frames` with no input, save; the first frame is the restored state's), on every installed
backend. The game definition is the bundled one with the variant's ROM hash and the solver's
optimal presses per rung; the manifest is the bundled dry-run pointing at these files.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import EmulatorError, Timing, frame_sha256
from sessions.preflight.assets import ASSETS
from sessions.variants.variant_solver import Solution
from sessions.variants.variants import Variant

ROM_NAME = "parcel-quest-variant.gb"
STATE_NAMES = {"pyboy": "parcel-quest-variant.state", "mgba": "parcel-quest-variant.mgba.state"}
GAME_NAME = "parcel-quest-variant.yaml"
MANIFEST_NAME = "manifest.yaml"
WALKTHROUGH_NAME = "walkthrough.txt"


class VariantFilesError(ValueError):
    """The folder cannot be written; one line."""


def start_yaml() -> dict:
    return yaml.safe_load((ASSETS / "cartridge" / "start.yaml").read_text(encoding="utf-8"))


def make_start_state(name: str, rom: bytes, boot_frames: int) -> tuple[bytes, str, str]:
    """(state, first-frame SHA-256 after restoring it, emulator version) on backend `name`."""
    b = BACKENDS[name]
    version = b.require()
    machine = b.open(rom, ROM_NAME, "gb")
    try:
        machine.boot(boot_frames)
        state = machine.save_state()
    finally:
        machine.close()
    check = b.open(rom, ROM_NAME, "gb")
    try:
        check.restore(state)
        first = frame_sha256(check.frame())
    finally:
        check.close()
    return state, first, version


def walkthrough_text(sol: Solution, timing: Timing) -> str:
    """The plan as an input script, one line per stretch between rungs, NAME*N for runs."""
    marks = {n: r for r, n in sol.reached_at.items()}
    lines = ["# Parcel Quest variant: the solver's shortest plan from the start state to M8.",
             f"# {len(sol.actions)} presses; timing: press {timing.press_frames} frames, settle "
             f"{timing.settle_frames} frames. Optimal presses per rung: "
             + ", ".join(f"{r} {n}" for r, n in sol.optimal.items()) + "."]
    chunk: list[str] = []
    for i, a in enumerate(sol.actions, start=1):
        chunk.append(a)
        if i in marks or i == len(sol.actions):
            tokens: list[str] = []
            for tok in chunk:
                if tokens and tokens[-1].split("*")[0] == tok:
                    head, _, n = tokens[-1].partition("*")
                    tokens[-1] = f"{head}*{int(n or 1) + 1}"
                else:
                    tokens.append(tok)
            label = f"  # {marks[i]} at press {i}" if i in marks else ""
            lines.append(" ".join(tokens) + label)
            chunk = []
    return "\n".join(lines) + "\n"


def game_definition(variant: Variant, rom_sha256: str) -> str:
    data = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text(encoding="utf-8"))
    data["title"] = "Parcel Quest (variant)"
    data["rom_sha256"] = rom_sha256
    data["optimal_presses"] = dict(variant.solution.optimal)
    data["optimal_presses_for"] = rom_sha256
    return ("# Game definition of a Parcel Quest variant (`oakwatch cartridge variant`): the bundled one\n"
            "# (the hidden-state addresses and the ladder do not move), this ROM's hash, and the solver's\n"
            "# fewest presses to each rung (the yardstick of path efficiency).\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def manifest(rom_sha256: str, states: dict[str, tuple[str, str, str]], start: dict) -> str:
    data = yaml.safe_load((ASSETS / "experiments" / "dry-run.yaml").read_text(encoding="utf-8"))
    data["experiment_id"] = f"parcel-quest-variant-{rom_sha256[:12]}"
    game = data["game"]
    game.update({"definition": GAME_NAME, "rom": ROM_NAME, "rom_sha256": rom_sha256,
                 "start_states": {name: {"state": STATE_NAMES[name], "sha256": sha, "first_frame_sha256": first,
                                         "emulator_version": version}
                                  for name, (sha, first, version) in states.items()}})
    game.pop("starter", None)  # the creatures' names are the variant's
    if "mgba" not in states and data["emulator"]["name"] == "mgba":
        data["emulator"]["name"] = "pyboy"
    cond = data["conditions"][0]
    cond["script"] = WALKTHROUGH_NAME
    cond.pop("script_notes", None)  # the bundled notes describe the bundled walkthrough
    return ("# A Parcel Quest variant's dry-run (`oakwatch cartridge variant`): the solver's walkthrough.\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def write_variant(variant: Variant, output: Path) -> dict[str, str]:
    """Write the folder (which must not exist); returns what was written, by kind."""
    from sessions.preflight.manifest import ManifestError, parse_manifest

    output = output.expanduser()
    if output.exists():
        raise VariantFilesError(f"output folder already exists: {output} (choose a new one)")
    start = start_yaml()
    timing = Timing(int(start["press_frames"]), int(start["settle_frames"]))
    states: dict[str, tuple[str, str, str]] = {}
    blobs: dict[str, bytes] = {}
    for name in STATE_NAMES:
        if BACKENDS[name].version() is None:
            continue  # a backend that is not installed gets no start state
        try:
            state, first, version = make_start_state(name, variant.rom, int(start["boot_frames"]))
        except EmulatorError as exc:
            raise VariantFilesError(f"{name}: {exc}") from None
        blobs[name] = state
        states[name] = (hashlib.sha256(state).hexdigest(), first, version)
    rom_sha = hashlib.sha256(variant.rom).hexdigest()
    text = manifest(rom_sha, states, start)
    try:
        parse_manifest(text, "the variant's manifest")
    except ManifestError as exc:
        raise VariantFilesError(str(exc)) from None
    output.mkdir(parents=True)
    (output / ROM_NAME).write_bytes(variant.rom)
    for name, state in blobs.items():
        (output / STATE_NAMES[name]).write_bytes(state)
    (output / GAME_NAME).write_text(game_definition(variant, rom_sha), encoding="utf-8")
    (output / MANIFEST_NAME).write_text(text, encoding="utf-8")
    (output / WALKTHROUGH_NAME).write_text(walkthrough_text(variant.solution, timing), encoding="utf-8")
    return {"rom": ROM_NAME, "rom_sha256": rom_sha, "definition": GAME_NAME, "manifest": MANIFEST_NAME,
            "walkthrough": WALKTHROUGH_NAME, **{f"state_{n}": STATE_NAMES[n] for n in blobs}}
