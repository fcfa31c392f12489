"""`oakwatch replay`: re-run a trial's recorded inputs from the recorded start state.

No policy and no model: the emulator gets exactly the logged button presses with the
manifest's timing. Every action's frame hash and frame numbers, every decision's milestones,
every award's frame, and the recorded reason the trial ended (where the emulator can decide
it) must come out the same. The trace is streamed: memory stays flat however long the trial.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.battle.episodes import EpisodeRules
from engine.emulators.emulator import Timing, frame_sha256
from engine.games.gamedef import GameDefinition
from engine.games.goals import GOAL_MET, GoalCheck
from engine.games.ladder import FINAL, FINAL_SKIPPED, Ladder
from engine.games.probe import Probe
from engine.loop.records import InputLine, TraceLine
from engine.loop.routes import RouteTracker
from sessions.audit.package import GAME_COPY, PACKAGE_MANIFEST, REDACTED, is_package
from sessions.evidence import layout
from sessions.evidence.reader import FormatProblem, TrialReader
from sessions.preflight.assets import resolve
from sessions.preflight.experiment import PreflightError, sha256_file
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition
from sessions.preflight.manifest import Manifest, ManifestError, load_manifest


class Divergence(RuntimeError):
    """The replay differs from the record; the message names where."""


@dataclass
class LoadedTrial:
    reader: TrialReader
    manifest: Manifest
    rom_path: Path
    state: bytes
    game: GameDefinition
    timing: Timing
    rom: bytes  # as hashed: the replay plays exactly these bytes
    first_frame: str | None = None  # a suite variant's pinned first frame (else the manifest's)


def load_trial(trial_dir: Path, rom: Path | None = None, state: Path | None = None) -> LoadedTrial:
    """Everything a replay needs, checked; PreflightError (bad input) if any is missing."""
    from sessions.evidence.folder_kind import trial_problem

    problem = trial_problem(trial_dir)
    if problem is not None:
        raise PreflightError(problem)
    folder = trial_dir.resolve().parent.parent
    package = is_package(folder)  # the publishable package: its manifest is redacted (docs/report.md)
    try:
        manifest = load_manifest(folder / (PACKAGE_MANIFEST if package else layout.MANIFEST))
    except ManifestError as exc:
        raise PreflightError(str(exc)) from None
    g = manifest.game
    if manifest.variants:
        return _load_variant_trial(trial_dir, folder, manifest, rom)
    if rom is None and g.rom == REDACTED:
        raise PreflightError(f"the package does not say where the ROM is (its path was redacted): give it with "
                             f"--rom (SHA-256 {g.rom_sha256})")
    rom_path = rom or resolve(g.rom, folder)
    rom_bytes, rom_sha = sha256_file(rom_path, "ROM")
    if rom_sha != g.rom_sha256:
        raise PreflightError(f"ROM {rom_path} has SHA-256 {rom_sha}, the experiment used {g.rom_sha256}")
    entry = _start_entry(manifest, folder)
    state_bytes = _start_state(entry, state, folder)
    definition = folder / GAME_COPY if package and g.definition == REDACTED else resolve(g.definition, folder)
    try:
        game = load_game_definition(definition)
    except GameDefinitionError as exc:
        raise PreflightError(str(exc)) from None
    timing = Timing(manifest.emulator.press_frames, manifest.emulator.settle_frames)
    return LoadedTrial(TrialReader(trial_dir), manifest, rom_path, state_bytes, game, timing, rom_bytes)


def _start_entry(manifest: Manifest, folder: Path):
    """The manifest's start state for its emulator, which must be installed at the version it ran on."""
    from engine.emulators.backends import BACKENDS

    chosen = BACKENDS[manifest.emulator.name]
    installed = chosen.version()
    if installed is None:
        raise PreflightError(chosen.missing_message())
    entry = manifest.start_state()
    if entry is None:
        raise PreflightError(f"{folder / layout.MANIFEST}: no start state for {manifest.emulator.name} in "
                             f"game.start_states")
    if installed != (manifest.emulator.version or entry.emulator_version):
        raise PreflightError(f"the experiment ran on {manifest.emulator.name} "
                             f"{manifest.emulator.version or entry.emulator_version}, but {installed} is "
                             f"installed: a replay needs the same emulator version")
    return entry


