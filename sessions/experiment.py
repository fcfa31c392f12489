"""Preparing an experiment: every check first, then the folder, exactly the seed's layout.

`prepare` reads and verifies everything (manifest, ROM and state hashes, game definition,
scripts, output folder) and writes nothing; only `create_folder` touches the disk.
"""

from __future__ import annotations

import hashlib
import json
import platform
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as dist_version
from pathlib import Path

import yaml

from engine.contract import response_json_schema
from engine.gamedef import GameDefinition
from engine.pyboy_backend import PYBOY_VERSION
from engine.script import ScriptError, load_script
from sessions.assets import ASSETS, BUNDLED_PREFIX, DEFAULT_MANIFEST, resolve
from sessions.gamedefs import GameDefinitionError, load_game_definition
from sessions.manifest import Condition, Manifest, ManifestError, load_manifest
from sessions.notes import NotesError, load_notes
from sessions.schedule import blind_labels, trial_order

EMULATOR_FRAME_SIZES = {"pyboy": (160, 144)}


class PreflightError(ValueError):
    """The experiment cannot start; one line, naming the problem. Nothing was written."""


@dataclass
class Prepared:
    manifest: Manifest
    manifest_path: Path
    rom_path: Path
    start_state: bytes
    game: GameDefinition
    game_path: Path
    labels: dict[str, str]  # condition id -> blinded label
    schedule: list[tuple[str, int]]  # (label, trial number) in run order
    scripts: dict[str, list[str]] = field(default_factory=dict)  # condition id -> actions
    notes: dict[str, dict[int, dict]] = field(default_factory=dict)  # condition id -> script notes
    replay_dirs: dict[str, Path] = field(default_factory=dict)

    @property
    def base(self) -> Path:
        return self.manifest_path.parent

    def condition(self, label: str) -> Condition:
        cid = next(c for c, lab in self.labels.items() if lab == label)
        return next(c for c in self.manifest.conditions if c.id == cid)

    def provenance(self) -> dict:
        m = self.manifest
        return {
            "rom_sha256": m.game.rom_sha256,
            "initial_state_sha256": m.game.initial_state_sha256,
            "manifest_sha256": m.sha256(),
            "game_definition_sha256": hashlib.sha256(self.game_path.read_bytes()).hexdigest(),
            "emulator_config_sha256": m.emulator.config_sha256,
            "oakwatch_version": dist_version("oakwatch"),
            "python_version": platform.python_version(),
        }


