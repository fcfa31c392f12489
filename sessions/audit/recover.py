"""`oakwatch recover DIR`: finish a folder whose process died (kill -9, power loss, a second Ctrl-C).

It takes the folder's lock (refusing while the run that holds it lives), cuts every stream to
its last whole record and every trial to its last whole decision (an unbroken chain with all
its records), writes a harness-error result (`process-died`, `recovered: true`) for each trial
that has none, finishes a void the process died making, voids their blocks, and writes the
summary and SHA256SUMS. It refuses to adopt sealed evidence that no longer matches SHA256SUMS:
recovering must never launder tampering. Every refusal is decided from a read-only look before
anything is written, so a refused folder stays exactly as it was; a recover killed part way leaves
a folder the next recover finishes.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from engine.games.ladder import deepest, skipped_required
from engine.loop.outcomes import classify, is_valid
from engine.loop.records import Chain, FrameStoreSeal, MemoryOp, TraceLine, TrialResult
from engine.loop.tally import TraceTally
from engine.loop.trial import derived_figures, path_figures, utc_now
from sessions.analysis.summary import missing_positions, summarise
from sessions.evidence import layout
from sessions.evidence.checksums import SumsFormatError, file_sha256, parse_sums
from sessions.evidence.durable import write_atomic
from sessions.evidence.experiment_folder import ExperimentFolder, FolderBusy, busy_message, holder_alive
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.framestore import scan_store
from sessions.evidence.reader import FormatProblem, TrialReader, parse, sha256_hex, whole_lines_length
from sessions.evidence.records import ScheduleFile, VoidRecord


class RecoverRefused(RuntimeError):
    """The folder cannot be recovered as it stands; the message says why."""


@dataclass
class Recovered:
    finished: list[str] = field(default_factory=list)  # trials given a result
    removed: list[str] = field(default_factory=list)  # trial folders that never started
    voided: list[int] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)  # what was cut, for the report
    nothing_to_do: bool = False


def needs_recovery(root: Path) -> bool:
    trials = root / layout.TRIALS
    unfinished = trials.is_dir() and any(p.is_dir() and not (p / layout.RESULT).is_file() for p in trials.iterdir())
    return unfinished or (root / layout.LOCK).exists() or not (root / layout.SUMMARY).is_file()


def recover(root: Path) -> Recovered:
    """Finish `root`. Raises FolderBusy (a live run holds it) or RecoverRefused.

    Every refusal is decided before anything is written, from a read-only look at the folder,
    and again under the lock if another process wrote the folder meanwhile: a refused folder is
    left byte for byte (and mtime for mtime) as it was."""
    if not (root / layout.SCHEDULE).is_file() or not (root / layout.MANIFEST).is_file():
        raise RecoverRefused(f"{root}: not an oakwatch experiment folder, or one that was never fully created "
                             f"(no {layout.SCHEDULE}); nothing in it is evidence")
    out = Recovered()
    if not needs_recovery(root):
        out.nothing_to_do = True
        return out
    alive, who = holder_alive(root)
    if alive:  # asked without creating or touching .lock
        raise FolderBusy(busy_message(root, who))
    seen = _fingerprint(root)
    manifest = _refusals(root)

    def vet(_folder: ExperimentFolder) -> None:
        if _fingerprint(root) != seen:  # another process wrote the folder while it was being checked
            raise RecoverRefused(f"{root} changed while recover was checking it (another oakwatch process "
                                 f"wrote it); run `oakwatch recover {root}` again")

    folder = ExperimentFolder.open(root, vet=vet)
    try:
        _finish_folder(folder, manifest, out)
    finally:
        folder.close()
    return out


def _finish_folder(folder: ExperimentFolder, manifest, out: Recovered) -> None:
    """Under the lock: temp files, voids, every trial sealed, invalid blocks voided, the summary."""
    root = folder.root
    for tmp in root.rglob("*.tmp"):
        tmp.unlink()
        out.cut.append(f"removed the leftover temp file {tmp.relative_to(root)}")
    folder.reopen_log()
    _finish_voids(folder, out)
    # Finish and seal every trial first: voiding moves a whole block, trials not yet seen included.
    seen_results = _seal_trials(folder, manifest, out)
    # Only voids made here count: an invalid attempt still in trials/ was never moved, even if an
    # earlier attempt of its block was voided before a resume reran it.
    voided_blocks: set[int] = set()
    for result in seen_results:
        if not is_valid(result.outcome) and result.position not in voided_blocks:
            block = folder.block_of(result.position)
            out.voided.append(folder.void_block(block, result).void)
            voided_blocks.update(block)
    for vdir in root.glob("void-*"):  # a void whose sums were never written (a full disk)
        _list_unlisted(folder, vdir)
    folder.event("recovered", trial_keys=out.finished)
    _write_summary(folder, manifest)


def _seal_trials(folder: ExperimentFolder, manifest, out: Recovered) -> list[TrialResult]:
    """Every trial in trials/ given a result (when it has none) and a seal in the run log; a folder that
    never got its genesis is removed (nothing happened in it)."""
    root = folder.root
    sealed = {(e.trial_key, e.attempt) for e in _events(root) if e.event == "trial-sealed"}
    results: list[TrialResult] = []
    for trial in EvidenceFolder(root).trials(voided=False):
        if not (trial.path / layout.TRIAL).is_file():
            shutil.rmtree(trial.path)
            out.removed.append(trial.key)
            continue
        reader = trial.reader()
        if not reader.exists(layout.RESULT):
            result = _finish_trial(reader, manifest, out)
            folder.sums.update({f"{trial.rel}/{k}": v for k, v in _trial_sums(trial.path).items()})
            out.finished.append(trial.key)
        else:
            result, _ = reader.result()
        if (result.trial_key, result.attempt) not in sealed:
            folder.event("trial-sealed", trial_key=result.trial_key, position=result.position,
                         attempt=result.attempt, outcome=result.outcome,
                         result_sha256=file_sha256(trial.path / layout.RESULT),
                         trace_head=result.chain.trace_head if result.chain else None)
        _list_unlisted(folder, trial.path)
        results.append(result)
    return results


def _write_summary(folder: ExperimentFolder, manifest) -> None:
    """The summary of what is on disk now; a schedule position without a result stopped the run early."""
    evidence = EvidenceFolder(folder.root)
    results = evidence.results()
    voids = [v.record()[0] for v in evidence.voids()]
    order = folder.schedule.order
    missing = missing_positions(order, results)
    stop = "process-died" if missing else None
    labels = sorted({k.split("-")[0] for k in order})
    folder.finish(bool(missing), stop, lambda head: summarise(
        experiment_id=manifest.experiment_id, manifest_sha256=folder.manifest_sha256,
        schedule_sha256=folder.schedule_sha256, order=order, results=results, voids=voids, labels=labels,
        stopped_early=bool(missing), stop_reason=stop, recovered=True, run_log_head=head))


def _fingerprint(root: Path) -> tuple:
    """What any oakwatch process that wrote the folder changes: its run log, sums and summary."""
    out = []
    for name in (layout.RUN_LOG, layout.SUMS, layout.SUMMARY):
        try:
            st = (root / name).stat()
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            out.append(None)
    return tuple(out)


def _refusals(root: Path):
    """Every reason to refuse, read-only (nothing is created or changed); returns the manifest."""
    from sessions.preflight.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(root / layout.MANIFEST)
    except ManifestError as exc:
        raise RecoverRefused(f"{layout.MANIFEST}: {exc}") from None
    try:
        parse(ScheduleFile, (root / layout.SCHEDULE).read_bytes(), layout.SCHEDULE)
    except (OSError, FormatProblem) as exc:
        raise RecoverRefused(f"{exc}; `oakwatch verify` says more") from None
    sums: dict[str, str] = {}
    if (root / layout.SUMS).is_file():
        try:
            sums = parse_sums((root / layout.SUMS).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SumsFormatError) as exc:
            raise RecoverRefused(f"{layout.SUMS}: {exc}; `oakwatch verify` says more") from None
    _refuse_tampered(root, sums)
    _refuse_unreadable_records(root)
    sealed = {(e.trial_key, e.attempt) for e in _events(root) if e.event == "trial-sealed"}
    _refuse_unsealed_results(root, sealed)
    return manifest


def _events(root: Path):
    return EvidenceFolder(root).run_log()[0]


def _refuse_tampered(root: Path, sums: dict[str, str]) -> None:
    changed = [rel for rel, digest in sums.items()
               if rel != layout.RUN_LOG and (root / rel).is_file() and file_sha256(root / rel) != digest]
    if changed:
        raise RecoverRefused(f"sealed evidence no longer matches {layout.SUMS} ({', '.join(changed[:3])}"
                             f"{' …' if len(changed) > 3 else ''}): refusing to recover a folder that was changed "
                             f"after it was written; `oakwatch verify` says more")


def _refuse_unreadable_records(root: Path) -> None:
    """What recover reads whole was written whole (a temp file and a rename), so a kill cannot have
    torn it: a genesis, result or void record that does not parse was changed afterwards."""
    for trial in EvidenceFolder(root).trials(voided=False):
        reader = trial.reader()
        try:
            if reader.exists(layout.RESULT):
                reader.result()
            elif reader.exists(layout.TRIAL):
                reader.genesis()
        except FormatProblem as exc:
            raise RecoverRefused(f"{exc}: refusing to recover a folder that was changed after it was written; "
                                 f"`oakwatch verify` says more") from None
    for vdir in root.glob("void-*"):
        record = vdir / "void.json"
        try:
            if record.is_file():
                parse(VoidRecord, record.read_bytes(), f"{vdir.name}/void.json")
        except (OSError, FormatProblem) as exc:
            raise RecoverRefused(f"{exc}: refusing to recover a folder that was changed after it was written; "
                                 f"`oakwatch verify` says more") from None


def _finish_voids(folder: ExperimentFolder, out: Recovered) -> None:
    """Voids a kill interrupted: one without its record had moved nothing yet (its record is written
    first; an older oakwatch wrote it last, so a trial found in one goes back to trials/ and is voided
    again below); one with its record gets the rest of its moves, its log line and its sums."""
    root = folder.root
    logged = {e.void for e in _events(root) if e.event == "voided"}
    for void in EvidenceFolder(root).voids():
        if not (void.path / "void.json").is_file():
            _undo_void(root, void.path)
            out.cut.append(f"removed {void.rel}/, a void the process died making")
            continue
        record = void.record()[0]
        moved = all((void.path / key).is_dir() for key in record.trial_keys)
        stale = any(rel.startswith(f"{layout.trial_dir(key)}/") and not (root / rel).exists()
                    for key in record.trial_keys for rel in folder.sums)
        if record.void not in logged or not moved or stale:
            folder.finish_void(record, logged=record.void in logged)
            out.cut.append(f"finished {void.rel}/, a void the process died making")


def _undo_void(root: Path, vdir: Path) -> None:
    """A void without its record: its trials go back to trials/ (where none of that key is) and it goes."""
    for trial in sorted(p for p in vdir.iterdir() if p.is_dir()):
        if not (root / layout.trial_dir(trial.name)).exists():
            os.replace(trial, root / layout.trial_dir(trial.name))
    vdir.rmdir()


def _refuse_unsealed_results(root: Path, sealed: set[tuple[str, int]]) -> None:
    """A sealed trial's result is durable before its seal: without it, the folder was changed, not crashed."""
    for trial in EvidenceFolder(root).trials(voided=False):
        reader = trial.reader()
        if reader.exists(layout.RESULT) or not reader.exists(layout.TRIAL):
            continue
        try:
            attempt = reader.genesis()[0].attempt
        except FormatProblem:
            continue  # finishing it reports the problem
        if (trial.key, attempt) in sealed:
            raise RecoverRefused(f"{trial.rel}/{layout.RESULT} is missing but run.jsonl sealed "
                                 f"that trial: refusing to recover a folder that was changed after it was written; "
                                 f"`oakwatch verify` says more")


