"""Task files (seed 003): a start state, a goal, budgets and a ruleset, run as an experiment of their own.

A task file (assets/tasks/*.yaml, docs/tasks.md) names a base experiment (its game, emulator and
agent settings), an optional start state of its own, a goal (a subset of the game's ladder, or a
probe predicate), budgets, the information track, a reference script (the scripted policy's moves)
and, for an episodic task (seed 004), an episode budget and a failure predicate.

A task compiles to two files the existing harness runs unchanged: a derived game definition (the
goal as the ladder's deciding rungs) and a manifest. Everything is checked before anything is
written: a bad task file is one line (TaskError), and nothing is written.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.battle.battle import BattleSettings, settings_problem
from engine.games.gamedef import Condition as ProbeTest
from engine.games.gamedef import GameDefinition, Instruction
from sessions.preflight.assets import ASSETS, BUNDLED_PREFIX, resolve
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition
from sessions.preflight.manifest import PLACEHOLDER, Manifest, ManifestError, PathRef, StartState, load_manifest
from sessions.preflight.yamlfile import load_yaml_model

TASKS_DIR = ASSETS / "tasks"
GOAL_ID = "GOAL"  # the rung a probe-predicate goal becomes in the derived definition
TaskId = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]


class TaskError(ValueError):
    """A task that cannot be used; one line naming the file and the problem. Nothing was written."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Goal(_Strict):
    """What success is: every listed rung of the game's ladder, or every test of a probe predicate."""

    milestones: Annotated[list[Annotated[str, Field(max_length=64)]], Field(min_length=1, max_length=256)] | None = None
    probe: Annotated[list[ProbeTest], Field(min_length=1, max_length=64)] | None = None
    name: Annotated[str, Field(max_length=200)] | None = None  # the probe goal's rung name (default: the title)

    @model_validator(mode="after")
    def _one(self) -> Goal:
        if (self.milestones is None) == (self.probe is None):
            raise ValueError("give milestones (a ladder subset) or probe (a predicate), exactly one")
        if self.milestones is not None and len(set(self.milestones)) != len(self.milestones):
            raise ValueError("milestones listed twice")
        return self


class TaskBudgets(_Strict):
    """The task's own budgets per trial; an absent one keeps the base experiment's."""

    accepted_actions: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    model_decisions: Annotated[int, Field(ge=1, le=10_000_000)] | None = None
    wall_time_minutes: Annotated[float, Field(gt=0, le=10_080)] | None = None
    tokens: Annotated[int, Field(ge=1, le=10**12)] | None = None
    total_cost_usd: Annotated[float, Field(gt=0, le=1_000_000)] | None = None


class Episodes(_Strict):
    """Seed 004: a trial of up to `budget` episodes. An episode ends when the failure predicate holds
    (every test), after `actions` accepted actions, or when the agent asks for a reset; the next one
    starts from the task's start state. Success within E episodes is the goal reached in episode <= E."""

    budget: Annotated[int, Field(ge=1, le=1000)]
    failure: Annotated[list[ProbeTest], Field(min_length=1, max_length=64)] | None = None
    actions: Annotated[int, Field(ge=1, le=10_000_000)] | None = None  # per episode

    @model_validator(mode="after")
    def _ends(self) -> Episodes:
        if self.budget > 1 and self.failure is None and self.actions is None:
            raise ValueError("an episode budget above 1 needs failure (a predicate) or actions (per episode): "
                             "else no episode ever ends before the trial does")
        return self


class TaskFile(_Strict):
    task_id: TaskId
    title: Annotated[str, Field(min_length=1, max_length=200)]
    # What the agent is told to do (agent.instruction of the experiment the task compiles to): the goal in
    # the game's words, the same for every condition, never a hidden-state fact.
    instruction: Instruction
    experiment: PathRef  # the base experiment: game, emulator and agent settings (its conditions are not used)
    # The task's start state per emulator backend (the base experiment's when absent), and the input
    # prefix that made it from the base's start state (documentation, checked by the tests).
    start_states: Annotated[dict[str, StartState], Field(min_length=1)] | None = None
    start_prefix: PathRef | None = None
    goal: Goal
    budgets: TaskBudgets = TaskBudgets()
    track: Literal["visual", "structured", "gameplay"] = "visual"  # the ruleset: what the agent is shown
    reference_script: PathRef | None = None  # the scripted policy's moves (a winning trace shows feasibility)
    reference_notes: PathRef | None = None  # its observations and memory operations by decision (script notes)
    episodes: Episodes | None = None
    # Seed 004's battle rules (engine.battle.battle): party limit, level cap, pool, difficulty, the default team
    battle: BattleSettings | None = None
    tags: Annotated[list[Annotated[str, Field(max_length=32)]], Field(max_length=16)] = []
    # The mechanical shortcuts the task permits (engine.loop.shortcuts): none (the default) for a
    # menu-operation task, where every press is the agent's. Frozen in the manifest, recorded in each result.
    shortcuts: Annotated[list[Literal["advance_dialogue", "choose_move", "use_item", "switch_to"]],
                         Field(max_length=4)] = []


