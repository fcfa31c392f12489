"""Preparing an experiment: every check first, then the folder, exactly the seed's layout.

`prepare` reads and verifies everything (manifest, ROM and state hashes, game definition,
scripts, output folder) and writes nothing; only `create_folder` touches the disk.
"""

from __future__ import annotations

import hashlib
import platform
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from engine.emulators.backends import BACKENDS
from engine.games.gamedef import TASK_LINE, GameDefinition
from engine.loop.script import ScriptError
from sessions.execute.schedule import blind_labels, trial_order
from sessions.preflight.assets import ASSETS, BUNDLED_PREFIX, DEFAULT_MANIFEST, resolve
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition
from sessions.preflight.implementation import implementation
from sessions.preflight.manifest import Condition, Manifest, ManifestError, load_manifest
from sessions.preflight.notes import NotesError, load_notes
from sessions.preflight.romid import RomIdentity, RomIdentityError, identify

_M = TypeVar("_M", bound=BaseModel)


class PreflightError(ValueError):
    """The experiment cannot start; one line, naming the problem. Nothing was written."""


class Keys:
    """API keys by condition id. Never printed: its repr names no key."""

    def __init__(self, keys: dict[str, str | None]):
        self._keys = dict(keys)

    def get(self, condition_id: str) -> str | None:
        return self._keys.get(condition_id)

    def secrets(self) -> tuple[str, ...]:
        return tuple(k for k in self._keys.values() if k)

    def __repr__(self) -> str:
        return f"Keys({len(self._keys)} condition(s), values hidden)"


@dataclass(frozen=True)
class Prepared:
    """Everything preflight read, checked and hashed, once; frozen so no later step changes it (a resumed
    run takes a new value with the folder's own labels, schedule and prompt)."""

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
    # what the preflight probe saw after restoring the state (the chosen backend's start state)
    first_frame_sha256: str | None = None
    recordings: dict[str, list[list[str]]] = field(default_factory=dict)  # replay: raw texts per decision
    rom: bytes = b""  # the ROM's bytes as hashed in preflight: every trial plays exactly these
    # policy: model — prices per condition (None: none known), and the API keys, read from the
    # environment in preflight and never shown (repr, logs, files).
    prices: dict[str, object] = field(default_factory=dict)
    keys: Keys = field(default_factory=lambda: Keys({}), repr=False)
    system_prompt: str = ""
    rom_identity: RomIdentity | None = None  # which dump the ROM is (sessions.preflight.romid)
    variants: list = field(default_factory=list)  # sessions.variants.suites.PreparedVariant, in manifest order
    game_sha256: str = ""  # the definition file's hash, taken where it can be read (Ray workers cannot)
    # the preflight's probe right after restoring the start state, and each frozen control's status
    # (engine.games.controls: checked, unchecked or not-set)
    start_sample: dict = field(default_factory=dict)
    controls: dict[str, str] = field(default_factory=dict)
    # The bytes of every price schedule a condition names, by their place in the folder (pricing/<sha256>.yaml)
    price_schedules: dict[str, bytes] = field(default_factory=dict, repr=False)

    def variant(self, trial_number: int):
        """The suite variant a trial plays (sessions.variants.suites), or None outside a suite."""
        if not self.variants:
            return None
        from sessions.variants.suites import variant_index

        return self.variants[variant_index(trial_number, self.manifest.trials.per_condition)]

    @property
    def base(self) -> Path:
        return self.manifest_path.parent

    def open_emulator(self):
        """A new emulator of the manifest's backend with this experiment's ROM (the bytes hashed in
        preflight) loaded, for the game's platform."""
        rom = self.rom or self.rom_path.read_bytes()
        return BACKENDS[self.manifest.emulator.name].open(rom, str(self.rom_path), self.game.platform)

    def condition(self, label: str) -> Condition:
        cid = next(c for c, lab in self.labels.items() if lab == label)
        return next(c for c in self.manifest.conditions if c.id == cid)

    def provenance(self) -> dict:
        m = self.manifest
        return {
            "rom_sha256": m.game.rom_sha256,
            "initial_state_sha256": m.start_state().sha256,
            "manifest_sha256": m.sha256(),
            "game_definition_sha256": self.game_sha256 or hashlib.sha256(self.game_path.read_bytes()).hexdigest(),
            "emulator_config_sha256": m.emulator.config_sha256,
            "oakwatch_version": dist_version("oakwatch"),
            "implementation": dict(implementation()),  # version, and git commit and dirty flag from a checkout
            "python_version": platform.python_version(),
            "rom_identity": self.rom_identity.as_dict() if self.rom_identity else None,
            "game_definition_verified": self.game.verified,
            # where the definition has run unchanged on an open cartridge (never a check on the game itself)
            "game_definition_conformance": [c.model_dump(include={"build", "rom_sha256", "commit"})
                                            for c in self.game.conformance],
            "controls": dict(self.controls) or None,
        }

    def start_fields(self) -> dict:
        """The hidden state every restore of the start state must reproduce (the preflight's values)."""
        return {name: self.start_sample[name] for name in self.game.stable_at_start if name in self.start_sample}