def _list_unlisted(folder: ExperimentFolder, where: Path) -> None:
    """Sealed evidence whose sums never reached the disk; what is listed was checked already."""
    for path in sorted(p for p in where.rglob("*") if p.is_file()):
        rel = path.relative_to(folder.root).as_posix()
        if rel not in folder.sums:
            folder.sums[rel] = file_sha256(path)


def _trial_sums(trial: Path) -> dict[str, str]:
    return {p.relative_to(trial).as_posix(): file_sha256(p) for p in sorted(trial.rglob("*")) if p.is_file()}


def _cut(path: Path, size: int, out: Recovered, what: str) -> None:
    if path.exists() and path.stat().st_size > size:
        os.truncate(path, size)
        out.cut.append(what)


def _finish_trial(reader: TrialReader, manifest, out: Recovered) -> TrialResult:
    """Cut the trial to its last whole decision and write its result."""
    trial = reader.folder
    key = trial.name
    genesis, genesis_sha = reader.genesis()
    for name in layout.STREAMS:
        path = trial / name
        if not path.exists():
            path.touch()
        _cut(path, whole_lines_length(path), out, f"{key}/{name}: a torn last line")
    tally, head = _cut_decisions(reader, genesis_sha, out)
    ann_head, ann_lines = _cut_tags(trial, genesis_sha, out)
    chain = Chain(genesis_sha256=genesis_sha, trace_head=head, trace_lines=tally.decisions, annotations_head=ann_head,
                  annotation_lines=ann_lines, frames=_seal_frames(trial, out))
    result = _recovered_result(trial, genesis, tally, chain, manifest)
    write_atomic(trial / layout.RESULT, (result.model_dump_json(indent=2) + "\n").encode())
    return result


