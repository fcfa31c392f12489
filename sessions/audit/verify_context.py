"""What verify checks each part against (the experiment's header, as read) and where the problems go."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from sessions.evidence import layout
from sessions.evidence.records import ScheduleFile

EMPTY = hashlib.sha256(b"").hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Context:
    """What the experiment's header says, for checking each trial against it."""

    root: Path
    manifest: object | None = None  # sessions.preflight.manifest.Manifest
    manifest_sha256: str | None = None
    schedule: ScheduleFile | None = None
    schedule_sha256: str | None = None
    labels: dict[str, str] = field(default_factory=dict)  # label -> condition id
    sums: dict[str, str] = field(default_factory=dict)
    game: object | None = None  # engine.games.gamedef.GameDefinition
    run_head: str | None = None  # the run log's last whole line's hash
    interrupted: bool = False  # the run that wrote the folder did not finish (recover finishes it)
    # Big streams' SHA256SUMS entries, checked with the digest taken while their lines are read
    # (one pass over each file instead of two).
    deferred: dict[str, str] = field(default_factory=dict)
    streamed: dict[str, str] = field(default_factory=dict)


PER_FILE = 20  # problems reported per file; one broken chain breaks every line after it


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    interrupted: list[str] = field(default_factory=list)  # not tampering: a run that did not finish
    _per_file: dict[str, int] = field(default_factory=dict)

    def add(self, problem: str) -> None:
        where = problem.split(":", 1)[0]
        count = self._per_file[where] = self._per_file.get(where, 0) + 1
        if count <= PER_FILE:
            self.problems.append(problem)
        elif count == PER_FILE + 1:
            self.problems.append(f"{where}: more problems follow (only the first {PER_FILE} are shown)")


def _variant_entry(m, trial: int):
    """A suite trial's frozen variant entry (sessions.variants.suites), or None outside a suite."""
    if not m.variants:
        return None
    from sessions.variants.suites import variant_index

    i = variant_index(trial, m.trials.per_condition)
    return m.variants[i] if 0 <= i < len(m.variants) else None


def _trial_game(ctx, trial: int):
    """The game definition a trial played: a suite variant's carries its own optimal presses."""
    entry = _variant_entry(ctx.manifest, trial) if ctx.manifest is not None else None
    if ctx.game is None or entry is None:
        return ctx.game
    return ctx.game.model_copy(update={"rom_sha256": entry.rom_sha256, "optimal_presses": entry.optimal_presses,
                                       "optimal_presses_for": entry.rom_sha256})


STREAMED = ("/" + layout.TRACE, "/" + layout.RESPONSES, "/" + layout.INPUTS)
# Files a trial check reads whole anyway: their SHA256SUMS entries are checked with the digest taken
# there (the frame store is hashed once, by its seal check, not twice).
DEFERRED = (*STREAMED, "/" + layout.FRAMES)


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