def _start_state(entry, state: Path | None, folder: Path) -> bytes:
    """The start state's bytes (`--state`, or the manifest's path), checked against its SHA-256."""
    if state is None and entry.state == REDACTED:
        raise PreflightError(f"the package does not say where the start state is (its path was redacted): give it "
                             f"with --state (SHA-256 {entry.sha256})")
    data, state_sha = sha256_file(state or resolve(entry.state, folder), "initial state")
    if state_sha != entry.sha256:
        raise PreflightError(f"initial state has SHA-256 {state_sha}, the experiment used {entry.sha256}")
    return data


def _load_variant_trial(trial_dir: Path, folder: Path, manifest: Manifest, rom: Path | None) -> LoadedTrial:
    """A suite trial: its variant's ROM (`--rom`, or remade from a seen variant's seed) and the start
    state made from it the bundled way, both checked against the hashes the trial recorded."""
    from engine.emulators.backends import BACKENDS
    from sessions.variants.suites import variant_index
    from sessions.variants.variant_files import make_start_state, start_yaml
    from sessions.variants.variants import VariantError, make_variant

    reader = TrialReader(trial_dir)
    try:
        genesis, _ = reader.genesis()
    except FormatProblem as exc:
        raise PreflightError(str(exc)) from None
    i = variant_index(genesis.trial, manifest.trials.per_condition)
    if not 0 <= i < len(manifest.variants):
        raise PreflightError(f"{trial_dir}: trial {genesis.trial} has no variant in the manifest's suite")
    entry = manifest.variants[i]
    if rom is not None:
        rom_bytes, rom_sha = sha256_file(rom, "ROM")
        rom_path = rom
    elif entry.seed is not None:
        base, _ = sha256_file(resolve(manifest.game.rom, folder), "ROM")
        try:
            rom_bytes = make_variant(entry.seed, base).rom
        except VariantError as exc:
            raise PreflightError(str(exc)) from None
        rom_path, rom_sha = folder / f"variant-{i}.gb", hashlib.sha256(rom_bytes).hexdigest()
    else:
        raise PreflightError(f"{trial_dir} played held-out variant {i} (ROM {genesis.rom_sha256}): give its ROM "
                             "with --rom (`oakwatch cartridge variant` writes it)")
    if rom_sha != genesis.rom_sha256:
        raise PreflightError(f"ROM {rom_path} has SHA-256 {rom_sha}, the trial played {genesis.rom_sha256}")
    chosen = BACKENDS[manifest.emulator.name]
    if chosen.version() is None:
        raise PreflightError(chosen.missing_message())
    state, first, _ = make_start_state(manifest.emulator.name, rom_bytes, int(start_yaml()["boot_frames"]))
    if hashlib.sha256(state).hexdigest() != genesis.initial_state_sha256:
        raise PreflightError(f"the start state made from {rom_path} is not the one the trial recorded "
                             f"(another {manifest.emulator.name} version?)")
    try:
        game = load_game_definition(resolve(manifest.game.definition, folder))
    except GameDefinitionError as exc:
        raise PreflightError(str(exc)) from None
    game = game.model_copy(update={"rom_sha256": rom_sha, "optimal_presses": entry.optimal_presses,
                                   "optimal_presses_for": rom_sha})
    timing = Timing(manifest.emulator.press_frames, manifest.emulator.settle_frames)
    return LoadedTrial(reader, manifest, rom_path, state, game, timing, rom_bytes, entry.first_frame_sha256 or first)


def replay_trial(trial_dir: Path, rom: Path | None = None, progress: Callable[[int], None] | None = None, *,
                 state: Path | None = None) -> dict:
    """Replay and check; return counts. Raise Divergence at the first mismatch and
    FormatProblem for a malformed record."""
    from engine.emulators.backends import BACKENDS

    loaded = load_trial(trial_dir, rom, state)
    emulator = BACKENDS[loaded.manifest.emulator.name].open(loaded.rom, str(loaded.rom_path), loaded.game.platform)
    try:
        return replay_records(emulator, loaded, progress)
    finally:
        emulator.close()