def _cut_decisions(reader: TrialReader, genesis_sha: str, out: Recovered) -> tuple[TraceTally, str]:
    """Cut every stream after the last whole decision: an unbroken chain whose response is on disk.
    Returns the kept decisions' tally and the chain's head."""
    trial, key = reader.folder, reader.folder.name
    tally = TraceTally()
    head, kept = genesis_sha, 0
    responses = (trial / layout.RESPONSES).read_bytes().splitlines(keepends=True)
    try:
        for n, line in reader.lines(layout.TRACE):
            t = parse(TraceLine, line, f"{key}/{layout.TRACE}:{n}")
            if t.prev_sha256 != head or t.decision_id != n or n > len(responses) \
                    or sha256_hex(responses[n - 1]) != t.response_sha256:
                break
            head = sha256_hex(line)
            kept += len(line)
            tally.add(t)
    except FormatProblem:
        pass
    _cut(trial / layout.TRACE, kept, out, f"{key}/{layout.TRACE}: decisions after {tally.decisions}")
    n = tally.decisions
    _cut(trial / layout.RESPONSES, sum(len(r) for r in responses[:n]), out,
         f"{key}/{layout.RESPONSES}: responses after decision {n}")
    inputs = (trial / layout.INPUTS).read_bytes().splitlines(keepends=True)
    _cut(trial / layout.INPUTS, sum(len(r) for r in inputs[:tally.accepted_actions]), out,
         f"{key}/{layout.INPUTS}: inputs after decision {n}")
    keep = 0
    for line in (trial / layout.MEMORY).read_bytes().splitlines(keepends=True):
        try:
            if MemoryOp.model_validate_json(line).decision_id > n:
                break
        except ValueError:
            break
        keep += len(line)
    _cut(trial / layout.MEMORY, keep, out, f"{key}/{layout.MEMORY}: operations after decision {n}")
    return tally, head


