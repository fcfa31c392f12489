"""Annotation layers: each annotator's labels beside the evidence, never inside it.

    annotations/<annotator>/annotations.jsonl   one Annotation per line, append-only, hash-chained
                                                (the first line's prev_sha256 is SHA-256 of nothing)
    annotations/<annotator>/SHA256SUMS          the layer's own sums (the evidence's never change),
                                                plus `FROZEN <sha256 of annotations.jsonl>` once frozen

The layer's root is the SHA-256 of its SHA256SUMS: part of the folder's root (sessions.evidence.roots),
fixed once the layer is frozen. Every write appends the folder's new root to roots.jsonl, which
records the layer's state (lines, their hash, frozen) for verify to hold it to later.

Layers: one per annotator (source annotator: review or `oakwatch annotate`); `operator`, the live
console's tags whose trial ended while they were typed (tags made while the trial ran are in the
trial's own annotations.jsonl, sealed with its evidence; `read_layers` puts both in the operator
layer); `adjudication`, records that settle labels of other layers (the originals stay as they are).
A layer's last line may be a freeze record; after it the layer refuses appends.

An annotator's memory-error label names the later, contradicting decision (`decision_id`, a recorded
decision) and the earlier fact or decision it contradicts (`refers_to`: a fact id some memory
operation wrote at or before that decision, or an earlier decision number); both are required and
must exist. `recovered_decision`, when given, lies after `decision_id` and within the trial. A
consequence names its primary cause, an existing primary label of the same trial in the same layer.
A reviewed record (an annotator's layer only) says the annotator looked at decisions
`decision_id`..`through_decision` of a trial, inside its recorded decisions, and labelled every memory
error found there; no decision is reviewed twice in one layer (a review may come in disjoint parts).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from engine.loop.control import TagForAnotherTrial
from engine.loop.records import Annotation
from engine.loop.trial import FACT_ID, TagRefused, build_annotation, check_reference, utc_now
from sessions.evidence import layout, roots
from sessions.evidence.checksums import SumsFormatError, file_sha256, parse_sums, render_sums
from sessions.evidence.durable import AppendLog, EvidenceError, write_atomic
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.reader import FormatProblem, TrialReader, iter_lines, short_error
from sessions.preflight.assets import ASSETS

LAYER_FILE = "annotations.jsonl"
ADJUDICATION = "adjudication"
OPERATOR = layout.OPERATOR_ANNOTATOR
FROZEN = "FROZEN"
EMPTY = hashlib.sha256(b"").hexdigest()
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # as layout allows under annotations/
RUBRIC = ASSETS / "prompts" / "memory-error-rubric.yaml"
SEVERITIES = ("minor", "material", "critical")
MAX_LAYER_BYTES = 64 << 20


class LayerError(ValueError):
    """A label refused or a layer that cannot be read; the message is one line saying why."""


def rubric_types(root: Path | None = None) -> list[str]:
    """The memory-error types: the run's frozen rubric (scoring/) if it has one, else the bundled one."""
    for path in ([root / "scoring" / "memory-error-rubric.yaml"] if root is not None else []) + [RUBRIC]:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            types = [str(k) for k in data["types"]]
            if types:
                return types
        except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
            continue
    return []


def ladder_ids(root: Path | None) -> list[str]:
    """The rung ids of the run's frozen ladder (scoring/milestones.yaml); empty when unreadable."""
    try:
        data = EvidenceFolder(root).milestones_data()
        return [str(m["id"]) for m in data["milestones"]]
    except (FormatProblem, KeyError, TypeError):
        return []


def split_sums(text: str) -> tuple[dict[str, str], str | None]:
    """A layer's SHA256SUMS: (path -> digest, the FROZEN digest or None). Raises SumsFormatError."""
    frozen = None
    rest = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(FROZEN + " "):
            digest = line[len(FROZEN) + 1:]
            if frozen is not None or not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise SumsFormatError(f"{layout.SUMS}:{n}: malformed {FROZEN} line")
            frozen = digest
        else:
            rest.append(line)
    return parse_sums("".join(f"{line}\n" for line in rest)), frozen


# -- the evidence a label points into ------------------------------------------------------------

