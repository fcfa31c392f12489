"""The publishable package (`oakwatch export DIR --output PKG`, sessions.report) as a reader checks it:
`oakwatch verify PKG` in package mode, and what `oakwatch replay PKG/trials/<key>` needs from it.

A package is not an evidence folder (no ROM or state, no raw payloads unless `--include-raw`, a
redacted manifest, the report and analysis code added), so the evidence audit does not apply to it.
Package mode checks what the package holds:
  - its own SHA256SUMS: every file listed and matching, nothing unlisted;
  - provenance: every file shipped under an evidence file's name is that file byte for byte (its
    entry in evidence-SHA256SUMS, the evidence folder's own sums), unless package.json names it as
    rewritten at export (redacted text, a condition's redacted manifest), with why;
  - the records: each trial's trace is an unbroken hash chain from its trial.json, each decision's
    inputs and memory operations (and responses, when shipped) are the bytes it recorded, result.json
    names the trace's last line; run.jsonl is a hash chain from schedule.json, and every trial it
    sealed is in the package with the result it sealed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from sessions.evidence import layout
from sessions.evidence.checksums import SumsFormatError, file_sha256, parse_sums

PACKAGE_MANIFEST = "manifest.redacted.yaml"
PACKAGE_INFO = "package.json"
EVIDENCE_SUMS = "evidence-SHA256SUMS"
GAME_COPY = "game/definition.yaml"  # the game definition, when the manifest's path was local (redacted)
REDACTED = "<local path redacted>"
EMPTY = hashlib.sha256(b"").hexdigest()


class PackageInfo(BaseModel):
    """package.json: what the export did, for `oakwatch verify` (package mode)."""

    model_config = ConfigDict(extra="forbid")
    format: int = 1
    experiment_id: str
    evidence_root_sha256: str | None
    include_raw: bool
    rewritten: dict[str, str]  # package path -> why its bytes differ from the evidence file of that name
    game_definition: str | None = None  # GAME_COPY when shipped


def is_package(folder: Path) -> bool:
    return (folder / PACKAGE_MANIFEST).is_file() and (folder / EVIDENCE_SUMS).is_file() \
        and not (folder / layout.MANIFEST).exists()


def _sums(path: Path, name: str, problems: list[str]) -> dict[str, str]:
    try:
        return parse_sums(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(f"{name} is missing")
    except (OSError, UnicodeDecodeError, SumsFormatError) as exc:
        problems.append(f"{name}: unreadable ({exc})")
    return {}


def _info(folder: Path, problems: list[str]) -> PackageInfo | None:
    try:
        return PackageInfo.model_validate_json((folder / PACKAGE_INFO).read_bytes())
    except FileNotFoundError:
        problems.append(f"{PACKAGE_INFO} is missing (a package written before it: export it again to check its "
                        f"provenance)")
    except (OSError, ValidationError) as exc:
        problems.append(f"{PACKAGE_INFO}: unreadable ({str(exc).splitlines()[0]})")
    return None


def verify_package(folder: Path) -> tuple[list[str], dict[str, Any]]:
    """Every problem, one line each, and what was checked (counts for the OK line)."""
    problems: list[str] = []
    checked: dict[str, Any] = {"files": 0, "from_evidence": 0, "trials": 0, "decisions": 0}
    digests = _check_own_sums(folder, problems)
    checked["files"] = len(digests)
    info = _info(folder, problems)
    rewritten = info.rewritten if info is not None else {}
    checked["from_evidence"] = _check_provenance(folder, digests, rewritten, problems)
    sealed = _check_run_log(folder, problems)
    from sessions.analysis.metrics import trial_folders

    for trial, rel, _voided in trial_folders(folder):
        if any(f"{rel}/{name}" in rewritten for name in layout.STREAMS + (layout.TRIAL, layout.RESULT)):
            continue  # redacted at export: its chains cannot hold, and package.json says so
        decisions = _check_trial(trial, rel, problems, sealed)
        checked["trials"] += 1
        checked["decisions"] += decisions
    for key, attempt in sorted(sealed):
        problems.append(f"{layout.RUN_LOG}: trial {key} (attempt {attempt}) was sealed, but the package lacks it")
    return problems, checked


def _check_own_sums(folder: Path, problems: list[str]) -> dict[str, str]:
    """The package's SHA256SUMS: every file listed and matching, nothing unlisted; rel -> SHA-256."""
    sums = _sums(folder / layout.SUMS, layout.SUMS, problems)
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    digests: dict[str, str] = {}
    for rel in present:
        if rel == layout.SUMS:
            continue
        digests[rel] = file_sha256(folder / rel)
        if rel not in sums:
            problems.append(f"{rel}: not listed in {layout.SUMS}")
        elif sums[rel] != digests[rel]:
            problems.append(f"{rel}: content differs from its {layout.SUMS} entry")
    for rel in sorted(set(sums) - set(digests)):
        problems.append(f"{layout.SUMS} lists {rel}, which the package lacks")
    return digests