def sha256_file(path: Path, what: str) -> tuple[bytes, str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PreflightError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise PreflightError(f"{what} unreadable: {path} ({exc.strerror})") from None
    return data, hashlib.sha256(data).hexdigest()


def prepare(manifest_path: Path | None, output: Path | None, *, allow_human: bool = False) -> Prepared:
    manifest_path = (manifest_path or DEFAULT_MANIFEST).resolve()
    try:
        manifest = load_manifest(manifest_path)
    except ManifestError as exc:
        raise PreflightError(str(exc)) from None
    base = manifest_path.parent
    g, emu = manifest.game, manifest.emulator

    if output is not None and output.exists():
        raise PreflightError(f"output folder already exists: {output} (choose a new one)")

    if emu.version != PYBOY_VERSION:
        raise PreflightError(f"{manifest_path}: emulator.version pins {emu.name} {emu.version}, "
                             f"but {PYBOY_VERSION} is installed (save states depend on the version)")
    computed = emu.config_hash()
    if emu.config_sha256 is not None and emu.config_sha256 != computed:
        raise PreflightError(f"{manifest_path}: emulator.config_sha256 does not match the emulator "
                             f"settings (computed {computed})")
    if (emu.frame_width, emu.frame_height) != EMULATOR_FRAME_SIZES[emu.name]:
        w, h = EMULATOR_FRAME_SIZES[emu.name]
        raise PreflightError(f"{manifest_path}: emulator.frame_width/height must be {w}x{h} for {emu.name}")

    rom_path = resolve(g.rom, base)
    _, rom_sha = sha256_file(rom_path, "ROM")
    if rom_sha != g.rom_sha256:
        raise PreflightError(f"ROM {rom_path} has SHA-256 {rom_sha}, but the manifest's game.rom_sha256 "
                             f"is {g.rom_sha256}: refusing a different ROM")
    state_path = resolve(g.initial_state, base)
    state, state_sha = sha256_file(state_path, "initial state")
    if state_sha != g.initial_state_sha256:
        raise PreflightError(f"initial state {state_path} has SHA-256 {state_sha}, but the manifest's "
                             f"game.initial_state_sha256 is {g.initial_state_sha256}")

    game_path = resolve(g.definition, base)
    try:
        game = load_game_definition(game_path)
    except GameDefinitionError as exc:
        raise PreflightError(str(exc)) from None
    if game.rom_sha256 is not None and game.rom_sha256 != g.rom_sha256:
        raise PreflightError(f"game definition {game_path} is for ROM {game.rom_sha256}, "
                             f"not the manifest's {g.rom_sha256}")

    scripts: dict[str, list[str]] = {}
    notes: dict[str, dict[int, dict]] = {}
    replay_dirs: dict[str, Path] = {}
    for c in manifest.conditions:
        if c.policy == "scripted":
            try:
                scripts[c.id] = load_script(resolve(c.script, base))
                if c.script_notes is not None:
                    notes[c.id] = load_notes(resolve(c.script_notes, base))
            except (ScriptError, NotesError) as exc:
                raise PreflightError(f"condition {c.id}: {exc}") from None
        elif c.policy == "replay":
            trial_dir = resolve(c.replay_trace, base)
            if not (trial_dir / "trace.jsonl").is_file():
                raise PreflightError(f"condition {c.id}: replay_trace {trial_dir} has no trace.jsonl")
            replay_dirs[c.id] = trial_dir
        elif c.policy == "human" and not allow_human:
            raise PreflightError(f"condition {c.id}: policy 'human' needs the console (not --headless)")

    labels = blind_labels([c.id for c in manifest.conditions], manifest.trials.blinding_seed)
    try:
        schedule = trial_order(sorted(labels.values()), manifest.trials.per_condition, manifest.trials.order)
    except ValueError as exc:
        raise PreflightError(f"{manifest_path}: {exc}") from None

    frozen = manifest.model_copy(deep=True)
    frozen.emulator.config_sha256 = computed
    # The frozen copy lives elsewhere: anchor relative file references to absolute paths.
    for section, key in [(frozen.game, "rom"), (frozen.game, "initial_state"), (frozen.game, "definition"),
                         *[(c, k) for c in frozen.conditions for k in ("script", "script_notes", "replay_trace")]]:
        ref = getattr(section, key)
        if ref is not None and not ref.startswith(BUNDLED_PREFIX):
            setattr(section, key, str(resolve(ref, base).resolve()))
    if frozen.created_utc is None:
        frozen.created_utc = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Prepared(frozen, manifest_path, rom_path, state, game, game_path, labels, schedule,
                    scripts, notes, replay_dirs)


def default_output(experiment_id: str, root: Path = Path("runs")) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return root / f"{experiment_id}-{stamp}"


def _dump_yaml(path: Path, data) -> None:
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def create_folder(prepared: Prepared, output: Path) -> Path:
    """Lay out the experiment folder; refuses an existing one."""
    m = prepared.manifest
    try:
        output.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise PreflightError(f"output folder already exists: {output} (choose a new one)") from None
    (output / "manifest.yaml").write_text(m.to_yaml(), encoding="utf-8")
    prompts = output / "prompts"
    prompts.mkdir()
    (prompts / "system.txt").write_bytes((ASSETS / "prompts" / "system.txt").read_bytes())
    (prompts / "action-schema.json").write_text(
        json.dumps(response_json_schema(m.agent.max_actions_per_decision), indent=2) + "\n", encoding="utf-8")
    conditions = output / "conditions"
    conditions.mkdir()
    for c in m.conditions:
        label = prepared.labels[c.id]
        data = {"label": label, **c.model_dump(mode="json", exclude={"id"})}
        _dump_yaml(conditions / f"{label}.yaml", data)
    scoring = output / "scoring"
    scoring.mkdir()
    ladder = [{"id": ms.id, "name": ms.name, "points": ms.points,
               "verification": [cond.model_dump(exclude_none=True) for cond in ms.all]}
              for ms in prepared.game.milestones]
    _dump_yaml(scoring / "milestones.yaml", {"game": prepared.game.id, "rules": {
        "award_once": True, "consecutive_frames": 2, "never_if_true_at_start": True},
        "milestones": ladder})
    (scoring / "memory-error-rubric.yaml").write_bytes(
        (ASSETS / "prompts" / "memory-error-rubric.yaml").read_bytes())
    (output / "trials").mkdir()
    # The unblinding key sits apart from conditions/ and trials/, which annotators work from.
    (output / "blinding.json").write_text(json.dumps(
        {"labels": {lab: cid for cid, lab in prepared.labels.items()}}, indent=2) + "\n", encoding="utf-8")
    (output / "schedule.json").write_text(json.dumps(
        {"manifest_sha256": m.sha256(),
         "order": [f"{lab}-{n:02d}" for lab, n in prepared.schedule]}, indent=2) + "\n", encoding="utf-8")
    return output