def sha256_file(path: Path, what: str, max_bytes: int | None = None) -> tuple[bytes, str]:
    """The file's bytes and SHA-256, read safely (no FIFO, device or unbounded read)."""
    from sessions.preflight.safe_read import MAX_ROM_BYTES, MAX_STATE_BYTES, InputFileError, read_input

    cap = max_bytes or {"initial state": MAX_STATE_BYTES}.get(what, MAX_ROM_BYTES)
    try:
        data = read_input(path, what=what, max_bytes=cap)
    except InputFileError as exc:
        raise PreflightError(str(exc)) from None
    return data, hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class _Refs:
    """Where a manifest's values came from, for messages: `at(field)` cites the field, `where(field, ref)`
    turns one of its file references into a path."""
    manifest_path: Path
    origin: object = None

    @property
    def shown(self) -> str:
        return self.origin.name if self.origin is not None else str(self.manifest_path)

    def at(self, field: str) -> str:
        """`MANIFEST:LINE: field` for a value that parsed but cannot be used."""
        from sessions.preflight.yamlfile import field_line

        if self.origin is not None:
            return self.origin.at(field)
        line = field_line(self.manifest_path, field)
        return f"{self.manifest_path}:{line}: {field}" if line else f"{self.manifest_path}: {field}"

    def where(self, field: str, ref: str) -> Path:
        """A manifest's file reference as a path; a path the OS cannot take is refused here."""
        try:
            return resolve(ref, self.manifest_path.parent)
        except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, `~nosuchuser/...`
            raise PreflightError(f"{self.at(field)}: cannot use path {ref} ({exc})") from None


@dataclass(frozen=True)
class _Emulator:
    """The backend the manifest names, as installed, and the start state listed for it."""
    chosen: object
    installed: str
    entry: object  # the manifest's start-state entry for this backend
    state_field: str
    config_sha256: str


@dataclass
class _ConditionInputs:
    """What each condition's policy reads before the run: scripts, notes, recordings, keys, prices."""
    scripts: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, dict[int, dict]] = field(default_factory=dict)
    replay_dirs: dict[str, Path] = field(default_factory=dict)
    recordings: dict[str, list[list[str]]] = field(default_factory=dict)
    keys: dict[str, str | None] = field(default_factory=dict)
    prices: dict[str, object] = field(default_factory=dict)
    schedules: dict[str, bytes] = field(default_factory=dict)


