"""Starting a run's evidence: a new folder for a prepared experiment, or a finished or stopped
folder taken back for `run --resume`.

Preflight (sessions.preflight.experiment) reads, checks and hashes the inputs and returns a frozen
`Prepared`; it never touches an evidence folder. This is where a run's folder begins, so the
arrow from preflight to the evidence goes through execution, as the data flows.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from sessions.preflight.experiment import PreflightError, Prepared, prepare


def default_output(experiment_id: str, root: Path = Path("runs")) -> Path:
    """A new folder name that two runs started in the same second never share."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    while True:
        candidate = root / f"{experiment_id}-{stamp}-{secrets.token_hex(3)}"
        if not candidate.exists():
            return candidate


def create_folder(prepared: Prepared, output: Path):
    """Lay out the experiment folder (sessions.evidence.experiment_folder); refuses an existing one.
    Returns the ExperimentFolder, which holds the folder's lock until the run closes it."""
    from sessions.evidence.durable import EvidenceError
    from sessions.evidence.experiment_folder import ExperimentFolder

    try:
        return ExperimentFolder.create(prepared, output)
    except FileExistsError as exc:
        raise PreflightError(str(exc)) from None
    except EvidenceError as exc:
        raise PreflightError(f"{exc}") from None


def _names_instruction(path: Path) -> bool:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return True  # prepare has read it already; a folder it refuses never gets here
    return isinstance(data, dict) and isinstance(data.get("agent"), dict) and "instruction" in data["agent"]


def prepare_resume(root: Path, *, allow_human: bool = False):
    """Take a finished or stopped folder back for `run --resume`: its frozen manifest, blinding and
    schedule, and the schedule positions that hold no valid trial. Returns (prepared, folder,
    positions); the folder is locked until the run closes it."""
    from sessions.analysis.summary import missing_positions
    from sessions.audit.recover import needs_recovery
    from sessions.evidence import layout
    from sessions.evidence.durable import EvidenceError
    from sessions.evidence.experiment_folder import ExperimentFolder, FolderBusy, holder_alive
    from sessions.evidence.folder import EvidenceFolder
    from sessions.evidence.reader import FormatProblem

    if not (root / layout.SCHEDULE).is_file() or not (root / layout.MANIFEST).is_file():
        raise PreflightError(f"{root}: not an oakwatch experiment folder (no {layout.SCHEDULE} and "
                             f"{layout.MANIFEST})")
    alive, who = holder_alive(root)
    if alive:
        raise PreflightError(f"{root} is held by a live oakwatch process{who}")
    if needs_recovery(root):
        raise PreflightError(f"{root}: its run did not finish; `oakwatch recover {root}` first")
    prepared = prepare(root / layout.MANIFEST, None, allow_human=allow_human)
    if not _names_instruction(root / layout.MANIFEST):  # frozen before instructions: its agents were told none
        m = prepared.manifest
        told_none = m.agent.model_copy(update={"instruction": None})
        prepared = replace(prepared, manifest=m.model_copy(update={"agent": told_none}))
    try:
        folder = ExperimentFolder.open(root)
    except (FolderBusy, EvidenceError) as exc:  # EvidenceError: no room for the reserve (a full disk)
        raise PreflightError(f"{root}: {exc}" if isinstance(exc, EvidenceError) else str(exc)) from None
    try:
        if prepared.manifest.sha256() != folder.manifest_sha256:
            raise PreflightError(f"{root}/{layout.MANIFEST} no longer hashes to the manifest the schedule was "
                                 f"made for: refusing to resume a changed experiment")
        evidence = EvidenceFolder(root)
        try:
            blinding, _ = evidence.blinding()
        except FormatProblem as exc:
            raise PreflightError(f"{root}: {exc}") from None
        system_prompt = evidence.system_prompt()  # as frozen
        if system_prompt is None:
            raise PreflightError(f"{root}: prompts/system.txt is missing")
        order = folder.schedule.order
        prepared = replace(
            prepared, labels={cid: label for label, cid in blinding.labels.items()}, system_prompt=system_prompt,
            schedule=[(key.split("-")[0], int(key.split("-")[1])) for key in order])
        positions = missing_positions(order, evidence.results())
        folder.reopen_log()
        if positions:
            folder.event("run-started", resume=True)
        return prepared, folder, positions
    except BaseException:
        folder.leave_as_found()
        raise
