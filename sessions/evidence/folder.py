"""The one reader of an evidence folder: where each part lives and what type it is.

`EvidenceFolder(root)` is the only code (beside `layout`, which names the files, and the recorder,
which writes them) that knows the folder's shape: the experiment's own files, the trials under
`trials/`, the voided attempts under `void-<n>/`, the annotation layers and `unblinded/`. Each part
comes back as its pydantic record, parsed strictly (`Record` forbids unknown fields); a bad file
raises `FormatProblem` naming it, never a traceback. Per trial, `TrialReader` (sessions.evidence.reader)
streams the records line by line, so memory stays flat however long the trial.

How the consumers use it:
    folder = EvidenceFolder(root)
    schedule, sha = folder.schedule()          # typed record and the SHA-256 of its bytes
    for trial in folder.trials():              # trials/ by key, then void-<n>/ in void order
        reader = trial.reader()                # trace(), inputs(), responses(), memory(), result() ...
    results = folder.results()                 # key -> (TrialResult, sha) for sealed trials/
    events, good, problems = folder.run_log()  # the run log's whole events (a torn tail is a problem)

Tolerant readers (review, attach, report on a damaged folder) use the `*_or_none` forms, which
answer None for a missing or unreadable part instead of raising.

Is the folder a user named an oakwatch evidence folder (or a trial of one) at all?

Every command that takes DIR or TRIAL_DIR asks this first, so a home directory or a source tree
is bad input (one line, exit status 2) rather than a damaged experiment with a problem per file.
A real folder that is damaged (its schedule deleted, its files changed) still counts as evidence,
and the auditing commands report its problems.

Creating an experiment folder is atomic (it appears under its name complete), so a folder that
was ever evidence holds `schedule.json`, or at least `manifest.yaml` beside what a run writes
(`run.jsonl`, `blinding.json`, `trials/`). A lone `manifest.yaml` is an experiment to run, not a
run's folder.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.loop.records import TrialResult
from engine.text import printable
from sessions.evidence import layout
from sessions.evidence.reader import (
    FormatProblem,
    M,
    TrialReader,
    parse,
    read_results,
    read_run_log,
    sha256_hex,
)
from sessions.evidence.records import BlindingFile, RunEvent, ScheduleFile, Summary, VoidRecord

MILESTONES = "scoring/milestones.yaml"
SYSTEM_PROMPT = "prompts/system.txt"
CONDITIONS = "conditions"
LAYER_FILE = "annotations.jsonl"  # annotations/<annotator>/annotations.jsonl


@dataclass(frozen=True)
class TrialFolder:
    """One trial's folder: `trials/<key>` or, for a voided attempt, `void-<n>/<key>`."""

    key: str  # e.g. "A-01"
    rel: str  # relative to the experiment folder, as problems name it
    path: Path
    void: int | None = None  # the void block that holds it, None for trials/

    @property
    def voided(self) -> bool:
        return self.void is not None

    @property
    def label(self) -> str:
        return self.key.split("-", 1)[0]

    def reader(self) -> TrialReader:
        return TrialReader(self.path, self.rel)

    def sealed(self) -> bool:
        """Has its result.json (a trial still running, or cut off by a crash, has none)."""
        return (self.path / layout.RESULT).is_file()

    def result_or_none(self) -> TrialResult | None:
        try:
            return self.reader().result()[0]
        except FormatProblem:
            return None


@dataclass(frozen=True)
class VoidFolder:
    n: int
    rel: str
    path: Path

    def record(self) -> tuple[VoidRecord, str]:
        return _whole(self.path / "void.json", f"{self.rel}/void.json", VoidRecord)

    def attempts(self) -> list[TrialFolder]:
        return [TrialFolder(p.name, f"{self.rel}/{p.name}", p, self.n) for p in _subfolders(self.path)]