def prepare(manifest_path: Path | None, output: Path | None, *, allow_human: bool = False,
            origin=None, allow_mcp: bool = False) -> Prepared:
    """Every check first, nothing written; each refusal is one printable line (user text escaped).
    `origin`: for a manifest oakwatch built from the command line (app.commands.model_run.Origin), where the
    user set each field (`origin.at(field)`: an option or a line of their own file) and what to call
    the manifest (`origin.name`), so no message cites the temporary copy.
    The steps run in this order because it is the order refusals are reported in."""
    from engine.text import printable

    try:
        manifest_path, manifest = _read_manifest(manifest_path)
        refs = _Refs(manifest_path, origin)
        _check_output(output)
        emu = _check_emulator(manifest, refs)
        rom_path, rom, state_path, state = _read_rom_and_state(manifest, emu, refs)
        game_path, game = _read_game(manifest, refs)
        _check_game_fits(manifest, game, game_path, refs)
        rom_identity = _identify_rom(manifest, rom, rom_path, game)
        _check_platform(manifest, emu, game, game_path, refs)
        inputs = _condition_inputs(manifest, game, refs, allow_human=allow_human, allow_mcp=allow_mcp,
                                   protected=out_of_reach(manifest_path, rom_path, state_path, game_path, output))
        variants = _variants(manifest, rom, game, refs)
        labels, schedule = _blind_and_schedule(manifest, refs)
        first_frame, start_sample = _probe(manifest, emu, rom_path, rom, state_path, state, game, game_path)
        controls = _check_controls(manifest, game, start_sample, state_path, refs)
        _check_goal(manifest, game, game_path, start_sample, state_path, refs)
        instruction = _instruction(manifest, game, game_path, refs)
        frozen = _freeze(manifest, instruction, emu, variants, refs)
        return Prepared(frozen, manifest_path, rom_path, state, game, game_path, labels, schedule,
                        inputs.scripts, inputs.notes, inputs.replay_dirs, first_frame, inputs.recordings, rom,
                        inputs.prices, Keys(inputs.keys), system_prompt_for(frozen), rom_identity,
                        variants=variants, start_sample=start_sample, controls=controls,
                        price_schedules=inputs.schedules)
    except PreflightError as exc:
        raise PreflightError(printable(str(exc))) from None


def _read_manifest(manifest_path: Path | None) -> tuple[Path, Manifest]:
    """The manifest's absolute path (the bundled dry-run's when none is given) and its parsed contents."""
    try:
        manifest_path = (manifest_path or DEFAULT_MANIFEST).resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise PreflightError(f"cannot read manifest: {manifest_path} ({exc})") from None
    try:
        return manifest_path, load_manifest(manifest_path)
    except ManifestError as exc:
        raise PreflightError(str(exc)) from None


def _check_output(output: Path | None) -> None:
    """The evidence folder must not exist yet (a run never writes into an old one)."""
    try:
        exists = output is not None and output.exists()
    except (OSError, ValueError) as exc:
        raise PreflightError(f"cannot use output folder {output} ({exc})") from None
    if exists:
        raise PreflightError(f"output folder already exists: {output} (choose a new one)")


def _check_emulator(manifest: Manifest, refs: _Refs) -> _Emulator:
    """The backend is installed at the pinned version, has a start state made by that version, and
    its settings hash to the manifest's pin."""
    g, emu = manifest.game, manifest.emulator
    at = refs.at
    chosen = BACKENDS[emu.name]
    installed = chosen.version()
    if installed is None:
        raise PreflightError(chosen.missing_message())
    if emu.version is not None and emu.version != installed:
        raise PreflightError(f"{at('emulator.version')}: pins {emu.name} {emu.version}, "
                             f"but {installed} is installed (save states depend on the version)")
    entry = manifest.start_state()
    if entry is None:
        _refuse_wrong_platform(chosen, refs.where("game.definition", g.definition), at)
        raise PreflightError(f"{at('emulator.name')}: no start state for {emu.name} in game.start_states "
                             f"(it lists one for: {', '.join(g.start_states)}); make one with "
                             f"`oakwatch make-state ROM --emulator {emu.name} --frames N --output FILE`")
    state_field = f"game.start_states.{emu.name}"
    if entry.emulator_version != installed:
        raise PreflightError(f"{at(state_field + '.emulator_version')}: the {emu.name} start state was made by "
                             f"{emu.name} {entry.emulator_version}, but {installed} is installed (a state "
                             f"loads only in the version that made it): make it again with oakwatch make-state")
    computed = emu.model_copy(update={"version": installed}).config_hash()
    if emu.config_sha256 is not None and emu.config_sha256 != computed:
        raise PreflightError(f"{at('emulator.config_sha256')}: does not match the emulator "
                             f"settings (computed {computed})")
    return _Emulator(chosen, installed, entry, state_field, computed)


