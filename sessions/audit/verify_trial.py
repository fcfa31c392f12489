"""verify: one trial folder (genesis, streams, tags, result, frames, provider failure, client transcript)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from engine.loop.outcomes import VALID_OUTCOMES
from engine.loop.records import TrialGenesis, TrialResult
from sessions.audit.verify_context import Context, Report, _sha, _variant_entry
from sessions.audit.verify_result import _check_result
from sessions.audit.verify_streams import _check_streams
from sessions.evidence import layout
from sessions.evidence.checksums import file_sha256
from sessions.evidence.framestore import decode_png, iter_pngs, pixel_sha256, scan_store
from sessions.evidence.reader import (
    FormatProblem,
    TrialReader,
    parse,
)


def verify_trial(folder: Path, ctx: Context, report: Report, *, rel: str, deep: bool = False,
                 expect_voided: bool = False) -> tuple[TrialResult, str] | None:
    """Check one trial folder; returns (result, its hash) when result.json is readable."""
    reader = TrialReader(folder, rel)
    key = folder.name
    problems_before = len(report.problems)
    try:
        genesis, genesis_sha = reader.genesis()
    except FormatProblem as exc:
        report.add(str(exc))
        return None
    _check_genesis(genesis, key, ctx, report, rel)
    result = result_sha = None
    if not reader.exists(layout.RESULT):
        report.interrupted.append(f"{rel}: interrupted (no result.json): `oakwatch recover {ctx.root}` "
                                  f"finishes the folder")
    else:
        try:
            result, result_sha = reader.result()
        except FormatProblem as exc:
            report.add(str(exc))
    try:
        facts, frames_seen, tally, last, head = _check_streams(reader, genesis_sha, rel, report, ctx, result,
                                                               genesis.trial)
    except FormatProblem as exc:
        report.add(str(exc))
        return (result, result_sha) if result is not None else None
    _check_annotations(reader, genesis_sha, result, rel, facts, tally.decisions, report)
    if result is not None:
        _check_result(result, genesis, genesis_sha, head, tally, last, rel, ctx, report)
        _check_frames(reader, result, frames_seen, rel, report, deep, ctx)
        _check_provider_failure(reader, result, rel, report)
        _check_client_transcript(reader, result, rel, report,
                                 ctx.manifest.agent.max_reply_bytes if ctx.manifest is not None else None)
    if len(report.problems) > problems_before and result is None:
        return None
    return (result, result_sha) if result is not None else None


def _check_provider_failure(reader: TrialReader, r: TrialResult, rel: str, report: Report) -> None:
    """provider-failure.json sits beside the result of a trial the provider ended, and only there."""
    from engine.loop.records import ProviderFailureRecord

    where = f"{rel}/{layout.PROVIDER_FAILURE}"
    path = reader.folder / layout.PROVIDER_FAILURE
    if r.outcome != "invalid-provider":
        if path.exists():
            report.add(f"{where}: present, but the trial's outcome is {r.outcome}")
        return
    if not path.is_file():
        if r.telemetry is not None and r.telemetry.model_calls:  # a failure at startup made no call
            report.add(f"{where} is missing: the provider ended this trial")
        return
    try:
        parse(ProviderFailureRecord, path.read_bytes(), where)
    except FormatProblem as exc:
        report.add(str(exc))


def _check_client_transcript(reader: TrialReader, r: TrialResult, rel: str, report: Report, cap: int | None) -> None:
    """A cli client's transcript (sessions.execute.cli_client) sits beside the result that records its hash, and
    only there (or beside a result `recover` wrote); each source's kept text is within agent.max_reply_bytes."""
    where = f"{rel}/{layout.CLIENT_TRANSCRIPT}"
    path = reader.folder / layout.CLIENT_TRANSCRIPT
    server = r.provenance.get("tool_server")
    client = server.get("client") if isinstance(server, dict) else None
    recorded = client.get("transcript") if isinstance(client, dict) else None
    if recorded is None:
        # A run that died between the transcript and the result: `recover` wrote the result, and keeps
        # the client's account (SHA256SUMS covers it), but nothing recorded its hash before.
        if path.exists() and not r.recovered:
            report.add(f"{where}: present, but {layout.RESULT} records no client transcript")
        if path.is_file() and r.recovered:
            _check_transcript_lines(path.read_bytes(), where, report, cap)
        return
    if not isinstance(recorded, dict) or recorded.get("file") != layout.CLIENT_TRANSCRIPT:
        report.add(f"{rel}/{layout.RESULT}: provenance.tool_server.client.transcript is malformed")
        return
    if not path.is_file():
        report.add(f"{where} is missing: {layout.RESULT} records the client's transcript")
        return
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != recorded.get("sha256") or len(data) != recorded.get("bytes"):
        report.add(f"{where}: does not hash to the SHA-256 {layout.RESULT} records for it")
    _check_transcript_lines(data, where, report, cap)