def _subfolders(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def _read(path: Path, where: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FormatProblem(f"{where} is missing") from None
    except OSError as exc:
        raise FormatProblem(f"{where}: unreadable ({exc.strerror})") from None


def _whole(path: Path, where: str, model: type[M]) -> tuple[M, str]:
    data = _read(path, where)
    return parse(model, data, where), sha256_hex(data)


class EvidenceFolder:
    """An experiment's evidence folder, read-only."""

    def __init__(self, root: Path):
        self.root = Path(root)

    # -- paths ---------------------------------------------------------------------------------
    def path(self, rel: str) -> Path:
        return self.root / rel

    def has(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def bytes(self, rel: str) -> bytes:
        """A file's bytes (FormatProblem when missing or unreadable)."""
        return _read(self.root / rel, rel)

    def json(self, rel: str) -> Any:
        """A JSON file as plain data, for readers that compare raw values (FormatProblem if not JSON)."""
        try:
            return json.loads(self.bytes(rel))
        except ValueError as exc:
            raise FormatProblem(f"{rel}: not JSON ({exc})") from None

    def yaml(self, rel: str) -> Any:
        try:
            return yaml.safe_load(self.bytes(rel).decode("utf-8"))
        except (ValueError, yaml.YAMLError) as exc:
            raise FormatProblem(f"{rel}: not YAML ({str(exc).splitlines()[0]})") from None

    # -- the experiment's own records ----------------------------------------------------------
    def schedule(self) -> tuple[ScheduleFile, str]:
        return _whole(self.root / layout.SCHEDULE, layout.SCHEDULE, ScheduleFile)

    def blinding(self) -> tuple[BlindingFile, str]:
        return _whole(self.root / layout.BLINDING, layout.BLINDING, BlindingFile)

    def summary(self) -> tuple[Summary, str]:
        return _whole(self.root / layout.SUMMARY, layout.SUMMARY, Summary)

    def run_log(self) -> tuple[list[RunEvent], int, list[str]]:
        """The run log's whole events, the bytes they span, and problems (a torn tail among them)."""
        return read_run_log(self.root)

    def experiment_id(self) -> str | None:
        try:
            return self.schedule()[0].experiment_id
        except FormatProblem:
            return None

    def manifest_data(self) -> Any:
        """manifest.yaml as plain data (its model lives in preflight, which reads through here)."""
        return self.yaml(layout.MANIFEST)

    def milestones_data(self) -> Any:
        return self.yaml(MILESTONES)

    def system_prompt(self) -> str | None:
        return self.path(SYSTEM_PROMPT).read_text(encoding="utf-8") if self.has(SYSTEM_PROMPT) else None

    def unblinded_labels(self) -> dict[str, str] | None:
        """label -> condition id once `oakwatch unblind` has run (an unblinded/ folder), else None."""
        if not self.path(layout.UNBLINDED).is_dir():
            return None
        try:
            return dict(self.blinding()[0].labels)
        except FormatProblem:
            return None

    # -- trials ----------------------------------------------------------------------------------
    def trial(self, key: str) -> TrialFolder:
        rel = layout.trial_dir(key)
        return TrialFolder(key, rel, self.root / rel)

    def trials(self, *, voided: bool = True) -> list[TrialFolder]:
        """Every trial folder: trials/ by key, then (with `voided`) each void's attempts in void order."""
        out = [TrialFolder(p.name, layout.trial_dir(p.name), p) for p in _subfolders(self.root / layout.TRIALS)]
        if voided:
            for void in self.voids():
                out += void.attempts()
        return out

    def voids(self) -> list[VoidFolder]:
        """The void-<n>/ folders, by n (a folder named void-<not a number> is not one: verify reports it)."""
        found = []
        for p in self.root.glob("void-*"):
            if p.is_dir() and p.name[5:].isdigit():
                found.append(VoidFolder(int(p.name[5:]), p.name, p))
        return sorted(found, key=lambda v: v.n)

    def results(self) -> dict[str, tuple[TrialResult, str]]:
        """Every trial in trials/ that has a readable result.json: key -> (result, its SHA-256)."""
        return read_results(self.root)

    def sealed_results(self, *, voided: bool = False) -> Iterator[tuple[TrialFolder, TrialResult]]:
        """(trial, result) for each trial whose result.json reads; unreadable ones are skipped."""
        for trial in self.trials(voided=voided):
            if trial.sealed():
                result = trial.result_or_none()
                if result is not None:
                    yield trial, result

    # -- layers beside the evidence ------------------------------------------------------------
    def layer_path(self, annotator: str) -> Path:
        return self.root / layout.ANNOTATIONS / annotator / LAYER_FILE

    def layer_names(self) -> list[str]:
        return [p.name for p in _subfolders(self.root / layout.ANNOTATIONS) if layout.LAYER_NAME.fullmatch(p.name)]


# -- is the folder a user named evidence at all? -----------------------------------------------
_BESIDE_MANIFEST = (layout.RUN_LOG, layout.BLINDING, layout.TRIALS)


def evidence_problem(root: Path) -> str | None:
    """None for an evidence folder; else one line saying why `root` is not one."""
    shown = printable(str(root))
    try:
        if not root.is_dir():
            return f"{shown}: not a folder"
        if (root / layout.SCHEDULE).is_file():
            return None
        if (root / layout.MANIFEST).is_file():
            if any((root / name).exists() for name in _BESIDE_MANIFEST):
                return None
            return (f"{shown}: not an oakwatch evidence folder (a {layout.MANIFEST} but no {layout.SCHEDULE}, "
                    f"{layout.RUN_LOG}, {layout.BLINDING} or {layout.TRIALS}/: an experiment to run, "
                    f"not a run's folder)")
    except OSError as exc:
        return f"{shown}: cannot read it ({printable(exc.strerror or str(exc))})"
    return (f"{shown}: not an oakwatch evidence folder (no {layout.SCHEDULE} or {layout.MANIFEST}; "
            f"give the folder `oakwatch run` wrote)")


def trial_problem(trial: Path) -> str | None:
    """None for a trial folder inside an evidence folder (<exp>/trials/<key> or <exp>/void-<n>/<key>)."""
    shown = printable(str(trial))
    try:
        if not (trial / layout.TRACE).is_file():
            voided = voided_attempts(trial)
            if voided:
                return (f"{shown}: no {layout.TRACE} here: that attempt was voided (an invalid trial's block moves "
                        f"to void-<n>/ and `run --resume` reruns it); give {'; '.join(voided)}")
            return f"{shown}: no {layout.TRACE} here; give a trial folder (<exp>/trials/<label>-<NN>)"
        experiment = trial.resolve().parent.parent
    except (OSError, RuntimeError) as exc:
        return f"{shown}: cannot read it ({printable(str(exc))})"
    from sessions.audit.package import is_package

    if evidence_problem(experiment) is not None and not is_package(experiment):
        return (f"{shown}: not a trial of an oakwatch evidence folder ({printable(str(experiment))}, two levels "
                f"up, is not one; give <exp>/trials/<label>-<NN>)")
    return None


def voided_attempts(trial: Path, most: int = 4) -> list[str]:
    """Where an `<exp>/trials/<key>` the user named went when its attempt was voided: each matching
    `<exp>/void-<n>/<key>` (the key may be an unexpanded glob such as `*-01`), with its void's cause."""
    if trial.parent.name != layout.TRIALS or evidence_problem(trial.parent.parent) is not None:
        return []
    root = trial.parent.parent
    found = []
    try:
        voids = sorted((p for p in root.glob("void-*") if p.is_dir()),
                       key=lambda p: int(p.name[5:]) if p.name[5:].isdigit() else 0)
        for void in voids:
            for attempt in sorted(p for p in void.iterdir() if p.is_dir()):
                if fnmatch.fnmatchcase(attempt.name, trial.name) and (attempt / layout.TRACE).is_file():
                    found.append(f"{printable(str(attempt))}{_cause(void)}")
    except OSError:
        return found
    return found[-most:]  # the latest attempts


def _cause(void: Path) -> str:
    try:
        data = json.loads((void / "void.json").read_text(encoding="utf-8"))
        return f" ({printable(str(data['outcome']))}: {printable(str(data['cause']))})"
    except (OSError, ValueError, KeyError, TypeError):
        return ""