def _start_decision(emulator, loaded: LoadedTrial, t: TraceLine, last: TraceLine | None, first: str) -> bool:
    """The decision starts where the trace says; True when an episode ended and the start state was restored."""
    if last is None and t.frame_sha256 != first:
        raise Divergence(f"start state: first frame is {first}, the trace recorded {t.frame_sha256}")
    if last is None or last.episode_end is None:
        return False
    emulator.restore(loaded.state)
    again = frame_sha256(emulator.frame())
    if again != t.frame_sha256:
        raise Divergence(f"decision {t.decision_id}: episode {t.episode} restored to frame {again[:16]}…, the trace "
                         f"recorded {t.frame_sha256[:16]}…")
    return True


def _battle_writes(emulator, reader: TrialReader, t: TraceLine) -> bool:
    """A battle call's RAM writes, made before its presses; True when there were any."""
    if t.battle is None or not t.battle.get("writes"):
        return False
    try:
        writes = [(int(w["address"]), bytes(w["bytes"])) for w in t.battle["writes"]]
    except (KeyError, TypeError, ValueError):
        raise FormatProblem(f"{reader.where(layout.TRACE)}: decision {t.decision_id}: "
                            f"malformed battle writes") from None
    for address, data in writes:
        emulator.write(address, data)
    return True


def _check_press(did: int, row: InputLine, step) -> None:
    """A replayed press gives the recorded frame, pressed and captured at the recorded frames."""
    if step.frame_sha256 != row.frame_sha256:
        raise Divergence(f"decision {did}, action {row.index} ({row.action}): frame {step.frame_sha256[:16]}… "
                         f"differs from the recorded {row.frame_sha256[:16]}… at frame {step.frame_index}")
    press = step.press_frame if step.press_frame >= 0 else None
    if (step.frame_index, press) != (row.capture_frame, row.press_frame):
        raise Divergence(f"decision {did}, action {row.index} ({row.action}): pressed at frame {press} and "
                         f"captured at {step.frame_index}, the record says {row.press_frame} and {row.capture_frame}")


def _check_decision_end(t: TraceLine, failed: bool, ladder: Ladder, emulator) -> None:
    """After its presses the decision's episode failure, milestones and frame are the recorded ones."""
    did = t.decision_id
    if t.episode_end == "failure" and not failed:
        raise Divergence(f"decision {did}: the trace ends episode {t.episode} by its failure predicate, which "
                         f"does not hold in the replay")
    if ladder.reached != t.milestones_after:
        raise Divergence(f"decision {did}: milestones {ladder.reached} differ from the recorded "
                         f"{t.milestones_after}")
    if t.result_frame_index != emulator.frame_index:
        raise Divergence(f"decision {did}: ended at frame {emulator.frame_index}, the trace says "
                         f"{t.result_frame_index}")


