"""`oakwatch review`: an evidence folder loaded into per-decision views (pure: no Textual).

A trial is read from its folder (trace, responses, inputs, memory, annotations, frame store,
result.json if sealed), tolerating a still-running trial: a torn last line is left for the next
read, a result that is not there yet means "running". For the decision in view it gives the frame
the agent saw, every attempt's raw response, the parsed actions, the memory store as it stood
(memory ops replayed up to and including that decision, with that decision's reads and writes
marked) and the ladder so far (awards at or before that decision).

Blinding: conditions appear by label only. Model ids (trace `model_id`, each attempt's `model_id`
and the model its reply names) are masked as `[model]` wherever text is shown, and neither
`conditions/<label>.yaml` nor `blinding.json` is read, unless the folder holds `unblinded/`.

Labels made here are memory-error annotations of the named annotator, checked against the trial
(refers-to an earlier decision or a fact some memory op wrote by then; a consequence names its
primary; a recovery decision after the contradicting one) and appended through the annotation layer.
So are reviewed records (the annotator looked at a range of the trial's decisions, the whole trial by
default, and labelled every memory error found there); the trial list marks the trials this
annotator has reviewed.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from engine.figures import decision_figure, money
from engine.loop.records import Annotation, InputLine, MemoryOp, ResponseLine, TraceLine, Usage
from engine.loop.trial import utc_now
from sessions.evidence import layout
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.framestore import StoredFrame, decode_png, scan_store
from sessions.evidence.reader import FormatProblem, parse

MODEL_MASK = "[model]"
UNBLINDED = "unblinded"
RUBRIC = Path(__file__).resolve().parents[2] / "assets" / "prompts" / "memory-error-rubric.yaml"
SEVERITIES = ("minor", "material", "critical")
ROLES = ("primary", "consequence")
FACT_WRITING_OPS = frozenset({"write", "update", "supersede", "complete"})
STORE_OPS = FACT_WRITING_OPS | {"evict"}
DEFAULT_EXCLUSIVE = ("is_at", "current_objective", "status")
DEFAULT_POSSESSION = ("has_item", "lacks_item", "delivered_item")
FRAME_CACHE = 32


class LabelRefused(ValueError):
    """A label that cannot be recorded as given; the message says why."""


def rubric_types(path: Path = RUBRIC) -> dict[str, str]:
    """The memory-error types (name -> definition) of the rubric; `other` always last."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        types = {str(k): str(v) for k, v in data["types"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
        types = {k: "" for k in ("omission", "false-persistence", "fabrication", "contradiction",
                                 "duplicate-objective", "context-substitution", "memory-use-failure",
                                 "unsupported-overwrite")}
    types.setdefault("other", "Anything else; the note must say what.")
    return types


# -- tolerant reading -----------------------------------------------------------------------------