class TrialFacts:
    """What a label of one trial may name: its recorded decisions and when each fact was first written."""

    def __init__(self, root: Path, key: str):
        trial = EvidenceFolder(root).trial(key)
        if not re.fullmatch(layout.TRIAL_KEY, key) or not trial.path.is_dir():
            raise LayerError(f"trial {key} is not in {root / layout.TRIALS}")
        reader = trial.reader()
        try:
            if reader.exists(layout.RESULT):
                self.last_decision = reader.result()[0].last_decision
            else:  # a trial still running: its whole decisions so far
                self.last_decision = sum(1 for _ in reader.lines(layout.TRACE)) if reader.exists(layout.TRACE) else 0
            self.written: dict[str, int] = {}
            if reader.exists(layout.MEMORY):
                for op in reader.memory():
                    if op.op == "write" and op.fact_id and op.fact_id not in self.written:
                        self.written[op.fact_id] = op.decision_id
        except FormatProblem as exc:
            raise LayerError(f"trial {key} cannot be read back: {exc}") from None
        self.key = key


class Evidence:
    """TrialFacts per trial, read once."""

    def __init__(self, root: Path):
        self.root = root
        self._trials: dict[str, TrialFacts] = {}
        self.types = rubric_types(root)
        self.ladder = ladder_ids(root)

    def trial(self, key: str) -> TrialFacts:
        if key not in self._trials:
            self._trials[key] = TrialFacts(self.root, key)
        return self._trials[key]


def check_label(a: Annotation, layer: str, earlier: list[Annotation], evidence: Evidence,
                others: dict[str, Annotation] | None = None) -> None:
    """Raises LayerError saying why `a` cannot stand in `layer` after `earlier` (its lines so far)."""
    if a.kind == "freeze":
        return
    if a.annotator != layer and a.source == "annotator":
        raise LayerError(f"annotator {a.annotator!r} cannot write to layer {layer!r}")
    if a.kind == "adjudication":
        _check_adjudication(a, layer, others or {}, evidence)
        return
    if layer == ADJUDICATION:
        raise LayerError(f"the {ADJUDICATION} layer holds adjudications only")
    if a.resolves is not None or a.resolution is not None or a.reason is not None:
        raise LayerError("resolves, resolution and reason belong to adjudications")
    trial = evidence.trial(a.trial_key)
    if a.kind == "reviewed":
        _check_reviewed(a, layer, earlier, trial)
        return
    _check_decision_label(a, layer, earlier, evidence, trial)


def _check_decision_label(a: Annotation, layer: str, earlier: list[Annotation], evidence: Evidence,
                          trial: TrialFacts) -> None:
    """A label at one recorded decision: a milestone, a route, or a memory label."""
    if a.through_decision is not None:
        raise LayerError("through_decision belongs to reviewed records")
    lo = 1 if a.source == "annotator" else 0
    if not lo <= a.decision_id <= trial.last_decision:
        raise LayerError(f"decision {a.decision_id} is not a recorded decision of {a.trial_key} "
                         f"(it has {lo}..{trial.last_decision})")
    if (a.milestone is not None) != (a.kind == "milestone"):
        raise LayerError("milestone belongs to milestone annotations, and a milestone annotation needs one")
    if a.kind == "milestone":
        _check_milestone(a, earlier, evidence)
        return
    if a.kind == "route":
        if not (a.room or "").strip():
            raise LayerError("a route annotation needs a room")
        if (a.type, a.severity) != ("route", "minor"):
            raise LayerError("a route annotation has type route and severity minor")
        return
    _check_memory_label(a, layer, earlier, evidence, trial)


def _check_memory_label(a: Annotation, layer: str, earlier: list[Annotation], evidence: Evidence,
                        trial: TrialFacts) -> None:
    """A memory label: the rubric's type, what it refers to, where it recovered, and its role."""
    if a.room is not None or a.landmark is not None:
        raise LayerError("room and landmark belong to route annotations")
    if evidence.types and a.type not in evidence.types:
        raise LayerError(f"type {a.type!r} is not one of the rubric's: {', '.join(evidence.types)}")
    if a.type == "other" and not a.note.strip():
        raise LayerError("type 'other' needs a note saying what")
    if a.source == "annotator" or a.refers_to is not None:
        _check_refers(a, trial)
    if a.recovered_decision is not None and not a.decision_id < a.recovered_decision <= trial.last_decision:
        raise LayerError(f"recovered at decision {a.recovered_decision}: it must lie after decision {a.decision_id} "
                         f"and within {a.trial_key} (last decision {trial.last_decision})")
    _check_role(a, layer, earlier)