def _check_transcript_lines(data: bytes, where: str, report: Report, cap: int | None) -> None:
    for n, line in enumerate(data.splitlines(), 1):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        text = entry.get("text") if isinstance(entry, dict) else None
        if not isinstance(text, str) or not isinstance(entry.get("source"), str):
            report.add(f"{where}:{n}: not a transcript line (source, text)")
            continue
        if cap is not None and len(text.encode()) > cap:
            report.add(f"{where}:{n}: keeps {len(text.encode()):,} bytes of {entry['source']}, over the manifest's "
                       f"agent.max_reply_bytes ({cap:,})")


def _check_genesis(g: TrialGenesis, key: str, ctx: Context, report: Report, rel: str) -> None:
    where = f"{rel}/{layout.TRIAL}"
    if g.trial_key != key:
        report.add(f"{where}: names trial {g.trial_key}, but sits in folder {key}")
    if ctx.manifest_sha256 and g.manifest_sha256 != ctx.manifest_sha256:
        report.add(f"{where}: started under manifest {g.manifest_sha256[:16]}…, but {layout.MANIFEST} hashes "
                   f"to {ctx.manifest_sha256[:16]}…")
    if ctx.schedule_sha256 and g.schedule_sha256 != ctx.schedule_sha256:
        report.add(f"{where}: started under a different {layout.SCHEDULE}")
    cond = ctx.sums.get(f"conditions/{g.condition}.yaml")
    if cond and g.condition_sha256 != cond:
        report.add(f"{where}: started under a different conditions/{g.condition}.yaml")
    if ctx.schedule is not None:
        _check_position(g, key, ctx.schedule.order, rel, report)
    if f"{g.condition}-{g.trial:02d}" != key:
        report.add(f"{where}: condition {g.condition} trial {g.trial} do not make {key}")
    if ctx.manifest is not None:
        _check_start(g, ctx.manifest, where, report)
        _check_policy(g, key, ctx, where, report)


def _check_position(g: TrialGenesis, key: str, order: list[str], rel: str, report: Report) -> None:
    if key not in order:
        report.add(f"{rel}: trial {key} is not in the schedule")
    elif order.index(key) != g.position:
        report.add(f"{rel}/{layout.TRIAL}: position {g.position}, but the schedule puts {key} at {order.index(key)}")


def _check_start(g: TrialGenesis, m, where: str, report: Report) -> None:
    """The ROM and start state are the manifest's, or the suite variant's the trial played."""
    entry = _variant_entry(m, g.trial)
    if m.variants and entry is None:
        report.add(f"{where}: trial {g.trial} has no variant in the manifest's suite")
    elif entry is not None and (g.rom_sha256, g.initial_state_sha256) != (entry.rom_sha256, entry.state_sha256):
        report.add(f"{where}: ROM or start state differs from the manifest's variant {m.variants.index(entry)}")
    elif entry is None:
        state = m.start_state()
        if g.rom_sha256 != m.game.rom_sha256 or state is None or g.initial_state_sha256 != state.sha256:
            report.add(f"{where}: ROM or start state differs from the manifest's")


