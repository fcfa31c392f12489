"""verify: the frozen header (manifest, schedule, blinding key, conditions, schema, price copies) and the run log."""

from __future__ import annotations

import json
from pathlib import Path

from engine.loop.contract import response_json_schema
from sessions.audit.verify_context import Context, Report, _sha
from sessions.evidence import layout
from sessions.evidence.checksums import file_sha256
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.reader import (
    FormatProblem,
    iter_lines,
    parse,
)
from sessions.evidence.records import BlindingFile, ScheduleFile
from sessions.execute.schedule import trial_order

# -- the frozen header -------------------------------------------------------------------------

def _check_header(ctx: Context, report: Report) -> None:
    manifest = _read_manifest(ctx, report)
    _read_schedule(ctx, report)
    blinding = _read_blinding(ctx, report)
    if manifest is None or ctx.schedule is None:
        return
    _check_schedule(ctx, manifest, report)
    _check_frozen_files(ctx, report)
    _check_price_copies(ctx.root, manifest, report)
    if ctx.schedule.block_size != len(manifest.conditions):
        report.add(f"{layout.SCHEDULE}: block_size {ctx.schedule.block_size} but the manifest has "
                   f"{len(manifest.conditions)} conditions")
    if blinding is not None:
        _check_blinding(ctx, manifest, blinding, report)
        _check_condition_files(ctx.root, manifest, blinding, report)
    _check_action_schema(ctx.root, manifest, report)
    ctx.game = _read_game(ctx.root, manifest)


def _read_manifest(ctx: Context, report: Report):
    from sessions.preflight.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(ctx.root / layout.MANIFEST)
    except ManifestError as exc:
        report.add(f"{layout.MANIFEST}: {exc}")
        return None
    ctx.manifest, ctx.manifest_sha256 = manifest, manifest.sha256()
    return manifest


def _header_bytes(ctx: Context, rel: str, report: Report) -> bytes | None:
    """A header file's bytes, read through the evidence folder (None, reported, when missing or unreadable)."""
    try:
        return EvidenceFolder(ctx.root).bytes(rel)
    except FormatProblem:
        report.add(f"{rel} is missing or unreadable")
        return None


def _read_schedule(ctx: Context, report: Report) -> None:
    data = _header_bytes(ctx, layout.SCHEDULE, report)
    if data is None:
        return
    try:
        ctx.schedule, ctx.schedule_sha256 = parse(ScheduleFile, data, layout.SCHEDULE), _sha(data)
    except FormatProblem as exc:
        report.add(str(exc))


def _read_blinding(ctx: Context, report: Report) -> BlindingFile | None:
    data = _header_bytes(ctx, layout.BLINDING, report)
    if data is None:
        return None
    try:
        blinding = parse(BlindingFile, data, layout.BLINDING)
    except FormatProblem as exc:
        report.add(str(exc))
        return None
    ctx.labels = dict(blinding.labels)
    if ctx.schedule and ctx.schedule.blinding_sha256 != _sha(data):
        report.add(f"{layout.BLINDING}: its hash differs from the one {layout.SCHEDULE} committed to")
    return blinding


def _check_schedule(ctx: Context, manifest, report: Report) -> None:
    """The schedule was made for this manifest."""
    s = ctx.schedule
    if s.manifest_sha256 != ctx.manifest_sha256:
        report.add(f"{layout.MANIFEST}: its canonical SHA-256 {ctx.manifest_sha256[:16]}… differs from the "
                   f"{s.manifest_sha256[:16]}… the schedule was made for (the manifest was changed)")
    if s.experiment_id != manifest.experiment_id:
        report.add(f"{layout.SCHEDULE}: experiment_id differs from the manifest's")


FROZEN_KINDS = ("prompts/", "scoring/", "conditions/", "schemas/", "pricing/")


def _check_frozen_files(ctx: Context, report: Report) -> None:
    """The files the schedule froze before the first trial are on disk unchanged, and no other."""
    frozen = ctx.schedule.frozen_files
    for rel, digest in frozen.items():
        path = ctx.root / rel
        if not path.is_file():
            report.add(f"{rel} is missing (the schedule froze it)")
        elif file_sha256(path) != digest:
            report.add(f"{rel}: differs from the file the schedule froze before the first trial")
    for rel in sorted(r for r in ctx.sums if r.startswith(FROZEN_KINDS) and r not in frozen):
        report.add(f"{rel}: not among the files the schedule froze")


