"""Every metric of the protocol (seed 000), computed from the records of an evidence folder.

Pure functions over records: result.json, trace.jsonl, inputs.jsonl, memory.jsonl (through
sessions.evidence.reader) and the annotation layers (sessions.annotations.annotation_layer.read_layers). The one
optional extra is the per-action probed state, which the records do not hold: `replayed_samples`
re-runs a trial's recorded inputs (like `oakwatch replay`) to recover it, `replay_figures` counts
what the figures need from it as it streams by (no sample is kept), and every figure that needs it
says where its state came from (`state_source`: "replay" or "records").

Definitions (docs/metrics.md repeats them, with the formulas):
- Unknown stays null, never zero; zero-progress trials never get a ratio over zero progress.
- Productive action: an accepted action that changed the probed state (the position and every field
  the definition names for progress, recovery, battle or a milestone) or the screen (the captured
  frame's hash), and is not part of a repeated route segment. Without replayed state: the screen only.
- Repeated navigation action: an action that completes a segment of SEGMENT (4) transitions that
  already occurred since the last progress event (a milestone, a change in a progress field or a
  recovery-event field); required backtracking (game definition) is never repetition. Without
  replayed state a transition is (frame before, action, frame after).
- Memory errors: the confirmed labels (see `confirmed_labels`) of the eight rubric types; a
  consequence is never counted in an aggregate that already counts its primary cause. A trial's count
  is known (0 with no label) only when the annotators looked at every decision of it: a reviewed
  record's range, or a label in a trial they recorded no review of (`coverage`); otherwise null.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from engine.games.gamedef import GameDefinition
from engine.loop.records import Annotation, InputLine, TraceLine, TrialResult
from engine.loop.routes import RouteTracker
from sessions.analysis.curve import Curve, DecisionCounts, curve_points
from sessions.evidence import layout
from sessions.evidence.folder import EvidenceFolder, TrialFolder
from sessions.evidence.reader import FormatProblem, TrialReader

MEMORY_TYPES = ("omission", "false-persistence", "fabrication", "contradiction", "duplicate-objective",
                "context-substitution", "memory-use-failure", "unsupported-overwrite")
STORAGE_TYPES = frozenset({"omission", "false-persistence", "fabrication", "contradiction", "unsupported-overwrite"})
USE_TYPES = frozenset({"duplicate-objective", "context-substitution", "memory-use-failure"})
SEVERITIES = ("minor", "material", "critical")
SEVERITY_RANK = {s: i for i, s in enumerate(SEVERITIES)}
WRITE_OPS = frozenset({"write", "update", "complete", "supersede", "reject"})
ADJUDICATION = "adjudication"
OPERATOR = "operator"
BOOTSTRAP_RESAMPLES = 2000
Z95 = 1.959963984540054
SIGNIFICANCE_MIN = 10

# Per-condition metrics: name -> the row key whose zero excludes a trial (its ratio does not exist), or None.
SUMMARY_METRICS: dict[str, str | None] = {
    "points": None, "milestones": None, "accepted_actions": None, "model_decisions": None, "cost_usd": None,
    "tokens": None, "model_latency_s": None, "wall_s": None, "productive_actions": None,
    "productive_action_rate": "accepted_actions", "battle_actions": None, "navigation_actions": None,
    "repeated_navigation_actions": None, "repeat_overhead": "accepted_actions", "memory_errors": None,
    "material_errors": None, "memory_error_rate": "model_decisions",
    "material_memory_error_rate": "model_decisions", "memory_recovery_cost": None,
    "cost_per_milestone": "milestones", "cost_per_point": "points", "actions_per_milestone": "milestones",
    "progress_efficiency": "cost_usd", "storage_quality": None, "use_quality": None,
    "path_efficiency": "milestones",
}


def ratio(numerator, denominator, scale: float = 1.0):
    """numerator / denominator * scale; None when either is unknown or the denominator is zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator * scale, 6)


# -- per-action state ---------------------------------------------------------------------------

@dataclass
class States:
    """The probed sample before the first action and after each accepted action (replayed)."""

    start: dict
    after: list[dict]


def replay_states(trial_dir: Path) -> tuple[States | None, str | None]:
    """Re-run the trial's recorded inputs from its start state and collect the probed sample after
    every action, checking each frame hash against the record. (States, None) or (None, why not).
    It holds a sample per action: the report streams them instead (`replay_figures`)."""
    stopped: list[str] = []
    samples = replayed_samples(trial_dir, stopped)
    start = next(samples, None)
    after = [sample for _, sample in samples]
    if stopped:
        return None, stopped[0]
    return States(start[1], after), None


def replayed_samples(trial_dir: Path, stopped: list[str]) -> Iterator[tuple[InputLine | None, dict]]:
    """The replay as a stream: (None, the sample before the first action), then (input line, the
    probed sample after it) per recorded action, each frame hash checked against the record. When
    the replay cannot start, diverges or fails, the stream ends early with the reason in `stopped`
    (the figures then come from the records only). Only the emulator's own work is guarded here: an
    error of whoever consumes the stream is raised where it happens, as before."""
    from engine.emulators.backends import BACKENDS
    from engine.games.probe import Probe
    from sessions.audit.replay import load_trial
    from sessions.preflight.experiment import PreflightError

    try:
        loaded = load_trial(trial_dir)
        emulator = BACKENDS[loaded.manifest.emulator.name].open(loaded.rom, str(loaded.rom_path),
                                                                loaded.game.platform)
    except (PreflightError, FormatProblem, OSError) as exc:
        stopped.append(f"replay unavailable: {exc}")
        return
    except Exception as exc:  # an emulator that cannot start: the records still give what they give
        stopped.append(f"replay unavailable: {type(exc).__name__}: {exc}")
        return
    try:
        probe = Probe(loaded.game)
        emulator.restore(loaded.state)
        start = probe(emulator.read_range)
        yield None, start
        for row in loaded.reader.inputs():
            step = emulator.step(row.action, loaded.timing, probe)
            if step.frame_sha256 != row.frame_sha256:
                stopped.append(f"replay diverged at decision {row.decision_id}, action {row.index}: "
                               f"state from the records only")
                return
            yield row, step.ram_last
    except FormatProblem as exc:
        stopped.append(f"replay unavailable: {exc}")
    except Exception as exc:
        stopped.append(f"replay failed: {type(exc).__name__}: {exc}")
    finally:
        emulator.close()


@dataclass
class Replayed:
    """What the figures take from the replayed states, gathered action by action while the replay
    runs (`replay_figures`): the action figures and the highest party level, never the samples."""

    acts: ActionFigures | None  # None: the state is not used (no game, or not one sample per input)
    level: int | None  # the highest party level over the samples (the long-horizon scorer)