def whole_lines(path: Path) -> list[bytes]:
    """The file's whole lines (a torn last line, still being written, is left out)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = data.rfind(b"\n")
    if end < 0:
        return []
    return data[:end + 1].splitlines(keepends=True)


def read_stream(path: Path, model, where: str) -> tuple[list, str | None]:
    """Records of a JSONL stream up to its first bad line, and a problem naming that line."""
    out = []
    for n, line in enumerate(whole_lines(path), 1):
        try:
            out.append(parse(model, line, f"{where}:{n}"))
        except FormatProblem as exc:
            return out, str(exc)
    return out, None


def _signature(folder: Path, names: tuple[str, ...]) -> tuple:
    sig = []
    for name in names:
        try:
            st = os.stat(folder / name)
            sig.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            sig.append((name, None, None))
    return tuple(sig)


# -- blinding ---------------------------------------------------------------------------------------

class Masker:
    """Replaces every model id it was told of (longest first) with `[model]`; a no-op when unblinded."""

    def __init__(self, active: bool = True):
        self.active = active
        self.ids: set[str] = set()
        self._order: list[str] = []

    def add(self, model_id: Any) -> None:
        if isinstance(model_id, str) and len(model_id.strip()) >= 3 and model_id not in self.ids:
            self.ids.add(model_id)
            self._order = sorted(self.ids, key=len, reverse=True)

    def text(self, text: str | None) -> str | None:
        if text is None or not self.active:
            return text
        for model_id in self._order:
            if model_id in text:
                text = text.replace(model_id, MODEL_MASK)
        return text

    def field(self, value: str | None) -> str | None:
        """A model field itself: masked whole (even an id too short to search for in text)."""
        if value is None or not self.active:
            return value
        return MODEL_MASK


def is_unblinded(root: Path) -> bool:
    return EvidenceFolder(root).path(layout.UNBLINDED).is_dir()


def condition_names(root: Path) -> dict[str, str]:
    """label -> condition id, only once the folder is unblinded (else nothing is read)."""
    labels = EvidenceFolder(root).unblinded_labels()  # None while blind, or unreadable
    return {str(k): str(v) for k, v in labels.items()} if labels else {}


def _manifest_models(root: Path) -> list[str]:
    """The model ids the manifest asked for (only to mask them: an error text may quote one)."""
    try:
        data = EvidenceFolder(root).manifest_data()
        return [c["model"] for c in data.get("conditions", []) if isinstance(c, dict) and c.get("model")]
    except (ValueError, AttributeError, TypeError):  # FormatProblem: missing, unreadable or not YAML
        return []


# -- the experiment ----------------------------------------------------------------------------------

REVIEWED_MARK = "✓"  # every decision reviewed by this annotator
PART_REVIEWED_MARK = "◐"  # some of them


@dataclass(frozen=True)
class TrialEntry:
    key: str
    label: str
    outcome: str  # a result's outcome, or "running" while no result.json is there
    decisions: int | None  # the result's last decision (None while running)
    points: int | None
    total_points: int | None
    deepest: str | None
    cost_usd: float | None = None  # the result's (None: unknown, or no result yet)
    reviewed: tuple[tuple[int, int], ...] = ()  # this annotator's reviewed ranges of it

    @property
    def reviewed_whole(self) -> bool:
        return self.decisions is not None and reviewed_through(self.reviewed, self.decisions)

    def line(self) -> str:
        pts = "" if self.points is None else f" {self.points}/{self.total_points} pts"
        deep = f" {self.deepest}" if self.deepest else ""
        n = "" if self.decisions is None else f" {self.decisions}d"
        cost = "" if self.outcome == "running" else f" {money(self.cost_usd)}"
        mark = ""
        if self.reviewed_whole:
            mark = f" {REVIEWED_MARK}"
        elif self.reviewed:
            mark = f" {PART_REVIEWED_MARK} {spans_text(self.reviewed)}"
        return f"{self.key}{mark}  {self.outcome}{deep}{pts}{n}{cost}"


def reviewed_spans(records) -> dict[str, tuple[tuple[int, int], ...]]:
    """trial key -> the reviewed ranges among a layer's records (dicts as read, tolerantly), in order."""
    out: dict[str, list[tuple[int, int]]] = {}
    for d in records:
        if not isinstance(d, dict) or d.get("kind") != "reviewed":
            continue
        first, last = d.get("decision_id"), d.get("through_decision")
        if isinstance(first, int) and isinstance(last, int) and first <= last and isinstance(d.get("trial_key"), str):
            out.setdefault(d["trial_key"], []).append((first, last))
    return {k: tuple(sorted(v)) for k, v in out.items()}


def reviewed_through(spans, decisions: int) -> bool:
    """Whether the ranges hold every decision 1..decisions (a trial with none is not reviewed)."""
    from sessions.analysis.metrics import Coverage, complete

    return decisions >= 1 and complete([Coverage(spans=list(spans))], decisions)


def spans_text(spans) -> str:
    return ", ".join(f"{a}..{b}" for a, b in spans)