def _check_role(a: Annotation, layer: str, earlier: list[Annotation]) -> None:
    """A primary cause names no primary; a consequence names a primary memory-error label of its trial."""
    if a.role == "primary":
        if a.primary_id is not None:
            raise LayerError("a primary cause names no primary_id (give --role consequence)")
        return
    if not a.primary_id:
        raise LayerError("a consequence names its primary cause's annotation id (--primary)")
    primary = next((e for e in earlier if e.id == a.primary_id), None)
    if primary is None:
        raise LayerError(f"primary {a.primary_id} is not an annotation of layer {layer}")
    if primary.kind != "memory-error" or primary.role != "primary":
        raise LayerError(f"{a.primary_id} is not a primary memory-error label")
    if primary.trial_key != a.trial_key:
        raise LayerError(f"{a.primary_id} labels trial {primary.trial_key}, not {a.trial_key}")


def _check_milestone(a: Annotation, earlier: list[Annotation], evidence: Evidence) -> None:
    """A rung scored by hand: one of the frozen ladder's, first reached once per trial in the layer."""
    if (a.type, a.severity) != ("milestone", "minor"):
        raise LayerError("a milestone annotation has type milestone and severity minor")
    if a.room is not None or a.landmark is not None:
        raise LayerError("room and landmark belong to route annotations")
    if evidence.ladder and a.milestone not in evidence.ladder:
        raise LayerError(f"milestone {a.milestone!r} is not a rung of the frozen ladder: {', '.join(evidence.ladder)}")
    twice = next((e for e in earlier if e.kind == "milestone" and e.trial_key == a.trial_key
                  and e.milestone == a.milestone), None)
    if twice is not None:
        raise LayerError(f"{a.milestone} of {a.trial_key} is labelled already ({twice.id}, decision "
                         f"{twice.decision_id})")


def _check_refers(a: Annotation, trial: TrialFacts) -> None:
    text = (a.refers_to or "").strip()
    if not text:
        raise LayerError("refers_to is required: the earlier fact id (fact-0003) or decision number")
    if text.isdigit():
        # An annotator cites an earlier decision; a live tag may cite the one in view (engine.loop.trial).
        last = a.decision_id - 1 if a.source == "annotator" else a.decision_id
        if not 1 <= int(text) <= last:
            raise LayerError(f"refers to decision {text}, which is not before decision {a.decision_id}")
        return
    if not FACT_ID.fullmatch(text):
        raise LayerError(f"refers to {text!r}: give a fact id (fact-0003) or a decision number")
    written = trial.written.get(text)
    if written is None:
        raise LayerError(f"refers to {text}, which no memory operation of {trial.key} wrote")
    if written > a.decision_id and a.source == "annotator":
        raise LayerError(f"refers to {text}, first written at decision {written}, after decision {a.decision_id}")


def _check_review_range(a: Annotation, trial: TrialFacts) -> None:
    """A reviewed record's range lies within the trial's recorded decisions, first to last."""
    if trial.last_decision < 1:
        raise LayerError(f"trial {a.trial_key} has no recorded decision to review")
    first, last = a.decision_id, a.through_decision
    if last is None:
        raise LayerError("a reviewed record names the last decision reviewed (through_decision)")
    if first < 1:
        raise LayerError(f"a review starts at decision 1 or later, not {first}")
    if last < first:
        raise LayerError(f"the reviewed range {first}..{last} ends before it starts")
    if last > trial.last_decision:
        raise LayerError(f"decision {last} is past the last decision of {a.trial_key} ({trial.last_decision})")


def _check_reviewed(a: Annotation, layer: str, earlier: list[Annotation], trial: TrialFacts) -> None:
    """A reviewed record: an annotator's own, a range of the trial's recorded decisions, and no decision
    of it reviewed before in this layer (a review may come in parts; the same decision twice says nothing)."""
    if layer == OPERATOR or a.source != "annotator":
        raise LayerError("a reviewed record belongs to an annotator's own layer")
    if (a.type, a.severity) != ("reviewed", "minor"):
        raise LayerError("a reviewed record has type reviewed and severity minor")
    if (a.refers_to, a.recovered_decision, a.primary_id, a.room, a.landmark) != (None,) * 5 or a.role != "primary":
        raise LayerError("a reviewed record names a trial, its decisions and a note only")
    _check_review_range(a, trial)
    first, last = a.decision_id, a.through_decision
    for e in earlier:
        if e.kind == "reviewed" and e.trial_key == a.trial_key and e.through_decision is not None \
                and e.decision_id <= last and first <= e.through_decision:
            raise LayerError(f"decisions {max(first, e.decision_id)}..{min(last, e.through_decision)} of "
                             f"{a.trial_key} are already reviewed in this layer ({e.id}: decisions "
                             f"{e.decision_id}..{e.through_decision})")