def replay_figures(trial_dir: Path, first_frame: str | None, input_count: int, awards: dict[int, str],
                   game: GameDefinition | None) -> tuple[Replayed | None, str | None]:
    """`action_figures` and `_highest_level` over the replayed states in one streamed pass beside the
    replay: memory does not grow with the run. (Replayed, None), or (None, why not) when the replay
    could not start, diverged or failed (the figures then come from the records, as before)."""
    stopped: list[str] = []
    samples = replayed_samples(trial_dir, stopped)
    first = next(samples, None)
    if first is None:
        return None, stopped[0]
    start = first[1]
    counter = _ActionCounter(first_frame, awards, game, start) if game is not None else None
    level_field = game.party_level_field if game is not None and game.long_horizon else None
    level = int(start[level_field]) if level_field else None
    count = 0
    try:
        for row, after in samples:
            count += 1
            if counter is not None:
                counter.add(row, after)
            if level_field:
                level = max(level, int(after[level_field]))
    finally:
        samples.close()  # the emulator closes now, even when a figure raised
    if stopped:
        return None, stopped[0]
    # the state counts only with one sample per recorded input (else the records alone, as before)
    acts = counter.finish(input_count) if counter is not None and count == input_count else None
    return Replayed(acts, level), None


def state_fields(game: GameDefinition | None) -> list[str]:
    """The probed state that makes an action productive: position, progress, recovery, battle and
    milestone fields (counters that tick every frame are left out)."""
    if game is None:
        return []
    names: list[str] = []
    if game.position:
        names += [game.position.map, game.position.x, game.position.y]
    names += list(game.progress_fields) + list(game.recovery_events)
    names += [game.battle_field] if game.battle_field else []
    names += [c.field for m in game.milestones for c in m.all]
    return list(dict.fromkeys(names))


@dataclass
class ActionFigures:
    productive: int = 0
    repeated: int = 0  # repeated navigation actions
    excused: int = 0  # repeated segments that were required backtracking
    battle: int | None = None
    navigation: int | None = None
    changed: int = 0

    def count(self, changed: bool, repeated: bool, in_battle: bool) -> None:
        """One action's share of the figures."""
        self.changed += changed
        self.repeated += repeated
        self.productive += changed and not repeated
        if self.battle is not None:
            self.battle += in_battle


@dataclass
class _Watch:
    """What `action_figures` compares between probed samples: nothing without replayed state."""

    fields: list[str]  # a change in any makes an action productive
    resets: list[str]  # a change in any is a progress event for the route tracker
    pos: object | None  # the definition's position fields
    battle_field: str | None
    state: bool

    @classmethod
    def of(cls, game: GameDefinition | None) -> _Watch:
        if game is None:
            return cls([], [], None, None, False)
        return cls(state_fields(game), game.route_resets, game.position, game.battle_field, True)

    def record(self, tracker: RouteTracker, before: tuple[str | None, dict | None], row: InputLine,
               after: dict | None, reached: list[str]) -> None:
        """One transition for the tracker: positions with state, else (frame, action, frame)."""
        frame, sample = before
        if self.pos is not None:
            tracker.record(_at(sample, self.pos), row.action, _at(after, self.pos), reached)
        elif not self.state:
            tracker.record((frame,), row.action, (row.frame_sha256,))


def _differs(before: dict | None, after: dict | None, fields: list[str]) -> bool:
    return any(before.get(f) != after.get(f) for f in fields)


def _at(sample: dict, pos) -> tuple[int, int, int]:
    return int(sample[pos.map]), int(sample[pos.x]), int(sample[pos.y])


class _ActionCounter:
    """`action_figures`, one action at a time: the counts, the frame and sample before the next
    action, and the route tracker (no list of actions or states is kept). `start`: the replayed
    sample before the first action, None without replayed state (the screen alone tells a change)."""

    def __init__(self, first_frame: str | None, awards: dict[int, str], game: GameDefinition | None,
                 start: dict | None):
        use_state = start is not None and game is not None
        self.out = ActionFigures()
        self.watch = _Watch.of(game if use_state else None)
        self.tracker = RouteTracker.for_game(game, None) if use_state else RouteTracker(None)
        if self.watch.battle_field:
            self.out.battle = 0
        self.awards = awards
        self.frame, self.sample = first_frame, (start if use_state else None)
        self.reached: list[str] = []

    def add(self, row: InputLine, after: dict | None) -> None:
        """One accepted action and the probed sample after it (None without replayed state)."""
        watch, tracker, sample = self.watch, self.tracker, self.sample
        changed = row.frame_sha256 != self.frame or _differs(sample, after, watch.fields)
        before_repeats = tracker.repeated_actions
        if row.capture_frame in self.awards:
            self.reached.append(self.awards[row.capture_frame])
            tracker.progress()
        if _differs(sample, after, watch.resets):
            tracker.progress()
        in_battle = bool(watch.battle_field and sample.get(watch.battle_field))
        watch.record(tracker, (self.frame, sample), row, after, self.reached)
        self.out.count(changed, tracker.repeated_actions > before_repeats and not in_battle, in_battle)
        self.frame, self.sample = row.frame_sha256, after

    def finish(self, input_count: int) -> ActionFigures:
        out = self.out
        out.excused = self.tracker.excused_actions
        if out.battle is not None:
            out.navigation = input_count - out.battle
        return out


def action_figures(first_frame: str | None, inputs: Iterable[InputLine], input_count: int,
                   awards: dict[int, str], game: GameDefinition | None, states: States | None) -> ActionFigures:
    """Productive, repeated, battle and navigation actions (module docstring), in one pass over the
    inputs (streamed: memory does not grow with the run).

    `first_frame`: the trace's first frame hash; `awards`: capture frame index -> milestone id, the
    actions that earned a rung (a progress event). Without replayed state (or without the game) no
    field is watched: the screen alone tells a change, and a transition is (frame, action, frame)."""
    use_state = states is not None and game is not None and len(states.after) == input_count
    counter = _ActionCounter(first_frame, awards, game, states.start if use_state else None)
    for i, row in enumerate(inputs):
        counter.add(row, states.after[i] if use_state else None)
    return counter.finish(input_count)


# -- annotations ----------------------------------------------------------------------------------

def read_annotation_layers(root: Path) -> dict[str, list[Annotation]]:
    """Every layer (annotators, the operator's live tags, adjudication) through the annotation layer."""
    from sessions.annotations.annotation_layer import read_layers

    return read_layers(root)


@dataclass
class Label:
    """One confirmed memory-error label, as aggregates count it."""

    id: str
    trial_key: str
    decision_id: int
    type: str
    severity: str
    refers_to: str | None
    recovered_decision: int | None
    role: str
    primary_id: str | None
    source: str  # "single", "agreed" or "adjudicated"

    @property
    def is_memory(self) -> bool:
        return self.type in MEMORY_TYPES


@dataclass
class Coverage:
    """The decisions of one trial one annotator looked at for memory errors.

    With a reviewed record for the trial: its reviewed ranges and the decisions the annotator labelled.
    Without one (a layer from before reviewed records, or labels only): a label anywhere in the trial
    stands for the whole of it, as it always did."""

    whole: bool = False
    spans: list[tuple[int, int]] = field(default_factory=list)  # inclusive decision ranges

    def covers(self, decision: int) -> bool:
        return self.whole or any(lo <= decision <= hi for lo, hi in self.spans)


