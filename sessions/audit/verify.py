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

It reads streams line by line (flat memory) and never raises on a malformed folder: every
problem is one line.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from engine.battle.episodes import Step, episode_records
from engine.games.ladder import FINAL, FINAL_SKIPPED, deciding, deepest, final_ending, skipped_required
from engine.loop.contract import response_json_schema
from engine.loop.outcomes import ENDINGS, VALID_OUTCOMES, ending
from engine.loop.records import Attempt, InputLine, MemoryOp, ResponseLine, TraceLine, TrialGenesis, TrialResult
from engine.loop.tally import TraceTally
from engine.loop.trial import decision_latency
from sessions.analysis.summary import summarise
from sessions.audit.verify_tools import check_battle_line
from sessions.evidence import layout, roots
from sessions.evidence.checksums import SumsFormatError, file_sha256, parse_sums
from sessions.evidence.framestore import decode_png, iter_pngs, pixel_sha256, scan_store
from sessions.evidence.reader import (
    MAX_LINE,
    FormatProblem,
    TrialReader,
    iter_lines,
    parse,
    read_run_log,
    short_error,
)
from sessions.evidence.records import BlindingFile, ScheduleFile, Summary, VoidRecord
from sessions.execute.schedule import trial_order

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
    trials_dir = folder / layout.TRIALS
    for trial in sorted(p for p in trials_dir.iterdir() if p.is_dir()) if trials_dir.is_dir() else []:
        checked = verify_trial(trial, ctx, report, rel=layout.trial_dir(trial.name), deep=deep)
        if checked is not None:
            results[trial.name] = checked
    _check_prompt_cores(ctx, results, report)
    from sessions.audit.verify_tools import check_tools

    check_tools(ctx.manifest, ctx.labels, results, report)  # the tool server exposed exactly its ruleset
    voids = _check_voids(ctx, report, deep)
    for rel, digest in ctx.deferred.items():  # a stream no trial check read to its end is hashed now
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


# -- the folder as files -----------------------------------------------------------------------

def _check_files(ctx: Context, report: Report) -> None:
    root = ctx.root
    sums_path = root / layout.SUMS
    listed: dict[str, str] = {}
    if not sums_path.is_file():
        report.add(f"{layout.SUMS} is missing")
    else:
        try:
            listed = parse_sums(sums_path.read_text(encoding="utf-8"))
        except (SumsFormatError, UnicodeDecodeError, OSError) as exc:
            report.add(str(exc) if isinstance(exc, SumsFormatError) else f"{layout.SUMS}: unreadable")
    ctx.sums = listed
    present: set[str] = set()
    layers: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            rel = Path(dirpath, name).relative_to(root).as_posix()
            kind = layout.classify_path(rel)
            if kind == "evidence":
                present.add(rel)
            elif kind == "layer":
                layers.add(rel.rsplit("/", 1)[0] if rel.startswith(layout.ANNOTATIONS)
                           else layout.UNBLINDED if rel.startswith(layout.UNBLINDED + "/") else layout.REPORTS)
            elif kind == "temp":
                report.add(f"{rel}: leftover temp file (a write was interrupted)")
            elif kind == "run-only":
                report.interrupted.append(_lock_note(root, rel))
            elif kind == "unknown":
                report.add(f"{rel}: unknown file (not part of an oakwatch evidence folder)")
    # A run that did not finish leaves its last trial unsealed and its run log ahead of the sums:
    # that is an interruption (recover finishes it), not a tampering.
    unfinished = {f"{layout.trial_dir(p.name)}/" for p in (root / layout.TRIALS).glob("*")
                  if p.is_dir() and not (p / layout.RESULT).is_file()}
    interrupted = bool(unfinished) or (root / layout.LOCK).exists() or not (root / layout.SUMMARY).is_file()
    ctx.interrupted = interrupted
    if interrupted:  # a seal or a void as the disk filled: its sums never reached SHA256SUMS (recover lists them)
        unfinished |= {f"{layout.trial_dir(p.name)}/" for p in (root / layout.TRIALS).glob("*")
                       if (p / layout.RESULT).is_file() and f"{layout.trial_dir(p.name)}/{layout.RESULT}" not in listed}
        unfinished |= {f"{p.name}/" for p in root.glob("void-*") if f"{p.name}/void.json" not in listed}
    for rel, digest in listed.items():
        path = root / rel
        if rel not in present and layout.classify_path(rel) != "evidence":
            report.add(f"{layout.SUMS} lists {rel}, which is not an evidence file")
        elif not path.is_file():
            report.add(f"{rel}: listed in {layout.SUMS} but missing")
        elif rel.endswith(STREAMED):
            ctx.deferred[rel] = digest
        elif file_sha256(path) != digest and not (interrupted and rel == layout.RUN_LOG):
            report.add(f"{rel}: content differs from its {layout.SUMS} entry")
    for rel in sorted(present - set(listed)):
        if not (interrupted and (rel == layout.RUN_LOG or rel.startswith(tuple(unfinished))
                                 or rel.endswith("/" + layout.RESULT))):
            report.add(f"{rel}: present but not listed in {layout.SUMS}")
    for layer in sorted(layers):
        _check_layer(root / layer, layer, report)
    for problem in roots.check(root):  # layers against the states recorded outside them
        report.add(problem)


def _lock_note(root: Path, rel: str) -> str:
    if rel == layout.LOCK:
        from sessions.evidence.experiment_folder import holder_alive

        alive, who = holder_alive(root)
        if alive:
            return f"{rel}: a run is still writing this folder{who}"
        return f"{rel}: the run that wrote this folder did not finish{who}; `oakwatch recover {root}` finishes it"
    return f"{rel}: left by a run that did not finish; `oakwatch recover {root}` finishes it"


def _check_layer(folder: Path, rel: str, report: Report) -> None:
    """annotations/<annotator>/ and reports/: their own SHA256SUMS over their own files."""
    from sessions.annotations.annotation_layer import check_layer, split_sums

    sums = folder / layout.SUMS
    if not sums.is_file():
        report.add(f"{rel}/{layout.SUMS} is missing")
        return
    annotations = rel.startswith(layout.ANNOTATIONS + "/")
    try:
        text = sums.read_text(encoding="utf-8")
        # An annotation layer's sums end with `FROZEN <sha256>` once it is frozen.
        listed = split_sums(text)[0] if annotations else parse_sums(text)
    except (SumsFormatError, UnicodeDecodeError) as exc:
        report.add(f"{rel}/{exc}")
        return
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} - {layout.SUMS}
    for name in sorted(files - set(listed)):
        report.add(f"{rel}/{name}: present but not listed in {rel}/{layout.SUMS}")
    for name, digest in listed.items():
        path = folder / name
        if not path.is_file():
            report.add(f"{rel}/{name}: listed in {rel}/{layout.SUMS} but missing")
        elif file_sha256(path) != digest:
            report.add(f"{rel}/{name}: content differs from its {rel}/{layout.SUMS} entry")
    key, original = folder / layout.BLINDING, folder.parent / layout.BLINDING
    if rel == layout.UNBLINDED and key.is_file() and original.is_file() and file_sha256(key) != file_sha256(original):
        report.add(f"{rel}/{layout.BLINDING}: differs from the run's {layout.BLINDING}")
    if annotations:  # the layer's chain, freeze, ids and every label's references into the evidence
        for problem in check_layer(folder.parent.parent, folder.name):
            report.add(problem)


