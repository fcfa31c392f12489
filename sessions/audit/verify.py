"""`oakwatch verify`: audit an evidence folder without trusting its summary.

What it proves: every file is one the layout allows and matches SHA256SUMS; the manifest,
blinding key and schedule are the ones every trial was started under; each trial's trace is
an unbroken hash chain from its genesis, and each decision's response, inputs, memory
operations and frame are exactly the bytes its trace line names; result.json follows from the
trace (outcome, termination reason, telemetry, milestones); the frame store is the one sealed;
the run log records every trial sealed and every block voided; summary.json is what the
results give. Each annotation layer's chain, freeze and references hold, and every state of a
layer recorded outside it (roots.jsonl, unblinded/summary.json, reports/report.json) is still the
start of the layer, the whole of it once frozen (sessions.evidence.roots). An attacker who rewrites files
and regenerates SHA256SUMS breaks one of these; one who recomputes every chain, sum and record is
caught only by a published root (`--print-root`: the evidence and every layer, sessions.evidence.roots).

The checks are split by what they read: verify_files (the folder as files), verify_header (the
frozen header, the run log), verify_trial (one trial folder), verify_streams (its streams, in step
with the trace), verify_response and verify_result; this module runs them and checks voids, seals
and the summary. It reads streams line by line (flat memory) and never raises on a malformed folder: every
problem is one line.
"""

from __future__ import annotations

from pathlib import Path

from engine.loop.records import TrialResult
from sessions.analysis.summary import summarise
from sessions.audit.verify_context import STREAMED, Context, Report, _short
from sessions.audit.verify_files import _check_files
from sessions.audit.verify_header import _check_header, _check_run_log
from sessions.audit.verify_response import _check_response
from sessions.audit.verify_trial import verify_trial
from sessions.evidence import layout
from sessions.evidence.checksums import file_sha256
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.reader import FormatProblem, TrialReader, parse
from sessions.evidence.records import Summary, VoidRecord

# The checks live in verify_* beside this module (files, header, trial, streams, response, result);
# these names stay importable from here for the code and tests that use them.
__all__ = ["STREAMED", "Context", "Report", "_check_response", "audit", "verify_experiment", "verify_trial"]


def verify_experiment(folder: Path, *, deep: bool = False) -> list[str]:
    """Every problem found, one line each; empty when the folder is whole and consistent."""
    report = audit(folder, deep=deep)
    return report.interrupted + report.problems


def audit(folder: Path, *, deep: bool = False) -> Report:
    report = Report()
    if not folder.is_dir():
        report.add(f"{folder}: not a folder")
        return report
    ctx = Context(folder)
    _check_files(ctx, report)
    _check_header(ctx, report)
    events = _check_run_log(ctx, report)
    results: dict[str, tuple[TrialResult, str]] = {}
    for trial in EvidenceFolder(folder).trials(voided=False):
        checked = verify_trial(trial.path, ctx, report, rel=trial.rel, deep=deep)
        if checked is not None:
            results[trial.key] = checked
    _check_prompt_cores(ctx, results, report)
    from sessions.audit.verify_tools import check_tools

    check_tools(ctx.manifest, ctx.labels, results, report)  # the tool server exposed exactly its ruleset
    from sessions.audit.verify_client import check_clients

    check_clients(ctx.manifest, ctx.labels, results, report)  # a cli client ran as its condition allowed
    voids = _check_voids(ctx, report, deep)
    for rel, digest in ctx.deferred.items():  # a stream or frame store no trial check read whole is hashed now
        if (ctx.streamed.get(rel) or file_sha256(folder / rel)) != digest:
            report.add(f"{rel}: content differs from its {layout.SUMS} entry")
    _check_sealed(ctx, report, events, results, voids)
    _check_summary(ctx, report, events, results, voids)
    return report


def _check_prompt_cores(ctx: Context, results: dict[str, tuple[TrialResult, str]], report: Report) -> None:
    """Every model trial (of one suite variant) was first sent the same system prompt, response
    schema and screen: one prompt_core_sha256 across conditions (seed 000: an identical harness)."""
    groups: dict[object, dict[str, str]] = {}
    for key, (r, _sha) in sorted(results.items()):
        core = r.provenance.get("prompt_core_sha256")
        if core is None or r.provenance.get("model") is None:
            continue  # sends no prompt, never asked one, or recovered (its provenance died with it)
        group = r.provenance.get("variant_index")
        groups.setdefault(group, {})[key] = core
    for cores in groups.values():
        first_key, first = next(iter(cores.items()))
        for key, core in cores.items():
            if core != first:
                report.add(f"{layout.trial_dir(key)}/{layout.RESULT}: provenance.prompt_core_sha256 {core[:16]}… "
                           f"differs from {first_key}'s {first[:16]}…: the model conditions were not sent the "
                           f"same system prompt, response schema and first screen")


# -- voids, seals, summary ----------------------------------------------------------------------

def _check_voids(ctx: Context, report: Report, deep: bool) -> list[VoidRecord]:
    voids = []
    for vdir in sorted((p for p in ctx.root.glob("void-*") if p.is_dir()), key=lambda p: p.name):
        rel = vdir.name
        try:
            record = parse(VoidRecord, (vdir / "void.json").read_bytes(), f"{rel}/void.json")
        except OSError:
            report.add(f"{rel}/void.json is missing")
            continue
        except FormatProblem as exc:
            report.add(str(exc))
            continue
        if f"void-{record.void}" != rel:
            report.add(f"{rel}/void.json: names void {record.void}")
        voids.append(record)
        present = sorted(p.name for p in vdir.iterdir() if p.is_dir())
        if present != sorted(record.trial_keys):
            report.add(f"{rel}: holds {present}, void.json lists {record.trial_keys}")
        for key in present:
            verify_trial(vdir / key, ctx, report, rel=f"{rel}/{key}", deep=deep)
    voids.sort(key=lambda v: v.void)
    return voids