def complete(coverages: Iterable[Coverage], last_decision: int) -> bool:
    """Whether the coverages together hold every decision 1..last_decision (and there is one at all)."""
    spans: list[tuple[int, int]] = []
    for c in coverages:
        if c.whole:
            return True
        spans += c.spans
    if not spans:
        return False
    need = 1  # the first decision not yet covered
    for lo, hi in sorted(spans):
        if lo > need:
            break
        need = max(need, hi + 1)
    return need > last_decision


def coverage(records: Iterable[Annotation]) -> dict[str, Coverage]:
    """trial key -> the decisions this layer looked at (Coverage). A reviewed record without a usable
    range covers nothing (verify names it)."""
    records = list(records)
    reviewed = {a.trial_key for a in records if a.kind == "reviewed"}
    out: dict[str, Coverage] = {}
    for a in records:
        if a.kind == "reviewed":
            last = a.through_decision
            if last is not None and last >= a.decision_id:
                out.setdefault(a.trial_key, Coverage()).spans.append((a.decision_id, last))
        elif a.kind in ("memory-error", "route"):
            c = out.setdefault(a.trial_key, Coverage())
            if a.trial_key in reviewed:
                c.spans.append((a.decision_id, a.decision_id))
            else:
                c.whole = True
    return out


@dataclass
class Confirmed:
    labels: list[Label]
    disputed: list[dict]  # unresolved disagreements, kept, never counted
    annotators: list[str]
    basis: str  # "annotators", "operator" or "none"
    # basis layer -> trial key -> what it looked at (reviewed ranges, labels)
    coverage: dict[str, dict[str, Coverage]] = field(default_factory=dict)

    def is_annotated(self, key: str, last_decision: int) -> bool:
        """Whether the basis layers together looked at every decision of the trial: only then is its
        memory-error count a known number (0 with no label); otherwise its memory figures are null."""
        return complete((layer[key] for layer in self.coverage.values() if key in layer), last_decision)


def _memory_labels(records: Iterable[Annotation]) -> list[Annotation]:
    return [a for a in records if a.kind == "memory-error"]


def _label(a: Annotation, source: str, **changes) -> Label:
    fields = {"id": a.id or f"{a.annotator}-{a.trial_key}-{a.decision_id}-{a.type}", "trial_key": a.trial_key,
              "decision_id": a.decision_id, "type": a.type, "severity": a.severity, "refers_to": a.refers_to,
              "recovered_decision": a.recovered_decision, "role": a.role, "primary_id": a.primary_id,
              "source": source}
    fields.update(changes)
    return Label(**fields)


def confirmed_labels(layers: dict[str, list[Annotation]]) -> Confirmed:
    """The labels aggregates count.

    The annotators' layers are the basis when there are any (every layer but `operator` and
    `adjudication`), else the operator's live tags. Labels are grouped by (trial, decision):
    - an adjudication that settles any label of the group replaces the group: accept keeps the
      settled labels (with the adjudication's type and severity when it gives them), relabel keeps
      one label of the adjudicated type and severity, reject keeps none;
    - the annotators at a decision are those who looked at it (`coverage`: a reviewed range, or a
      label in the trial when they recorded no review of it);
    - one of them: every label counts;
    - several: a type counts when every one of them gave it at that decision (severity: the least
      severe given); anything else, a reviewed decision left unlabelled beside another's label
      included, is a disagreement, listed and not counted until adjudicated.
    A trial is annotated when the basis layers looked at every decision of it (`Confirmed.is_annotated`).
    """
    basis, names = _basis(layers)
    if not names:
        return Confirmed([], [], [], "none")
    looked = {name: coverage(layers.get(name, [])) for name in names}
    rulings = _rulings(layers)
    labels: list[Label] = []
    disputed: list[dict] = []
    for (key, decision), by_name in _label_groups(layers, names):
        every = [a for group in by_name.values() for a in group]
        ruling = _ruling_on(every, rulings)
        if ruling is not None:
            labels += _ruled(ruling, every)
            continue
        present = [n for n in names if n in by_name or _covered(looked[n], key, decision)]
        if len(present) == 1:
            labels += [_label(a, "single") for a in every]
        elif len({_types_given(by_name, n) for n in present}) == 1:
            labels += _agreed(by_name[present[0]], every)
        else:
            disputed.append(_dispute(key, decision, by_name, present))
    return Confirmed(labels, disputed, names, basis, looked)


def _ruling_on(labels: list[Annotation], rulings: dict[str, Annotation]) -> Annotation | None:
    """The adjudication that settles any of these labels (the first label's that has one)."""
    return next((rulings[a.id] for a in labels if a.id in rulings), None)


def _covered(looked: dict[str, Coverage], key: str, decision: int) -> bool:
    return key in looked and looked[key].covers(decision)


def _basis(layers: dict[str, list[Annotation]]) -> tuple[str, list[str]]:
    """Which layers aggregates count: the annotators' when there are any, else the operator's live
    tags when it has a memory-error label, else none (an empty list)."""
    annotators = annotator_names(layers)
    if annotators:
        return "annotators", annotators
    if _memory_labels(layers.get(OPERATOR, [])):
        return "operator", [OPERATOR]
    return "none", []


def _types_given(by_name: dict[str, list[Annotation]], name: str) -> tuple[str, ...]:
    return tuple(sorted({a.type for a in by_name.get(name, [])}))


def _dispute(key: str, decision: int, by_name: dict[str, list[Annotation]], present: list[str]) -> dict:
    """An unresolved disagreement at one decision: what each annotator who looked at it gave."""
    return {"trial_key": key, "decision_id": decision,
            "labels": {name: [{"id": a.id, "type": a.type, "severity": a.severity}
                              for a in by_name.get(name, [])] for name in present}}


def _label_groups(layers: dict[str, list[Annotation]],
                  names: list[str]) -> list[tuple[tuple[str, int], dict[str, list[Annotation]]]]:
    """The basis layers' memory-error labels by (trial, decision), then by annotator, in order."""
    groups: dict[tuple[str, int], dict[str, list[Annotation]]] = defaultdict(lambda: defaultdict(list))
    for name in names:
        for a in _memory_labels(layers.get(name, [])):
            groups[(a.trial_key, a.decision_id)][name].append(a)
    return sorted(groups.items())


def _ruled(ruling: Annotation, every: list[Annotation]) -> list[Label]:
    """The labels a decision keeps once an adjudication settles any of them (`confirmed_labels`)."""
    settled = [a for a in every if a.id in (ruling.resolves or [])]
    if ruling.resolution == "reject":
        return []
    if ruling.resolution == "relabel":
        first = settled[0] if settled else every[0]
        return [_label(first, "adjudicated", type=ruling.type, severity=ruling.severity)]
    if len(settled) > 1:  # accept of several labels: one, of the adjudication's type and severity
        return [_label(settled[0], "adjudicated", type=ruling.type, severity=ruling.severity)]
    out: list[Label] = []
    seen: set[str] = set()
    for a in settled or every:
        if a.type not in seen:
            seen.add(a.type)
            out.append(_label(a, "adjudicated"))
    return out