def _check_adjudication(a: Annotation, layer: str, others: dict[str, Annotation], evidence: Evidence) -> None:
    if layer != ADJUDICATION:
        raise LayerError(f"adjudications go to the {ADJUDICATION} layer")
    if not a.resolves:
        raise LayerError("an adjudication resolves one or more annotation ids")
    if not (a.reason or "").strip():
        raise LayerError("an adjudication needs a reason")
    if a.resolution is None:
        raise LayerError("an adjudication needs a resolution (accept, reject or relabel)")
    trials = set()
    for rid in a.resolves:
        original = others.get(rid)
        if original is None:
            raise LayerError(f"{rid} is not an annotation of any layer")
        if original.kind not in ("memory-error", "route"):
            raise LayerError(f"{rid} is a {original.kind} record, not a label")
        trials.add(original.trial_key)
    if len(trials) > 1:
        raise LayerError(f"{', '.join(a.resolves)} label different trials ({', '.join(sorted(trials))})")
    if a.trial_key not in trials:
        raise LayerError(f"the adjudication names trial {a.trial_key}, its labels are of {trials.pop()}")
    if a.resolution == "relabel" and a.type != "route":
        if evidence.types and a.type not in evidence.types:
            raise LayerError(f"type {a.type!r} is not one of the rubric's: {', '.join(evidence.types)}")


# -- one layer ------------------------------------------------------------------------------------