def _check_policy(g: TrialGenesis, key: str, ctx: Context, where: str, report: Report) -> None:
    """The policy and its seed are the ones the trial's condition gives."""
    cid = ctx.labels.get(g.condition)
    cond = next((c for c in ctx.manifest.conditions if c.id == cid), None)
    if cond is None:
        return
    from sessions.execute.trial_factory import policy_seed

    if cond.policy != g.policy:
        report.add(f"{where}: policy {g.policy}, the condition's is {cond.policy}")
    if policy_seed(cond, g.trial) != g.policy_seed:
        report.add(f"{where}: policy seed {g.policy_seed} is not the one derived for {key}")


def _check_annotations(reader: TrialReader, genesis_sha: str, result: TrialResult | None, rel: str,
                       facts: set[str], decisions: int, report: Report) -> None:
    from engine.loop.records import Annotation
    from engine.loop.trial import TagRefused, check_reference

    head = genesis_sha
    count = 0
    try:
        for n, line in reader.lines(layout.TRIAL_ANNOTATIONS):
            where = f"{rel}/{layout.TRIAL_ANNOTATIONS}:{n}"
            a = parse(Annotation, line, where)
            count += 1
            if a.prev_sha256 != head:
                report.add(f"{where}: hash chain broken")
            head = _sha(line)
            if a.trial_key != reader.folder.name:
                report.add(f"{where}: tags trial {a.trial_key}, not this one")
            if not 0 <= a.decision_id <= decisions:
                report.add(f"{where}: tags decision {a.decision_id}, which was never recorded")
            if a.refers_to is not None:
                try:
                    check_reference(a.refers_to, a.decision_id, lambda fid: fid in facts)
                except TagRefused as exc:
                    report.add(f"{where}: {exc}")
    except FormatProblem as exc:
        report.add(str(exc))
        return
    if result is not None and result.chain is not None:
        if (result.chain.annotations_head, result.chain.annotation_lines) != (head, count):
            report.add(f"{rel}/{layout.TRIAL_ANNOTATIONS}: the tags ({count}) are not the "
                       f"{result.chain.annotation_lines} sealed in result.json (one was added, removed or changed)")


def _check_frames(reader: TrialReader, r: TrialResult, referenced: set[str], rel: str, report: Report,
                  deep: bool, ctx: Context) -> None:
    """The frame store against its seal; its digest is also the one its SHA256SUMS entry is checked
    against (`ctx.streamed`: hashed once)."""
    seal = r.chain.frames if r.chain else None
    path = reader.folder / layout.FRAMES
    if seal is None:
        if r.outcome in VALID_OUTCOMES:
            report.add(f"{rel}/{layout.RESULT}: a valid trial without a sealed frame store")
        return
    if not path.is_file():
        report.add(f"{rel}/{layout.FRAMES} is missing")
        return
    digest = file_sha256(path)
    ctx.streamed[f"{rel}/{layout.FRAMES}"] = digest
    if digest != seal.sha256 or path.stat().st_size != seal.bytes:
        report.add(f"{rel}/{layout.FRAMES}: differs from the store sealed in result.json (a frame was changed)")
    frames, _good, problem = scan_store(path)
    if problem:
        report.add(f"{rel}/{layout.FRAMES}: {problem}")
    if len(frames) != seal.frames:
        report.add(f"{rel}/{layout.FRAMES}: holds {len(frames)} frames, {seal.frames} were sealed")
    stored = {f.sha256 for f in frames}
    missing = referenced - stored
    if missing and not r.recovered:
        report.add(f"{rel}/{layout.FRAMES}: {len(missing)} frame(s) named by the trace are not stored")
    if deep:
        _check_pixels(path, frames, rel, report)


def _check_pixels(path: Path, frames: list, rel: str, report: Report) -> None:
    """`--deep`: every stored frame decodes to the pixels its hash names."""
    for frame, png in iter_pngs(path, frames):
        try:
            if pixel_sha256(decode_png(png)) != frame.sha256:
                report.add(f"{rel}/{layout.FRAMES}: the frame stored at byte {frame.offset} does not have "
                           f"the pixels its hash names")
        except ValueError as exc:
            report.add(f"{rel}/{layout.FRAMES}: byte {frame.offset}: {exc}")