def _agreed(first: list[Annotation], every: list[Annotation]) -> list[Label]:
    """Annotators who gave the same types at a decision: each type once, at the least severity given."""
    out = []
    for t in sorted({a.type for a in first}):
        least = min((a.severity for a in every if a.type == t), key=SEVERITY_RANK.__getitem__)
        origin = next(a for a in first if a.type == t)
        out.append(_label(origin, "agreed", severity=least))
    return out


def counted(labels: list[Label], keep: Callable[[Label], bool]) -> list[Label]:
    """The labels one aggregate counts: those `keep` accepts, minus any consequence whose primary
    cause is itself counted in that aggregate (one event is never counted twice)."""
    kept = [lab for lab in labels if keep(lab)]
    ids = {lab.id for lab in kept}
    return [lab for lab in kept if not (lab.role == "consequence" and lab.primary_id in ids)]


@dataclass
class MemoryFigures:
    memory_errors: int | None
    material_errors: int | None
    memory_error_rate: float | None
    material_memory_error_rate: float | None
    memory_recovery_cost: int | None
    storage_errors: int | None
    use_errors: int | None
    storage_quality: float | None
    use_quality: float | None
    by_type: dict[str, int]
    by_severity: dict[str, int]


def memory_figures(labels: list[Label] | None, decisions: int, per_decision: DecisionCounts | dict[int, int],
                   last_decision: int, writes: int, reading: int) -> MemoryFigures:
    """`labels`: the trial's confirmed labels; None when nobody annotated (every label figure is null).
    `writes`: the trial's memory operations that write; `reading`: its decisions that read memory.

    memory_recovery_cost: accepted actions of the decisions from each counted error's decision up to
    (not including) its recovered_decision; an error with none recorded never recovered: to the end."""
    if labels is None:
        return MemoryFigures(None, None, None, None, None, None, None, None, None, {}, {})
    errors = counted(labels, lambda lab: lab.is_memory)
    material = counted(labels, lambda lab: lab.is_memory and lab.severity in ("material", "critical"))
    storage = counted(labels, lambda lab: lab.type in STORAGE_TYPES)
    use = counted(labels, lambda lab: lab.type in USE_TYPES)
    cost = 0
    for lab in errors:
        end = lab.recovered_decision if lab.recovered_decision is not None else last_decision + 1
        cost += sum(n for d, n in per_decision.items() if lab.decision_id <= d < end)
    by_type = {t: len(counted(labels, lambda lab, t=t: lab.type == t)) for t in MEMORY_TYPES}
    by_severity = {s: len(counted(labels, lambda lab, s=s: lab.is_memory and lab.severity == s))
                   for s in SEVERITIES}
    return MemoryFigures(
        memory_errors=len(errors), material_errors=len(material),
        memory_error_rate=ratio(len(errors), decisions, 100), material_memory_error_rate=ratio(len(material),
                                                                                               decisions, 100),
        memory_recovery_cost=cost, storage_errors=len(storage), use_errors=len(use),
        storage_quality=None if not writes else round(max(0.0, 1 - len(storage) / writes), 6),
        use_quality=None if not reading else round(max(0.0, 1 - len(use) / reading), 6),
        by_type=by_type, by_severity=by_severity)


# -- the long-horizon scorer (seed 002) --------------------------------------------------------------

def long_horizon(result: TrialResult, game: GameDefinition | None, level: int | None) -> dict:
    """Seed 002's score with the definition's constants (engine.games.gamedef.LongHorizon):
    progress = 70 m / M, speed = 40 log2(1 + T_ref / t), discipline = 10 clamp((L0 - L) / (L0 - Lfull), 0, 1),
    overall = progress + F (speed + discipline). Times are active game time (docs/metrics.md), from each
    award's `active_seconds` stamp: m counts the required rungs reached within the budget hours (later
    ones are trimmed), t is the final rung's stamp, and F = 1 when the final rung is reached within budget.
    Unknown stays null with a reason: a folder without stamps gives progress only where its wall time
    (an upper bound on active time) is within budget, and no speed."""
    if game is None:
        return {"overall": None, "reason": "the game definition could not be loaded"}
    lh = game.long_horizon
    if lh is None:
        return {"overall": None, "reason": f"game definition {game.id} has no long_horizon section"}
    required = {m.id for m in game.milestones if m.required}
    total = lh.required_milestones or len(required)
    budget_s = lh.budget_hours * 3600
    final = lh.final_milestone or game.final_id
    stamps = {a.id: a.active_seconds for a in result.milestones}
    out = {"required_milestones": total, "level": level, "reference_hours": lh.reference_hours,
           "budget_hours": lh.budget_hours, "final_milestone": final,
           "trial_active_hours": _active_hours(result), "reason": None}
    unstamped = [mid for mid in result.milestones_reached if stamps.get(mid) is None]
    if unstamped and not _wall_within(result, budget_s):
        out.update(reached_required=None, trimmed=None, active_hours=None, progress=None, gate=None, speed=None,
                   discipline=None, overall=None,
                   reason=f"no active-time stamp for {', '.join(unstamped)} (a folder from before the stamps, or "
                          f"a recovered trial): which rungs fell within the {lh.budget_hours:g}-hour budget is "
                          f"unknown")
        return out
    reached = [mid for mid in result.milestones_reached if mid in required]
    final_s = _lh_progress(out, result, reached, stamps, budget_s, total, final)
    return _lh_finish(out, lh, final, final_s, final in result.milestones_reached, level)


def _active_hours(result: TrialResult) -> float | None:
    tel = result.telemetry
    trial_active = tel.active_seconds if tel is not None else None
    return None if trial_active is None else trial_active / 3600


def _wall_within(result: TrialResult, budget_s: float) -> bool:
    """The trial's wall time (an upper bound on its active time) is known and within the budget."""
    wall = result.telemetry.wall_time_seconds if result.telemetry is not None else None
    return wall is not None and wall <= budget_s


def _lh_progress(out: dict, result: TrialResult, reached: list[str], stamps: dict, budget_s: float, total: int,
                 final: str) -> float | None:
    """Seed 002's progress term into `out` (rungs within budget; the trimmed ones); the final rung's stamp.
    Without stamps the wall time bounds every rung's active time, and it is within budget here."""
    within = [mid for mid in reached if stamps.get(mid) is None or stamps[mid] <= budget_s]
    m = min(total, len(within))
    final_s = stamps.get(final) if final in result.milestones_reached else None
    out.update(reached_required=m, trimmed=[mid for mid in result.milestones_reached if mid not in within
                                            and stamps.get(mid) is not None and stamps[mid] > budget_s],
               active_hours=None if final_s is None else final_s / 3600, progress=round(70 * m / total, 6))
    return final_s