def _check_provenance(folder: Path, digests: dict[str, str], rewritten: dict[str, str], problems: list[str]) -> int:
    """Every file shipped under an evidence file's name is that file, unless package.json names it as
    rewritten; the number of files that came from the evidence."""
    evidence = _sums(folder / EVIDENCE_SUMS, EVIDENCE_SUMS, problems)
    count = 0
    for rel, digest in digests.items():
        if rel in evidence and rel not in rewritten:
            count += 1
            if evidence[rel] != digest:
                problems.append(f"{rel}: not the evidence's file of that name (its {EVIDENCE_SUMS} entry differs)")
    for rel in sorted(rewritten):
        if rel not in digests:
            problems.append(f"{PACKAGE_INFO} names {rel} as rewritten, but the package lacks it")
    return count


def _check_run_log(folder: Path, problems: list[str]) -> dict[tuple[str, int], Any]:
    """The run log's chain from schedule.json; {(trial key, attempt): its trial-sealed event}."""
    from sessions.evidence.reader import FormatProblem, iter_lines, read_run_log

    sealed: dict[tuple[str, int], Any] = {}
    if not (folder / layout.RUN_LOG).is_file() or not (folder / layout.SCHEDULE).is_file():
        problems.append(f"{layout.RUN_LOG} or {layout.SCHEDULE} is missing")
        return sealed
    events, _good, bad = read_run_log(folder)
    problems += bad
    head = file_sha256(folder / layout.SCHEDULE)
    try:
        for n, line in iter_lines(folder / layout.RUN_LOG, layout.RUN_LOG):
            if n > len(events):
                break
            if events[n - 1].prev_sha256 != head:
                problems.append(f"{layout.RUN_LOG}:{n}: hash chain broken (prev_sha256 does not match line {n - 1})")
            head = hashlib.sha256(line).hexdigest()
    except FormatProblem as exc:
        problems.append(str(exc))
    for e in events:
        if e.event == "trial-sealed":
            sealed[(e.trial_key, e.attempt)] = e
    return sealed