@dataclass
class Task:
    """A task file, checked against its base experiment and game."""

    path: Path
    file: TaskFile
    sha256: str
    base_path: Path | None  # None for a template
    base: Manifest | None
    game: GameDefinition | None
    template: str | None  # why it cannot run yet (a template to fill in), else None

    @property
    def id(self) -> str:
        return self.file.task_id

    @property
    def episodic(self) -> bool:
        return self.file.episodes is not None and self.file.episodes.budget > 1


def load_task(path: Path) -> Task:
    """Read and check one task file: TaskError (one line) for anything wrong."""
    from sessions.preflight.safe_read import MAX_TEXT_BYTES, InputFileError, read_input

    try:
        data = read_input(path, what="task file", max_bytes=MAX_TEXT_BYTES)
    except InputFileError as exc:
        raise TaskError(str(exc)) from None
    try:
        task = load_yaml_model(path, TaskFile, TaskError, "task file")
    except TaskError:
        raise
    except (OSError, ValueError) as exc:
        raise TaskError(f"{path}: {exc}") from None
    sha = hashlib.sha256(data).hexdigest()
    try:
        base_path = resolve(task.experiment, path.parent).resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise TaskError(f"{path}: experiment: {exc}") from None
    if not base_path.is_file():
        raise TaskError(f"{path}: experiment: no such file {task.experiment}")
    try:
        base = load_manifest(base_path)
    except ManifestError as exc:
        if PLACEHOLDER in str(exc):  # a bring-your-own-ROM template: listed, not runnable
            template = Task(path, task, sha, base_path, None, _template_game(base_path), f"{task.experiment} is a "
                            "template (fill it in with `oakwatch state new`, then point the task at the filled-in "
                            "manifest)")
            if template.game is not None:
                _check_against_game(template)
            return template
        raise TaskError(f"{path}: experiment: {exc}") from None
    game_path = _ref_path(base.game.definition, base_path.parent, path, "experiment's game.definition")
    try:
        game = load_game_definition(game_path)
    except GameDefinitionError as exc:
        raise TaskError(f"{path}: {exc}") from None
    checked = Task(path, task, sha, base_path, base, game, None)
    _check_against_game(checked)
    _check_files(task, path)
    return checked


def _check_files(task: TaskFile, path: Path) -> None:
    """The reference script, start prefix, reference notes and start states the task names exist."""
    for ref, what in ((task.reference_script, "reference_script"), (task.start_prefix, "start_prefix"),
                      (task.reference_notes, "reference_notes")):
        if ref is not None and not _ref_path(ref, path.parent, path, what).is_file():
            raise TaskError(f"{path}: {what}: no such file {ref}")
    for name, entry in (task.start_states or {}).items():
        if not _ref_path(entry.state, path.parent, path, f"start_states.{name}.state").is_file():
            raise TaskError(f"{path}: start_states.{name}.state: no such file {entry.state}")


def _template_game(base_path: Path) -> GameDefinition | None:
    """A template's game definition (its ladder is what a template task's goal names), where it reads."""
    try:
        raw = yaml.safe_load(base_path.read_text())
        return load_game_definition(resolve(raw["game"]["definition"], base_path.parent))
    except Exception:  # a template whose game does not read is still listed, unchecked
        return None


def _ref_path(ref: str, base: Path, source: Path, what: str) -> Path:
    try:
        return resolve(ref, base).resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise TaskError(f"{source}: {what}: {exc}") from None