def _lh_finish(out: dict, lh, final: str, final_s: float | None, finished: bool, level: int | None) -> dict:
    """Seed 002's gate, speed and discipline terms and the overall score, into `out`."""
    if finished and final_s is None:
        out.update(gate=None, speed=None, discipline=None, overall=None,
                   reason=f"the final rung {final} has no active-time stamp (a folder from before the stamps): "
                          f"the time to the finish is unknown")
        return out
    gate = 1 if finished and final_s <= lh.budget_hours * 3600 else 0
    out["gate"] = gate
    if not gate:
        out.update(speed=0.0, discipline=0.0, overall=out["progress"])
        return out
    out["speed"] = round(40 * math.log2(1 + lh.reference_hours / max(final_s / 3600, 1e-9)), 6)
    if level is None:
        out.update(discipline=None, overall=None,
                   reason="the highest party level is unknown (no level_field, or no replayed state)")
        return out
    span = lh.level_zero - lh.level_full
    out["discipline"] = round(10 * min(1.0, max(0.0, (lh.level_zero - level) / span)), 6)
    out["overall"] = round(out["progress"] + out["speed"] + out["discipline"], 6)
    return out


# -- one trial -----------------------------------------------------------------------------------------

@dataclass
class TrialRecords:
    """What the figures need of one trial's records, read in one streamed pass (`read_trial`): the
    per-decision figures, never the lines themselves, so memory stays flat as the run grows (the
    curve keeps its figures and corners; its points are read again from the trace when written).
    `action_figures` reads the inputs again through `reader`."""

    key: str
    rel: str  # folder relative to the experiment
    result: TrialResult
    reader: TrialReader
    input_count: int
    decision_count: int  # trace lines
    first_frame: str | None  # the trace's first frame hash
    per_decision: DecisionCounts  # accepted actions per decision
    memory_writes: int  # memory operations that write
    memory_reading: int  # decisions that read memory
    curve: Curve  # sessions.analysis.curve: its figures, and its points read again when long
    voided: bool = False

    def inputs(self) -> Iterator[InputLine]:
        return self.reader.inputs()


CLIENT_METRICS = ("client_cost_usd", "client_tokens")  # a policy-cli client's own totals for its trial


def client_totals(r: TrialResult) -> dict | None:
    """What a `policy: cli` client reported of its own run (sessions.execute.cli_client): its cost, and its tokens
    (input + output, plus Claude Code's cache reads and writes where reported; Codex counts cached input
    inside input). None for a trial no client played; a figure it did not report is None, never 0."""
    server = r.provenance.get("tool_server")
    client = server.get("client") if isinstance(server, dict) else None
    if not isinstance(client, dict):
        return None
    cost = client.get("total_cost_usd")
    usage = client.get("usage")
    tokens = None
    if isinstance(usage, dict):
        parts = [usage.get("input_tokens"), usage.get("output_tokens"),
                 *[usage[k] for k in ("cache_read_input_tokens", "cache_creation_input_tokens") if k in usage]]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in parts):
            tokens = sum(parts)
    return {"client_cost_usd": float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
            "client_tokens": tokens}


def _acts_and_level(rec: TrialRecords, game: GameDefinition | None, states: States | None,
                    replayed: Replayed | None):
    """The action figures and the highest party level: gathered beside the replay, else from the held
    states (or the records alone)."""
    if replayed is not None:
        acts = replayed.acts if replayed.acts is not None else action_figures(
            rec.first_frame, rec.inputs(), rec.input_count, awards_of(rec.result), game, None)
        return acts, replayed.level
    acts = action_figures(rec.first_frame, rec.inputs(), rec.input_count, awards_of(rec.result), game, states)
    return acts, _highest_level(game, states)


def compute_row(rec: TrialRecords, game: GameDefinition | None, labels: list[Label] | None,
                states: States | None = None, state_note: str | None = None,
                condition_id: str | None = None, replayed: Replayed | None = None) -> dict:
    """The seed's trial-level row with every per-trial metric (docs/metrics.md). The replayed state
    comes either whole (`states`) or as the figures already gathered beside the replay (`replayed`,
    what `trial_metrics` does: nothing per action is kept)."""
    r = rec.result
    tel = r.telemetry
    valid = r.outcome in ("success", "game-failure")
    acts, level = _acts_and_level(rec, game, states, replayed)
    accepted = tel.accepted_actions if tel else rec.input_count
    decisions = tel.decisions if tel else rec.decision_count
    cost = _tel(tel, "cost_usd")
    milestones = len(r.milestones_reached)
    points = r.progress_points
    mem = memory_figures(labels, decisions, rec.per_decision, r.last_decision, rec.memory_writes,
                         rec.memory_reading)
    latency = _latency_s(tel)
    return {
        "trial_key": rec.key, "folder": rec.rel, "condition": r.condition, "condition_id": condition_id,
        "trial": r.trial, "position": r.position, "attempt": r.attempt, "outcome": r.outcome, "valid": valid,
        "end_reason": r.termination_reason, "milestones": milestones, "milestones_reached": r.milestones_reached,
        "deepest": r.deepest_milestone, "points": points, "total_points": r.total_points,
        "accepted_actions": accepted, "model_decisions": decisions, "cost_usd": cost,
        "cost_source": _tel(tel, "cost_source"), "tokens": _tel(tel, "tokens"),
        "model_latency_s": round(latency, 6) if latency is not None else None,
        "wall_s": _tel(tel, "wall_time_seconds"),
        "invalid_outputs": _tel(tel, "invalid_outputs"),
        "rejected_actions": _tel(tel, "rejected_actions"),
        "productive_actions": acts.productive, "productive_action_rate": ratio(acts.productive, accepted),
        "battle_actions": acts.battle, "navigation_actions": acts.navigation,
        "repeated_navigation_actions": acts.repeated, "required_backtracking_actions": acts.excused,
        "repeat_overhead": ratio(acts.repeated, accepted),
        "live_repeated_navigation_actions": _tel(tel, "repeated_navigation_actions"),
        "state_source": "replay" if states is not None or replayed is not None else "records",
        "state_note": state_note,
        "memory_errors": mem.memory_errors, "material_errors": mem.material_errors,
        "memory_error_rate": mem.memory_error_rate, "material_memory_error_rate": mem.material_memory_error_rate,
        "memory_recovery_cost": mem.memory_recovery_cost, "errors_by_type": mem.by_type,
        "errors_by_severity": mem.by_severity, "storage_errors": mem.storage_errors, "use_errors": mem.use_errors,
        "storage_quality": mem.storage_quality, "use_quality": mem.use_quality,
        "cost_per_milestone": ratio(cost, milestones), "cost_per_point": ratio(cost, points),
        "actions_per_milestone": ratio(accepted, milestones), "progress_efficiency": ratio(points, cost),
        "zero_progress": points == 0,
        "client": client_totals(r),  # a cli client's own totals (its report), beside oakwatch's unknown cost
        **(client_totals(r) or dict.fromkeys(CLIENT_METRICS)),
        "variant": r.provenance.get("variant_label"),  # a suite's seen or held-out variant (sessions.variants.suites)
        "variant_index": r.provenance.get("variant_index"),
        # the result's own figures (engine.loop.trial.path_figures; verify recomputes them)
        "path_efficiency": r.derived.get("path_efficiency"),
        "path_optimal_presses": r.derived.get("path_optimal_presses"), "path_actions": r.derived.get("path_actions"),
        "long_horizon": long_horizon(r, game, level),
        "timeline": [{"id": a.id, "decision_id": a.decision_id, "points": a.points} for a in r.milestones],
        "curve": rec.curve,
    }