def _cut_tags(trial: Path, genesis_sha: str, out: Recovered) -> tuple[str, int]:
    """Cut the tags at the first that breaks their chain; (the chain's head, the tags kept)."""
    from engine.loop.records import Annotation

    ann_head, ann_lines, keep = genesis_sha, 0, 0
    for line in (trial / layout.TRIAL_ANNOTATIONS).read_bytes().splitlines(keepends=True):
        try:
            a = Annotation.model_validate_json(line)
        except ValueError:
            break
        if a.prev_sha256 != ann_head:
            break
        ann_head, ann_lines, keep = sha256_hex(line), ann_lines + 1, keep + len(line)
    _cut(trial / layout.TRIAL_ANNOTATIONS, keep, out, f"{trial.name}/{layout.TRIAL_ANNOTATIONS}: a broken tag")
    return ann_head, ann_lines


def _seal_frames(trial: Path, out: Recovered) -> FrameStoreSeal | None:
    """The frame store cut to its last whole frame, and its seal (None without a store)."""
    frames_path = trial / layout.FRAMES
    if not frames_path.exists():
        return None
    frames, good, problem = scan_store(frames_path)
    if problem:
        _cut(frames_path, good, out, f"{trial.name}/{layout.FRAMES}: {problem}")
    return FrameStoreSeal(file=layout.FRAMES, sha256=file_sha256(frames_path), frames=len(frames), bytes=good)