def _read_rom_and_state(manifest: Manifest, emu: _Emulator, refs: _Refs) -> tuple[Path, bytes, Path, bytes]:
    """The ROM's and the start state's bytes, read once and checked against the manifest's hashes."""
    g = manifest.game
    rom_path = refs.where("game.rom", g.rom)
    rom, rom_sha = sha256_file(rom_path, "ROM")
    if rom_sha != g.rom_sha256:
        raise PreflightError(f"ROM {rom_path} has SHA-256 {rom_sha}, but the manifest's game.rom_sha256 "
                             f"is {g.rom_sha256}: refusing a different ROM")
    state_path = refs.where(f"{emu.state_field}.state", emu.entry.state)
    state, state_sha = sha256_file(state_path, "initial state")
    if state_sha != emu.entry.sha256:
        raise PreflightError(f"initial state {state_path} has SHA-256 {state_sha}, but the manifest's "
                             f"{emu.state_field}.sha256 is {emu.entry.sha256}")
    return rom_path, rom, state_path, state


def _read_game(manifest: Manifest, refs: _Refs) -> tuple[Path, GameDefinition]:
    """The game definition, read and checked to be for the manifest's ROM."""
    g = manifest.game
    game_path = refs.where("game.definition", g.definition)
    try:
        game = load_game_definition(game_path)
    except GameDefinitionError as exc:
        raise PreflightError(str(exc)) from None
    if game.rom_sha256 is not None and game.rom_sha256 != g.rom_sha256:
        raise PreflightError(f"game definition {game_path} is for ROM {game.rom_sha256}, "
                             f"not the manifest's {g.rom_sha256}")
    return game_path, game


def _check_game_fits(manifest: Manifest, game: GameDefinition, game_path: Path, refs: _Refs) -> None:
    """Everything the manifest asks of the game definition, it defines: failure fields, the
    information track, shortcuts (pressing only allowed buttons) and the battle adapter."""
    at = refs.at
    # an episode's failure test on a field the game does not probe would fail mid-trial: refuse it here
    unknown = sorted({t.field for t in (manifest.episodes.failure or [])} - set(game.fields) - set(game.pointers)) \
        if manifest.episodes is not None else []
    if unknown:
        raise PreflightError(f"{at('episodes.failure')}: {', '.join(unknown)} is not a field of {game_path}")
    track = manifest.agent.information_track
    if track != "visual" and getattr(game.tracks, track) is None:
        raise PreflightError(f"{at('agent.information_track')}: {track}, but game definition {game_path} "
                             f"declares no {track} track (tracks.{track})")
    _check_shortcuts(manifest, game, game_path, refs)
    if manifest.battle is not None:  # a battle task's rules need the game's battle adapter (engine.battle.battle)
        from engine.battle.battle import settings_problem

        if problem := settings_problem(manifest.battle, game.battle, f"game definition {game_path}"):
            raise PreflightError(f"{at('battle')}: {problem}")


def _check_shortcuts(manifest: Manifest, game: GameDefinition, game_path: Path, refs: _Refs) -> None:
    lacking = [s for s in manifest.agent.shortcuts if s not in game.shortcuts]
    if lacking:
        raise PreflightError(f"{refs.at('agent.shortcuts')}: {', '.join(lacking)} is not a shortcut game definition "
                             f"{game_path} defines (it defines: {', '.join(game.shortcuts) or 'none'})")
    for name in manifest.agent.shortcuts:
        stray = sorted({b for step in game.shortcuts[name].steps for b in step.buttons()}
                       - set(manifest.agent.allowed_actions))
        if stray:
            raise PreflightError(f"{refs.at('agent.shortcuts')}: {name} presses {', '.join(stray)}, which "
                                 f"agent.allowed_actions lacks")