def awards_of(r: TrialResult) -> dict[int, str]:
    """Capture frame index -> milestone id: the actions that earned a rung (a progress event)."""
    return {a.frame_index: a.id for a in r.milestones}


def _tel(tel, name: str):
    """A telemetry figure, None for a result without telemetry."""
    return getattr(tel, name) if tel else None


def _latency_s(tel) -> float | None:
    return tel.model_latency_ms / 1000 if tel and tel.model_latency_ms is not None else None


def _highest_level(game: GameDefinition | None, states: States | None) -> int | None:
    """The highest party level in the replayed samples, for the long-horizon scorer (None without)."""
    if states is not None and game is not None and game.long_horizon and game.party_level_field:
        return max(int(s[game.party_level_field]) for s in (states.start, *states.after))
    return None


def actions_per_decision(inputs: Iterable[InputLine]) -> tuple[DecisionCounts, int]:
    """(accepted actions per decision, accepted actions in all), streamed into a compact array."""
    out = DecisionCounts()
    count = 0
    for row in inputs:
        out.add(row.decision_id)
        count += 1
    return out, count


def _curve(trace: Iterable[TraceLine], per_decision: DecisionCounts | dict[int, int], r: TrialResult,
           each: Callable[[TraceLine], None]) -> list[dict]:
    """Per decision: accepted actions so far, cost so far (null once any is unknown), points so far.
    `each` sees every trace line on the way (the one pass over the trace)."""
    return list(curve_points(trace, per_decision, r, each))


# -- the folder ----------------------------------------------------------------------------------------

def load_game(root: Path) -> tuple[GameDefinition | None, str | None]:
    from sessions.preflight.assets import resolve
    from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition
    from sessions.preflight.manifest import ManifestError, load_manifest

    try:
        manifest = load_manifest(root / layout.MANIFEST)
        return load_game_definition(resolve(manifest.game.definition, root)), None
    except (ManifestError, GameDefinitionError, OSError, ValueError) as exc:
        return None, str(exc)


def read_trial(trial: TrialFolder) -> TrialRecords | None:
    """One trial's records in one streamed pass; None for a trial without result.json (unfinished)."""
    if not trial.sealed():
        return None
    reader, rel = trial.reader(), trial.rel
    result, _ = reader.result()
    per_decision, input_count = actions_per_decision(reader.inputs())
    seen = {"count": 0, "reading": 0, "first": None}

    def each(t: TraceLine) -> None:
        if not seen["count"]:
            seen["first"] = t.frame_sha256
        seen["count"] += 1
        seen["reading"] += bool(t.memory_reads)

    curve = Curve(lambda: curve_points(reader.trace(), per_decision, result))
    for point in curve_points(reader.trace(), per_decision, result, each):
        curve.add(point)
    writes = sum(op.op in WRITE_OPS for op in reader.memory()) if reader.exists(layout.MEMORY) else 0
    return TrialRecords(trial.key, rel, result, reader, input_count, seen["count"], seen["first"], per_decision,
                        writes, seen["reading"], curve, trial.voided)


def trial_metrics(root: Path, *, replay: bool = True, progress: Callable[[str], None] | None = None,
                  layers: dict[str, list[Annotation]] | None = None) -> list[dict]:
    """One row per trial with a result (valid or invalid, voided ones included)."""
    game, _ = load_game(root)
    if layers is None:
        layers = read_annotation_layers(root)
    confirmed = confirmed_labels(layers)
    by_trial: dict[str, list[Label]] = defaultdict(list)
    for lab in confirmed.labels:
        by_trial[lab.trial_key].append(lab)
    key_map = EvidenceFolder(root).unblinded_labels()
    rows = []
    for trial in EvidenceFolder(root).trials():
        folder, rel, voided = trial.path, trial.rel, trial.voided
        try:
            rec = read_trial(trial)
        except FormatProblem as exc:
            if progress:
                progress(f"{rel}: unreadable ({exc}); left out")
            continue
        if rec is None:
            continue
        replayed, note = None, None
        if replay and not voided and rec.input_count:
            if progress:
                progress(f"replaying {rel} for per-action state ({rec.input_count} actions)")
            replayed, note = replay_figures(folder, rec.first_frame, rec.input_count, awards_of(rec.result), game)
        elif progress:
            progress(f"reading {rel}")
        # a trial the annotators did not look at whole was not annotated: null memory figures, never 0;
        # one they did (reviewed, or labelled) has a known count, 0 with no label
        annotated = not voided and confirmed.is_annotated(rec.key, rec.result.last_decision)
        labels = by_trial.get(rec.key, []) if annotated else None
        cid = key_map.get(rec.result.condition) if key_map else None
        rows.append(compute_row(rec, game, labels, None, note, cid, replayed))
    return rows


# -- per condition -------------------------------------------------------------------------------------