def _recovered_result(trial: Path, genesis, tally: TraceTally, chain: Chain, manifest) -> TrialResult:
    """A harness-error result (`process-died`, `recovered: true`) for the kept decisions."""
    n = tally.decisions
    outcome, cause = classify("process-died")
    last = tally.last
    reached = tally.milestones_reached
    game = _game(manifest, trial.parent.parent)
    # The awards (the frame and probe where each rung was reached) died with the process; the kept
    # inputs, replayed, prove them again, and which rungs held at the start. Where they cannot be replayed
    # (no ROM here) the result lists none: its deepest rung and skipped rungs are then lower bounds.
    awards, pre_satisfied, proof = _proven_awards(trial, reached)
    points = sum(m.points for m in game.milestones if m.id in reached) if game else 0
    return TrialResult(
        experiment_id=genesis.experiment_id, condition=genesis.condition, trial=genesis.trial, trial_key=trial.name,
        position=genesis.position, attempt=genesis.attempt, outcome=outcome, termination_reason="process-died",
        termination_detail=last.termination_reason if last else None,  # the loop had ended it
        invalid_cause=cause,
        error=f"the process (pid {genesis.pid}) died before the trial ended; finished by `oakwatch recover` at "
              f"decision {n}",
        recovered=True, started_utc=genesis.started_utc, ended_utc=last.timestamp_utc if last else utc_now(),
        last_decision=n, milestones=awards, milestones_reached=reached, pre_satisfied=pre_satisfied,
        skipped_required=skipped_required(game, reached, pre_satisfied) if game and awards else [],
        deepest_milestone=deepest(game, reached, pre_satisfied) if game else None,
        progress_points=points, total_points=game.total_points if game else 0, telemetry=tally.telemetry(),
        # the awards' frames died with the process: which action reached the deepest rung is unknown
        derived=derived_figures(tally.telemetry().cost_usd, len(reached), points, tally.accepted_actions, 0)
        | path_figures(None, None, None),
        provenance={"recovered_utc": utc_now(), "recovered_awards": proof,
                    # and a battle task's rules, as in every result of the task
                    **({"battle": manifest.battle.model_dump(mode="json")} if manifest.battle is not None else {})},
        chain=chain)


def _proven_awards(trial: Path, reached: list[str]) -> tuple[list, list[str], str]:
    """(the awards a replay of the kept decisions makes, the rungs that held at the start, how they were
    found). A replay that cannot run, or whose rungs are not the trace's, proves nothing: ([], [], why)."""
    from sessions.audit.replay import Divergence, replay_trial
    from sessions.preflight.experiment import PreflightError

    try:
        replayed = replay_trial(trial)
    except (PreflightError, Divergence, FormatProblem, OSError, RuntimeError, ValueError) as exc:
        return [], [], f"not replayed: {type(exc).__name__}: {str(exc)[:300]}"
    if sorted(a.id for a in replayed["awards"]) != sorted(reached):
        return [], [], f"not replayed: the replay awards {[a.id for a in replayed['awards']]}, the trace {reached}"
    return replayed["awards"], replayed["pre_satisfied"], "replayed"


def _game(manifest, root: Path):
    """The game definition (for points and the deepest milestone), if readable."""
    from sessions.preflight.assets import resolve
    from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition

    try:
        return load_game_definition(resolve(manifest.game.definition, root))
    except (GameDefinitionError, OSError, ValueError):
        return None