def _identify_rom(manifest: Manifest, rom: bytes, rom_path: Path, game: GameDefinition) -> RomIdentity | None:
    """Which dump the ROM is (sessions.preflight.romid); an unknown one only when the manifest allows it."""
    try:
        return identify(rom, game, force=manifest.game.allow_unidentified_rom, source=f"ROM {rom_path}")
    except RomIdentityError as exc:
        raise PreflightError(str(exc)) from None


def _check_platform(manifest: Manifest, emu: _Emulator, game: GameDefinition, game_path: Path,
                    refs: _Refs) -> None:
    """The backend runs the game's platform, at the frame size the manifest states."""
    m = manifest.emulator
    if not emu.chosen.runs(game.platform):
        raise PreflightError(_platform_message(emu.chosen, game.platform, game_path, refs.at))
    size = emu.chosen.frame_size(game.platform)
    if (m.frame_width, m.frame_height) != size:
        raise PreflightError(f"{refs.at('emulator.frame_width')}: frame width and height must be "
                             f"{size[0]}x{size[1]} for {game.platform} on {m.name} (the manifest says "
                             f"{m.frame_width}x{m.frame_height})")


def _condition_inputs(manifest: Manifest, game: GameDefinition, refs: _Refs, *, allow_human: bool,
                      allow_mcp: bool, protected: list[tuple[str, Path]]) -> _ConditionInputs:
    """Each condition's policy inputs, read and checked in manifest order."""
    inputs = _ConditionInputs()
    for i, c in enumerate(manifest.conditions):
        if c.policy == "scripted":
            _read_script(c, i, refs, inputs)
        elif c.policy == "replay":
            _read_recording(c, i, refs, inputs)
        elif c.policy == "human" and not allow_human:
            raise PreflightError(f"condition {c.id}: policy 'human' needs the console (not --headless)")
        elif c.policy in ("mcp", "cli"):  # an agent on oakwatch's tool server (sessions.preflight.tool_conditions)
            from sessions.preflight.tool_conditions import ToolConditionError, check_tool_condition

            try:
                check_tool_condition(manifest, c, i, allow_mcp=allow_mcp, game=game,
                                     base=refs.manifest_path.parent, protected=protected)
            except ToolConditionError as exc:
                raise PreflightError(f"{refs.at(exc.field) if exc.field else f'condition {c.id}'}: {exc}") from None
        elif c.policy == "model":
            inputs.keys[c.id], inputs.prices[c.id] = _model_inputs(
                c, i, manifest, refs.where, refs.at, built=refs.origin is not None, schedules=inputs.schedules)
    return inputs


def _read_script(c: Condition, i: int, refs: _Refs, inputs: _ConditionInputs) -> None:
    """A scripted condition's input script (parsed) and its notes, if any."""
    from engine.loop.script import parse_script
    from sessions.preflight.safe_read import MAX_TEXT_BYTES, InputFileError, read_input

    script_path = refs.where(f"conditions.{i}.script", c.script)
    try:
        try:
            raw = read_input(script_path, what="input script", max_bytes=MAX_TEXT_BYTES)
        except InputFileError as exc:
            raise ScriptError(f"{script_path}: cannot read input script ({exc.reason})") from None
        inputs.scripts[c.id] = parse_script(raw, str(script_path))
        if c.script_notes is not None:
            inputs.notes[c.id] = load_notes(refs.where(f"conditions.{i}.script_notes", c.script_notes))
    except (ScriptError, NotesError) as exc:
        raise PreflightError(f"condition {c.id}: {exc}") from None


def _read_recording(c: Condition, i: int, refs: _Refs, inputs: _ConditionInputs) -> None:
    """A replay condition's recorded trial, read (and checked) now, not when the trial starts."""
    from sessions.evidence.reader import FormatProblem, TrialReader

    trial_dir = refs.where(f"conditions.{i}.replay_trace", c.replay_trace)
    if not (trial_dir / "responses.jsonl").is_file():
        raise PreflightError(f"{refs.at(f'conditions.{i}.replay_trace')}: {trial_dir} is not a recorded "
                             f"trial (no responses.jsonl)")
    try:
        inputs.recordings[c.id] = TrialReader(trial_dir).recorded_attempts()
    except (FormatProblem, OSError) as exc:
        raise PreflightError(f"condition {c.id}: replay_trace: {exc}") from None
    inputs.replay_dirs[c.id] = trial_dir