class AnnotationLayer:
    def __init__(self, root: Path, annotator: str):
        if not isinstance(annotator, str) or not NAME.fullmatch(annotator):
            raise LayerError(f"annotator {annotator!r}: use letters, digits, '.', '_' or '-' (at most 64)")
        self.root = root
        self.annotator = annotator
        self.folder = root / layout.ANNOTATIONS / annotator
        self.path = self.folder / LAYER_FILE
        self.rel = f"{layout.ANNOTATIONS}/{annotator}/{LAYER_FILE}"

    # reading
    def _lines(self) -> list[tuple[Annotation, bytes]]:
        if not self.path.exists():
            return []
        if not self.path.is_file():
            raise LayerError(f"{self.rel}: not a regular file")
        if self.path.stat().st_size > MAX_LAYER_BYTES:
            raise LayerError(f"{self.rel}: larger than {MAX_LAYER_BYTES >> 20} MiB")
        out = []
        head = EMPTY
        try:
            for n, line in iter_lines(self.path, self.rel):
                try:
                    record = Annotation.model_validate_json(line)
                except ValidationError as exc:
                    raise LayerError(f"{self.rel}:{n}: {short_error(exc)}") from None
                if record.prev_sha256 != head:
                    raise LayerError(f"{self.rel}:{n}: hash chain broken (prev_sha256 does not match line {n - 1})")
                if out and out[-1][0].kind == "freeze":
                    raise LayerError(f"{self.rel}:{n}: a line after the layer's freeze")
                head = hashlib.sha256(line).hexdigest()
                out.append((record, line))
        except FormatProblem as exc:
            raise LayerError(str(exc)) from None
        except OSError as exc:
            raise LayerError(f"{self.rel}: cannot read ({exc.strerror or exc})") from None
        return out

    def records(self) -> list[Annotation]:
        """Every line, the freeze record included (kind freeze); raises LayerError on a malformed layer."""
        return [r for r, _ in self._lines()]

    def head(self) -> str:
        lines = self._lines()
        return hashlib.sha256(lines[-1][1]).hexdigest() if lines else EMPTY

    @property
    def frozen(self) -> bool:
        lines = self._lines()
        return bool(lines) and lines[-1][0].kind == "freeze"

    def frozen_sha256(self) -> str | None:
        """The FROZEN digest its SHA256SUMS records, or None."""
        try:
            return split_sums((self.folder / layout.SUMS).read_text(encoding="utf-8"))[1]
        except (OSError, UnicodeDecodeError, SumsFormatError):
            return None

    # writing
    def append(self, record: Annotation, *, check: bool = True) -> Annotation:
        """Append one label (its id, chain link and the layer's sums set here); raises LayerError if refused."""
        self._still_blind()
        lines = self._lines()
        if lines and lines[-1][0].kind == "freeze":
            raise LayerError(f"layer {self.annotator} is frozen: it takes no more labels")
        if record.kind == "freeze":
            raise LayerError("a layer is frozen with freeze(), not by appending")
        records = [r for r, _ in lines]
        label_id = f"{self.annotator}-{len(records) + 1}"
        if check:
            others = None
            if record.kind == "adjudication":
                others = {a.id: a for name, layer in read_layers(self.root).items() if name != ADJUDICATION
                          for a in layer if a.id}
            check_label(record.model_copy(update={"id": label_id}), self.annotator, records, Evidence(self.root),
                        others)
        # Set on the caller's record too (as before): its id and chain link are the ones written.
        record.id = label_id
        record.prev_sha256 = hashlib.sha256(lines[-1][1]).hexdigest() if lines else EMPTY
        self._write(record, frozen=False)
        return record

    def freeze(self) -> Annotation:
        """Seal the layer: a freeze line, and `FROZEN <sha256>` in its SHA256SUMS."""
        self._still_blind()
        lines = self._lines()
        if lines and lines[-1][0].kind == "freeze":
            raise LayerError(f"layer {self.annotator} is already frozen")
        if not lines:
            raise LayerError(f"layer {self.annotator} holds no labels to freeze")
        now = utc_now()
        record = Annotation(
            trial_key="", decision_id=0, frame_sha256=None, frame_index=None, opened_utc=now, timestamp_utc=now,
            annotator=self.annotator, source="operator" if self.annotator == OPERATOR else "annotator",
            type="freeze", severity="minor", refers_to=None, note=f"{len(lines)} line(s) frozen",
            kind="freeze", id=f"{self.annotator}-{len(lines) + 1}",
            prev_sha256=hashlib.sha256(lines[-1][1]).hexdigest())
        self._write(record, frozen=True)
        return record

    def _still_blind(self) -> None:
        # Once `unblind` has shown the condition ids, a label would be made knowing them: the layers are
        # what was labelled blind, so nothing joins them (verify would fail the folder, the report count it).
        if (self.root / layout.UNBLINDED).exists():
            raise LayerError(f"{self.root} is unblinded ({layout.UNBLINDED}/ exists): labels are taken only while "
                             "the folder is blind; label a blinded copy (`oakwatch export --for-annotators`) instead")

    def _write(self, record: Annotation, *, frozen: bool) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = AppendLog(self.path, what=self.rel, exclusive=False)
        try:
            log.append((record.model_dump_json() + "\n").encode())
            log.sync()
        finally:
            log.close()
        digest = file_sha256(self.path)
        sums = render_sums({LAYER_FILE: digest}) + (f"{FROZEN} {digest}\n" if frozen else "")
        write_atomic(self.folder / layout.SUMS, sums.encode())
        try:
            roots.record(self.root, f"{layout.ANNOTATIONS}/{self.annotator}: {record.id} ({record.kind})")
        except EvidenceError as exc:
            raise LayerError(f"{record.id} was written, but {layout.ROOTS_LOG} was not ({exc})") from None

    def layer_root(self) -> str | None:
        """The layer's root: the SHA-256 of its SHA256SUMS (fixed once frozen), or None."""
        try:
            return file_sha256(self.folder / layout.SUMS)
        except OSError:
            return None


def frame_seen(root: Path, key: str, decision: int) -> tuple[str | None, int | None]:
    """The frame the agent saw at `decision` (its hash and frame number), or (None, None)."""
    reader = EvidenceFolder(root).trial(key).reader()
    previous_index = 0
    try:
        for line in reader.trace():
            if line.decision_id == decision:
                return line.frame_sha256, previous_index
            previous_index = line.result_frame_index
    except (FormatProblem, OSError):
        pass
    return None, None