def _layer_records(path: Path | None) -> list:
    if path is None:
        return []
    out = []
    for line in whole_lines(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def layer_path(root: Path, annotator: str | None) -> Path | None:
    return EvidenceFolder(root).layer_path(annotator) if annotator else None


def list_trials(root: Path, annotator: str | None = None) -> list[TrialEntry]:
    """Every trial folder under trials/, by key: its blinded label and outcome (or running), and the
    ranges of it `annotator` has reviewed."""
    trials = EvidenceFolder(root).trials(voided=False)
    out: list[TrialEntry] = []
    if not trials:
        return out
    reviewed = reviewed_spans(_layer_records(layer_path(root, annotator)))
    for trial in trials:
        key = trial.key
        result = trial.result_or_none()
        if result is None:
            out.append(TrialEntry(key, trial.label, "running", None, None, None, None, reviewed=reviewed.get(key, ())))
        else:
            out.append(TrialEntry(key, result.condition, result.outcome, result.last_decision,
                                  result.progress_points, result.total_points, result.deepest_milestone,
                                  result.telemetry.cost_usd if result.telemetry is not None else None,
                                  reviewed=reviewed.get(key, ())))
    return out


@dataclass(frozen=True)
class Rung:
    id: str
    name: str
    points: int
    required: bool = True


def read_ladder(root: Path) -> tuple[Rung, ...]:
    """The rungs from the folder's frozen scoring/milestones.yaml (no condition is named there)."""
    try:
        data = EvidenceFolder(root).milestones_data()
        return tuple(Rung(str(m["id"]), str(m.get("name", m["id"])), int(m.get("points", 0)),
                          bool(m.get("required", True))) for m in data["milestones"])
    except (ValueError, KeyError, TypeError, AttributeError):  # FormatProblem: missing, unreadable, not YAML
        return ()


# -- per-decision views ------------------------------------------------------------------------------

@dataclass(frozen=True)
class AttemptView:
    n: int
    raw: str | None
    valid: bool
    error: str | None
    aborted: bool
    model: str | None  # masked
    latency_ms: float | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    stop_reason: str | None
    failure: str | None
    thinking: str | None  # reasoning the reply carried beside its answer, if any


@dataclass(frozen=True)
class DecisionView:
    decision_id: int
    frame_sha256: str  # the frame the agent saw
    frame_index: int
    result_frame_sha256: str
    result_frame_index: int
    model: str | None  # masked
    parsed_actions: tuple[str, ...]
    accepted_actions: int
    inputs: tuple[str, ...]
    invalid_output: bool
    aborted: bool
    reasoning_summary: str | None
    observed: dict | None
    memory_reads: tuple[str, ...]
    memory_writes: tuple[str | None, ...]
    milestones_after: tuple[str, ...]
    awarded: tuple[str, ...]  # rungs this decision reached
    termination_reason: str | None
    attempts: tuple[AttemptView, ...]
    latency_ms: float | None
    cost_usd: float | None


@dataclass(frozen=True)
class MemoryView:
    """The store as it stood after decision `decision_id`'s operations."""

    decision_id: int
    facts: tuple[dict, ...]  # in order of first writing; evicted facts are gone
    contradictions: tuple[tuple[str, ...], ...]
    marks: dict[str, tuple[str, ...]]  # fact id -> this decision's operations on it (read, write, ...)
    rejected: tuple[str, ...]  # this decision's refused writes, with their reasons
    version: int = 0

    @property
    def last_read(self) -> tuple[str, ...]:
        return tuple(f for f, ops in self.marks.items() if "read" in ops)


@dataclass(frozen=True)
class LadderView:
    milestones: tuple[tuple[str, str, int], ...]
    pre_satisfied: tuple[str, ...]
    awards: dict[str, dict]
    version: int
    optional: tuple[str, ...]


def replay_memory(ops: list[MemoryOp], decision: int, rules: dict | None = None) -> MemoryView:
    """The store after every op of decisions <= `decision`, that decision's ops marked."""
    facts: OrderedDict[str, dict] = OrderedDict()
    marks: dict[str, list[str]] = {}
    rejected: list[str] = []
    for op in ops:
        if op.decision_id > decision:
            break
        _apply_op(facts, op)
        if op.decision_id == decision:
            _mark_op(marks, rejected, op)
    return MemoryView(decision, tuple(facts.values()), contradictions(facts.values(), rules),
                      {k: tuple(v) for k, v in marks.items()}, tuple(rejected))


def _apply_op(facts: OrderedDict[str, dict], op: MemoryOp) -> None:
    """The store after one op: a fact written or evicted."""
    if op.op in FACT_WRITING_OPS and op.fact_id and op.fact is not None:
        facts[op.fact_id] = op.fact.model_dump()
    elif op.op == "evict" and op.fact_id:
        facts.pop(op.fact_id, None)


def _mark_op(marks: dict[str, list[str]], rejected: list[str], op: MemoryOp) -> None:
    """What an op of the decision shown did: facts read or offered, a write rejected, a fact touched."""
    if op.op in ("read", "retrieve"):
        for fid in op.fact_ids or ():
            _mark(marks, fid, "read" if op.op == "read" else "offered")
    elif op.op == "reject":
        what = op.write or {}
        rejected.append(f"{what.get('kind', '?')} {what.get('value', '')!r}: {op.reason}".strip())
    elif op.fact_id:
        _mark(marks, op.fact_id, op.op)


def _mark(marks: dict[str, list[str]], fid: str, what: str) -> None:
    got = marks.setdefault(fid, [])
    if what not in got:
        got.append(what)


def contradictions(facts, rules: dict | None = None) -> tuple[tuple[str, ...], ...]:
    """Active facts that cannot all hold (engine.loop.memory's rule, with the trial's recorded predicates)."""
    from engine.loop.memory import norm_predicate, norm_text

    rules = rules or {}
    exclusive = {norm_predicate(p) for p in rules.get("exclusive_predicates", DEFAULT_EXCLUSIVE)}
    possession = {norm_predicate(p) for p in rules.get("possession_predicates", DEFAULT_POSSESSION)}
    groups: dict[tuple, list[tuple[str, str]]] = {}
    for f in facts:
        if f.get("status") != "active":
            continue
        p = norm_predicate(str(f.get("predicate", "")))
        subject, obj = norm_text(str(f.get("subject", ""))), norm_text(str(f.get("object", "")))
        if p in exclusive:
            groups.setdefault(("x", subject, p), []).append((f["fact_id"], obj))
        elif p in possession:
            groups.setdefault(("p", subject, obj), []).append((f["fact_id"], p))
    return tuple(tuple(i for i, _ in m) for m in groups.values() if len({v for _, v in m}) > 1)


def _thinking(reply: dict | None) -> str | None:
    """Reasoning text a provider reply carried (Anthropic thinking blocks, OpenAI reasoning)."""
    if not isinstance(reply, dict):
        return None
    parts: list[str] = []
    for block in reply.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "thinking" and block.get("thinking"):
            parts.append(str(block["thinking"]))
    for choice in reply.get("choices") or ():
        msg = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(msg, dict):
            for key in ("reasoning_content", "reasoning"):
                if isinstance(msg.get(key), str) and msg[key]:
                    parts.append(msg[key])
    return "\n\n".join(parts) or None


# -- a trial --------------------------------------------------------------------------------------

STREAM_FILES = (layout.TRACE, layout.RESPONSES, layout.INPUTS, layout.MEMORY, layout.TRIAL_ANNOTATIONS,
                layout.FRAMES, layout.RESULT)


class TrialData:
    """One trial's evidence as per-decision views. `refresh()` re-reads it if a file changed."""

    def __init__(self, root: Path, key: str, *, annotator: str | None = None):
        self.root = root
        self.key = key
        self.evidence = EvidenceFolder(root)
        self.trial = self.evidence.trial(key)
        self.folder = self.trial.path
        self.annotator = annotator
        self.unblinded = is_unblinded(root)
        self.masker = Masker(active=not self.unblinded)
        for model_id in _manifest_models(root):
            self.masker.add(model_id)
        self.ladder_def = read_ladder(root)
        self.problems: list[str] = []
        self._sig: tuple = ()
        self._frames: dict[str, StoredFrame] = {}
        self._frame_cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.version = 0
        self.load()

    # -- loading ------------------------------------------------------------------------------
    def _layer_path(self) -> Path | None:
        return layer_path(self.root, self.annotator)

    def _operator_path(self) -> Path:
        return self.evidence.layer_path(layout.OPERATOR_ANNOTATOR)

    def signature(self) -> tuple:
        sig = _signature(self.folder, STREAM_FILES)
        for layer in (self._layer_path(), self._operator_path()):
            if layer is not None:
                sig += _signature(layer.parent, (layer.name,))
        return sig

    def refresh(self) -> bool:
        """Re-read the trial if any of its files changed; True if it did."""
        if self.signature() == self._sig:
            return False
        self.load()
        return True

    def load(self) -> None:
        self._sig = self.signature()
        problems: list[str] = []
        self.result = self.trial.result_or_none()
        self._read_streams(problems)
        self.own_labels = self._own_labels()
        # Live tags whose trial ended while they were typed: the operator's layer (not an annotator's).
        self.late_tags = self._layer_labels(self._operator_path())
        self._mask_models()
        self._frames = {}
        store = self.folder / layout.FRAMES
        if store.is_file():
            frames, _good, _problem = scan_store(store)  # a torn tail is a frame still being written
            self._frames = {f.sha256: f for f in frames}
        self.rules = (self.result.provenance.get("memory_rules") if self.result else None) or {}
        self._awards = self._compute_awards()
        self.fact_written: dict[str, int] = {}
        for op in self.ops:
            if op.op in FACT_WRITING_OPS and op.fact_id and op.fact_id not in self.fact_written:
                self.fact_written[op.fact_id] = op.decision_id
        self.problems = [self.masker.text(p) for p in problems]
        self.version += 1

    def _read_streams(self, problems: list[str]) -> None:
        """The trial's record streams (what reads of each is kept; what does not is a problem)."""
        rel = layout.trial_dir(self.key)

        def stream(name, model):
            records, problem = read_stream(self.folder / name, model, f"{rel}/{name}")
            if problem:
                problems.append(problem)
            return records

        traces: list[TraceLine] = stream(layout.TRACE, TraceLine)
        # Decisions in order, without a gap: the trace is the record of what was decided.
        self.traces = []
        for t in traces:
            if t.decision_id != len(self.traces) + 1:
                problems.append(f"{rel}/{layout.TRACE}: decision {t.decision_id} out of order")
                break
            self.traces.append(t)
        self.responses = {r.decision_id: r for r in stream(layout.RESPONSES, ResponseLine)}
        self.inputs: dict[int, list[InputLine]] = {}
        for row in stream(layout.INPUTS, InputLine):
            self.inputs.setdefault(row.decision_id, []).append(row)
        self.ops: list[MemoryOp] = stream(layout.MEMORY, MemoryOp)
        self.live_tags: list[Annotation] = stream(layout.TRIAL_ANNOTATIONS, Annotation)

    def _mask_models(self) -> None:
        """Every model id the trial's records name, masked wherever review shows text (blinding)."""
        for t in self.traces:
            self.masker.add(t.model_id)
        for r in self.responses.values():
            for a in r.attempts:
                self.masker.add(a.model_id)
                if isinstance(a.reply, dict):
                    self.masker.add(a.reply.get("model"))
        try:
            failure = json.loads((self.folder / layout.PROVIDER_FAILURE).read_text(encoding="utf-8"))
            self.masker.add(failure.get("model"))
        except (OSError, ValueError, AttributeError):
            pass

    def _own_labels(self) -> list[dict]:
        """This annotator's own labels on this trial (other annotators' stay unseen: labels are blind)."""
        return self._layer_labels(self._layer_path())

    def _layer_labels(self, path: Path | None) -> list[dict]:
        return [d for d in _layer_records(path) if isinstance(d, dict) and d.get("trial_key") == self.key]

    def _compute_awards(self) -> dict[str, dict]:
        if self.result is not None:
            return {m.id: m.model_dump(exclude={"probe"}) for m in self.result.milestones}
        points = {r.id: r.points for r in self.ladder_def}
        names = {r.id: r.name for r in self.ladder_def}
        awards = {}
        for t in self.traces:
            for mid in t.milestones_after:
                if mid not in t.milestones_before and mid not in awards:
                    awards[mid] = {"id": mid, "name": names.get(mid, mid), "points": points.get(mid, 0),
                                   "decision_id": t.decision_id, "frame_index": t.result_frame_index,
                                   "frame_sha256": t.result_frame_sha256}
        return awards

    # -- what there is ------------------------------------------------------------------------
    @property
    def decisions(self) -> int:
        return len(self.traces)

    @property
    def label(self) -> str:
        if self.traces:
            return self.traces[0].condition_id
        return self.result.condition if self.result else self.key.split("-", 1)[0]

    @property
    def condition_name(self) -> str | None:
        """The condition's id: only in an unblinded folder."""
        return condition_names(self.root).get(self.label) if self.unblinded else None

    @property
    def running(self) -> bool:
        return self.result is None

    @property
    def pre_satisfied(self) -> tuple[str, ...]:
        if self.result is not None:
            return tuple(self.result.pre_satisfied)
        return tuple(self.traces[0].milestones_before) if self.traces else ()

    def milestone_decisions(self) -> list[int]:
        return sorted({a["decision_id"] for a in self._awards.values()})

    def invalid_decisions(self) -> list[int]:
        return [t.decision_id for t in self.traces if t.invalid_output]

    def tag_decisions(self) -> list[int]:
        """Decisions with a live operator tag (in the trial or the operator layer) or a label of this annotator."""
        found = {a.decision_id for a in self.live_tags}
        found |= {d["decision_id"] for d in (*self.own_labels, *self.late_tags)
                  if isinstance(d.get("decision_id"), int) and d.get("kind") != "reviewed"}
        return sorted(d for d in found if 1 <= d <= max(self.decisions, 1))

    def marks(self, kind: str) -> list[int]:
        return {"milestone": self.milestone_decisions, "tag": self.tag_decisions,
                "invalid": self.invalid_decisions}[kind]()

    def next_mark(self, kind: str, current: int, direction: int) -> int | None:
        """The nearest decision of that kind after (direction 1) or before (-1) `current`."""
        marks = self.marks(kind)
        if direction > 0:
            return next((d for d in marks if d > current), None)
        return next((d for d in reversed(marks) if d < current), None)

    # -- one decision -------------------------------------------------------------------------
    def view(self, n: int) -> DecisionView:
        t = self.traces[n - 1]
        seen_index = self.traces[n - 2].result_frame_index if n > 1 else 0
        response = self.responses.get(n)
        attempts = []
        for i, a in enumerate(response.attempts if response else (), 1):
            # No usage: not a paid call (engine.loop.records.Attempt), so it cost nothing, a known zero.
            usage = a.usage or Usage(input_tokens=0, output_tokens=0, cached_tokens=0, cost_usd=0.0)
            attempts.append(AttemptView(
                n=i, raw=self.masker.text(a.raw), valid=a.valid, error=self.masker.text(a.error),
                aborted=a.aborted, model=self.masker.field(a.model_id), latency_ms=a.latency_ms,
                input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                cost_usd=usage.cost_usd, stop_reason=a.stop_reason,
                failure=a.failure, thinking=self.masker.text(_thinking(a.reply))))
        observed = json.loads(self.masker.text(json.dumps(t.observed))) if t.observed is not None else None
        return DecisionView(
            decision_id=n, frame_sha256=t.frame_sha256, frame_index=seen_index,
            result_frame_sha256=t.result_frame_sha256, result_frame_index=t.result_frame_index,
            model=self.masker.field(t.model_id), parsed_actions=tuple(t.parsed_actions),
            accepted_actions=t.accepted_actions, inputs=tuple(i.action for i in self.inputs.get(n, ())),
            invalid_output=t.invalid_output, aborted=t.aborted,
            reasoning_summary=self.masker.text(t.reasoning_summary), observed=observed,
            memory_reads=tuple(t.memory_reads), memory_writes=tuple(t.memory_writes),
            milestones_after=tuple(t.milestones_after),
            awarded=tuple(m for m in t.milestones_after if m not in t.milestones_before),
            termination_reason=t.termination_reason, attempts=tuple(attempts), latency_ms=t.latency_ms,
            # The trace's null cost means "none" without a paid call (a scripted decision: $0), unknown after one.
            cost_usd=decision_figure(t.model_dump(include={"paid_calls", "provider_cost_usd"}), "provider_cost_usd"))

    def memory_at(self, n: int) -> MemoryView:
        view = replay_memory(self.ops, n, self.rules)
        return MemoryView(view.decision_id, view.facts, view.contradictions, view.marks, view.rejected,
                          version=self.version * 1_000_003 + n)

    def ladder_at(self, n: int) -> LadderView:
        awards = {k: v for k, v in self._awards.items() if v["decision_id"] <= n}
        return LadderView(tuple((r.id, r.name, r.points) for r in self.ladder_def), self.pre_satisfied, awards,
                          self.version * 1_000_003 + n, tuple(r.id for r in self.ladder_def if not r.required))

    def frame(self, sha256: str) -> np.ndarray | None:
        """The stored frame with these pixels (None if the store does not hold it yet)."""
        cached = self._frame_cache.get(sha256)
        if cached is not None:
            self._frame_cache.move_to_end(sha256)
            return cached
        stored = self._frames.get(sha256)
        if stored is None:
            return None
        try:
            with (self.folder / layout.FRAMES).open("rb") as f:
                f.seek(stored.offset)
                pixels = decode_png(f.read(stored.length))
        except (OSError, ValueError):
            return None
        self._frame_cache[sha256] = pixels
        if len(self._frame_cache) > FRAME_CACHE:
            self._frame_cache.popitem(last=False)
        return pixels

    # -- labels -------------------------------------------------------------------------------
    def check_label(self, decision: int, label: dict) -> str | None:
        """Why this label would be refused (None: it may be recorded)."""
        types = rubric_types()
        kind = label.get("type")
        if kind not in types:
            return f"type {kind!r} is not one of the rubric's: {', '.join(types)}"
        if kind == "other" and not str(label.get("note") or "").strip():
            return "type 'other' needs a note saying what"
        if label.get("severity") not in SEVERITIES:
            return f"severity must be one of {', '.join(SEVERITIES)}"
        if not 1 <= decision <= self.decisions:
            return f"decision {decision} is not a recorded decision of {self.key}"
        return (self._refers_problem(decision, str(label.get("refers_to") or "").strip())
                or self._role_problem(label) or self._recovered_problem(decision, label.get("recovered_decision")))

    def _refers_problem(self, decision: int, refers: str) -> str | None:
        """What the label refers to: an earlier decision, or a fact written by then."""
        if not refers:
            return "refers to is required: the earlier fact id (fact-0003) or decision number"
        if refers.isdigit():
            if not 1 <= int(refers) < decision:
                return (f"refers to decision {refers}, but the earlier decisions are 1..{decision - 1}"
                        if decision > 1 else "refers to an earlier decision, but this is decision 1")
            return None
        written = self.fact_written.get(refers)
        if written is None:
            return f"refers to {refers!r}, which no memory operation of {self.key} wrote"
        if written > decision:
            return f"refers to {refers}, first written at decision {written}, after decision {decision}"
        return None

    def _role_problem(self, label: dict) -> str | None:
        """A primary cause, or a consequence naming one of this annotator's memory-error labels."""
        role = label.get("role") or "primary"
        if role not in ROLES:
            return f"role must be primary or consequence, not {role!r}"
        primary = str(label.get("primary_id") or "").strip()
        if role == "consequence":
            if not primary:
                return "a consequence names its primary cause's annotation id"
            mine = {d.get("id") for d in self._own_labels() if d.get("kind", "memory-error") == "memory-error"}
            if primary not in mine:
                return f"primary {primary!r} is not one of your labels on {self.key}"
        return None

    def _recovered_problem(self, decision: int, recovered) -> str | None:
        """A recovered decision, if given: a number after this decision and within the trial."""
        if recovered in (None, ""):
            return None
        text = str(recovered).strip()
        if not text.isdigit():
            return f"recovered decision {recovered!r} is not a decision number"
        last = self.result.last_decision if self.result is not None else self.decisions
        if not decision < int(text) <= last:
            return f"recovered decision {text} must be after {decision} and at most {last}"
        return None

    def build_label(self, decision: int, label: dict, *, annotator: str, opened_utc: str) -> Annotation:
        """The record of a label on the decision in view (checked first: LabelRefused says why not)."""
        problem = self.check_label(decision, label)
        if problem:
            raise LabelRefused(problem)
        t = self.traces[decision - 1]
        recovered = label.get("recovered_decision")
        role = label.get("role") or "primary"
        fields: dict[str, Any] = {
            "trial_key": self.key, "decision_id": decision, "frame_sha256": t.frame_sha256,
            "frame_index": self.traces[decision - 2].result_frame_index if decision > 1 else 0,
            "opened_utc": opened_utc, "timestamp_utc": utc_now(), "annotator": annotator,
            "source": "annotator", "kind": "memory-error", "type": label["type"], "severity": label["severity"],
            "refers_to": str(label["refers_to"]).strip(), "note": str(label.get("note") or "").strip(),
            "role": role, "primary_id": (str(label.get("primary_id")).strip() or None)
            if role == "consequence" else None,
            "recovered_decision": int(str(recovered).strip()) if recovered not in (None, "") else None,
        }
        known = Annotation.model_fields
        if "kind" not in known:  # the record before issue 10's fields: only what it has
            fields.pop("source")
        fields = {k: v for k, v in fields.items() if k in known}
        try:
            return Annotation.model_validate(fields)
        except ValueError as exc:
            errors = getattr(exc, "errors", None)
            raise LabelRefused(f"not a valid label: {errors()[0]['msg'] if errors else exc}") from None


    # -- reviewed -----------------------------------------------------------------------------
    @property
    def reviewed(self) -> tuple[tuple[int, int], ...]:
        """This annotator's reviewed ranges of the trial, in order."""
        return reviewed_spans(self.own_labels).get(self.key, ())

    @property
    def reviewed_whole(self) -> bool:
        """Every decision recorded so far is in a reviewed range of this annotator's."""
        return reviewed_through(self.reviewed, self.decisions)

    def first_unreviewed(self) -> int:
        covered = {d for a, b in self.reviewed for d in range(max(a, 1), min(b, self.decisions) + 1)}
        return next((d for d in range(1, self.decisions + 1) if d not in covered), 1)

    def check_reviewed(self, first: int, last: int) -> str | None:
        """Why a reviewed record of decisions first..last would be refused (None: it may be recorded)."""
        if self.decisions < 1:
            return f"{self.key} has no recorded decision to review"
        if not 1 <= first <= last <= self.decisions:
            return f"decisions {first}..{last} are not within {self.key}'s 1..{self.decisions} (first to last)"
        for a, b in self.reviewed:
            if a <= last and first <= b:
                return f"decisions {max(a, first)}..{min(b, last)} are already reviewed ({spans_text(self.reviewed)})"
        return None

    def build_reviewed(self, values: dict, *, annotator: str, opened_utc: str) -> Annotation:
        """The record of a review of decisions values["first"]..values["last"] (checked first)."""
        numbers = []
        for name in ("first", "last"):
            text = str(values.get(name) if values.get(name) is not None else "").strip()
            if not text.isdigit():
                raise LabelRefused(f"the {name} decision reviewed, {text!r}, is not a decision number")
            numbers.append(int(text))
        first, last = numbers
        problem = self.check_reviewed(first, last)
        if problem:
            raise LabelRefused(problem)
        try:
            return Annotation.model_validate({
                "trial_key": self.key, "decision_id": first, "through_decision": last, "frame_sha256": None,
                "frame_index": None, "opened_utc": opened_utc, "timestamp_utc": utc_now(), "annotator": annotator,
                "source": "annotator", "kind": "reviewed", "type": "reviewed", "severity": "minor",
                "refers_to": None, "note": str(values.get("note") or "").strip()})
        except ValueError as exc:
            errors = getattr(exc, "errors", None)
            raise LabelRefused(f"not a valid record: {errors()[0]['msg'] if errors else exc}") from None


def append_label(root: Path, annotator: str, record: Annotation) -> Annotation:
    """Append through the annotation layer; its refusal comes back as LabelRefused."""
    from sessions.annotations.annotation_layer import AnnotationLayer

    try:
        AnnotationLayer(root, annotator).append(record)
    except (ValueError, LookupError, RuntimeError, OSError) as exc:
        raise LabelRefused(str(exc) or type(exc).__name__) from None
    return record


@dataclass
class ReviewFolder:
    """The experiment folder as review sees it: its trials, and the one open."""

    root: Path
    annotator: str
    trials: list[TrialEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rescan()

    def rescan(self) -> bool:
        trials = list_trials(self.root, self.annotator or None)
        changed = trials != self.trials
        self.trials = trials
        return changed

    def open(self, key: str) -> TrialData:
        return TrialData(self.root, key, annotator=self.annotator)

    @property
    def experiment_id(self) -> str:
        return EvidenceFolder(self.root).experiment_id() or self.root.name