# -- the frozen header -------------------------------------------------------------------------

def _check_header(ctx: Context, report: Report) -> None:
    from sessions.preflight.assets import resolve
    from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition
    from sessions.preflight.manifest import ManifestError, load_manifest

    root = ctx.root
    try:
        manifest = load_manifest(root / layout.MANIFEST)
        ctx.manifest, ctx.manifest_sha256 = manifest, manifest.sha256()
    except ManifestError as exc:
        report.add(f"{layout.MANIFEST}: {exc}")
        manifest = None
    try:
        data = (root / layout.SCHEDULE).read_bytes()
        ctx.schedule, ctx.schedule_sha256 = parse(ScheduleFile, data, layout.SCHEDULE), _sha(data)
    except (OSError, FormatProblem) as exc:
        report.add(str(exc) if isinstance(exc, FormatProblem) else f"{layout.SCHEDULE} is missing or unreadable")
    blinding = None
    try:
        data = (root / layout.BLINDING).read_bytes()
        blinding = parse(BlindingFile, data, layout.BLINDING)
        ctx.labels = dict(blinding.labels)
        if ctx.schedule and ctx.schedule.blinding_sha256 != _sha(data):
            report.add(f"{layout.BLINDING}: its hash differs from the one {layout.SCHEDULE} committed to")
    except (OSError, FormatProblem) as exc:
        report.add(str(exc) if isinstance(exc, FormatProblem) else f"{layout.BLINDING} is missing or unreadable")
    if manifest is None or ctx.schedule is None:
        return
    s = ctx.schedule
    if s.manifest_sha256 != ctx.manifest_sha256:
        report.add(f"{layout.MANIFEST}: its canonical SHA-256 {ctx.manifest_sha256[:16]}… differs from the "
                   f"{s.manifest_sha256[:16]}… the schedule was made for (the manifest was changed)")
    if s.experiment_id != manifest.experiment_id:
        report.add(f"{layout.SCHEDULE}: experiment_id differs from the manifest's")
    for rel, digest in s.frozen_files.items():
        path = root / rel
        if not path.is_file():
            report.add(f"{rel} is missing (the schedule froze it)")
        elif file_sha256(path) != digest:
            report.add(f"{rel}: differs from the file the schedule froze before the first trial")
    frozen_kinds = ("prompts/", "scoring/", "conditions/", "schemas/", "pricing/")
    for rel in sorted(r for r in ctx.sums if r.startswith(frozen_kinds) and r not in s.frozen_files):
        report.add(f"{rel}: not among the files the schedule froze")
    _check_price_copies(root, manifest, report)
    if s.block_size != len(manifest.conditions):
        report.add(f"{layout.SCHEDULE}: block_size {s.block_size} but the manifest has "
                   f"{len(manifest.conditions)} conditions")
    if blinding is not None:
        ids = {c.id for c in manifest.conditions}
        if set(blinding.labels.values()) != ids:
            report.add(f"{layout.BLINDING}: maps labels to {sorted(blinding.labels.values())}, the manifest's "
                       f"conditions are {sorted(ids)}")
        try:
            expected = trial_order(sorted(blinding.labels), manifest.trials_per_label(), manifest.trials.order)
            if [f"{lab}-{n:02d}" for lab, n in expected] != s.order:
                report.add(f"{layout.SCHEDULE}: the order is not the one the manifest's trials section gives")
        except ValueError as exc:
            report.add(f"{layout.SCHEDULE}: {exc}")
        by_id = {c.id: c for c in manifest.conditions}
        import yaml

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
    try:
        schema = json.loads((root / "prompts" / "action-schema.json").read_text(encoding="utf-8"))
        if schema != response_json_schema(manifest.agent.max_actions_per_decision, manifest.agent.context.notebook_chars
                                          if manifest.agent.context else None, tuple(manifest.agent.shortcuts) or None):
            report.add("prompts/action-schema.json is not the schema of this manifest's action contract")
    except (OSError, ValueError):
        report.add("prompts/action-schema.json is missing or unreadable")
    try:
        ctx.game = load_game_definition(resolve(manifest.game.definition, root))
    except (GameDefinitionError, OSError, ValueError):
        ctx.game = None  # milestone-specific checks are skipped; everything else still runs


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
    events, _good, problems = read_run_log(ctx.root)
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


# -- one trial ----------------------------------------------------------------------------------

class _Peek:
    def __init__(self, it: Iterator):
        self._it = it
        self._next = None
        self._done = False
        self._advance()

    def _advance(self) -> None:
        try:
            self._next = next(self._it)
        except StopIteration:
            self._next, self._done = None, True

    def peek(self):
        return None if self._done else self._next

    def take(self):
        item = self._next
        self._advance()
        return item


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
        _check_frames(reader, result, frames_seen, rel, report, deep)
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
        order = ctx.schedule.order
        if key not in order:
            report.add(f"{rel}: trial {key} is not in the schedule")
        elif order.index(key) != g.position:
            report.add(f"{where}: position {g.position}, but the schedule puts {key} at {order.index(key)}")
    if f"{g.condition}-{g.trial:02d}" != key:
        report.add(f"{where}: condition {g.condition} trial {g.trial} do not make {key}")
    m = ctx.manifest
    if m is not None:
        state = m.start_state()
        entry = _variant_entry(m, g.trial)
        if m.variants and entry is None:
            report.add(f"{where}: trial {g.trial} has no variant in the manifest's suite")
        elif entry is not None and (g.rom_sha256, g.initial_state_sha256) != (entry.rom_sha256, entry.state_sha256):
            report.add(f"{where}: ROM or start state differs from the manifest's variant {m.variants.index(entry)}")
        elif entry is None and (g.rom_sha256 != m.game.rom_sha256 or state is None
                                or g.initial_state_sha256 != state.sha256):
            report.add(f"{where}: ROM or start state differs from the manifest's")
        cid = ctx.labels.get(g.condition)
        cond = next((c for c in m.conditions if c.id == cid), None)
        if cond is not None:
            from sessions.execute.trial_factory import policy_seed

            if cond.policy != g.policy:
                report.add(f"{where}: policy {g.policy}, the condition's is {cond.policy}")
            if policy_seed(cond, g.trial) != g.policy_seed:
                report.add(f"{where}: policy seed {g.policy_seed} is not the one derived for {key}")


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


