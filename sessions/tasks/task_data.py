"""Seed 004's sandbox data: the game data a battle task's agent may read, as JSON files.

`oakwatch tasks data TASK --output DIR` writes what the task's pool allows from its game definition's
battle tables (engine.battle.battle / engine.battle.gen3_battle): species (types, base stats, abilities, the moves
it may use under the pool, a minimum level), moves (type, power, accuracy, PP), items, and the rules
(party limit, level cap, difficulty, where a derived task came from). Nothing about the opponent: that
is learnt by battling. Checked before anything is written; a bad task or an existing folder is one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from engine.battle.battle import BattleAdapter
from sessions.tasks.tasks import Task

if TYPE_CHECKING:
    from engine.battle.gen3_battle import Gen3BattleAdapter


class TaskDataError(ValueError):
    """Why no data can be written; one line. Nothing was written."""


def _allowed(names: list[str] | None, name: str) -> bool:
    return names is None or name in names


def task_data(task: Task) -> dict[str, object]:
    """The files' contents by file name."""
    rules = task.file.battle
    if rules is None:
        raise TaskDataError(f"{task.path}: {task.id} has no battle rules")
    adapter = task.game.battle if task.game is not None else None
    if adapter is None:
        raise TaskDataError(f"{task.path}: its game has no battle adapter, so no battle tables")
    pool = rules.pool
    if isinstance(adapter, BattleAdapter):
        species, move_rows = _battle_tables(adapter, pool)
    else:
        species, move_rows = _gen3_tables(adapter, pool)
    items = [{"name": i.name, **({"effect": i.effect} if getattr(i, "effect", None) else {})}
             for i in adapter.items if _allowed(pool.items, i.name)]
    named = {a for s in species for a in s.get("abilities", [])}
    abilities = [{"name": a.name, "effect": a.effect} for a in getattr(adapter, "abilities", []) if a.name in named]
    rules_out = {"task_id": task.id, "title": task.file.title, "party_limit": rules.party_limit,
                 "level_cap": rules.level_cap, "difficulty": dict(rules.difficulty),
                 "episode_budget": task.file.episodes.budget if task.file.episodes else None,
                 "task_sha256": task.sha256}
    if rules.derived is not None:
        rules_out["derived"] = rules.derived.model_dump(mode="json")
    files = {"task.json": rules_out, "species.json": species, "moves.json": move_rows, "items.json": items}
    if abilities:
        files["abilities.json"] = abilities
    return files


def _battle_tables(adapter: BattleAdapter, pool) -> tuple[list[dict], list[dict]]:
    """The pool's species (name, type, allowed moves) and the moves they know, by name."""
    species = [{"name": s.name, "type": s.type, "moves": [m for m in s.moves if _allowed(pool.moves, m)]}
               for s in adapter.species if _allowed(pool.species, s.name)]
    moves = sorted({m for s in species for m in s["moves"]})
    return species, [{"name": m} for m in moves]


def _gen3_tables(adapter: Gen3BattleAdapter, pool) -> tuple[list[dict], list[dict]]:
    """The pool's species with types, base stats, abilities and minimum level, and the moves they know with
    their type, power, accuracy and PP (in the adapter's order)."""
    min_levels = pool.min_levels or {}
    species = [{"name": s.name, "types": list(s.types), "base_stats": s.base.model_dump(),
                "abilities": list(s.abilities), "min_level": min_levels.get(s.name),
                "moves": [m for m in s.moves if _allowed(pool.moves, m)]}
               for s in adapter.species if _allowed(pool.species, s.name)]
    usable = {m for s in species for m in s["moves"]}
    move_rows = [{"name": m.name, "type": m.type, "power": m.power, "accuracy": m.accuracy, "pp": m.pp}
                 for m in adapter.moves if m.name in usable]
    return species, move_rows


def write_task_data(task: Task, output: Path) -> list[Path]:
    if output.exists():
        raise TaskDataError(f"{output}: already exists (choose a new folder)")
    files = task_data(task)
    output.mkdir(parents=True)
    written = []
    for name, content in files.items():
        path = output / name
        path.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