def _variants(manifest: Manifest, rom: bytes, game: GameDefinition, refs: _Refs) -> list:
    """A suite's variants (sessions.variants.suites), each ROM matching the hash the manifest pins."""
    if not manifest.variants:
        return []
    from sessions.variants.suites import SuiteError, prepare_variants

    try:
        variants = prepare_variants(manifest, rom, game, manifest.emulator.name)
    except SuiteError as exc:
        raise PreflightError(f"{refs.shown}: {exc}") from None
    for v, entry in zip(variants, manifest.variants, strict=True):
        if entry.rom_sha256 is not None and entry.rom_sha256 != v.rom_sha256:
            raise PreflightError(f"{refs.at(f'variants.{v.index}.rom_sha256')}: the seed makes ROM {v.rom_sha256}")
    return variants


def _blind_and_schedule(manifest: Manifest, refs: _Refs) -> tuple[dict[str, str], list[tuple[str, int]]]:
    """The conditions' blinded labels and the trials' run order."""
    labels = blind_labels([c.id for c in manifest.conditions], manifest.trials.blinding_seed)
    try:
        schedule = trial_order(sorted(labels.values()), manifest.trials_per_label(), manifest.trials.order)
    except ValueError as exc:
        raise PreflightError(f"{refs.at('trials.order')}: {str(exc).removeprefix('trials.order ')}") from None
    return labels, schedule


def _probe(manifest: Manifest, emu: _Emulator, rom_path: Path, rom: bytes, state_path: Path, state: bytes,
           game: GameDefinition, game_path: Path) -> tuple[str | None, dict]:
    """Last, being the slow check (~1 s): boot the ROM, restore and run the state, read the game's
    fields, all in a child process, so a cartridge or state the emulator cannot run is refused here
    rather than after the folder exists."""
    from sessions.preflight.romcheck import RomCheckError, probe_start_state

    try:
        return probe_start_state(
            rom_path, rom, state, game, emu.entry.first_frame_sha256, state_path=state_path, game_path=game_path,
            emulator=manifest.emulator.name, first_frame_field=f"{emu.state_field}.first_frame_sha256")
    except RomCheckError as exc:
        raise PreflightError(str(exc)) from None


def _check_controls(manifest: Manifest, game: GameDefinition, start_sample: dict, state_path: Path,
                    refs: _Refs) -> dict[str, str]:
    """The frozen controls (seed 000) against the state every trial starts from; each control's status."""
    from engine.games.controls import check_controls

    g = manifest.game
    controls, mismatches = check_controls(
        game, {"starter": g.starter, "text_speed": g.text_speed, "battle_style": g.battle_style}, start_sample)
    if mismatches:
        first_problem = mismatches[0]
        raise PreflightError(f"{refs.at('game.' + first_problem.control)}: {first_problem.message} "
                             f"(initial state {state_path})")
    return controls


def _check_goal(manifest: Manifest, game: GameDefinition, game_path: Path, start_sample: dict,
                state_path: Path, refs: _Refs) -> None:
    """Seed 001's goal benchmark (engine.games.goals): the goal exists and the start state leaves it room."""
    goal = manifest.game.goal
    if goal is None:
        return
    from engine.games.goals import room_problems

    if goal not in game.goals:
        raise PreflightError(f"{refs.at('game.goal')}: game definition {game_path} defines no goal {goal!r} "
                             f"(its goals: {', '.join(sorted(game.goals)) or 'none'})")
    if room := room_problems(game.goals[goal], start_sample):
        raise PreflightError(f"{refs.at('game.goal')}: the start state leaves goal {goal} no room: "
                             f"{'; '.join(room)} (initial state {state_path})")