def _stamped(root: Path, annotator: str, key: str, decision: int, **fields) -> Annotation:
    now = utc_now()
    if "frame_sha256" in fields:
        frame, index = fields.pop("frame_sha256"), fields.pop("frame_index", None)
    else:
        frame, index = frame_seen(root, key, decision) if isinstance(decision, int) else (None, None)
    base = {"trial_key": key, "decision_id": decision, "frame_sha256": frame, "frame_index": index,
            "opened_utc": now, "timestamp_utc": now, "annotator": annotator, "source": "annotator",
            "refers_to": None, "note": ""}
    try:
        return Annotation.model_validate({**base, **fields})
    except ValidationError as exc:
        raise LayerError(f"not a valid label: {short_error(exc)}") from None


def _annotator_layer(root: Path, annotator: str) -> AnnotationLayer:
    if annotator in (OPERATOR, ADJUDICATION):
        raise LayerError(f"{annotator!r} is a reserved layer: name yourself as the annotator")
    return AnnotationLayer(root, annotator)


def add_label(root: Path, annotator: str, key: str, decision: int, *, type: str, severity: str,
              refers_to: str | None, role: str = "primary", primary_id: str | None = None,
              recovered_decision: int | None = None, note: str = "") -> Annotation:
    """An annotator's memory-error label, checked against the evidence and appended to their layer."""
    layer = _annotator_layer(root, annotator)
    record = _stamped(root, annotator, key, decision, type=type, severity=severity, refers_to=refers_to,
                      role=role, primary_id=primary_id, recovered_decision=recovered_decision, note=note)
    return layer.append(record)


def add_route(root: Path, annotator: str, key: str, decision: int, *, room: str, landmark: str | None = None,
              note: str = "") -> Annotation:
    """A route annotation (room, landmark) for a decision whose coordinates are missing."""
    layer = _annotator_layer(root, annotator)
    record = _stamped(root, annotator, key, decision, kind="route", type="route", severity="minor", room=room,
                      landmark=landmark, note=note)
    return layer.append(record)


def add_milestone(root: Path, annotator: str, key: str, decision: int, *, milestone: str, note: str = "") -> Annotation:
    """A milestone scored by hand (a game without a memory probe): `milestone` first reached at `decision`."""
    layer = _annotator_layer(root, annotator)
    record = _stamped(root, annotator, key, decision, kind="milestone", type="milestone", severity="minor",
                      milestone=milestone, note=note)
    return layer.append(record)


def add_reviewed(root: Path, annotator: str, key: str, first: int | None = None, last: int | None = None, *,
                 note: str = "") -> Annotation:
    """A reviewed record: the annotator looked at decisions first..last of trial `key` (default: every
    decision recorded so far) for memory errors, and every one found there is labelled."""
    layer = _annotator_layer(root, annotator)
    trial = Evidence(root).trial(key)  # an unknown trial is refused here, naming it
    first = 1 if first is None else first
    last = trial.last_decision if last is None else last
    record = _stamped(root, annotator, key, first, kind="reviewed", type="reviewed", severity="minor",
                      through_decision=last, note=note, frame_sha256=None, frame_index=None)
    return layer.append(record)


def adjudicate(root: Path, resolves: list[str], resolution: str, reason: str, *, type: str | None = None,
               severity: str | None = None, adjudicator: str = ADJUDICATION) -> Annotation:
    """Settle labels of other layers (kept as they are) in the adjudication layer. accept and reject
    carry the first resolved label's type and severity unless given; relabel needs both."""
    others = {a.id: a for name, layer in read_layers(root).items() if name != ADJUDICATION for a in layer if a.id}
    if not resolves:
        raise LayerError("an adjudication resolves one or more annotation ids")
    first = others.get(resolves[0])
    if first is None:
        raise LayerError(f"{resolves[0]} is not an annotation of any layer")
    if resolution == "relabel" and (type is None or severity is None):
        raise LayerError("relabel gives the settled --type and --severity")
    record = _stamped(root, adjudicator, first.trial_key, first.decision_id, kind="adjudication",
                      source="annotator", type=type or first.type, severity=severity or first.severity,
                      refers_to=first.refers_to, resolves=list(resolves), resolution=resolution, reason=reason,
                      frame_sha256=first.frame_sha256, frame_index=first.frame_index)
    return AnnotationLayer(root, ADJUDICATION).append(record)


def layer_names(root: Path) -> list[str]:
    return EvidenceFolder(root).layer_names()