BLOCK = 1 << 16  # a stream is read 64 KiB at a time (bigger blocks fall out of the CPU cache)


class _Stream:
    """A stream's lines, read and hashed a block at a time (a few calls per MiB instead of a read, a
    check and a hash update per line); `digest` is the file's SHA-256 once every line has been read.
    Problems are iter_lines's (sessions.evidence.reader), raised at the same line: a torn last line,
    a line too long."""

    __slots__ = ("_path", "_where", "_file", "_hash", "_lines", "_i", "_n", "_pending", "digest")

    def __init__(self, reader: TrialReader, name: str):
        self._path = reader.folder / name
        if not self._path.is_file():
            raise FormatProblem(f"{reader.where(name)} is missing")
        self._where = reader.where(name)
        self._file = None
        self._hash = hashlib.sha256()
        self._lines: list[bytes] = []
        self._i = self._n = 0
        self._pending: list[bytes] = []  # the start of a line a block cut
        self.digest: str | None = None

    def __iter__(self):
        return self

    def __next__(self) -> tuple[int, bytes]:
        i = self._i
        if i >= len(self._lines):
            self._fill()
            i = 0
        self._i = i + 1
        self._n = n = self._n + 1
        line = self._lines[i]
        if len(line) > MAX_LINE:
            raise FormatProblem(f"{self._where}:{n}: line too long")
        return n, line

    def _fill(self) -> None:
        """The next block's whole lines (StopIteration at the end; a torn last line is a problem)."""
        if self.digest is not None:  # read to its end already
            raise StopIteration
        if self._file is None:
            self._file = self._path.open("rb")
        while True:
            block = self._file.read(BLOCK)
            if not block:
                self._file.close()
                self._lines = []
                if self._pending:
                    raise FormatProblem(f"{self._where}:{self._n + 1}: torn last line (no newline): the process "
                                        f"died mid-write")
                self.digest = self._hash.hexdigest()
                raise StopIteration
            self._hash.update(block)
            cut = block.rfind(b"\n") + 1
            if not cut:
                self._pending.append(block)
                continue
            whole = b"".join((*self._pending, block[:cut])) if self._pending else block[:cut]
            self._pending = [block[cut:]] if cut < len(block) else []
            self._lines = [line + b"\n" for line in whole.split(b"\n")[:-1]]
            return


def _parser(model, rel: str, name: str):
    """A fast line parser for the hot loop: the model's own validator, problems as FormatProblem."""
    validate = model.__pydantic_validator__.validate_json

    def parse_line(line: bytes, n: int):
        try:
            return validate(line)
        except ValidationError as exc:
            raise FormatProblem(f"{rel}/{name}:{n}: {short_error(exc)}") from None

    return parse_line


@dataclass(slots=True)
class _Walk:
    """One trial's streams walked in step with its trace, and what the walk has gathered so far.
    Its fields are read as attributes once per decision (not per line) to keep the hot loop lean."""

    rel: str
    report: Report
    ctx: Context
    result: TrialResult | None
    responses: _Stream
    inputs: _Stream
    trace: _Stream
    memory: _Peek
    parse_response: object
    parse_input: object
    first_frame: str | None
    episodes: object | None  # the manifest's episodes block
    cap: int | None  # the manifest's agent.max_reply_bytes
    awards: set[tuple[int, str]]
    evidence: set[tuple[int, str]]  # frames a milestone or a met goal names: an input must capture each
    head: str
    tally: TraceTally = field(default_factory=TraceTally)
    facts: set[str] = field(default_factory=set)
    frames_seen: set[str] = field(default_factory=set)
    award_frames: set[tuple[int, str]] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)  # engine.battle.episodes: each decision's episode facts
    clients: dict[str, int] = field(default_factory=dict)  # MCP sessions that decided -> the first decision of each
    prev: TraceLine | None = None
    inputs_read: int = 0
    last_capture: int = -1
    op_item: tuple[int, bytes] | None = None  # the memory line last parsed, and its operation
    op: MemoryOp | None = None


def _first_frame(ctx: Context, trial_number: int | None) -> str | None:
    """The frame the agent sees first: the start state's, or a suite variant's own."""
    if ctx.manifest is None:
        return None
    if ctx.manifest.variants:
        entry = _variant_entry(ctx.manifest, trial_number) if trial_number is not None else None
        return entry.first_frame_sha256 if entry is not None else None
    state = ctx.manifest.start_state()
    return state.first_frame_sha256 if state is not None else None


def _start_walk(reader: TrialReader, genesis_sha: str, rel: str, report: Report, ctx: Context,
                result: TrialResult | None, trial_number: int | None) -> _Walk:
    awards = {(m.frame_index, m.frame_sha256) for m in result.milestones} if result else set()
    # a met goal's frame is evidence too: it must be one an input captured (checked with the goal)
    goal = result.goal if result is not None else None
    evidence = awards | ({(goal.frame_index, goal.frame_sha256)} if goal is not None and goal.met else set())
    m = ctx.manifest
    return _Walk(rel=rel, report=report, ctx=ctx, result=result,
                 responses=_Stream(reader, layout.RESPONSES), inputs=_Stream(reader, layout.INPUTS),
                 trace=_Stream(reader, layout.TRACE), memory=_Peek(reader.lines(layout.MEMORY)),
                 parse_response=_parser(ResponseLine, rel, layout.RESPONSES),
                 parse_input=_parser(InputLine, rel, layout.INPUTS),
                 first_frame=_first_frame(ctx, trial_number),
                 episodes=m.episodes if m is not None else None,
                 cap=m.agent.max_reply_bytes if m is not None else None,
                 awards=awards, evidence=evidence, head=genesis_sha)