def _instruction(manifest: Manifest, game: GameDefinition, game_path: Path, refs: _Refs) -> str:
    """What every agent is told to do: someone must say, and it must not name hidden state."""
    instruction = instruction_for(manifest, game)
    if instruction is None:
        raise PreflightError(f"{refs.at('agent.instruction')}: say what the agent is asked to do (game definition "
                             f"{game_path} gives no instruction)")
    if hidden := game.hidden_in(instruction):
        raise PreflightError(f"{refs.at('agent.instruction')}: names hidden state ({', '.join(hidden)}): say the "
                             "objective as the player sees it")
    return instruction


def _freeze(manifest: Manifest, instruction: str, emu: _Emulator, variants: list, refs: _Refs) -> Manifest:
    """The manifest as the folder records it: the instruction told, the emulator version and settings
    hash that ran, absolute file references, the suite's variants, the CLI clients that will play,
    and when it was made. The manifest is frozen: each change is a copy with that part replaced."""
    update: dict = {
        "agent": manifest.agent.model_copy(update={"instruction": instruction}),  # what every agent was told
        "emulator": manifest.emulator.model_copy(update={"version": emu.installed,  # the version that ran
                                                         "config_sha256": emu.config_sha256}),
        "game": _anchored(manifest.game, ("rom", "definition"), refs).model_copy(update={"start_states": {
            name: _anchored(s, ("state",), refs) for name, s in manifest.game.start_states.items()}}),
    }
    conditions = [_anchored(c, ("script", "script_notes", "replay_trace"), refs) for c in manifest.conditions]
    if variants:
        from sessions.preflight.manifest import VariantEntry
        from sessions.variants.suites import frozen_entries

        update["variants"] = [VariantEntry.model_validate(e) for e in frozen_entries(manifest, variants)]
    update["conditions"] = [_played_client(c, refs) if c.policy == "cli" else c for c in conditions]
    if manifest.created_utc is None:
        update["created_utc"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return manifest.model_copy(update=update)


def _played_client(c: Condition, refs: _Refs) -> Condition:
    """The client that will play is the one the run records."""
    from sessions.preflight.tool_conditions import client_reads, client_version

    update: dict = {"client_version": client_version(c)}
    if c.client_reads is not None:
        update["client_reads"] = [str(p) for p in client_reads(c, refs.manifest_path.parent)]
    return c.model_copy(update=update)


def _anchored(section: _M, keys: tuple[str, ...], refs: _Refs) -> _M:
    """The frozen copy lives elsewhere: `section` with its relative file references made absolute."""
    base = refs.manifest_path.parent
    update = {}
    for key in keys:
        ref = getattr(section, key)
        if ref is not None and not ref.startswith(BUNDLED_PREFIX):
            try:
                update[key] = str(resolve(ref, base).resolve())
            except (OSError, ValueError, RuntimeError) as exc:
                raise PreflightError(f"{refs.shown}: cannot use path {ref} ({exc})") from None
    return section.model_copy(update=update) if update else section


def out_of_reach(manifest_path: Path, rom_path: Path, state_path: Path, game_path: Path,
                 output: Path | None) -> list[tuple[str, Path]]:
    """What a `policy: cli` client must not reach (sessions.execute.cli_sandbox): oakwatch's own tree with its
    assets, the manifest's folder, the ROM, start state and game definition, and the evidence folder."""
    from sessions.preflight.assets import ASSETS

    found = [("oakwatch's own files", Path(__file__).resolve().parents[2]), ("the bundled assets", ASSETS),
             ("the manifest's folder", manifest_path.parent), ("the ROM", rom_path), ("the start state", state_path),
             ("the game definition", game_path)]
    return found + ([("the evidence folder", output)] if output is not None else [])


def controls_rule(manifest: Manifest) -> str:
    """The prompt's rule stating the frozen controls (seed 000: every condition is told the same
    starter and settings, none chooses freely); empty when the manifest fixes none."""
    g = manifest.game
    settings = [f"{what} {value}" for what, value in (("text speed", g.text_speed), ("battle style", g.battle_style))
                if value is not None]
    parts = []
    if settings:
        parts.append(f"The game's options are fixed for this experiment: {', '.join(settings)}; "
                     "leave them as they are.")
    if g.starter is not None:
        parts.append(f"When the game offers you a first creature (the starter), choose {g.starter}.")
    return f"- {' '.join(parts)}\n" if parts else ""


def instruction_for(manifest: Manifest, game: GameDefinition) -> str | None:
    """What every agent of the run is told to do: the manifest's own instruction, else its goal's
    (`game.goal`, `run --goal ID`), else the game definition's (its ladder). None: nobody says."""
    if manifest.agent.instruction is not None:
        return manifest.agent.instruction
    goal = manifest.game.goal
    if goal is not None and goal in game.goals:
        return game.goals[goal].instruction
    return game.instruction


def system_prompt_for(manifest: Manifest) -> str:
    """The bundled system prompt with this experiment's instruction, memory rules and frozen controls
    filled in (what models are sent). A manifest frozen before instructions existed names none."""
    rules = manifest.agent.memory
    text = (ASSETS / "prompts" / "system.txt").read_text(encoding="utf-8")
    told = manifest.agent.instruction
    text = text.replace("{instruction}\n", TASK_LINE.format(instruction=told) if told is not None else "")
    text = text.replace("{controls}\n", controls_rule(manifest))
    for name, value in [("confirm_threshold", f"{rules.confirm_threshold:g}"),
                        ("exclusive_predicates", ", ".join(rules.exclusive_predicates) or "none"),
                        ("possession_predicates", ", ".join(rules.possession_predicates) or "none")]:
        text = text.replace("{" + name + "}", value)
    return text


def _model_inputs(c: Condition, i: int, manifest: Manifest, where, at, *, built: bool = False,
                  schedules: dict[str, bytes] | None = None) -> tuple[str | None, object]:
    """A model condition's API key (from the environment) and price, checked before anything runs;
    the price schedule's bytes go into `schedules`, by their place in the folder.
    `built`: the condition came from `run --provider/--model` (named by its options, not its id)."""
    import os

    from sessions.preflight.pricing import PricingError, copy_path, read_prices

    who = at(f"conditions.{i}.provider") if built else f"condition {c.id}"
    key = None
    if c.key_env is not None:
        key = os.environ.get(c.key_env) or None
        if key is None:
            raise PreflightError(f"{who}: the API key variable {c.key_env} is not set "
                                 f"(keys come from the environment only, never from a file)")
    price = None
    if c.pricing is not None:
        try:
            _, table, data = read_prices(where(f"conditions.{i}.pricing.file", c.pricing.file), c.pricing.sha256)
        except PricingError as exc:
            raise PreflightError(f"{who}: {exc}") from None
        if schedules is not None:
            schedules[copy_path(c.pricing.sha256)] = data
        price = table.get(c.model)
    if manifest.budgets.total_cost_usd is not None and price is None:
        fix = ("the bundled price schedule has none: drop the cost budget, or write the model into a condition "
               "of your manifest whose pricing names a schedule that prices it") if built else \
            f"add it to a price schedule named in conditions.{i}.pricing"
        raise PreflightError(f"{at(f'conditions.{i}.model')}: a cost budget is set (budgets.total_cost_usd), "
                             f"but no price is known for {c.model} ({fix})")
    return key, price


def _platform_message(chosen, platform: str, game_path: Path, at) -> str:
    others = [b.name for b in BACKENDS.values() if b.runs(platform)]
    return (f"{at('emulator.name')}: {chosen.name} runs {', '.join(chosen.platforms)} games; "
            f"game definition {game_path} is for {platform}"
            + (f" (run it on {' or '.join(others)})" if others else ""))


def _refuse_wrong_platform(chosen, game_path: Path, at) -> None:
    """A manifest (or --emulator) asking a backend for a game of a platform it does not run is told
    so before anything else about it (a GBA game on PyBoy lists no PyBoy start state, and making one
    would not help). A definition that cannot be read is left to the check that reads it."""
    try:
        game = load_game_definition(game_path)
    except (GameDefinitionError, OSError):
        return
    if not chosen.runs(game.platform):
        raise PreflightError(_platform_message(chosen, game.platform, game_path, at))