def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for successes out of n (95% by default); None for n = 0."""
    if n == 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (round(max(0.0, center - half), 6), round(min(1.0, center + half), 6))


def spread(rows: list[dict], metric: str, denominator: str | None) -> dict:
    """Median and full range over the trials where the metric exists (its denominator is not zero);
    null when any of those is unknown. `excluded`: trials left out for a zero denominator."""
    used = [r for r in rows if denominator is None or r.get(denominator) != 0]
    values = [r.get(metric) for r in used]
    out = {"n": len(values), "excluded": len(rows) - len(used), "unknown": sum(v is None for v in values)}
    if not values or out["unknown"]:
        return {**out, "median": None, "min": None, "max": None}
    return {**out, "median": median(values), "min": min(values), "max": max(values)}


EFFECTS = {  # name: (metric, sign): the effect of B against A is sign * (B - A)
    "additional_milestones": ("milestones", 1),
    "actions_saved_per_milestone": ("actions_per_milestone", -1),
    "cost_saved_per_point": ("cost_per_point", -1),
    "change_in_material_error_rate": ("material_memory_error_rate", 1),
}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _percentile(sorted_values: list[float], q: float) -> float:
    k = (len(sorted_values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def effect(rows_a: list[dict], rows_b: list[dict], metric: str, sign: int, *,
           blocks: dict[str, int] | None, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> dict:
    """sign * (B - A) as a mean difference with a percentile bootstrap 95% interval.

    Paired (blocks given): the differences within each counterbalanced block holding a valid trial of
    both conditions, blocks resampled. Unpaired: each condition resampled on its own. Trials whose
    metric does not exist (a ratio over zero) are left out; any unknown value makes the effect null."""
    rng = random.Random(seed)
    usable_a, usable_b = _with_metric(rows_a, metric), _with_metric(rows_b, metric)
    if any(r.get(metric) is None for r in usable_a + usable_b):
        return _no_effect(blocks is not None, "a value is unknown")
    if blocks is not None:
        return _paired_effect(usable_a, usable_b, metric, sign, blocks, rng, resamples)
    a = [r[metric] for r in usable_a]
    b = [r[metric] for r in usable_b]
    if not a or not b:
        return _no_effect(False, "no trial with the metric")
    stats = sorted(sign * (_mean([rng.choice(b) for _ in b]) - _mean([rng.choice(a) for _ in a]))
                   for _ in range(resamples))
    ci = _ci95(stats) if len(a) > 1 and len(b) > 1 else None
    return {"estimate": round(sign * (_mean(b) - _mean(a)), 6), "ci95": ci, "n": min(len(a), len(b)),
            "paired": False, "reason": None}


def _with_metric(rows: list[dict], metric: str) -> list[dict]:
    """The trials where the metric exists: its denominator (SUMMARY_METRICS) is not zero."""
    denominator = SUMMARY_METRICS.get(metric)
    return [r for r in rows if denominator is None or r.get(denominator) != 0]


def _no_effect(paired: bool, reason: str) -> dict:
    return {"estimate": None, "ci95": None, "n": 0, "paired": paired, "reason": reason}


def _ci95(stats: list[float]) -> tuple[float, float]:
    """The percentile interval of sorted bootstrap statistics."""
    return (round(_percentile(stats, 0.025), 6), round(_percentile(stats, 0.975), 6))


def _paired_effect(usable_a: list[dict], usable_b: list[dict], metric: str, sign: int, blocks: dict[str, int],
                   rng: random.Random, resamples: int) -> dict:
    """`effect` within counterbalanced blocks: the differences per complete block, blocks resampled."""
    a_by = {blocks[r["trial_key"]]: r[metric] for r in usable_a if r["trial_key"] in blocks}
    b_by = {blocks[r["trial_key"]]: r[metric] for r in usable_b if r["trial_key"] in blocks}
    diffs = [sign * (b_by[k] - a_by[k]) for k in sorted(set(a_by) & set(b_by))]
    if not diffs:
        return _no_effect(True, "no complete block")
    stats = sorted(_mean([rng.choice(diffs) for _ in diffs]) for _ in range(resamples))
    ci = _ci95(stats) if len(diffs) > 1 else None
    return {"estimate": round(_mean(diffs), 6), "ci95": ci, "n": len(diffs), "paired": True, "reason": None}


def blocks_of(root: Path) -> dict[str, int] | None:
    """trial key -> counterbalanced block (schedule position // block size) when the design pairs
    (trials.order counterbalanced, more than one condition); None otherwise."""
    from sessions.preflight.manifest import ManifestError, load_manifest

    try:
        schedule = EvidenceFolder(root).json(layout.SCHEDULE)
        manifest = load_manifest(root / layout.MANIFEST)
    except (FormatProblem, OSError, ValueError, ManifestError):
        return None
    if manifest.trials.order != "counterbalanced" or len(manifest.conditions) < 2:
        return None
    size = schedule["block_size"]
    return {key: i // size for i, key in enumerate(schedule["order"])}


def variant_comparison(rows: list[dict]) -> dict | None:
    """A suite's seen against held-out variants, per condition label: valid trials, completions and
    the spread of points and path efficiency. None outside a suite."""
    if not any(r.get("variant") for r in rows):
        return None
    out: dict[str, dict] = {}
    for label in sorted({r["condition"] for r in rows}):
        out[label] = {}
        for kind in ("seen", "held-out"):
            mine = [r for r in rows if r["valid"] and r["condition"] == label and r.get("variant") == kind]
            done = sum(r["outcome"] == "success" for r in mine)
            out[label][kind] = {"n_valid": len(mine), "successful": done, "completion_rate": ratio(done, len(mine)),
                                "points": spread(mine, "points", None),
                                "path_efficiency": spread(mine, "path_efficiency", "milestones")}
    return out


def condition_summary(rows: list[dict], *, paired_blocks: dict[str, int] | None, seed: int) -> dict:
    """Per condition label: valid trials, median and range of every metric, completion rate with its
    Wilson 95% interval, zero-progress count; then effects of each label against the first one."""
    valid = [r for r in rows if r["valid"]]
    labels = sorted({r["condition"] for r in rows})
    per = {label: _condition_figures(rows, [r for r in valid if r["condition"] == label], label)
           for label in labels}
    effects = _effects(valid, labels, paired_blocks, seed)
    supported = bool(labels) and all(per[lab]["n_valid"] >= SIGNIFICANCE_MIN for lab in labels)
    return {
        "conditions": per, "effects": effects, "bootstrap": _bootstrap_note(paired_blocks, seed),
        "significance_supported": supported,
        "significance_note": None if supported else
        f"fewer than {SIGNIFICANCE_MIN} valid trials per condition: significance claims are not supported",
    }


def _effects(valid: list[dict], labels: list[str], paired_blocks: dict[str, int] | None, seed: int) -> dict:
    """Each label's EFFECTS against the first label's."""
    effects = {}
    if len(labels) >= 2:
        base = labels[0]
        for other in labels[1:]:
            a = [r for r in valid if r["condition"] == base]
            b = [r for r in valid if r["condition"] == other]
            effects[f"{other} vs {base}"] = {
                name: effect(a, b, metric, sign, blocks=paired_blocks, seed=seed)
                for name, (metric, sign) in EFFECTS.items()}
    return effects


def _bootstrap_note(paired_blocks: dict[str, int] | None, seed: int) -> dict:
    paired = paired_blocks is not None
    return {"seed": seed, "resamples": BOOTSTRAP_RESAMPLES, "method": "percentile, 95%", "paired": paired,
            "pairing": "counterbalanced blocks (schedule position // block size)" if paired
            else "none (independent resampling per condition)"}


def _condition_figures(rows: list[dict], mine: list[dict], label: str) -> dict:
    """One condition label's entry of `condition_summary`; `mine`: its valid trials."""
    done = sum(r["outcome"] == "success" for r in mine)
    ours = [r for r in rows if r["condition"] == label]
    annotated = [r for r in mine if r.get("memory_errors") is not None]
    types, sev = _error_tallies(annotated)
    return {
        "condition_id": next((r["condition_id"] for r in ours), None),
        "n_valid": len(mine), "n_invalid": sum(not r["valid"] for r in ours),
        "successful": done, "completion_rate": ratio(done, len(mine)), "completion_ci95": wilson(done, len(mine)),
        "zero_progress": sum(r["zero_progress"] for r in mine),
        "deepest": [r["deepest"] for r in mine],
        "metrics": {m: spread(mine, m, d) for m, d in SUMMARY_METRICS.items()},
        # over the annotated trials only; null when none of them was annotated
        # a cli condition's clients' own totals (null for a condition no client played)
        "client_totals": _client_spread(mine, ours),
        "n_annotated": len(annotated), "errors_by_type": types, "errors_by_severity": sev,
    }


def _error_tallies(annotated: list[dict]) -> tuple[dict | None, dict | None]:
    """Memory errors by type and by severity over the annotated trials; null when there are none."""
    if not annotated:
        return None, None
    types, sev = Counter(), Counter()
    for r in annotated:
        types.update(r["errors_by_type"])
        sev.update(r["errors_by_severity"])
    return dict(types), dict(sev)


def _client_spread(mine: list[dict], ours: list[dict]) -> dict | None:
    """A cli condition's clients' own totals over its valid trials; null for a condition no client played."""
    if not any(r.get("client") is not None for r in ours):
        return None
    return {m: spread(mine, m, None) for m in CLIENT_METRICS}


# -- agreement -----------------------------------------------------------------------------------------

def _cohen(a: list[str], b: list[str]) -> tuple[float | None, float]:
    tally = _Tally()
    for x, y in zip(a, b, strict=True):
        tally.add(x, y)
    return tally.kappa()


@dataclass
class _Tally:
    """Cohen's kappa's counts over the units two raters both looked at, one unit at a time (no list of
    units is kept: a million decisions cost nothing more than ten)."""

    n: int = 0
    agree: int = 0
    a: Counter = field(default_factory=Counter)
    b: Counter = field(default_factory=Counter)

    def add(self, x: str, y: str, times: int = 1) -> None:
        self.n += times
        self.agree += times * (x == y)
        self.a[x] += times
        self.b[y] += times

    def kappa(self) -> tuple[float | None, float]:
        """(kappa, observed agreement); kappa None when chance agreement is 1; (None, 1.0) for no unit."""
        n = self.n
        if n == 0:
            return None, 1.0
        po = self.agree / n
        pe = sum(self.a[k] * self.b[k] for k in set(self.a) | set(self.b)) / (n * n)
        if pe == 1:
            return None, po
        return round((po - pe) / (1 - pe), 6), po


def annotator_names(layers: dict[str, list[Annotation]]) -> list[str]:
    """The annotators' layers: every layer but the operator's and adjudication's that holds more than freezes."""
    return sorted(n for n in layers if n not in (OPERATOR, ADJUDICATION)
                  and any(a.kind != "freeze" for a in layers[n]))


def _rulings(layers: dict[str, list[Annotation]]) -> dict[str, Annotation]:
    """label id -> the adjudication that rules on it (the latest ruling on a label wins)."""
    return {rid: a for a in layers.get(ADJUDICATION, []) if a.kind == "adjudication" for rid in a.resolves or []}


def kappa(layers: dict[str, list[Annotation]], decisions: dict[str, int]) -> dict:
    """Cohen's kappa between each pair of annotators over every decision both looked at (`coverage`:
    their reviewed ranges, or a trial they labelled without recording a review of it) of every trial
    (`decisions`: trial key -> its last decision). A decision only one of them looked at is missing
    for the other, not an agreement on "none" (`one_sided` counts them); one both looked at and only
    one labelled is a disagreement. Overall: the category of a decision is the sorted set of
    memory-error types an annotator gave it, or "none". Per type: gave that type or not.
    Undefined (null) when chance agreement is 1 (both say the same single thing everywhere)."""
    names = annotator_names(layers)
    looked = {name: coverage(layers[name]) for name in names}
    given: dict[str, dict[tuple[str, int], set[str]]] = {}
    ids: dict[str, dict[tuple[str, int], list[str]]] = {}
    for name in names:
        given[name], ids[name] = defaultdict(set), defaultdict(list)
        for a in _memory_labels(layers[name]):
            given[name][(a.trial_key, a.decision_id)].add(a.type)
            ids[name][(a.trial_key, a.decision_id)].append(a.id)

    def every() -> Iterator[tuple[str, int]]:  # streamed: a run's decisions are never held as a list
        return ((k, d) for k, last in sorted(decisions.items()) for d in range(1, last + 1))

    pair = _PairInputs(looked, given, ids, _rulings(layers))
    pairs = [_kappa_pair(x, y, every(), pair) for i, x in enumerate(names) for y in names[i + 1:]]
    return {"annotators": names, "pairs": pairs,
            "note": None if len(names) >= 2 else "fewer than two annotators: agreement not measured"}


@dataclass
class _PairInputs:
    looked: dict[str, dict[str, Coverage]]  # annotator -> trial key -> what they looked at
    given: dict[str, dict[tuple[str, int], set[str]]]  # annotator -> (trial, decision) -> types given
    ids: dict[str, dict[tuple[str, int], list[str]]]  # annotator -> (trial, decision) -> label ids
    rulings: dict[str, Annotation]

    def saw(self, name: str, u: tuple[str, int]) -> bool:
        return u[0] in self.looked[name] and self.looked[name][u[0]].covers(u[1])


def _category(types: set[str]) -> str:
    return "+".join(sorted(types)) or "none"


def _kappa_pair(x: str, y: str, every: Iterable[tuple[str, int]], inputs: _PairInputs) -> dict:
    """kappa's figures for one pair of annotators (see kappa), in one pass over the decisions."""
    given = inputs.given
    types = sorted(set(MEMORY_TYPES) | {t for n in (x, y) for s in given[n].values() for t in s})
    overall, per_type = _Tally(), {t: _Tally() for t in types}
    units = one_sided = blank = 0
    disagreements = []
    for u in every:
        both = (inputs.saw(x, u), inputs.saw(y, u))
        if not all(both):
            one_sided += any(both)
            continue
        units += 1
        gx, gy = given[x].get(u, set()), given[y].get(u, set())
        if not gx and not gy:
            blank += 1  # "none" from both: added in one go below
            continue
        overall.add(_category(gx), _category(gy))
        for t in types:
            per_type[t].add(str(t in gx), str(t in gy))
        if gx != gy:
            disagreements.append(_disagreement(x, y, u, given, inputs.ids, inputs.rulings))
    overall.add("none", "none", blank)
    for tally in per_type.values():
        tally.add("False", "False", blank)
    k, po = overall.kappa()
    return {"annotators": [x, y], "units": units, "one_sided": one_sided, "kappa": k,
            "observed_agreement": round(po, 6) if units else None,  # none looked at by both
            "per_type": {t: _type_figures(tally, units) for t, tally in per_type.items()},
            "disagreements": disagreements}


def _type_figures(tally: _Tally, units: int) -> dict:
    k, p = tally.kappa()
    return {"kappa": k, "observed_agreement": round(p, 6) if units else None}


def _disagreement(x: str, y: str, u: tuple[str, int], given: dict, ids: dict, rulings: dict) -> dict:
    """One decision two annotators labelled differently, and the adjudication that settled it, if any."""
    settled = next((rulings[i] for n in (x, y) for i in ids[n].get(u, []) if i in rulings), None)
    return {"trial_key": u[0], "decision_id": u[1], x: sorted(given[x].get(u, ())) or ["none"],
            y: sorted(given[y].get(u, ())) or ["none"],
            "adjudication": None if settled is None else {
                "id": settled.id, "resolution": settled.resolution, "type": settled.type,
                "severity": settled.severity, "reason": settled.reason}}
