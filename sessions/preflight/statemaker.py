"""`oakwatch state new`: a start state made from the user's own ROM, and a manifest ready to run.

A state is always rebuilt from what can be published without the ROM: power on, run
`boot_frames` frames with no input, then play an input prefix (title screen, intro, name entry)
with the experiment's fixed timing, and save. The prefix comes from a file, or from the
operator playing in a small console (app/console/state_console.py) whose presses are recorded and then
replayed here headlessly, so the state on disk is always the prefix's, reproducibly.

Everything goes into the output folder, which must be new and must not be inside the project's
bundled assets: nothing derived from a ROM ever lands in tracked files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from engine.emulators.backends import BACKENDS, backend
from engine.emulators.emulator import EmulatorError, Timing, frame_sha256
from engine.games.gamedef import GameDefinition
from engine.loop.script import ScriptError, parse_script
from engine.text import printable
from sessions.preflight.assets import ASSETS, BUNDLED_PREFIX, bundled_problem, bundled_refs, resolve
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition
from sessions.preflight.romid import RomIdentity, RomIdentityError, identify
from sessions.preflight.safe_read import MAX_ROM_BYTES, MAX_TEXT_BYTES, InputFileError, read_input

DEFAULT_BACKEND = {"gb": "pyboy", "gbc": "pyboy", "gba": "mgba"}


class StateMakerError(ValueError):
    """The state cannot be made; one line naming the problem. Nothing was written."""


@dataclass
class Setup:
    """Everything checked before the emulator starts."""

    rom_path: Path
    rom: bytes
    game: GameDefinition
    game_ref: str  # bundled:NAME.yaml or an absolute path, as the manifest will name it
    identity: RomIdentity
    emulator: str
    emulator_version: str
    output: Path


def game_definitions() -> dict[str, Path]:
    """Bundled definitions by id (the file's stem)."""
    return {p.stem: p for p in sorted((ASSETS / "games").glob("*.yaml"))}


def _game(ref: str) -> tuple[GameDefinition, str]:
    bundled = game_definitions()
    if ref in bundled:
        path, manifest_ref = bundled[ref], f"{BUNDLED_PREFIX}{bundled[ref].name}"
    else:
        path = Path(ref).expanduser()
        if not path.is_file():
            raise StateMakerError(f"--game {printable(ref)}: no bundled definition of that id and no such file "
                                  f"(bundled: {', '.join(bundled)})")
        path = path.resolve()
        manifest_ref = str(path)
    try:
        return load_game_definition(path), manifest_ref
    except GameDefinitionError as exc:
        raise StateMakerError(str(exc)) from None


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def setup(rom_path: Path, game_ref: str, output: Path, *, emulator: str | None = None,
          force: bool = False) -> Setup:
    """Check the ROM, definition, backend and output folder; write nothing."""
    try:
        rom = read_input(rom_path, what="ROM", max_bytes=MAX_ROM_BYTES)
    except InputFileError as exc:
        raise StateMakerError(str(exc)) from None
    game, manifest_ref = _game(game_ref)
    try:
        identity = identify(rom, game, force=force, source=str(rom_path))
    except RomIdentityError as exc:
        raise StateMakerError(str(exc)) from None
    name = emulator or DEFAULT_BACKEND[game.platform]
    if name not in BACKENDS:
        raise StateMakerError(f"--emulator {printable(name)}: no such backend (there are: {', '.join(BACKENDS)})")
    chosen = backend(name)
    if not chosen.runs(game.platform):
        raise StateMakerError(f"{chosen.title} does not run {game.platform} games; use "
                              f"--emulator {DEFAULT_BACKEND[game.platform]}")
    version = chosen.version()
    if version is None:
        raise StateMakerError(chosen.missing_message())
    output = output.expanduser().resolve()
    if output.exists():
        raise StateMakerError(f"output folder already exists: {output} (choose a new one)")
    if _inside(output, ASSETS.resolve()):
        raise StateMakerError(f"{output} is inside the project's bundled assets: a state made from your ROM "
                              "must not be written there (try runs/states/...)")
    return Setup(rom_path.resolve(), rom, game, manifest_ref, identity, name, version, output)


def read_prefix(path: Path) -> list[str]:
    try:
        return parse_script(read_input(path, what="input prefix", max_bytes=MAX_TEXT_BYTES), str(path))
    except (InputFileError, ScriptError) as exc:
        raise StateMakerError(str(exc)) from None


def play_prefix(s: Setup, boot_frames: int, actions: list[str], timing: Timing,
                progress: Callable[[int], None] | None = None) -> tuple[bytes, str, int]:
    """Power on, run `boot_frames`, play `actions`, save. Returns (state, first-frame SHA-256 after
    restoring it in a fresh emulator, frame number at the save)."""
    chosen = backend(s.emulator)
    try:
        machine = chosen.open(s.rom, str(s.rom_path), s.game.platform)
        try:
            machine.boot(boot_frames)
            for i, action in enumerate(actions, start=1):
                machine.step(action, timing, _no_probe)
                if progress and i % 100 == 0:
                    progress(i)
            state, frame_index = machine.save_state(), machine.frame_index
        finally:
            machine.close()
        check = chosen.open(s.rom, str(s.rom_path), s.game.platform)
        try:
            check.restore(state)
            first = frame_sha256(check.frame())
        finally:
            check.close()
    except EmulatorError as exc:
        raise StateMakerError(printable(str(exc))) from None
    return state, first, frame_index


def _no_probe(read_range) -> dict:
    return {}


def load_template(ref: str | None, s: Setup) -> tuple[dict, Timing]:
    """The experiment to fill in (`--experiment bundled:NAME` or a path), or a one-condition smoke
    test; and the timing it plays with (the prefix is played with the same timing)."""
    if ref is None:
        data = smoke_experiment(s)
    else:
        try:
            path = resolve(ref, Path.cwd())
        except (OSError, ValueError, RuntimeError) as exc:  # bundled:../x, ~nosuchuser/x: refused unopened
            raise StateMakerError(f"--experiment {printable(ref)}: cannot use it ({printable(str(exc))})") from None
        try:
            data = yaml.safe_load(read_input(path, what="experiment template", max_bytes=MAX_TEXT_BYTES))
        except (InputFileError, yaml.YAMLError, UnicodeDecodeError) as exc:
            raise StateMakerError(f"--experiment {printable(ref)}: cannot read it ({printable(str(exc))})") from None
        if not isinstance(data, dict) or not isinstance(data.get("game"), dict):
            raise StateMakerError(f"--experiment {printable(ref)}: not a manifest (no game section)")
        for field, named in bundled_refs(data):  # before anything runs: the filled-in manifest would refuse it
            problem = bundled_problem(named[len(BUNDLED_PREFIX):])
            if problem is not None:
                raise StateMakerError(f"--experiment {printable(ref)}: {printable(field)}: "
                                      f"{printable(named)} {problem}")
        wanted = data["game"].get("definition")
        ours = resolve(s.game_ref, Path.cwd()).resolve()
        try:
            theirs = resolve(wanted, path.parent).resolve() if isinstance(wanted, str) else None
        except (OSError, ValueError, RuntimeError):
            theirs = None
        if theirs != ours:
            raise StateMakerError(f"--experiment {printable(ref)} is for game definition {printable(str(wanted))}, "
                                  f"not {s.game_ref} (--game)")
    emulator = data.get("emulator") if isinstance(data.get("emulator"), dict) else {}
    try:
        timing = Timing(int(emulator.get("press_frames", 4)), int(emulator.get("settle_frames", 12)))
    except (TypeError, ValueError) as exc:
        raise StateMakerError(f"--experiment {printable(str(ref))}: emulator timing: {exc}") from None
    return data, timing


def smoke_experiment(s: Setup) -> dict:
    """A manifest that runs as written: one seeded random-policy condition, a smoke test of the
    setup. The seed's memory experiment is `--experiment bundled:<game>-design-a.yaml`."""
    return {
        "experiment_id": f"{s.game.id}-{s.emulator}"[:128], "protocol_version": 1,
        "game": {"title": s.game.title, "definition": s.game_ref},
        "emulator": {"name": s.emulator, "press_frames": 4, "settle_frames": 12},
        "budgets": {"accepted_actions": 200, "model_decisions": 200, "wall_time_minutes": 10},
        "trials": {"per_condition": 1},
        "conditions": [{"id": "random", "policy": "random", "seed": 1}],
    }


def write_outputs(s: Setup, boot_frames: int, actions: list[str], state: bytes, first: str,
                  frame_index: int, experiment: dict, timing: Timing) -> dict:
    """The state, the prefix that makes it, its hashes and a ready manifest, in a new folder."""
    state_name = f"{s.game.id}-{s.emulator}.state"
    record = {
        "game": s.game.id, "game_definition": s.game_ref, "definition_verified": s.game.verified,
        "rom": str(s.rom_path), "rom_identity": s.identity.as_dict(),
        "emulator": s.emulator, "emulator_version": s.emulator_version,
        "boot_frames": boot_frames, "press_frames": timing.press_frames, "settle_frames": timing.settle_frames,
        "prefix_actions": len(actions), "frame_index": frame_index,
        "state": state_name, "state_sha256": hashlib.sha256(state).hexdigest(), "first_frame_sha256": first,
    }
    manifest = fill_experiment(s, record, experiment)
    s.output.mkdir(parents=True)
    (s.output / state_name).write_bytes(state)
    (s.output / "inputs.txt").write_text(
        f"# input prefix played after {boot_frames} boot frames (press {timing.press_frames}, "
        f"settle {timing.settle_frames}); `oakwatch state new --inputs` replays it\n"
        + "".join(f"{a}\n" for a in actions), encoding="utf-8")
    (s.output / "start.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    (s.output / "manifest.yaml").write_text(manifest, encoding="utf-8")
    return record


def fill_experiment(s: Setup, record: dict, experiment: dict) -> str:
    """The experiment with this ROM, state and backend filled in, checked as a manifest."""
    from sessions.preflight.manifest import ManifestError, parse_manifest

    data = json.loads(json.dumps(experiment))  # a deep copy of plain data
    game = data.setdefault("game", {})
    game.update({"definition": s.game_ref, "rom": str(s.rom_path), "rom_sha256": s.identity.header.sha256,
                 "start_states": {s.emulator: {
                     "state": record["state"], "sha256": record["state_sha256"],
                     "first_frame_sha256": record["first_frame_sha256"],
                     "emulator_version": s.emulator_version}}})
    if s.identity.forced:
        game["allow_unidentified_rom"] = True
    width, height = backend(s.emulator).frame_size(s.game.platform)
    emulator = data.setdefault("emulator", {})
    emulator.update({"name": s.emulator, "frame_width": width, "frame_height": height})
    emulator.pop("version", None)  # the run records the installed version
    text = (f"# Made by `oakwatch state new` for {s.game.title} on {s.emulator} {s.emulator_version}.\n"
            "# The ROM path and hashes below are yours: keep this folder out of any repository.\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    try:
        parse_manifest(text, "the filled-in manifest")
    except ManifestError as exc:
        raise StateMakerError(str(exc)) from None
    return text