def _check_against_game(task: Task) -> None:
    f, game, where = task.file, task.game, task.path
    ids = [m.id for m in game.milestones]
    if f.goal.milestones is not None:
        unknown = [m for m in f.goal.milestones if m not in ids]
        if unknown:
            raise TaskError(f"{where}: goal.milestones: {', '.join(unknown)} not on {game.id}'s ladder "
                            f"({', '.join(ids)})")
    if hidden := game.hidden_in(f.instruction):
        raise TaskError(f"{where}: instruction names hidden state ({', '.join(hidden)}): say the objective as the "
                        f"player sees it")
    _check_tests(f, game, where)
    _check_shortcuts(f, game, where)
    if f.battle is not None and (problem := settings_problem(f.battle, game.battle, game.id)):
        raise TaskError(f"{where}: battle: {problem}")
    if task.base is not None and f.start_states is not None and task.base.emulator.name not in f.start_states:
        raise TaskError(f"{where}: start_states lists no state for the experiment's emulator "
                        f"{task.base.emulator.name}")
    _check_derived(f, game, where)


def _check_derived(f: TaskFile, game: GameDefinition, where: Path) -> None:
    """The definition the task runs with must itself be valid: a goal whose memory a track still reads
    (a party or inventory view, not only a listed field) would be told to the agent."""
    try:
        derived_game(f, game)
    except ValidationError as exc:
        first = exc.errors()[0]
        message = str(first.get("ctx", {}).get("error") or first["msg"]).removeprefix("Value error, ")
        raise TaskError(f"{where}: the goal cannot be hidden from {game.id}'s tracks: {message}") from None


def _check_tests(f: TaskFile, game: GameDefinition, where: Path) -> None:
    """Each goal probe and failure test names a field the game probes, tested as its kind (bytes or number)."""
    tests = list(f.goal.probe or []) + list(f.episodes.failure or [] if f.episodes else [])
    known = set(game.fields) | set(game.pointers)
    for t in tests:
        if t.field not in known:
            raise TaskError(f"{where}: a goal or failure test names field {t.field!r}, which {game.id} does not "
                            f"probe")
        is_bytes = game.is_bytes(t.field)
        if is_bytes != (t.contains is not None or t.lacks is not None):
            kind = "bytes: test it with contains or lacks" if is_bytes else "a number: contains/lacks are for bytes"
            raise TaskError(f"{where}: field {t.field!r} holds {kind}")


def _check_shortcuts(f: TaskFile, game: GameDefinition, where: Path) -> None:
    """Each shortcut is one the game defines and reads none of the fields the goal reads.
    (Called after the goal's rungs are known to be on the ladder.)"""
    lacking = [s for s in f.shortcuts if s not in game.shortcuts]
    if lacking:
        raise TaskError(f"{where}: shortcuts: {', '.join(lacking)} is not a shortcut {game.id} defines (it defines: "
                        f"{', '.join(game.shortcuts) or 'none'})")
    hidden = goal_fields(f, game)
    for name in f.shortcuts:
        if read := sorted(set(game.shortcuts[name].fields()) & hidden):
            raise TaskError(f"{where}: shortcuts: {name} reads {', '.join(read)}, which the goal reads and the agent "
                            f"may not learn")


def catalog(folder: Path = TASKS_DIR) -> list[Task]:
    """Every task file in a folder (sorted by name); the first bad one raises TaskError."""
    if not folder.is_dir():
        raise TaskError(f"{folder}: not a folder of task files")
    tasks = [load_task(p) for p in sorted(folder.glob("*.yaml"))]
    seen: dict[str, Path] = {}
    for t in tasks:
        if t.id in seen:
            raise TaskError(f"{t.path}: task_id {t.id} is also {seen[t.id]}'s")
        seen[t.id] = t.path
    return tasks


# -- compiling a task into what the harness runs --------------------------------------------------

def goal_fields(task: TaskFile, game: GameDefinition) -> set[str]:
    """The probe fields the goal reads: hidden from the structured track, like every rung's."""
    if task.goal.probe is not None:
        return {t.field for t in task.goal.probe}
    return {c.field for m in game.milestones if m.id in task.goal.milestones for c in m.all}