@dataclass
class _Replay:
    """A replay under way: the emulator, what it has reached, and the trial's rules (ladder, goal, routes,
    an episode's failure)."""

    emulator: object
    loaded: LoadedTrial
    probe: Probe
    sample: dict
    ladder: Ladder
    goal: GoalCheck | None
    routes: RouteTracker
    failure: Callable | None  # an episodic trial's failure predicate (engine.battle.episodes)
    actions: int = 0
    looped: bool = False
    failed: bool = False
    awards: dict[str, tuple[int, int, str]] = field(default_factory=dict)
    proven: list = field(default_factory=list)  # the awards themselves (engine.ladder), for recover

    def start(self, t: TraceLine, last: TraceLine | None, first: str) -> None:
        """The decision starts where the trace says (the start state again after an episode's end)."""
        if _start_decision(self.emulator, self.loaded, t, last, first):
            self.sample = self.probe(self.emulator.read_range)
            self.routes.progress()
        self.failed = False

    def decision(self, t: TraceLine, rows: list[InputLine]) -> None:
        """One recorded decision, once started: its battle writes, its presses, where it ends."""
        emulator, reader = self.emulator, self.loaded.reader
        if _battle_writes(emulator, reader, t):
            self.sample = self.probe(emulator.read_range)
        if len(rows) != t.accepted_actions:
            raise FormatProblem(f"{reader.where(layout.INPUTS)}: decision {t.decision_id} accepted "
                                f"{t.accepted_actions} actions, the log has {len(rows)}")
        for row in rows:
            self.press(t.decision_id, row)
        _check_decision_end(t, self.failed, self.ladder, emulator)

    def press(self, did: int, row: InputLine) -> None:
        """One recorded press, replayed and checked; the ladder, the goal, the routes and the failure follow it."""
        game = self.loaded.game
        before = _position(game, self.sample)
        step = self.emulator.step(row.action, self.loaded.timing, self.probe)
        self.actions += 1
        _check_press(did, row, step)
        where = {"decision_id": did, "frame_index": step.frame_index, "frame_sha256": step.frame_sha256}
        for award in self.ladder.update(step.ram_before_last, step.ram_last, **where):
            self.awards[award.id] = (did, step.frame_index, step.frame_sha256)
            self.proven.append(award)
            self.routes.progress()
        if self.goal is not None:
            self.goal.update(step.ram_before_last, step.ram_last, **where)
        if any(self.sample.get(f) != step.ram_last.get(f) for f in game.route_resets):
            self.routes.progress()
        self.failed = self.failure is not None and game.is_ready(step.ram_last) and self.failure(
            step.ram_before_last, step.ram_last)
        self.sample = step.ram_last
        if before is not None:
            self.looped = self.routes.record(before, row.action, _position(game, self.sample),
                                             self.ladder.awards) or self.looped


def _start_replay(emulator, loaded: LoadedTrial) -> tuple[_Replay, str]:
    """The start state restored and checked against the pinned first frame; (the replay, that frame)."""
    game, m = loaded.game, loaded.manifest
    probe = Probe(game)
    emulator.restore(loaded.state)
    first = frame_sha256(emulator.frame())
    pinned = loaded.first_frame if loaded.first_frame is not None else m.start_state().first_frame_sha256
    if pinned and pinned != first:
        raise Divergence(f"start state: first frame is {first}, the manifest recorded {pinned}")
    sample = probe(emulator.read_range)
    ladder = Ladder(game, sample)
    goal = GoalCheck(m.game.goal, game, sample) if m.game.goal and m.game.goal in game.goals else None
    routes = RouteTracker.for_game(game, m.budgets.unrecoverable_loop_repeats)
    # An episodic trial (engine.battle.episodes): after an episode's last decision the start state is restored.
    failure = EpisodeRules(m.episodes.budget, tuple(m.episodes.failure or ())).failure_test() if m.episodes else None
    replay = _Replay(emulator, loaded, probe, sample, ladder, goal, routes, failure)
    return replay, first


def replay_records(emulator, loaded: LoadedTrial, progress: Callable[[int], None] | None = None) -> dict:
    reader = loaded.reader
    replay, first = _start_replay(emulator, loaded)
    groups = reader.inputs_by_decision()
    pending: tuple[int, list[InputLine]] | None = next(groups, None)
    last: TraceLine | None = None
    for t in reader.trace():
        replay.start(t, last, first)
        rows: list[InputLine] = []
        if pending is not None and pending[0] == t.decision_id:
            rows = pending[1]
            pending = next(groups, None)
        replay.decision(t, rows)
        last = t
        if progress:
            progress(t.decision_id)
    if pending is not None:
        raise FormatProblem(f"{reader.where(layout.INPUTS)}: inputs for decision {pending[0]}, which the trace "
                            f"does not have")
    _check_ending(reader, last, replay.ladder, replay.looped, replay.actions, replay.awards, loaded.manifest,
                  replay.goal)
    return {"decisions": last.decision_id if last else 0, "actions": replay.actions,
            "milestones": replay.ladder.reached, "awards": replay.proven,
            "pre_satisfied": sorted(replay.ladder.pre_satisfied)}