def trial_tags(root: Path) -> list[Annotation]:
    """Live operator tags sealed in the trials' own annotations.jsonl, with ids operator-<key>-<n>."""
    out = []
    for trial in EvidenceFolder(root).trials(voided=False):
        reader = trial.reader()
        if not reader.exists(layout.TRIAL_ANNOTATIONS):
            continue
        try:
            for n, a in enumerate(reader.annotations(), 1):
                if a.id is None:
                    a.id = f"{OPERATOR}-{trial.key}-{n}"
                out.append(a)
        except FormatProblem as exc:
            raise LayerError(str(exc)) from None
    return out


def read_layers(root: Path) -> dict[str, list[Annotation]]:
    """Every layer by name (the operator's with the trials' live tags first; adjudication too).
    Raises LayerError naming the first malformed line."""
    layers = {name: AnnotationLayer(root, name).records() for name in layer_names(root)}
    tags = trial_tags(root)
    if tags:
        layers[OPERATOR] = tags + layers.get(OPERATOR, [])
    return dict(sorted(layers.items()))


def _settled_labels(root: Path, where: str, problems: list[str]) -> dict[str, Annotation]:
    """The labels of every other layer by id, which adjudications settle (none, and a problem, when
    they cannot be read)."""
    try:
        return {x.id: x for k, v in read_layers(root).items() if k != ADJUDICATION for x in v if x.id}
    except LayerError as exc:
        problems.append(f"{where}: cannot read the layers it settles ({exc})")
        return {}


def check_layer(root: Path, name: str, evidence: Evidence | None = None) -> list[str]:
    """verify's check of one layer: parse, chain, freeze last, FROZEN digest, ids, and every label's
    references into the evidence. One line per problem."""
    layer = AnnotationLayer(root, name)
    rel = f"{layout.ANNOTATIONS}/{name}"
    try:
        records = layer.records()
    except LayerError as exc:
        return [str(exc)]
    problems = []
    evidence = evidence or Evidence(root)
    others = None
    seen: list[Annotation] = []
    for n, a in enumerate(records, 1):
        where = f"{rel}/{LAYER_FILE}:{n}"
        if a.id != f"{name}-{n}":
            problems.append(f"{where}: id {a.id!r}, the layer gives {name}-{n}")
        if a.kind == "adjudication" and others is None:
            others = _settled_labels(root, where, problems)
        try:
            check_label(a, name, seen, evidence, others)
        except LayerError as exc:
            problems.append(f"{where}: {exc}")
        seen.append(a)
    return problems + _freeze_problems(layer, records, rel)


def _freeze_problems(layer: AnnotationLayer, records: list[Annotation], rel: str) -> list[str]:
    """A layer ending with a freeze has a FROZEN sum, and only then; and the file is the one frozen."""
    frozen = layer.frozen_sha256()
    is_frozen = bool(records) and records[-1].kind == "freeze"
    if is_frozen and frozen is None:
        return [f"{rel}/{layout.SUMS}: the layer ends with a freeze but its sums carry no {FROZEN} line"]
    if frozen is not None and not is_frozen:
        return [f"{rel}/{layout.SUMS}: {FROZEN}, but the layer does not end with a freeze"]
    if frozen is not None and layer.path.is_file() and file_sha256(layer.path) != frozen:
        return [f"{rel}/{LAYER_FILE}: differs from the one frozen"]
    return []


# -- live tags after their trial ended ------------------------------------------------------------

def late_tagger(root: Path):
    """Tags for a trial that has already been sealed: checked against its evidence on disk."""

    def tag(annotation: dict, commit: bool) -> Annotation:
        key = annotation.get("trial_key")
        trial = EvidenceFolder(root).trial(str(key))
        if not key or not trial.sealed():
            raise TagForAnotherTrial(key)
        reader = TrialReader(trial.path)  # problems name the trial by its key alone
        try:
            result, _ = reader.result()
            facts = {op.fact_id for op in reader.memory() if op.op == "write"}
        except FormatProblem as exc:
            raise TagRefused(f"trial {key} cannot be read back: {exc}") from None
        decision = annotation.get("decision_id", result.last_decision)
        if not isinstance(decision, int) or not 0 <= decision <= result.last_decision:
            raise TagRefused(f"decision {decision} is not a recorded decision of {key}")
        if annotation.get("refers_to") is not None:
            check_reference(annotation["refers_to"], decision, facts.__contains__)
        record = build_annotation(annotation, key, decision)
        if commit:
            try:
                return AnnotationLayer(root, OPERATOR).append(record, check=False)
            except LayerError as exc:
                raise TagRefused(str(exc)) from None
        return record

    return tag