def derived_game(task: TaskFile, game: GameDefinition) -> GameDefinition:
    """The game definition with the goal as the ladder's deciding rungs: the goal's rungs required (the
    last one final), every other rung optional; or, for a probe goal, one rung GOAL, final, with the
    others optional. Path-efficiency yardsticks were solved from the game's own start: dropped (null)."""
    milestones = [m.model_dump(mode="json") for m in game.milestones]
    if task.goal.milestones is not None:
        wanted = set(task.goal.milestones)
        for m in milestones:
            m["required"] = m["id"] in wanted
        final = [m["id"] for m in milestones if m["id"] in wanted][-1]
    else:
        for m in milestones:
            m["required"] = False
        milestones.append({"id": GOAL_ID, "name": task.goal.name or task.title, "points": 1, "required": True,
                           "all": [t.model_dump(mode="json", exclude_none=True) for t in task.goal.probe]})
        final = GOAL_ID
    data = game.model_dump(mode="json")
    data.update(milestones=milestones, final_milestone=final, optimal_presses=None, optimal_presses_for=None,
                instruction=task.instruction)
    _hide_from_tracks(data, game, goal_fields(task, game))
    data["long_horizon"] = None  # its final rung and rubric belong to the whole game, not the task
    # Only the shortcuts the task permits: one it does not (a menu task permits none) may read a goal field.
    if data.get("shortcuts"):
        data["shortcuts"] = {k: v for k, v in data["shortcuts"].items() if k in task.shortcuts}
    return GameDefinition.model_validate(data)


def _hide_from_tracks(data: dict, game: GameDefinition, hidden: set[str]) -> None:
    """Drop the goal's fields from the structured and gameplay tracks (in `data`, a dumped definition),
    and the gameplay track's press outcomes (and a grid terrain, centred on the player) when they would
    tell one of them."""
    for key in ("structured", "gameplay"):
        track = (data.get("tracks") or {}).get(key)
        if track and track.get("fields"):
            track["fields"] = [f for f in track["fields"] if f not in hidden]
    gameplay = (data.get("tracks") or {}).get("gameplay")
    if gameplay and game.position is not None:
        _hide_position(gameplay, game.position, hidden)


def _hide_position(gameplay: dict, position, hidden: set[str]) -> None:
    """The gameplay track's parts that tell the player's position: a press's result (position, facing
    and menu) and a grid terrain (centred on the player), dropped when the goal reads what they tell."""
    outcomes = gameplay.get("outcomes")
    if outcomes and {outcomes.get("facing"), outcomes.get("menu"), *position.model_dump().values()} & hidden:
        gameplay["outcomes"] = None
    terrain = gameplay.get("terrain")
    if terrain and terrain.get("kind") == "grid" and {position.x, position.y} & hidden:
        gameplay["terrain"] = None


def _absolute(ref: str, base: Path) -> str:
    """A file reference that reads the same from any folder: bundled names stay, paths become absolute."""
    return ref if ref.startswith(BUNDLED_PREFIX) else str(resolve(ref, base).resolve())


@dataclass(frozen=True)
class PolicyChoice:
    """Who plays the batch: the task's reference script, a seeded random policy, a model, or your own agent
    over MCP (`policy: cli`, `agent`: its command with {mcp_url} or {mcp_config}, launched per trial)."""

    policy: Literal["scripted", "random", "model", "cli"]
    seed: int = 0
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api: str | None = None
    agent: str | None = None
    allow_file_and_shell_tools: bool | None = None  # policy cli: the condition's permission (docs/mcp.md)
    client_reads: tuple[str, ...] = ()  # policy cli: what the client may read (its installation, the data)
    env: tuple[str, ...] = ()  # policy cli: the variables it is given


def task_manifest(task: Task, choice: PolicyChoice, game_ref: str, trials: int,
                  tokens_left: int | None, cost_left: float | None) -> Manifest:
    """The experiment a task is: the base's game, emulator and agent settings, the task's start state,
    budgets and track, one condition for the chosen policy, and the batch's remaining ceiling as the
    experiment's cost ceiling and the trial's token budget (whichever is lower)."""
    f, base = task.file, task.base
    data = base.model_dump(mode="json")
    _set_game(data["game"], task, game_ref)
    data["experiment_id"] = f.task_id
    data["created_utc"] = None
    data["variants"] = data.get("variants")  # a base on a seeded variant (a suite of one) keeps it
    data["agent"]["information_track"] = f.track
    data["agent"]["shortcuts"] = list(f.shortcuts)
    data["agent"]["instruction"] = f.instruction  # the task's objective, not the base's ladder's
    _set_budgets(data["budgets"], f, tokens_left, cost_left)
    data["trials"] = {"per_condition": trials, "order": "sequential",
                      "restore_initial_state_before_each_trial": True}
    data["conditions"] = [_condition(task, choice)]
    if choice.policy == "cli":  # the agent's tools: a battle task's battle tools, else the buttons
        data["agent"]["ruleset"] = "battle" if f.battle is not None else "human"
    if f.episodes is not None:
        data["episodes"] = f.episodes.model_dump(mode="json", exclude_none=True)
        for t in data["episodes"].get("failure", []):
            for k in [k for k, v in t.items() if v is None]:
                t.pop(k)
    if f.battle is not None:
        data["battle"] = compiled_rules(task)
    try:
        return Manifest.model_validate(data)
    except ValueError as exc:
        raise TaskError(f"{task.path}: cannot run with these options: {exc}") from None