def _check_chain(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """The hash chain, the numbering, and the first decision's prompt core against the provenance."""
    add, rel = w.report.add, w.rel
    if t.prev_sha256 != w.head:
        add(f"{rel}/{layout.TRACE}:{n}: hash chain broken (prev_sha256 does not match the "
            f"{'genesis' if n == 1 else f'line {n - 1}'})")
    w.head = hashlib.sha256(line).hexdigest()
    if t.decision_id != n:
        add(f"{rel}/{layout.TRACE}:{n}: decision_id {t.decision_id}, expected {n}")
    result = w.result
    if n == 1 and result is not None and "prompt_core_sha256" in result.provenance \
            and result.provenance["prompt_core_sha256"] != t.prompt_core_sha256:
        add(f"{rel}/{layout.RESULT}: provenance.prompt_core_sha256 is not the first decision's "
            f"({_short(t.prompt_core_sha256)} in {layout.TRACE})")


def _check_continuity(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """A decision follows the one before it: no decision after the end, the same milestones, the same frame."""
    add, rel, prev = w.report.add, w.rel, w.prev
    seen = w.first_frame
    if prev is not None:
        # after an episode's last decision the start state was restored: the agent sees its frame again
        seen = w.first_frame if prev.episode_end is not None else prev.result_frame_sha256
        if prev.termination_reason is not None:
            add(f"{rel}/{layout.TRACE}:{n}: a decision after the one that ended the trial")
        if t.milestones_before != prev.milestones_after:
            add(f"{rel}/{layout.TRACE}:{n}: milestones_before differs from the previous decision's "
                f"milestones_after")
    if seen is not None and t.frame_sha256 != seen:
        add(f"{rel}/{layout.TRACE}:{n}: the agent saw frame {t.frame_sha256[:12]}…, but the previous "
            f"decision left {seen[:12]}…")


def _check_episode(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """Episode fields only in an episodic trial, numbered in turn within the budget."""
    add, rel, episodes, prev = w.report.add, w.rel, w.episodes, w.prev
    if episodes is None:
        if t.episode is not None or t.episode_end is not None:
            add(f"{rel}/{layout.TRACE}:{n}: an episode field in a trial that is not episodic")
        return
    expected_episode = 1 if prev is None else prev.episode + (prev.episode_end is not None)
    if t.episode != expected_episode or t.episode > episodes.budget:
        add(f"{rel}/{layout.TRACE}:{n}: episode {t.episode}, expected {expected_episode} (budget "
            f"{episodes.budget})")
    if t.episode_end is not None and t.termination_reason is None and t.episode >= episodes.budget:
        add(f"{rel}/{layout.TRACE}:{n}: the last episode ended, yet the trial did not")
    w.steps.append(Step(n, t.episode or 0, t.episode_end, tuple(t.memory_writes),
                        t.battle.get("team") if t.battle is not None else None))


def _check_line_fields(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """The battle facts, no milestone lost, and the response the line points at."""
    add, rel = w.report.add, w.rel
    if t.battle is not None:
        check_battle_line(w.ctx.manifest, t, f"{rel}/{layout.TRACE}:{n}", w.report)
    w.frames_seen.add(t.frame_sha256)
    w.frames_seen.add(t.result_frame_sha256)
    if t.milestones_before != t.milestones_after and not set(t.milestones_before) <= set(t.milestones_after):
        add(f"{rel}/{layout.TRACE}:{n}: a milestone was lost")
    response_ref = f"{layout.RESPONSES}#"
    if t.raw_response_path != response_ref + str(n):
        add(f"{rel}/{layout.TRACE}:{n}: raw_response_path {t.raw_response_path!r}, expected {response_ref}{n}")


def _check_decision_response(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """The decision's response line: its bytes, its MCP session (one trial, one client), its content."""
    add, rel = w.report.add, w.rel
    item = next(w.responses, None)
    if item is None:
        add(f"{rel}/{layout.RESPONSES}: no response for decision {n}")
        return
    rn, rbytes = item
    if hashlib.sha256(rbytes).hexdigest() != t.response_sha256:
        add(f"{rel}/{layout.RESPONSES}:{rn}: differs from what decision {n} recorded")
    parsed = w.parse_response(rbytes, rn)
    clients = w.clients
    for a in parsed.attempts:  # a tool server's call: the session that made it (one trial, one client)
        if a.identity is not None and (made_by := a.identity.get("mcp_session_sha256")) is not None:
            if made_by not in clients and len(clients) == 1:
                add(f"{rel}/{layout.RESPONSES}:{rn}: decision {n} was made by another MCP session than "
                    f"decision {clients[next(iter(clients))]}'s (one trial, one client)")
            clients.setdefault(made_by, n)
    cap = w.cap
    cap = cap if cap is not None and len(rbytes) > cap else None
    if not (cap is None and _plain_response(parsed, t, n)):
        _check_response(parsed, t, n, f"{rel}/{layout.RESPONSES}:{rn}", w.report, cap)


def _plain_response(r: ResponseLine, t: TraceLine, n: int) -> bool:
    """The common case, in which `_check_response` finds nothing: one valid answer, no latency measured
    (a policy that is not a model). Checked here so the hot loop builds no string for it."""
    attempts = r.attempts
    if r.decision_id != n or len(attempts) != 1 or t.attempts != 1:
        return False
    a = attempts[0]
    return (a.valid and a.latency_ms is None and a.usage is None and not t.paid_calls
            and not t.invalid_output and not t.aborted and t.latency_ms is None and t.latency_total_ms is None)


def _check_decision_inputs(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """The decision's input lines: their bytes, the presses the trace accepted, increasing capture
    frames, milestone evidence frames, and the result frame. The per-press loop stays inline (hot)."""
    add, rel = w.report.add, w.rel
    accepted = t.accepted_actions
    chunk = _take_inputs(w, n, accepted)
    data = chunk[0][1] if len(chunk) == 1 else b"".join(b for _, b in chunk)
    if hashlib.sha256(data).hexdigest() != t.inputs_sha256:
        add(f"{rel}/{layout.INPUTS}: decision {n}'s inputs differ from what it recorded")
    # a shortcut's presses are its expansion (engine.loop.shortcuts), chosen press by press
    expected = (t.shortcut["expansion"] if t.shortcut else t.parsed_actions)[:accepted]
    parse_input, evidence, last_capture, inputs_read = w.parse_input, w.evidence, w.last_capture, w.inputs_read
    for i, (k, b) in enumerate(chunk):
        r = parse_input(b, k)
        if r.action != (expected[i] if i < len(expected) else None) or r.decision_id != n or r.index != i:
            add(f"{rel}/{layout.TRACE}:{n}: decision {n}: trace accepted {expected}, but {layout.INPUTS}:{k} "
                f"has {r.action} (decision {r.decision_id}, index {r.index})")
        if r.capture_frame <= last_capture:
            add(f"{rel}/{layout.INPUTS}:{k}: capture frames do not increase")
        last_capture = r.capture_frame
        inputs_read += 1
        if evidence and (r.capture_frame, r.frame_sha256) in evidence:
            w.award_frames.add((r.capture_frame, r.frame_sha256))
            w.tally.award_actions.setdefault((r.capture_frame, r.frame_sha256), inputs_read)
    w.last_capture, w.inputs_read = last_capture, inputs_read
    _check_result_frame(w, t, n, r if chunk else None)


def _take_inputs(w: _Walk, n: int, accepted: int) -> list[tuple[int, bytes]]:
    """The next `accepted` input lines (fewer when the log ends early: one problem)."""
    inputs = w.inputs
    chunk = []
    for i in range(accepted):
        item = next(inputs, None)
        if item is None:
            w.report.add(f"{w.rel}/{layout.INPUTS}: decision {n} accepted {accepted} actions, the log ends after {i}")
            break
        chunk.append(item)
    return chunk


def _check_result_frame(w: _Walk, t: TraceLine, n: int, last_input: InputLine | None) -> None:
    """The decision left the frame its last press captured, or the one it saw when it pressed nothing."""
    if last_input is not None:
        if last_input.frame_sha256 != t.result_frame_sha256 or last_input.capture_frame != t.result_frame_index:
            w.report.add(f"{w.rel}/{layout.TRACE}:{n}: result frame differs from the decision's last input")
    elif t.result_frame_sha256 != t.frame_sha256:
        w.report.add(f"{w.rel}/{layout.TRACE}:{n}: no action was pressed, yet the frame changed")


def _check_decision_memory(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """The decision's memory operations: in order, each sound, their bytes, and every fact it wrote."""
    add, rel, memory, facts = w.report.add, w.rel, w.memory, w.facts
    mem = []
    while (item := memory.peek()) is not None:
        op = _memory_op(w, item)
        if op.decision_id != n:
            if op.decision_id < n:
                add(f"{rel}/{layout.MEMORY}:{item[0]}: decision {op.decision_id} out of order")
                memory.take()
                continue
            break
        mem.append(item[1])
        memory.take()
        _check_memory_op(op, facts, f"{rel}/{layout.MEMORY}:{item[0]}", w.report)
    if (hashlib.sha256(b"".join(mem)).hexdigest() if mem else EMPTY) != t.memory_sha256:
        add(f"{rel}/{layout.MEMORY}: decision {n}'s memory operations differ from what it recorded")
    for fid in t.memory_writes:
        if fid is not None and fid not in facts:
            add(f"{rel}/{layout.TRACE}:{n}: memory_writes names {fid}, which no memory operation created")


def _memory_op(w: _Walk, item: tuple[int, bytes]) -> MemoryOp:
    """The operation on the memory stream's next line, parsed once: a line that belongs to a later
    decision is looked at by every decision until then."""
    if w.op_item is not item:
        w.op_item, w.op = item, parse(MemoryOp, item[1], f"{w.rel}/{layout.MEMORY}:{item[0]}")
    return w.op


# Each decision's checks, in the order their problems are reported (messages and order are pinned by tests).
DECISION_CHECKS = (_check_chain, _check_continuity, _check_episode, _check_line_fields,
                   _check_decision_response, _check_decision_inputs, _check_decision_memory)


def _check_leftovers(w: _Walk) -> None:
    """Lines after the last decision: an interruption's (recover cuts them) or tampering."""
    for name, left in ((layout.RESPONSES, next(w.responses, None)), (layout.INPUTS, next(w.inputs, None)),
                       (layout.MEMORY, w.memory.peek())):
        if left is not None and w.result is None:  # a decision cut short by the interruption: recover cuts it
            w.report.interrupted.append(f"{w.rel}/{name}:{left[0]}: lines after the last recorded decision "
                                        f"(interrupted mid-decision; `oakwatch recover` cuts them)")
        elif left is not None:
            w.report.add(f"{w.rel}/{name}:{left[0]}: lines after the last recorded decision")


def _check_walk_end(w: _Walk) -> None:
    """After the last decision: the streams' digests, the milestones' evidence, the result's episodes."""
    rel, add, result = w.rel, w.report.add, w.result
    for name, stream in ((layout.TRACE, w.trace), (layout.RESPONSES, w.responses), (layout.INPUTS, w.inputs)):
        if stream.digest is not None:
            w.ctx.streamed[f"{rel}/{name}"] = stream.digest
    if w.awards - w.award_frames:
        add(f"{rel}/{layout.RESULT}: a milestone's evidence frame matches no input in {layout.INPUTS}")
    if result is not None and not result.recovered:
        expected_episodes = episode_records(w.steps, result.termination_reason, result.outcome == "success") \
            if w.episodes is not None else None
        if result.episodes != expected_episodes:
            add(f"{rel}/{layout.RESULT}: episodes differ from the episodes of {layout.TRACE}")
    if w.first_frame is not None and w.prev is not None:  # stored once the state was restored
        w.frames_seen.add(w.first_frame)


def _check_streams(reader: TrialReader, genesis_sha: str, rel: str, report: Report, ctx: Context,
                   result: TrialResult | None, trial_number: int | None = None):
    """Walk the trace with the other streams in step; returns what the later checks need.
    The hot loop of verify (one pass per decision, 100,000s of them): a few calls per decision,
    none per press, no per-line strings unless there is a problem."""
    w = _start_walk(reader, genesis_sha, rel, report, ctx, result, trial_number)
    parse_trace = _parser(TraceLine, rel, layout.TRACE)
    checks = DECISION_CHECKS
    tally_add = w.tally.add
    for n, line in w.trace:
        t = parse_trace(line, n)
        for check in checks:
            check(w, t, n, line)
        tally_add(t)
        w.prev = t
    _check_leftovers(w)
    _check_walk_end(w)
    return w.facts, w.frames_seen, w.tally, w.prev, w.head


def _check_response(r: ResponseLine, t: TraceLine, n: int, where: str, report: Report,
                    cap: int | None = None) -> None:
    """`cap`: the manifest's agent.max_reply_bytes when the line is longer than it (a shorter line
    cannot hold a reply over it)."""
    attempts = r.attempts
    _check_latency(attempts, t, where, report)
    if (r.decision_id == n and len(attempts) == t.attempts == 1 and not t.invalid_output and not t.aborted
            and attempts[0].valid and t.paid_calls == (attempts[0].usage is not None) and cap is None):
        return  # the common case: one valid answer
    for i, a in enumerate(attempts, 1):
        problems = _oversize_problems(a, cap) if a.oversize is not None else _stored_problems(a, cap)
        for problem in problems:
            report.add(f"{where}: attempt {i}: {problem}")
    if r.decision_id != n:
        report.add(f"{where}: decision_id {r.decision_id}, expected {n}")
    if len(r.attempts) != t.attempts:
        report.add(f"{where}: holds {len(r.attempts)} attempts, the trace says {t.attempts}")
    if t.invalid_output != any(not a.valid for a in r.attempts):
        report.add(f"{where}: invalid_output in the trace disagrees with the attempts")
    if t.aborted != bool(r.attempts and r.attempts[-1].aborted):
        report.add(f"{where}: aborted in the trace disagrees with the attempts")
    if t.paid_calls != sum(a.usage is not None for a in r.attempts):
        report.add(f"{where}: paid_calls in the trace disagrees with the attempts")
    if t.parsed_actions and not (r.attempts and r.attempts[-1].valid):
        report.add(f"{where}: actions were parsed, but no attempt was valid")


def _check_latency(attempts: list[Attempt], t: TraceLine, where: str, report: Report) -> None:
    """The trace's latencies are the attempts': latency_ms the accepted one's, latency_total_ms
    their sum (a line from before latency_total_ms held the sum in latency_ms)."""
    want = decision_latency(attempts)
    if "latency_total_ms" not in t.model_fields_set:
        if t.latency_ms != want["latency_total_ms"]:
            report.add(f"{where}: latency_ms {t.latency_ms} in the trace, the attempts sum to "
                       f"{want['latency_total_ms']}")
        return
    for name, value in want.items():
        if getattr(t, name) != value:
            report.add(f"{where}: {name} {getattr(t, name)} in the trace, the attempts give {value}")


def _stored_problems(a: Attempt, cap: int | None) -> list[str]:
    """A stored reply, or the response taken from it, longer than the reply cap allows."""
    if cap is None:
        return []
    import pydantic_core

    return [f"stores {what} of {size:,} bytes, over the manifest's agent.max_reply_bytes ({cap:,})"
            for what, value in (("a reply", a.reply), ("a response", a.raw)) if value is not None
            and (size := len(pydantic_core.to_json(value))) > cap]


def _oversize_problems(a: Attempt, cap: int | None) -> list[str]:
    """An oversized reply's record, checked against itself and the manifest (its bytes are not
    kept: the digest cannot be checked)."""
    o = a.oversize
    out = []
    if a.valid or a.raw is not None or a.reply is not None or a.failure is not None:
        out.append("an oversized reply must be an invalid output that keeps no text, no reply body and no failure")
    if cap is not None and o.cap_bytes != cap:
        out.append(f"an oversized reply judged by a cap of {o.cap_bytes:,} bytes, not the manifest's {cap:,}")
    received, size, source, limit = o.received_bytes, o.size_bytes, o.size_source, o.cap_bytes
    consistent = {
        "received": size == received and received > limit,
        "content-length": size is not None and size > received > limit,
        "stored": size is not None and received <= limit < size,
        None: size is None and received > limit,
    }[source]
    if not consistent or received < 0:
        out.append(f"an oversized reply's sizes do not hold together (received {received}, size {size}, "
                   f"source {source}, cap {limit})")
    unread = source != "stored"  # a body cut at the cap was never parsed: nothing of it is known
    if unread and (a.model_id is not None or a.response_id is not None or a.stop_reason is not None or (
            a.usage is not None and any(v is not None for v in a.usage.model_dump().values()))):
        out.append("an oversized reply that was never read records a model, a response id, a stop reason or usage")
    return out


def _check_memory_op(op: MemoryOp, facts: set[str], where: str, report: Report) -> None:
    if op.op == "write":
        if op.fact_id in facts:
            report.add(f"{where}: writes {op.fact_id} a second time")
        facts.add(op.fact_id)
    elif op.op in ("update", "complete", "supersede", "evict"):
        if op.fact_id not in facts:
            report.add(f"{where}: {op.op} of {op.fact_id}, which no earlier write created")
    elif op.op in ("retrieve",):
        unknown = [f for f in op.fact_ids or [] if f not in facts]
        if unknown:
            report.add(f"{where}: retrieves {unknown}, which no earlier write created")
    elif op.op == "read":
        unknown = [f for f in op.fact_ids or [] if f not in facts]
        if unknown:
            report.add(f"{where}: reads {unknown} as found, but no earlier write created them")


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


@dataclass(frozen=True, slots=True)
class _ResultCase:
    """What a trial's result.json is checked against: its genesis, its trace's tally and last decision."""

    r: TrialResult
    g: TrialGenesis
    genesis_sha: str
    head: str
    tally: TraceTally
    last: TraceLine | None
    where: str
    ctx: Context
    report: Report


def _check_result_seal(c: _ResultCase) -> None:
    """The chain it was sealed with, and the trial it names."""
    r, g, where, add, chain = c.r, c.g, c.where, c.report.add, c.r.chain
    if chain.genesis_sha256 != c.genesis_sha:
        add(f"{where}: chain.genesis_sha256 is not the hash of {layout.TRIAL}")
    if chain.trace_head != c.head or chain.trace_lines != c.tally.decisions:
        add(f"{where}: sealed {chain.trace_lines} decisions ending {chain.trace_head[:12]}…, but the trace has "
            f"{c.tally.decisions} ending {c.head[:12]}… (the trace was cut or changed)")
    if r.last_decision != c.tally.decisions:
        add(f"{where}: last_decision {r.last_decision}, the trace has {c.tally.decisions}")
    for name in ("trial_key", "position", "attempt", "experiment_id"):
        if getattr(r, name) != getattr(g, name):
            add(f"{where}: {name} differs from {layout.TRIAL}")
    if (r.condition, r.trial) != (g.condition, g.trial):
        add(f"{where}: condition or trial number differs from {layout.TRIAL}")


def _check_result_ending(c: _ResultCase) -> None:
    """The outcome follows from the termination reason, which the last decision recorded."""
    r, where, add = c.r, c.where, c.report.add
    if r.termination_reason not in ENDINGS:
        add(f"{where}: unknown termination_reason {r.termination_reason!r}")
        return
    e = ending(r.termination_reason)
    if r.outcome != e.outcome:
        add(f"{where}: outcome {r.outcome} does not follow from termination_reason "
            f"{r.termination_reason} ({e.outcome})")
    if (r.outcome in VALID_OUTCOMES) != (r.invalid_cause is None):
        add(f"{where}: invalid_cause {r.invalid_cause!r} does not fit outcome {r.outcome}")
    recorded = c.last.termination_reason if c.last else None
    # A trial whose evidence failed after its last decision ended it keeps that reason as detail.
    if recorded is not None and recorded != r.termination_reason and not (
            r.termination_reason in ("evidence-failure", "process-died") and r.termination_detail == recorded):
        add(f"{where}: termination_reason {r.termination_reason}, but the last decision recorded "
            f"{recorded}")
    if e.at_decision and recorded != r.termination_reason:
        add(f"{where}: {r.termination_reason} must be recorded by the decision that ended the trial, "
            f"and the last decision records {recorded}")


def _check_result_budgets(c: _ResultCase) -> None:
    """A budget ending spent its budget; the final rung or the goal as the game defines them."""
    r, where, add, tally, m = c.r, c.where, c.report.add, c.tally, c.ctx.manifest
    if r.termination_reason not in ENDINGS:
        return
    if m is not None and r.termination_reason == "budget:accepted_actions" \
            and tally.accepted_actions != m.budgets.accepted_actions:
        add(f"{where}: ended on the action budget after {tally.accepted_actions} actions, the budget is "
            f"{m.budgets.accepted_actions}")
    if m is not None and r.termination_reason == "budget:model_decisions" \
            and (m.budgets.model_decisions is None or tally.model_calls < m.budgets.model_decisions):
        add(f"{where}: ended on the decision budget after {tally.model_calls} calls")
    goal_id = m.game.goal if m is not None else None
    if c.ctx.game is not None and goal_id is None:
        _check_final(r, tally, where, c.ctx.game, c.report)
    if m is not None:
        _check_goal(r, tally, where, goal_id, c.ctx.game, c.report)


def _check_result_telemetry(c: _ResultCase) -> None:
    """Every telemetry figure is the one the trace gives."""
    t = c.r.telemetry
    if t is None:
        return
    from engine.loop.tally import LOOP_ONLY

    recomputed = c.tally.telemetry().model_dump(exclude=set(LOOP_ONLY))
    for name, actual in recomputed.items():
        if getattr(t, name) != actual:
            c.report.add(f"{c.where}: telemetry.{name} is {getattr(t, name)}, the trace gives {actual}")


def _check_result_milestones(c: _ResultCase) -> None:
    """The milestones reached, their awards and stamps, and the points they are worth."""
    r, where, add, tally, game = c.r, c.where, c.report.add, c.tally, c.ctx.game
    if r.milestones_reached != tally.milestones_reached:
        add(f"{where}: milestones_reached {r.milestones_reached}, the trace reached "
            f"{tally.milestones_reached}")
    # A recovered trial lists no awards (their probe samples died with the process).
    if [m.id for m in r.milestones] != r.milestones_reached and not (r.recovered and not r.milestones):
        add(f"{where}: the milestone awards do not match milestones_reached")
    for m in r.milestones:
        if not 1 <= m.decision_id <= tally.decisions:
            add(f"{where}: {m.id} awarded at decision {m.decision_id}, which was never recorded")
    _check_active_stamps(r, where, c.report)
    if game is not None:
        points = sum(m.points for m in game.milestones if m.id in r.milestones_reached)
    else:
        points = sum(m.points for m in r.milestones)
    if points != r.progress_points:
        add(f"{where}: progress_points {r.progress_points}, the milestones reached are worth {points}")


def _check_result_game_figures(c: _ResultCase) -> None:
    """The ladder and path figures, against the game the trial played."""
    game = c.ctx.game
    if game is not None:
        _check_ladder_figures(c.r, c.where, game, c.report)
        _check_path_figures(c.r, c.tally, c.where, _trial_game(c.ctx, c.r.trial), c.g.rom_sha256, c.report)


# A sealed result's checks, in the order their problems are reported.
RESULT_CHECKS = (_check_result_seal, _check_result_ending, _check_result_budgets, _check_result_telemetry,
                 _check_result_milestones, _check_result_game_figures)


def _check_result(r: TrialResult, g: TrialGenesis, genesis_sha: str, head: str, tally: TraceTally,
                  last: TraceLine | None, rel: str, ctx: Context, report: Report) -> None:
    where = f"{rel}/{layout.RESULT}"
    if r.chain is None:
        report.add(f"{where}: no chain (not sealed by the recorder)")
        return
    case = _ResultCase(r, g, genesis_sha, head, tally, last, where, ctx, report)
    for check in RESULT_CHECKS:
        check(case)


def _check_active_stamps(r: TrialResult, where: str, report: Report) -> None:
    """The awards' active-time stamps (docs/metrics.md, "Active time") run forward in the order the rungs
    were reached and end within the trial's active total, which is its wall time less its policy time.
    A result from before the stamps has none of them and is not checked; one with some is checked whole."""
    stamped = [m for m in r.milestones if m.active_seconds is not None]
    t = r.telemetry
    total = t.active_seconds if t is not None else None
    if not stamped and total is None:
        return
    for m in r.milestones:
        if m.active_seconds is None:
            report.add(f"{where}: {m.id} has no active_seconds stamp, though the trial records active time")
        elif m.active_seconds < 0:
            report.add(f"{where}: {m.id} active_seconds {m.active_seconds} is negative")
    previous = None
    for m in sorted(stamped, key=lambda m: (m.decision_id, m.frame_index)):
        if previous is not None and m.active_seconds < previous.active_seconds:
            report.add(f"{where}: {m.id} reached after {previous.id} at active_seconds {m.active_seconds}, earlier "
                       f"than {previous.id}'s {previous.active_seconds}")
        previous = m
    if total is None:
        report.add(f"{where}: the awards carry active-time stamps but telemetry.active_seconds is null")
        return
    late = [m.id for m in stamped if m.active_seconds > total]
    if late:
        report.add(f"{where}: {', '.join(late)} stamped after the trial's active time ({total} s)")
    if t.wall_time_seconds is not None and t.policy_seconds is not None \
            and abs(t.wall_time_seconds - t.policy_seconds - total) > 0.002:  # each figure rounded to 1 ms
        report.add(f"{where}: telemetry.active_seconds {total} is not wall_time_seconds {t.wall_time_seconds} "
                   f"less policy_seconds {t.policy_seconds}")


def _check_path_figures(r: TrialResult, tally: TraceTally, where: str, game, rom_sha256: str,
                        report: Report) -> None:
    """Path efficiency from the game's optimal presses and the input that reached the deepest rung.
    (A result written before path efficiency existed has none of its keys and is not checked.)"""
    from engine.loop.trial import PATH_KEYS, path_figures

    if not any(k in r.derived for k in PATH_KEYS):
        return
    award = next((m for m in r.milestones if m.id == r.deepest_milestone), None)
    used = tally.award_actions.get((award.frame_index, award.frame_sha256)) if award else None
    expected = path_figures(game, r.deepest_milestone if award else None, used, rom_sha256) if not r.recovered \
        else path_figures(None, None, None)
    for key, value in expected.items():
        if r.derived.get(key) != value:
            report.add(f"{where}: derived.{key} is {r.derived.get(key)}, the trace and the game definition give "
                       f"{value}")


def _check_goal(r: TrialResult, tally: TraceTally, where: str, goal_id: str | None, game, report: Report) -> None:
    """The run's goal (manifest game.goal, engine.games.goals) against the result: recorded for every trial that
    played, met exactly when the trial ended goal-met, its evidence meeting the goal's predicate, on a frame
    the inputs captured in the trial's last decision. Without a goal, neither a goal nor goal-met."""
    from engine.games.goals import GOAL_MET, recheck

    reason, goal = r.termination_reason, r.goal
    if goal_id is None:
        if goal is not None or reason == GOAL_MET:
            report.add(f"{where}: records a goal ({goal.id if goal else reason}), but the manifest chose none")
        return
    if reason in (FINAL, FINAL_SKIPPED):
        report.add(f"{where}: {reason}, but the run's goal {goal_id} decides success, not the ladder")
    if goal is None:
        if r.outcome in VALID_OUTCOMES and tally.decisions:
            report.add(f"{where}: the run's goal is {goal_id}, but the result records no goal")
        return
    if goal.id != goal_id:
        report.add(f"{where}: the result's goal is {goal.id}, the manifest's {goal_id}")
    if goal.met != (reason == GOAL_MET):
        report.add(f"{where}: goal {goal.id} " + ("met, but the trial ended " + reason if goal.met else
                                                  "not met, yet the trial ended goal-met"))
    if game is None or goal_id not in game.goals:
        if game is not None:
            report.add(f"{where}: the game definition defines no goal {goal_id}")
        return
    for problem in recheck(game.goals[goal_id], game, goal):
        report.add(f"{where}: goal {goal.id}: {problem}")
    if goal.met:
        if goal.decision_id != tally.decisions:
            report.add(f"{where}: goal {goal.id} met at decision {goal.decision_id}, the trial's last is "
                       f"{tally.decisions}")
        if (goal.frame_index, goal.frame_sha256) not in tally.award_actions:
            report.add(f"{where}: goal {goal.id} met on frame {goal.frame_index}, which no recorded input captured")


def _check_final(r: TrialResult, tally: TraceTally, where: str, game, report: Report) -> None:
    """The ending the ladder gives (engine.games.ladder) against the one recorded."""
    reason = r.termination_reason
    expected = final_ending(game, tally.milestones_reached, r.pre_satisfied)
    if reason == FINAL and expected != FINAL:
        missing = [m for m in deciding(game) if m not in tally.milestones_reached and m not in r.pre_satisfied]
        report.add(f"{where}: final-milestone, but the trace never reached {', '.join(missing)}")
    elif reason == FINAL_SKIPPED and expected != FINAL_SKIPPED:
        report.add(f"{where}: {FINAL_SKIPPED}, but the trace " + (
            "satisfied every required rung" if expected == FINAL else f"never reached {game.final_id}"))
    elif expected is not None and reason not in (FINAL, FINAL_SKIPPED) and r.outcome in VALID_OUTCOMES \
            and tally.decisions:
        report.add(f"{where}: the trace reached the end of the ladder ({expected}), but the trial ended with "
                   f"{reason}")


def _check_ladder_figures(r: TrialResult, where: str, game, report: Report) -> None:
    """pre_satisfied, skipped_required and deepest_milestone, by the ladder's rules (engine.games.ladder)."""
    ids = [m.id for m in game.milestones]
    unknown = sorted(set(r.pre_satisfied) - set(ids))
    if unknown:
        report.add(f"{where}: pre_satisfied names rungs the game does not have: {', '.join(unknown)}")
    both = sorted(set(r.pre_satisfied) & set(r.milestones_reached))
    if both:
        report.add(f"{where}: {', '.join(both)} held at the start and cannot be reached again")
    # A recovered result cannot know which rungs held at the start (see sessions.audit.recover): it claims none skipped.
    skipped = [] if r.recovered else skipped_required(game, r.milestones_reached, r.pre_satisfied)
    if skipped != r.skipped_required:
        report.add(f"{where}: skipped_required {r.skipped_required}, the rungs reached skip {skipped}")
    if deepest(game, r.milestones_reached, r.pre_satisfied) != r.deepest_milestone:
        report.add(f"{where}: deepest_milestone {r.deepest_milestone} does not follow from the awards")


def _check_frames(reader: TrialReader, r: TrialResult, referenced: set[str], rel: str, report: Report,
                  deep: bool) -> None:
    seal = r.chain.frames if r.chain else None
    path = reader.folder / layout.FRAMES
    if seal is None:
        if r.outcome in VALID_OUTCOMES:
            report.add(f"{rel}/{layout.RESULT}: a valid trial without a sealed frame store")
        return
    if not path.is_file():
        report.add(f"{rel}/{layout.FRAMES} is missing")
        return
    if file_sha256(path) != seal.sha256 or path.stat().st_size != seal.bytes:
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
        for frame, png in iter_pngs(path, frames):
            try:
                if pixel_sha256(decode_png(png)) != frame.sha256:
                    report.add(f"{rel}/{layout.FRAMES}: the frame stored at byte {frame.offset} does not have "
                               f"the pixels its hash names")
            except ValueError as exc:
                report.add(f"{rel}/{layout.FRAMES}: byte {frame.offset}: {exc}")


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
    sealed = {}
    voided = {}
    for e in events:
        if e.event == "trial-sealed":
            sealed[(e.trial_key, e.attempt)] = e
        elif e.event == "voided":
            voided[e.void] = e
    present = {(r.trial_key, r.attempt): sha for r, sha in results.values()}
    for v in voids:
        for key in v.trial_keys:
            try:
                result, sha = TrialReader(ctx.root / f"void-{v.void}" / key).result()
                present[(key, result.attempt)] = sha
            except FormatProblem:
                continue
        e = voided.get(v.void)
        if e is None or e.positions != v.positions or e.trial_keys != v.trial_keys:
            report.add(f"void-{v.void}/void.json: not what {layout.RUN_LOG} recorded")
    for (key, attempt), e in sealed.items():
        sha = present.get((key, attempt))
        if sha is None:
            report.add(f"{layout.RUN_LOG}: trial {key} (attempt {attempt}) was sealed, but its folder is gone")
        elif sha != e.result_sha256:
            report.add(f"{key}/{layout.RESULT}: differs from the result sealed in {layout.RUN_LOG}")
    for key, attempt in sorted(set(present) - set(sealed)):
        if ctx.interrupted:  # killed between writing the result and logging its seal: recover seals it
            report.interrupted.append(f"{key} (attempt {attempt}): interrupted between its result and its seal "
                                      f"in {layout.RUN_LOG}; `oakwatch recover {ctx.root}` finishes it")
        else:
            report.add(f"{key} (attempt {attempt}): has a result that {layout.RUN_LOG} never sealed")
    for v in voids:
        if v.void not in voided:
            report.add(f"void-{v.void}: a void {layout.RUN_LOG} never recorded")


def _check_summary(ctx: Context, report: Report, events: list, results: dict, voids: list[VoidRecord]) -> None:
    path = ctx.root / layout.SUMMARY
    if not path.is_file():
        report.interrupted.append(f"{layout.SUMMARY} is missing: the run did not finish; "
                                  f"`oakwatch recover {ctx.root}` finishes it")
        return
    try:
        summary = parse(Summary, path.read_bytes(), layout.SUMMARY)
    except FormatProblem as exc:
        report.add(str(exc))
        return
    if ctx.manifest is None or ctx.schedule is None:
        return
    finished = [e for e in events if e.event == "run-finished"]
    if finished and (ctx.root / layout.LOCK).exists() and any(
            e.event == "run-started" and e.seq > finished[-1].seq for e in events):
        # A resume that did not finish: the summary is the one before it, not a claim about the run since.
        report.interrupted.append(f"{layout.SUMMARY} is from before the resumed run, which did not finish; "
                                  f"`oakwatch recover {ctx.root}` finishes it")
        return
    if not finished or events[-1].event != "run-finished":
        report.add(f"{layout.RUN_LOG}: does not end with the run's finish, yet {layout.SUMMARY} exists")
    elif (finished[-1].stopped_early, finished[-1].stop_reason) != (summary.stopped_early, summary.stop_reason):
        report.add(f"{layout.SUMMARY}: stopped_early/stop_reason differ from what {layout.RUN_LOG} recorded")
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


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