class _Chains:
    """One trial's streams, as the package ships them, read in step with its trace."""

    def __init__(self, reader, rel: str):
        from engine.loop.records import MemoryOp
        from sessions.evidence.reader import parse

        self.rel = rel
        self.inputs = iter(reader.lines(layout.INPUTS)) if reader.exists(layout.INPUTS) else iter(())
        memory = list(reader.lines(layout.MEMORY)) if reader.exists(layout.MEMORY) else []
        self.responses = iter(reader.lines(layout.RESPONSES)) if reader.exists(layout.RESPONSES) else None
        self.by_decision: dict[int, list[bytes]] = {}
        for n, line in memory:
            self.by_decision.setdefault(parse(MemoryOp, line, f"{rel}/{layout.MEMORY}:{n}").decision_id,
                                        []).append(line)

    def check(self, t, n: int, problems: list[str]) -> None:
        """Decision n's inputs, memory operations and (when shipped) response are the bytes it recorded."""
        from engine.loop.records import InputLine
        from sessions.evidence.reader import parse

        rel, sha = self.rel, hashlib.sha256
        chunk = [next(self.inputs, (0, b""))[1] for _ in range(t.accepted_actions)]
        for k, data in enumerate(chunk):
            if data:
                parse(InputLine, data, f"{rel}/{layout.INPUTS} (decision {n}, input {k})")
        if sha(b"".join(chunk)).hexdigest() != t.inputs_sha256:
            problems.append(f"{rel}/{layout.INPUTS}: decision {n}'s inputs differ from what it recorded")
        mem = self.by_decision.pop(n, [])
        if (sha(b"".join(mem)).hexdigest() if mem else EMPTY) != t.memory_sha256:
            problems.append(f"{rel}/{layout.MEMORY}: decision {n}'s memory operations differ from what it "
                            f"recorded")
        if self.responses is not None:
            item = next(self.responses, None)
            if item is None or sha(item[1]).hexdigest() != t.response_sha256:
                problems.append(f"{rel}/{layout.RESPONSES}: decision {n}'s response differs from what it "
                                f"recorded")

    def check_end(self, problems: list[str]) -> None:
        """Nothing is left after the trace's last decision."""
        if next(self.inputs, None) is not None:
            problems.append(f"{self.rel}/{layout.INPUTS}: inputs after the trace's last decision")
        if self.by_decision:
            problems.append(f"{self.rel}/{layout.MEMORY}: operations of decisions the trace lacks "
                            f"({sorted(self.by_decision)[:5]})")


def _check_trial(trial: Path, rel: str, problems: list[str], sealed: dict) -> int:
    """One trial's chains; the number of decisions read."""
    from sessions.evidence.reader import FormatProblem, TrialReader

    reader = TrialReader(trial, rel)
    try:
        genesis, genesis_sha = reader.genesis()
        decisions, head = _check_trace(reader, rel, genesis_sha, problems)
        if not reader.exists(layout.RESULT):
            problems.append(f"{rel}: no {layout.RESULT}")
            return decisions
        result, result_sha = reader.result()
    except FormatProblem as exc:
        problems.append(str(exc))
        return 0
    chain = result.chain
    if chain is None:
        problems.append(f"{rel}/{layout.RESULT}: no chain (not sealed by the recorder)")
    elif chain.genesis_sha256 != genesis_sha or chain.trace_head != head or chain.trace_lines != decisions:
        problems.append(f"{rel}/{layout.RESULT}: its chain (genesis, {chain.trace_lines} decisions ending "
                        f"{chain.trace_head[:12]}…) is not this trial.json and trace ({decisions} ending {head[:12]}…)")
    event = sealed.pop((genesis.trial_key, result.attempt), None)
    if event is None:
        problems.append(f"{rel}: a result {layout.RUN_LOG} never sealed")
    elif event.result_sha256 != result_sha or event.trace_head != head:
        problems.append(f"{rel}/{layout.RESULT}: differs from the result sealed in {layout.RUN_LOG}")
    return decisions


def _check_trace(reader, rel: str, genesis_sha: str, problems: list[str]) -> tuple[int, str]:
    """The trace's hash chain from trial.json, each decision's records in step; (decisions, the chain's head)."""
    from engine.loop.records import TraceLine
    from sessions.evidence.reader import parse

    head = genesis_sha
    streams = _Chains(reader, rel)
    decisions = 0
    for n, line in reader.lines(layout.TRACE):
        t = parse(TraceLine, line, f"{rel}/{layout.TRACE}:{n}")
        decisions = n
        if t.prev_sha256 != head:
            problems.append(f"{rel}/{layout.TRACE}:{n}: hash chain broken (prev_sha256 does not match the "
                            f"{'genesis' if n == 1 else f'line {n - 1}'})")
        head = hashlib.sha256(line).hexdigest()
        streams.check(t, n, problems)
    streams.check_end(problems)
    return decisions, head


def package_info(experiment_id: str, root_sha256: str | None, include_raw: bool, rewritten: dict[str, str],
                 game_definition: str | None) -> bytes:
    info = PackageInfo(experiment_id=experiment_id, evidence_root_sha256=root_sha256, include_raw=include_raw,
                       rewritten=rewritten, game_definition=game_definition)
    return (json.dumps(info.model_dump(mode="json"), indent=1, sort_keys=True) + "\n").encode()
