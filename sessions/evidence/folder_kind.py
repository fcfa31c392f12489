"""Is the folder a user named an oakwatch evidence folder (or a trial of one) at all?

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
from pathlib import Path

from engine.text import printable
from sessions.evidence import layout

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