def _check_sealed(ctx: Context, report: Report, events: list, results: dict, voids: list[VoidRecord]) -> None:
    """The run log is the record of what was sealed: every seal must be on disk, and vice versa."""
    sealed = {(e.trial_key, e.attempt): e for e in events if e.event == "trial-sealed"}
    voided = {e.void: e for e in events if e.event == "voided"}
    present = {(r.trial_key, r.attempt): sha for r, sha in results.values()}
    for v in voids:
        present |= _void_results(ctx.root, v)
        e = voided.get(v.void)
        if e is None or e.positions != v.positions or e.trial_keys != v.trial_keys:
            report.add(f"void-{v.void}/void.json: not what {layout.RUN_LOG} recorded")
    _check_seals_present(sealed, present, report)
    for key, attempt in sorted(set(present) - set(sealed)):
        _unsealed(ctx, key, attempt, report)
    for v in voids:
        if v.void not in voided:
            report.add(f"void-{v.void}: a void {layout.RUN_LOG} never recorded")


def _check_seals_present(sealed: dict, present: dict[tuple[str, int], str], report: Report) -> None:
    """Every trial the run log sealed is on disk with the result it sealed."""
    for (key, attempt), e in sealed.items():
        sha = present.get((key, attempt))
        if sha is None:
            report.add(f"{layout.RUN_LOG}: trial {key} (attempt {attempt}) was sealed, but its folder is gone")
        elif sha != e.result_sha256:
            report.add(f"{key}/{layout.RESULT}: differs from the result sealed in {layout.RUN_LOG}")


def _void_results(root: Path, v: VoidRecord) -> dict[tuple[str, int], str]:
    """(trial key, attempt) -> its result's SHA-256, for each readable result the void holds."""
    out = {}
    for key in v.trial_keys:
        try:
            result, sha = TrialReader(root / f"void-{v.void}" / key).result()
        except FormatProblem:
            continue
        out[(key, result.attempt)] = sha
    return out


def _unsealed(ctx: Context, key: str, attempt: int, report: Report) -> None:
    if ctx.interrupted:  # killed between writing the result and logging its seal: recover seals it
        report.interrupted.append(f"{key} (attempt {attempt}): interrupted between its result and its seal "
                                  f"in {layout.RUN_LOG}; `oakwatch recover {ctx.root}` finishes it")
    else:
        report.add(f"{key} (attempt {attempt}): has a result that {layout.RUN_LOG} never sealed")


def _check_summary(ctx: Context, report: Report, events: list, results: dict, voids: list[VoidRecord]) -> None:
    summary = _read_summary(ctx, report)
    if summary is None or ctx.manifest is None or ctx.schedule is None:
        return
    if not _check_finish(ctx, summary, events, report):
        return
    recovered = any(e.event == "recovered" for e in events)
    recomputed = summarise(
        experiment_id=ctx.manifest.experiment_id, manifest_sha256=ctx.manifest_sha256,
        schedule_sha256=ctx.schedule_sha256, order=ctx.schedule.order, results=results, voids=voids,
        labels=sorted(ctx.labels), stopped_early=summary.stopped_early, stop_reason=summary.stop_reason,
        recovered=recovered, run_log_head=ctx.run_head or summary.run_log_head)
    for key, value in recomputed.model_dump().items():
        if getattr(summary, key) != getattr(recomputed, key):
            claimed = summary.model_dump()[key]
            report.add(f"{layout.SUMMARY}: {key} is {_short(claimed)}, the evidence gives {_short(value)}")


def _check_finish(ctx: Context, summary: Summary, events: list, report: Report) -> bool:
    """The run log ends with the finish the summary claims; False when the summary is from before a resume
    that did not finish (not a claim about the run since: nothing more to check)."""
    finished = [e for e in events if e.event == "run-finished"]
    if finished and (ctx.root / layout.LOCK).exists() and any(
            e.event == "run-started" and e.seq > finished[-1].seq for e in events):
        report.interrupted.append(f"{layout.SUMMARY} is from before the resumed run, which did not finish; "
                                  f"`oakwatch recover {ctx.root}` finishes it")
        return False
    if not finished or events[-1].event != "run-finished":
        report.add(f"{layout.RUN_LOG}: does not end with the run's finish, yet {layout.SUMMARY} exists")
    elif (finished[-1].stopped_early, finished[-1].stop_reason) != (summary.stopped_early, summary.stop_reason):
        report.add(f"{layout.SUMMARY}: stopped_early/stop_reason differ from what {layout.RUN_LOG} recorded")
    return True


def _read_summary(ctx: Context, report: Report) -> Summary | None:
    evidence = EvidenceFolder(ctx.root)
    if not evidence.has(layout.SUMMARY):
        report.interrupted.append(f"{layout.SUMMARY} is missing: the run did not finish; "
                                  f"`oakwatch recover {ctx.root}` finishes it")
        return None
    try:
        return evidence.summary()[0]
    except FormatProblem as exc:
        report.add(str(exc))
        return None
