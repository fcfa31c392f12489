"""Seed 004's difficulty knobs: a knobs file derives a harder task file from a battle task.

A knobs file (docs/tasks.md, "Difficulty knobs") names a base task and the knobs: scale the level cap
down by a percentage, shrink the party limit, exclude named species, moves or items. The derived task
is the base's file with a new task id, its battle rules changed, and `battle.derived` recording the
base task's id and sha256 and the knobs verbatim, so every result of the derived task (its rules are in
each result's provenance.battle) says where it came from; the derived file's own sha256 is the batch
ledger's, as for any task. The base's reference script is not carried over: it showed the base feasible,
not the derived task.

Everything is checked before anything is written: a knob that makes an impossible task (a cap below the
pool's minimum level, an empty pool, a limit above the base's) is one line (KnobsError), nothing written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, ConfigDict, Field

from engine.battle.battle import BattleSettings, Derived, Knobs, settings_problem
from sessions.preflight.assets import BUNDLED_PREFIX
from sessions.preflight.yamlfile import load_yaml_model
from sessions.tasks.tasks import TASKS_DIR, TaskError, TaskFile, TaskId, catalog, load_task


class KnobsError(ValueError):
    """A knobs file that cannot derive a task; one line. Nothing was written."""


class KnobsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    base: Annotated[str, Field(min_length=1, max_length=500)]  # a task id of the catalog, or a task file
    task_id: TaskId
    title: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    knobs: Knobs


def _ref_keys(data: dict) -> list[tuple[dict, str]]:
    """The task file's file references, as (mapping, key) pairs to rewrite."""
    out = [(data, k) for k in ("experiment", "start_prefix", "reference_script", "reference_notes") if data.get(k)]
    out += [(entry, "state") for entry in (data.get("start_states") or {}).values()]
    return out


def _rebase(ref: str, old: Path, new: Path) -> str:
    """A reference read from `old` (a folder), as read from `new`: bundled names stay, paths are relative."""
    if ref.startswith(BUNDLED_PREFIX) or os.path.isabs(ref):
        return ref
    return os.path.relpath((old / ref).resolve(), new.resolve())


def derive_rules(rules: BattleSettings, knobs: Knobs, base_id: str, base_sha: str,
                 all_species: list[str] | None) -> BattleSettings:
    """The base rules turned by the knobs (KnobsError for an impossible task)."""
    data = rules.model_dump(mode="json")
    if knobs.level_cap_down_percent is not None:
        if rules.level_cap is None:
            raise KnobsError("level_cap_down_percent: the base task has no level cap to scale down")
        cap = rules.level_cap * (100 - knobs.level_cap_down_percent) // 100  # rounded down: never easier
        if cap < 1:
            raise KnobsError(f"level_cap_down_percent {knobs.level_cap_down_percent}: the cap "
                             f"{rules.level_cap} scales to {cap}, below level 1")
        data["level_cap"] = cap
    if knobs.party_limit is not None:
        if knobs.party_limit > rules.party_limit:
            raise KnobsError(f"party_limit {knobs.party_limit} is above the base task's {rules.party_limit}: "
                             f"the knob only shrinks it")
        data["party_limit"] = knobs.party_limit
    pool, ex = data["pool"], knobs.exclude
    for what, names in (("species", ex.species), ("moves", ex.moves), ("items", ex.items)):
        if not names:
            continue
        current = pool.get(what)
        if current is None:
            if what != "species" or all_species is None:
                raise KnobsError(f"exclude.{what}: the base task's pool allows every {what} of the game; list "
                                 f"them in its pool first")
            current = all_species
        if missing := sorted(set(names) - set(current)):
            raise KnobsError(f"exclude.{what}: {', '.join(missing)} not in the base task's pool")
        pool[what] = [n for n in current if n not in names]
    if pool.get("min_levels"):
        pool["min_levels"] = {k: v for k, v in pool["min_levels"].items() if k not in ex.species}
    if data.get("team") is not None:
        data["team"] = _fit_team(data["team"], data, ex)
    data["derived"] = Derived(base_task=base_id, base_sha256=base_sha, knobs=knobs).model_dump(mode="json")
    try:
        derived = BattleSettings.model_validate(data)
    except ValueError as exc:
        raise KnobsError(f"the derived rules do not hold: {exc}") from None
    return derived


