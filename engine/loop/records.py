"""The trial's typed records: what the loop emits and the recorder writes, one model per line kind.

These models are the schema of a trial folder (published as JSON Schema beside the evidence).
The engine fills them without any file path or hash chain field; the recorder
(sessions.evidence.recorder) adds those when it writes. Readers validate every line against them.

Records are built with `build` (pydantic's Rust validator: faster than `model_construct`,
which is pure Python) and written with `model_dump_json`; readers validate them again. The few
kinds the loop fills from its own typed values on every decision (the trace line, the response
line, each input line) are built with `trusted` instead: no validation, only the set of fields
checked (tests/engine/loop/test_trusted_records.py proves each one the loop writes is the
validated record, byte for byte; verify validates every line it reads).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
SCHEMA_VERSION = 2


class Record(BaseModel):
    """Strict on read: an unknown or missing field is a problem, not a default."""

    model_config = ConfigDict(extra="forbid")


R = TypeVar("R", bound=BaseModel)


def build(record: type[R], /, **fields) -> R:
    """A validated record from its fields (the fields given are its "set" fields)."""
    return record.model_validate(fields)


class _Shape:
    """What `trusted` needs of a model: its fields in order (defaults filled), the required ones, all."""

    def __init__(self, record: type[BaseModel]):
        fields = record.model_fields
        self.template: dict[str, Any] = {}
        for name, info in fields.items():
            if info.is_required():
                self.template[name] = None  # always replaced: a required field must be given
            elif info.default_factory is None and isinstance(info.default, (type(None), bool, int, float, str)):
                self.template[name] = info.default
            else:
                raise TypeError(f"{record.__name__}.{name}: a mutable default cannot be shared by trusted records")
        self.required = frozenset(n for n, i in fields.items() if i.is_required())
        self.names = frozenset(fields)


_SHAPES: dict[type, _Shape] = {}
_object_setattr = object.__setattr__


def _trusted(record: type[R], /, **fields) -> R:
    """A record from values the loop itself computed and typed, without pydantic's validation (its
    cost, four times a decision, was a tenth of the loop's own work). As `build` would make it: the
    fields in the model's order, unset ones at their (immutable) defaults, the given ones "set"; an
    unknown or missing field raises TypeError. Values are NOT checked: only for records whose every
    value the loop itself typed (tests/engine/loop/test_trusted_records.py holds every kind the loop
    builds this way to `build`'s record, byte for byte, and readers validate every line again)."""
    shape = _SHAPES.get(record)
    if shape is None:
        shape = _SHAPES[record] = _Shape(record)
    keys = fields.keys()
    if not (keys >= shape.required and keys <= shape.names):
        raise TypeError(f"{record.__name__}: missing {sorted(shape.required - keys)}, "
                        f"unknown {sorted(keys - shape.names)}")
    values = shape.template.copy()
    values.update(fields)  # keeps the template's (the model's) order
    obj = record.__new__(record)
    _object_setattr(obj, "__dict__", values)
    _object_setattr(obj, "__pydantic_fields_set__", set(keys))
    _object_setattr(obj, "__pydantic_extra__", None)
    _object_setattr(obj, "__pydantic_private__", None)
    return obj


def _checked(record: type[R], /, **fields) -> R:
    """`_trusted`, held to `build`: the same values validate strictly (no coercion, which would change
    a value's bytes) into the same record, serialised byte for byte alike. The test suite runs every
    trial this way (OAKWATCH_CHECK_TRUSTED, set by tests/conftest.py, reaches the CLIs it starts)."""
    made = _trusted(record, **fields)
    strict = record.model_validate(fields, strict=True)
    ser = record.__pydantic_serializer__
    if (made.__dict__ != strict.__dict__ or made.model_fields_set != strict.model_fields_set
            or ser.to_json(made) != ser.to_json(strict)):
        raise AssertionError(f"a trusted {record.__name__} differs from the validated one: {fields!r}")
    return made


trusted = _checked if os.environ.get("OAKWATCH_CHECK_TRUSTED") else _trusted


# -- per decision ---------------------------------------------------------------------------------

class Usage(Record):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: Literal["provider", "derived"] | None = None

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


class ReplyOversize(Record):
    """A reply whose body passed the manifest's `agent.max_reply_bytes`: the read stopped there and
    nothing of the body is kept but its size and the digest of the bytes received.

    `size_bytes` is the whole reply's size where known, and `size_source` says how it is known:
    "received" (the whole body arrived in the read that passed the cap: size = received),
    "content-length" (the read was cut short; the size the reply declared), "stored" (the body fit,
    but the copy that would be stored, the body re-serialised, did not: size = that copy's).
    Both are None when the read was cut short and the reply declared no size."""

    cap_bytes: int  # the manifest's agent.max_reply_bytes when the reply came
    received_bytes: int  # body bytes read (decoded, where the server compressed them) when the read stopped
    received_sha256: Sha256  # of exactly those bytes
    size_bytes: int | None
    size_source: Literal["received", "content-length", "stored"] | None
    status: int | None = None  # the HTTP status it came with

    def describe(self) -> str:
        if self.size_source == "stored":
            size = f"{self.size_bytes:,} bytes once stored ({self.received_bytes:,} received)"
        elif self.size_bytes is None:
            size = f"more than {self.received_bytes:,} bytes (the read stopped there; no size declared)"
        elif self.size_source == "content-length":
            size = f"{self.size_bytes:,} bytes declared (the read stopped after {self.received_bytes:,})"
        else:
            size = f"{self.size_bytes:,} bytes"
        return (f"the reply is {size}, over the {self.cap_bytes:,}-byte cap (agent.max_reply_bytes); not stored, "
                f"sha256 of the bytes received {self.received_sha256}")


class Attempt(Record):
    """One policy call within a decision: the raw response exactly as produced, and its fate."""

    raw: str | None  # None: the call never answered (aborted or failed)
    valid: bool
    error: str | None
    aborted: bool = False  # cancelled in flight (a signal or an operator stop)
    model_id: str | None
    response_id: str | None
    latency_ms: float | None
    usage: Usage | None  # None: no paid call was made
    # Model calls only: what else identifies the call, and the provider's reply as it came.
    prompt_sha256: Sha256 | None = None  # the exact request body sent (no credentials are in it)
    stop_reason: str | None = None
    identity: dict[str, Any] | None = None  # request id, system fingerprint, service tier
    failure: str | None = None  # a transport fault's kind: rate-limit, server, timeout, authentication, ...
    reply: dict[str, Any] | None = None  # the API's reply body
    oversize: ReplyOversize | None = None  # the reply passed the cap: an invalid output, its body not kept


class ResponseLine(Record):
    """responses.jsonl: every attempt of one decision, retries included."""

    decision_id: int
    attempts: list[Attempt]


class InputLine(Record):
    """inputs.jsonl: one accepted controller action with the frames it occupied."""

    decision_id: int
    index: int  # position within the decision
    action: str
    press_frame: int | None  # None for NOOP (no button went down)
    release_frame: int | None
    capture_frame: int
    frame_sha256: Sha256  # SHA-256 of the captured frame's raw RGB pixels


class Fact(Record):
    fact_id: str
    kind: str
    subject: str
    predicate: str
    object: str
    status: Literal["active", "superseded", "completed"]
    confidence: float
    confirmed: bool
    first_seen_decision: int
    last_confirmed_decision: int | None
    evidence_frame_sha256: Sha256 | None
    evidence: str
    supersedes: str | None


class MemoryOp(Record):
    """memory.jsonl: one operation on the agent's memory. Fields apply by `op`:
    retrieve (fact_ids, chars), read (fact_ids, missing), write/update/complete/supersede/evict
    (fact_id, fact), reject (reason, write)."""

    op: Literal["retrieve", "read", "write", "update", "complete", "supersede", "evict", "reject"]
    decision_id: int
    fact_ids: list[str] | None = None
    chars: int | None = None
    missing: list[str] | None = None
    fact_id: str | None = None
    fact: Fact | None = None
    reason: str | None = None
    write: dict[str, Any] | None = None


class TraceLine(Record):
    """trace.jsonl: one line per decision, every field of seed 000's trace record plus ours.

    Null means not measured; zero means measured and absent. The last five fields are the
    hash chain, set by the recorder: the previous line's SHA-256 (the trial genesis for the
    first line) and the SHA-256 of the exact bytes this decision added to each stream."""

    experiment_id: str
    condition_id: str  # the blinded label
    trial_id: int
    decision_id: int
    timestamp_utc: str
    frame_sha256: Sha256  # the frame the agent saw
    prompt_sha256: str | None
    prompt_core_sha256: str | None = None  # system prompt, response schema and image: equal across conditions
    model_id: str | None
    response_id: str | None
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    provider_cost_usd: float | None
    cost_source: list[str] | None
    latency_ms: float | None  # the accepted attempt's call; null when no response was accepted
    # Every attempt's call summed (retries, failed and timed-out calls included); null when one is
    # unmeasured. Absent from trace lines written before it existed, whose latency_ms was this sum.
    latency_total_ms: float | None = None
    raw_response_path: str | None = None  # set by the recorder
    attempts: int
    paid_calls: int  # attempts that were paid model calls (0: tokens and cost are none, not unknown)
    aborted: bool
    parsed_actions: list[str]
    accepted_actions: int
    invalid_output: bool
    reasoning_summary: str | None  # the valid response's own summary (the full text is in responses.jsonl)
    # Bounded context (engine.loop.context, docs/context.md): the last call's turn in its segment, the
    # segment, the notebook's length and whether its last write was cut. Set only with agent.context.
    context: dict | None = None
    observed: dict[str, Any] | None
    memory_reads: list[str]
    memory_writes: list[str | None]
    milestones_before: list[str]
    milestones_after: list[str]
    result_frame_sha256: Sha256  # pixels after the decision's last action
    result_frame_index: int
    termination_reason: str | None
    # Episodic trials only (seed 004; engine.battle.episodes), absent otherwise: the episode this decision is
    # in (from 1), and why the episode ended with it (the next decision sees the restored start state).
    episode: int | None = None
    episode_end: Literal["failure", "episode-actions", "reset"] | None = None
    # The battle ruleset only (engine.battle.battle), absent otherwise: the accepted battle call (apply_team, lead,
    # action): its tool and arguments, the RAM writes it made before its presses ({address, bytes}), the team
    # it made the party and the lead slot; replay re-applies the writes here.
    battle: dict[str, Any] | None = None
    # A mechanical shortcut the agent called (engine.loop.shortcuts), absent otherwise: its name, argument
    # and expansion, the controller presses it stood for (each one in inputs.jsonl like any other).
    shortcut: dict[str, Any] | None = None
    prev_sha256: Sha256 | None = None
    response_sha256: Sha256 | None = None
    inputs_sha256: Sha256 | None = None
    memory_sha256: Sha256 | None = None


class Annotation(Record):
    """annotations.jsonl: one label. Live operator tags (source operator) are stamped with what the
    operator saw when tagging began; annotators' labels (source annotator) come from review or the
    CLI and live in their own layer, annotations/<annotator>/ (sessions.annotations.annotation_layer).

    kind memory-error: `decision_id` is the LATER, contradicting decision and `refers_to` the EARLIER
    fact id (fact-0003) or decision number; a consequence names its primary cause in `primary_id`
    (aggregates never count both). kind route: `room` (and `landmark`) where coordinates are missing.
    kind adjudication (layer `adjudication`): settles the ids in `resolves`, originals untouched.
    kind reviewed (an annotator's layer): the annotator looked at decisions `decision_id`..`through_decision`
    of the trial for memory errors and labelled every one found there (none: the trial's count is a known
    0); type reviewed, severity minor, the note the annotator's. kind milestone (a game without a memory
    probe, scored by hand): `milestone` was first reached at `decision_id`; type milestone, severity minor
    (sessions.analysis.hand_scoring). kind freeze: the layer's last line; it
    refuses appends after it. Fields added later have defaults, so earlier tags still load."""

    trial_key: str
    decision_id: int  # the decision in view when the dialog opened; the later, contradicting decision
    frame_sha256: Sha256 | None
    frame_index: int | None
    opened_utc: str  # when the dialog opened
    timestamp_utc: str  # when the tag was submitted
    annotator: str
    source: Literal["operator", "annotator"] = "operator"
    type: str
    severity: Literal["minor", "material", "critical"]
    refers_to: str | None  # a fact id (fact-0003) or an earlier decision number
    note: str
    prev_sha256: Sha256 | None = None  # the annotation chain, set by the recorder or the layer
    id: str | None = None  # "<annotator>-<n>", n from 1 in the layer; set by the layer on append
    kind: Literal["memory-error", "route", "adjudication", "reviewed", "freeze", "milestone"] = "memory-error"
    role: Literal["primary", "consequence"] = "primary"
    primary_id: str | None = None  # a consequence's primary cause (an annotation id in the same layer)
    recovered_decision: int | None = None  # where the agent recovered (memory_recovery_cost)
    room: str | None = None  # kind route
    landmark: str | None = None  # kind route
    resolves: list[str] | None = None  # kind adjudication: the annotation ids settled (one or more)
    resolution: Literal["accept", "reject", "relabel"] | None = None  # kind adjudication
    reason: str | None = None  # kind adjudication: required there
    through_decision: int | None = None  # kind reviewed: the last decision reviewed (the first is decision_id)
    milestone: str | None = None  # kind milestone: the rung (of the frozen ladder) reached by hand at decision_id


# -- per trial ------------------------------------------------------------------------------------

class MilestoneAward(Record):
    id: str
    name: str
    points: int
    decision_id: int
    frame_index: int
    frame_sha256: Sha256
    probe: dict[str, Any]
    # The trial's active game time when the rung was reached (docs/metrics.md, "Active time"): wall time
    # less pauses, pacing and limiter/backoff holds, less the time spent waiting on the policy. None: not
    # recorded (a folder from before the stamps, or an award rebuilt by replay, which has no clock).
    active_seconds: float | None = None


class GoalResult(Record):
    """The run's goal (engine.games.goals) for one trial: met or not, with its evidence."""

    id: str
    name: str
    met: bool
    decision_id: int | None  # where it was met (None: not met)
    frame_index: int | None
    frame_sha256: Sha256 | None
    species: list[int]  # the species newly owned when met (bit numbers of the owned field, from 1)
    start: dict[str, Any]  # the goal's fields in the start sample
    probe: dict[str, Any] | None  # the goal's fields on the frame it was met


class Telemetry(Record):
    """The first figures come from the trace (verify recomputes them); the loop-only ones after
    them are null in a trial finished by `oakwatch recover` (the loop's counters died with it)."""

    decisions: int
    model_calls: int
    aborted_calls: int
    accepted_actions: int
    invalid_outputs: int
    input_tokens: int | None
    output_tokens: int | None
    cached_tokens: int | None
    tokens: int | None
    cost_usd: float | None
    cost_source: list[str] | None
    model_latency_ms: float | None
    rejected_actions: int | None
    ignored_inputs: int | None
    repeated_position_loops: int | None
    repeated_navigation_actions: int | None
    wall_time_seconds: float | None
    held_seconds: float | None
    frames: int | None
    # Seconds the loop waited on the policy's calls (holds within them, e.g. limiter waits, left in
    # held_seconds), and the active game time: wall_time_seconds - policy_seconds (docs/metrics.md).
    policy_seconds: float | None = None
    active_seconds: float | None = None


class FrameStoreSeal(Record):
    file: str  # relative to the trial folder
    sha256: Sha256  # of the whole store file, sealed at trial end
    frames: int  # distinct frames stored
    bytes: int


class Chain(Record):
    """How the trial's evidence hangs together; result.json carries it, summary.json repeats the head."""

    genesis_sha256: Sha256  # SHA-256 of trial.json: the first trace line's prev_sha256
    trace_head: Sha256  # SHA-256 of the last trace line (the genesis when there is none)
    trace_lines: int
    annotations_head: Sha256
    annotation_lines: int
    frames: FrameStoreSeal | None  # None: the store could not be sealed (see invalid_cause)


class EpisodeRecord(Record):
    """One episode of an episodic trial (seed 004), from its trace: where it ran, how it ended, and
    the change log, what the agent changed in it (its memory store's writes, by fact id)."""

    episode: int
    first_decision: int
    last_decision: int
    ended: str  # an episode_end, or the trial's termination reason for the last episode
    goal_reached: bool
    memory_writes: list[str]
    # The battle ruleset (seed 004's Team Updates): the team applied in this episode (apply_team, or the
    # task's own at the lead), as {species, level, moves, item}; absent where none was applied.
    team: list[dict[str, Any]] | None = None


class TrialResult(Record):
    """result.json: the trial's outcome (seed 001) with the evidence for it."""

    schema_version: int = SCHEMA_VERSION
    experiment_id: str
    condition: str  # the blinded label
    trial: int
    trial_key: str
    position: int  # index in the schedule, from 0
    attempt: int  # 1 for the first run of this slot; more after a void and --resume
    outcome: Literal["success", "game-failure", "invalid-provider", "harness-error"]
    termination_reason: str
    termination_detail: str | None  # the operator's or the error's own words
    invalid_cause: str | None  # why the run is invalid; None for success and game-failure
    error: str | None
    recovered: bool = False  # finished by `oakwatch recover` after the process died
    started_utc: str
    ended_utc: str
    last_decision: int  # the last whole decision on disk
    milestones: list[MilestoneAward]
    milestones_reached: list[str]
    pre_satisfied: list[str]  # rungs true at the start: never awarded, 0 points, block nothing
    skipped_required: list[str] = []  # required rungs passed over on the way (engine.games.ladder)
    deepest_milestone: str | None  # the deepest rung reached in ladder order (engine.games.ladder)
    progress_points: int
    total_points: int
    telemetry: Telemetry | None  # None only when recovered without a loop's counters
    # Seconds this trial waited for the run's shared rate limiter before its model calls: apart from
    # every call's latency and (like pauses and backoffs) outside the wall-time budget; None: no limiter.
    # Beside the telemetry rather than in it: the telemetry's figures are the ones verify recomputes
    # from the trace, and this one is the loop's own.
    limiter_wait_s: float | None = None
    derived: dict[str, float | None]
    provenance: dict[str, Any]
    # Episodic trials only (seed 004): each episode, from the trace; verify recomputes them. Absent otherwise.
    episodes: list[EpisodeRecord] | None = None
    chain: Chain | None = None  # set by the recorder
    goal: GoalResult | None = None  # the run's goal (manifest game.goal), if it chose one


class ProviderFailureRecord(Record):
    """provider-failure.json: why the provider, not the agent, ended the trial."""

    kind: str  # authentication, permission, not-found, bad-request, rate-limit, server, timeout, connection,
    #            malformed-reply, startup, usage-unknown, agent-disconnected (a tool server's client left)
    message: str  # redacted: no key or part of one
    status: int | None
    provider: str | None
    api: str | None
    model: str | None
    decision_id: int | None
    attempts: int  # calls made for that decision, the failed ones included


class TrialGenesis(Record):
    """trial.json: what this trial is, written before its first decision. Its hash starts the chain."""

    schema_version: int = SCHEMA_VERSION
    experiment_id: str
    trial_key: str
    condition: str
    trial: int
    position: int
    attempt: int
    manifest_sha256: Sha256
    schedule_sha256: Sha256
    condition_sha256: Sha256  # conditions/<label>.yaml
    rom_sha256: Sha256
    initial_state_sha256: Sha256
    policy: str
    policy_seed: int | None  # random policies: derived from the condition seed and the trial number
    started_utc: str
    pid: int


TRIAL_RECORDS: dict[str, type[Record]] = {
    "trial": TrialGenesis, "trace-line": TraceLine, "response": ResponseLine, "input": InputLine,
    "memory-op": MemoryOp, "annotation": Annotation, "result": TrialResult,
    "provider-failure": ProviderFailureRecord,
}


EPISODE_FIELDS = {"episode", "episode_end"}


def trace_line_unwritten(line: TraceLine) -> frozenset[str]:
    """The fields a trace line's file leaves out: the episode fields outside episodic trials, so a
    non-episodic line reads as it did before episodes existed (the recorder and every export agree)."""
    return _UNWRITTEN[line.episode is None, line.battle is None, line.shortcut is None]


# every answer of trace_line_unwritten, made once (it is asked once a decision)
_UNWRITTEN = {(episode, battle, shortcut): frozenset((EPISODE_FIELDS if episode else set())
                                                     | ({"battle"} if battle else set())
                                                     | ({"shortcut"} if shortcut else set()))
              for episode in (False, True) for battle in (False, True) for shortcut in (False, True)}
