"""The experiment's own records (beside the trial records of engine.loop.records): schedule,
blinding key, run log, voids and summary. Pydantic models, published as JSON Schema."""

from __future__ import annotations

from typing import Any, Literal

from engine.loop.records import SCHEMA_VERSION, Record, Sha256


class BlindingFile(Record):
    """blinding.json: label -> condition id. The nonce makes its hash (in schedule.json and every
    trial's genesis) a commitment that annotators cannot invert by trying the few mappings."""

    nonce: str
    labels: dict[str, str]


class ScheduleFile(Record):
    schema_version: int = SCHEMA_VERSION
    experiment_id: str
    manifest_sha256: Sha256
    blinding_sha256: Sha256
    block_size: int  # schedule positions voided together when one of them is invalid
    order: list[str]  # trial keys in run order
    frozen_files: dict[str, Sha256]  # prompts, scoring, conditions and schemas, as every trial saw them


class RunEvent(Record):
    """run.jsonl: the experiment's own log, hash-chained (the first line's prev is schedule.json's hash)."""

    seq: int
    event: Literal["run-started", "trial-sealed", "voided", "limits", "control-refused", "run-finished", "recovered"]
    timestamp_utc: str
    pid: int
    resume: bool | None = None
    trial_key: str | None = None
    position: int | None = None
    attempt: int | None = None
    outcome: str | None = None
    result_sha256: Sha256 | None = None
    trace_head: Sha256 | None = None
    void: int | None = None
    positions: list[int] | None = None
    trial_keys: list[str] | None = None
    cause: str | None = None
    stopped_early: bool | None = None
    stop_reason: str | None = None
    detail: str | None = None  # control-refused: who was refused (sessions.execute.control_socket)
    # "limits", logged just before run-finished when the run had them: trials at once (`--workers N`)
    # and the shared limits (sessions.execute.limits: the cost ceiling's rule, spend, rate limits, waits)
    workers: int | None = None
    executor: Literal["local", "ray"] | None = None  # where trial processes ran (`--executor`)
    limits: dict[str, Any] | None = None
    prev_sha256: Sha256


class VoidRecord(Record):
    """void-<n>/void.json: a block of schedule positions voided by an invalid trial (seed 000:
    a harness failure invalidates its pair, rerun from the same schedule positions)."""

    void: int
    positions: list[int]
    trial_keys: list[str]  # the attempts moved here (a position not yet run has none)
    trigger: str  # the invalid trial
    outcome: str
    cause: str | None
    timestamp_utc: str


class TrialSeal(Record):
    position: int
    trial_key: str
    attempt: int
    outcome: str
    result_sha256: Sha256
    trace_head: Sha256


class Summary(Record):
    """summary.json: counts and per-condition figures from the valid trials, and every seal."""

    schema_version: int = SCHEMA_VERSION
    experiment_id: str
    manifest_sha256: Sha256
    schedule_sha256: Sha256
    requested: int
    completed: int  # schedule positions holding a valid trial
    valid: int
    successful: int
    failed: int
    invalid: int  # invalid attempts (kept under void-<n>/)
    success_rate: float | None
    stopped_early: bool
    stop_reason: str | None
    all_succeeded: bool
    missing_positions: list[int]  # no valid trial yet: `oakwatch run --resume` reruns them
    per_condition: dict[str, dict[str, Any]]
    trials: list[TrialSeal]
    voids: list[VoidRecord]
    recovered: bool
    run_log_head: Sha256


EXPERIMENT_RECORDS: dict[str, type[Record]] = {
    "blinding": BlindingFile, "schedule": ScheduleFile, "run-event": RunEvent, "void": VoidRecord,
    "summary": Summary,
}