def _check_blinding(ctx: Context, manifest, blinding: BlindingFile, report: Report) -> None:
    """The key maps the labels to the manifest's conditions, and the order is the manifest's."""
    ids = {c.id for c in manifest.conditions}
    if set(blinding.labels.values()) != ids:
        report.add(f"{layout.BLINDING}: maps labels to {sorted(blinding.labels.values())}, the manifest's "
                   f"conditions are {sorted(ids)}")
    try:
        expected = trial_order(sorted(blinding.labels), manifest.trials_per_label(), manifest.trials.order)
        if [f"{lab}-{n:02d}" for lab, n in expected] != ctx.schedule.order:
            report.add(f"{layout.SCHEDULE}: the order is not the one the manifest's trials section gives")
    except ValueError as exc:
        report.add(f"{layout.SCHEDULE}: {exc}")


def _check_condition_files(root: Path, manifest, blinding: BlindingFile, report: Report) -> None:
    """conditions/<label>.yaml describes the condition the key maps its label to."""
    import yaml

    by_id = {c.id: c for c in manifest.conditions}
    for label, cid in blinding.labels.items():
        path = root / "conditions" / f"{label}.yaml"
        try:
            on_disk = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            report.add(f"conditions/{label}.yaml is missing or unreadable")
            continue
        if cid in by_id:
            want = {"label": label, **by_id[cid].model_dump(mode="json", exclude={"id"})}
            if on_disk != want:
                report.add(f"conditions/{label}.yaml does not describe the condition {layout.BLINDING} "
                           f"maps {label} to (relabelled?)")


def _check_action_schema(root: Path, manifest, report: Report) -> None:
    agent = manifest.agent
    try:
        schema = json.loads((root / "prompts" / "action-schema.json").read_text(encoding="utf-8"))
        if schema != response_json_schema(agent.max_actions_per_decision, agent.context.notebook_chars
                                          if agent.context else None, tuple(agent.shortcuts) or None):
            report.add("prompts/action-schema.json is not the schema of this manifest's action contract")
    except (OSError, ValueError):
        report.add("prompts/action-schema.json is missing or unreadable")


def _read_game(root: Path, manifest):
    """The game definition, or None: milestone-specific checks are skipped; everything else still runs."""
    from sessions.preflight.assets import resolve
    from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition

    try:
        return load_game_definition(resolve(manifest.game.definition, root))
    except (GameDefinitionError, OSError, ValueError):
        return None


def _check_price_copies(root: Path, manifest, report: Report) -> None:
    """Each price schedule a condition names is kept, byte for byte, as pricing/<its sha256>.yaml
    (so a derived cost can be rebuilt from the folder alone), and nothing else is kept there."""
    from sessions.preflight.pricing import copy_path

    named: dict[str, str] = {}
    for i, c in enumerate(manifest.conditions):
        if c.pricing is not None:
            named.setdefault(copy_path(c.pricing.sha256), f"conditions.{i}.pricing")
    for rel, field_name in named.items():
        path = root / rel
        if not path.is_file():
            report.add(f"{rel} is missing: the price schedule the manifest's {field_name} names is not kept")
        elif file_sha256(path) != rel.removeprefix("pricing/").removesuffix(".yaml"):
            report.add(f"{rel}: its SHA-256 differs from the one the manifest's {field_name} names")
    folder = root / "pricing"
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        rel = f"pricing/{path.name}"
        if rel not in named and layout.classify_path(rel) == "evidence":
            report.add(f"{rel}: a price schedule no condition of the manifest names")


# -- the run log --------------------------------------------------------------------------------

def _check_run_log(ctx: Context, report: Report) -> list:
    events, _good, problems = EvidenceFolder(ctx.root).run_log()
    for p in problems:
        (report.interrupted if "torn" in p else report.problems).append(p)
    head = ctx.schedule_sha256
    path = ctx.root / layout.RUN_LOG
    if path.is_file() and head:
        try:
            for n, line in iter_lines(path, layout.RUN_LOG):
                if n > len(events):
                    break
                event = events[n - 1]
                if event.prev_sha256 != head:
                    report.add(f"{layout.RUN_LOG}:{n}: hash chain broken (prev_sha256 does not match line {n - 1})")
                if event.seq != n:
                    report.add(f"{layout.RUN_LOG}:{n}: seq {event.seq}, expected {n}")
                head = _sha(line)
        except FormatProblem:
            pass
    ctx.run_head = head
    return events