def _set_game(g: dict, task: Task, game_ref: str) -> None:
    """The base's game section (dumped) with the task's definition, and every file reference absolute:
    the task's own start states (read beside the task file) or the base's."""
    bdir, tdir = task.base_path.parent, task.path.parent
    g["definition"] = game_ref
    g["rom"] = _absolute(g["rom"], bdir)
    if task.file.start_states is not None:
        g["start_states"] = {k: v.model_dump(mode="json") for k, v in task.file.start_states.items()}
        states_base = tdir
    else:
        states_base = bdir
    for entry in g["start_states"].values():
        entry["state"] = _absolute(entry["state"], states_base)


def _set_budgets(budgets: dict, f: TaskFile, tokens_left: int | None, cost_left: float | None) -> None:
    """The base's budgets (dumped) overridden by the task's, capped by what the batch's ceiling leaves."""
    for key, value in f.budgets.model_dump().items():
        if value is not None:
            budgets[key] = value
    if tokens_left is not None:
        budgets["tokens"] = min(budgets["tokens"] or tokens_left, tokens_left)
    if cost_left is not None:
        budgets["experiment_cost_usd"] = min(budgets["experiment_cost_usd"] or cost_left, cost_left)


def compiled_rules(task: Task) -> dict | None:
    """A battle task's rules as its manifest freezes them: the file's, named by the file's sha256."""
    if task.file.battle is None:
        return None
    return {**task.file.battle.model_dump(mode="json"), "task_sha256": task.sha256}


def _condition(task: Task, choice: PolicyChoice) -> dict:
    f = task.file
    if choice.policy == "scripted":
        if f.reference_script is None:
            raise TaskError(f"{task.path}: no reference_script: the scripted policy has no moves for this task")
        cond = {"id": "scripted", "policy": "scripted", "script": _absolute(f.reference_script, task.path.parent),
                "actions_per_decision": 1}
        if f.reference_notes is not None:
            cond["script_notes"] = _absolute(f.reference_notes, task.path.parent)
        return cond
    if choice.policy == "random":
        return {"id": "random", "policy": "random", "seed": choice.seed, "actions_per_decision": 1}
    if choice.policy == "cli":
        cond = {"id": "cli", "policy": "cli", "command": shlex.split(choice.agent or "")}
        if choice.allow_file_and_shell_tools:
            cond["allow_file_and_shell_tools"] = True
        if choice.client_reads:
            cond["client_reads"] = list(choice.client_reads)
        if choice.env:
            cond["env"] = list(choice.env)
        return cond
    cond = {"id": "model", "policy": "model", "model": choice.model, "provider": choice.provider}
    if choice.base_url is not None:
        cond["base_url"] = choice.base_url
    if choice.api is not None:
        cond["api"] = choice.api
    return cond


def write_task_inputs(task: Task, choice: PolicyChoice, where: Path, trials: int, tokens_left: int | None,
                      cost_left: float | None) -> Path:
    """Write the task's derived definition and manifest into `where` (a new folder); returns the manifest.
    The manifest names the definition as ../../<where's last two parts>/game.yaml: the same file from
    the task folder and from an experiment folder two levels under the batch (batch/runs/<id>)."""
    game = derived_game(task.file, task.game)
    ref = f"../../{where.parent.name}/{where.name}/game.yaml"
    manifest = task_manifest(task, choice, ref, trials, tokens_left, cost_left)
    where.mkdir(parents=True)
    (where / "game.yaml").write_text(yaml.safe_dump(game.model_dump(mode="json"), sort_keys=False))
    path = where / "manifest.yaml"
    path.write_text(manifest.to_yaml())
    (where / "task.yaml").write_bytes(task.path.read_bytes())  # the task file as run
    return path