def _fit_team(team: list[dict], rules: dict, ex) -> list[dict]:
    """The base's default team under the derived rules: levels down to the new cap, excluded moves and
    items dropped, members beyond the new limit left out. An excluded species cannot be fitted."""
    out = []
    for i, m in enumerate(team[:rules["party_limit"]]):
        if m["species"] in ex.species:
            raise KnobsError(f"exclude.species: {m['species']} is the base task's default team (member {i}); "
                             f"a derived task needs a default team the knobs allow")
        m = dict(m)
        if m.get("level") is not None and rules.get("level_cap") is not None:
            m["level"] = min(m["level"], rules["level_cap"])
        m["moves"] = [x for x in m.get("moves", []) if x not in ex.moves]
        if m.get("item") in ex.items:
            m["item"] = None
        out.append(m)
    return out


def derive_task(knobs_path: Path, output: Path, folder: Path = TASKS_DIR) -> Path:
    """Write the derived task file to `output` (a new file); KnobsError (one line) and nothing written."""
    if output.exists():
        raise KnobsError(f"{output}: already exists (choose a new file)")
    try:
        spec = load_yaml_model(knobs_path, KnobsFile, KnobsError, "knobs file")
    except KnobsError:
        raise
    except (OSError, ValueError) as exc:
        raise KnobsError(f"{knobs_path}: {exc}") from None
    where = f"{knobs_path}: "
    try:
        if spec.base.endswith((".yaml", ".yml")) or "/" in spec.base:
            base_path = (knobs_path.parent / spec.base)
            base = load_task(base_path)
        else:
            base = next((t for t in catalog(folder) if t.id == spec.base), None)
            if base is None:
                raise KnobsError(f"{where}base: no task {spec.base!r} in {folder}")
    except TaskError as exc:
        raise KnobsError(f"{where}base: {exc}") from None
    if base.file.battle is None:
        raise KnobsError(f"{where}base: {base.id} has no battle rules for the knobs to turn")
    adapter = base.game.battle if base.game is not None else None
    all_species = [s.name for s in adapter.species] if adapter is not None else None
    try:
        rules = derive_rules(base.file.battle, spec.knobs, base.id, base.sha256, all_species)
    except KnobsError as exc:
        raise KnobsError(f"{where}{exc}") from None
    game_id = base.game.id if base.game is not None else "the base's game"
    if adapter is not None and (problem := settings_problem(rules, adapter, game_id)):
        raise KnobsError(f"{where}an impossible task: {problem}")
    data = yaml.safe_load(base.path.read_text())
    for mapping, key in _ref_keys(data):
        mapping[key] = _rebase(mapping[key], base.path.parent, output.parent)
        ref = mapping[key]
        target = Path(os.path.normpath(output.parent.resolve() / ref))
        if key not in ("reference_script", "reference_notes") and not ref.startswith(BUNDLED_PREFIX) \
                and not target.exists():
            raise KnobsError(f"{where}{key}: {ref} does not resolve from {output.parent}")
    data.pop("reference_script", None)
    data.pop("reference_notes", None)
    data["task_id"] = spec.task_id
    data["title"] = spec.title or f"{base.file.title} (derived: {describe(spec.knobs)})"
    data["battle"] = rules.model_dump(mode="json")
    data["tags"] = sorted(set(data.get("tags") or []) | {"derived"})[:16]
    try:
        TaskFile.model_validate(data)
    except ValueError as exc:
        raise KnobsError(f"{where}the derived task file does not hold: {exc}") from None
    text = (f"# Derived by `oakwatch tasks derive {knobs_path.name}` from {base.id} (sha256 {base.sha256}):\n"
            f"# {describe(spec.knobs)}. battle.derived records the base and the knobs in every result.\n"
            + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text)
    try:
        load_task(output)  # the written file reads back as a task (its references resolve from its folder)
    except TaskError as exc:
        output.unlink()
        raise KnobsError(f"{where}the derived task does not load: {exc}") from None
    return output


def describe(knobs: Knobs) -> str:
    parts = []
    if knobs.level_cap_down_percent is not None:
        parts.append(f"level cap -{knobs.level_cap_down_percent}%")
    if knobs.party_limit is not None:
        parts.append(f"party limit {knobs.party_limit}")
    for what in ("species", "moves", "items"):
        if names := getattr(knobs.exclude, what):
            parts.append(f"without {what} {', '.join(names)}")
    return "; ".join(parts) or "no knob turned"