def _check_ending(reader: TrialReader, last: TraceLine | None, ladder: Ladder, looped: bool, actions: int,
                  awards: dict, manifest: Manifest, goal: GoalCheck | None = None) -> None:
    """Where the emulator alone decides why a trial ended, the replay must end the same way."""
    if not reader.exists(layout.RESULT):
        return
    result, _ = reader.result()
    if manifest.game.goal:  # with a goal, it alone ends a trial as a success (engine.games.goals)
        _check_goal_ending(result, goal, last)
    expected = ladder.ending if not manifest.game.goal else None  # engine.games.ladder: final-milestone, ... or None
    _check_reason(result, expected, looped, actions, manifest, last)
    if not result.recovered and result.pre_satisfied != sorted(ladder.pre_satisfied):
        raise Divergence(f"the replay's start state satisfies {sorted(ladder.pre_satisfied)}; the result says "
                         f"{result.pre_satisfied}")
    _check_awards(result, awards, last)


def _check_reason(result, expected: str | None, looped: bool, actions: int, manifest: Manifest,
                  last: TraceLine | None) -> None:
    """The termination reason, where the replay decides it: the ladder's end, a loop, the action budget."""
    reason = result.termination_reason
    if reason in (FINAL, FINAL_SKIPPED) and reason != expected:
        raise Divergence(f"the result claims {reason}; the replay " + (
            f"ends the ladder with {expected}" if expected else "never reaches the end of the ladder"))
    if reason == "unrecoverable-loop" and not looped:
        raise Divergence("the result claims an unrecoverable loop; the replay has none")
    if reason == "budget:accepted_actions" and actions != manifest.budgets.accepted_actions:
        raise Divergence(f"the result claims the action budget ({manifest.budgets.accepted_actions}); "
                         f"the replay pressed {actions}")
    if expected is not None and reason != expected and result.outcome in ("success", "game-failure") \
            and last is not None:
        raise Divergence(f"the replay reaches the end of the ladder ({expected}); the result says {reason}")


def _check_awards(result, awards: dict, last: TraceLine | None) -> None:
    """Every award the result lists is where the replay makes it, and a sealed result lists every one."""
    for m in result.milestones:
        if awards.get(m.id) != (m.decision_id, m.frame_index, m.frame_sha256):
            raise Divergence(f"{m.id}: the result's evidence (decision {m.decision_id}, frame {m.frame_index}) "
                             f"is not where the replay awards it")
    unlisted = set(awards) - {m.id for m in result.milestones}
    if unlisted and result.chain is not None and result.last_decision == (last.decision_id if last else 0):
        raise Divergence(f"the replay awards {sorted(unlisted)}, which the result does not list")


def _check_goal_ending(result, goal: GoalCheck | None, last: TraceLine | None) -> None:
    """The replay meets the run's goal where the result says, or, for a valid trial, nowhere if it says so."""
    met = goal.result if goal is not None else None
    if result.termination_reason == GOAL_MET and met is None:
        raise Divergence("the result claims goal-met; the replay never meets the goal")
    if result.goal is not None and result.goal.met:
        if met is None or (met.decision_id, met.frame_index, met.frame_sha256, met.species) != (
                result.goal.decision_id, result.goal.frame_index, result.goal.frame_sha256, result.goal.species):
            raise Divergence(f"the result's goal evidence (decision {result.goal.decision_id}, frame "
                             f"{result.goal.frame_index}, species {result.goal.species}) is not where the replay "
                             f"meets the goal" + (f" (decision {met.decision_id}, frame {met.frame_index})" if met
                                                  else ""))
    elif met is not None and result.outcome in ("success", "game-failure") and last is not None \
            and met.decision_id <= last.decision_id:
        raise Divergence(f"the replay meets the goal at decision {met.decision_id}; the result says "
                         f"{result.termination_reason}")


def _position(game: GameDefinition, sample) -> tuple[int, int, int] | None:
    pos = game.position
    if pos is None or sample is None:
        return None
    return (int(sample[pos.map]), int(sample[pos.x]), int(sample[pos.y]))
