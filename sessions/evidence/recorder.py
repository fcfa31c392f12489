"""The trial recorder: the only code that writes a trial folder.

It is the trial loop's first sink. Each decision is committed as one transaction: its
response, its accepted inputs, its memory operations, its frame (queued to the frame store),
and last the trace line, which carries the SHA-256 of each of those byte runs and of the
trace line before it (the first line points at trial.json, the trial's genesis). A trace line
on disk therefore implies everything it names is on disk. If any write fails, the streams are
cut back to the last committed decision and the loop is told (SinkFailure): the trial ends as
an invalid run, and `seal` still writes a truthful result.json.

Operator tags go to annotations.jsonl as they come, in their own chain, from the UI thread.
"""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from engine.loop.events import (
    AnnotationAdded,
    DecisionRecorded,
    EpisodeStarted,
    Event,
    MemoryChanged,
    TrialStarted,
)
from engine.loop.outcomes import classify
from engine.loop.records import Chain, FrameStoreSeal, TrialGenesis, TrialResult, trace_line_unwritten
from sessions.evidence import layout
from sessions.evidence.durable import AppendLog, EvidenceError, error_from, write_atomic
from sessions.evidence.framestore import FrameStoreWriter


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


EMPTY_SHA256 = sha256_hex(b"")


def json_line(record, **options) -> bytes:
    """One JSONL line of `record`: exactly `(record.model_dump_json(**options) + "\n").encode()`,
    from pydantic's serializer straight to bytes (model_dump_json's Python wrapper and the str round
    trip cost more than the serialising itself, three or more times per decision)."""
    return record.__pydantic_serializer__.to_json(record, **options) + b"\n"


def _chain(trace, raw_response_path: str, prev: str, response: str, inputs: str, memory: str) -> None:
    """Set the recorder's fields of a trace line, as `trace.field = value` would (pydantic's setattr
    for a model without validate_assignment stores the value and marks the field set) at a fifth of the cost."""
    trace.__dict__.update(raw_response_path=raw_response_path, prev_sha256=prev, response_sha256=response,
                          inputs_sha256=inputs, memory_sha256=memory)
    trace.__pydantic_fields_set__.update(_CHAIN_FIELDS)


_CHAIN_FIELDS = ("raw_response_path", "prev_sha256", "response_sha256", "inputs_sha256", "memory_sha256")


def response_ref(decision_id: int) -> str:
    return f"{layout.RESPONSES}#{decision_id}"


class TrialRecorder:
    def __init__(self, folder: Path, genesis: TrialGenesis,
                 on_disk_full: Callable[[], None] | None = None, secrets: tuple[str, ...] = (),
                 encode_aside: bool = False):
        """Create the trial folder and its genesis. Raises EvidenceError if it cannot. `secrets`
        (API keys) are cut out of anything written, whatever produced it: the last net under the
        providers' own redaction. `encode_aside`: the frame store encodes on its own thread (an
        emulator that runs without the GIL; FrameStoreWriter)."""
        self.folder = folder
        self._secrets = tuple(s.encode() for s in secrets if s)
        self.genesis = genesis
        self._on_disk_full = on_disk_full
        try:
            (folder / "frames").mkdir(parents=True)
        except OSError as exc:
            raise error_from(exc, f"the trial folder {folder}") from None
        data = (genesis.model_dump_json(indent=2) + "\n").encode()
        try:
            write_atomic(folder / layout.TRIAL, data)
        except EvidenceError:
            shutil.rmtree(folder, ignore_errors=True)  # a trial that never started leaves nothing
            raise
        self.genesis_sha256 = sha256_hex(data)
        self.head = self.genesis_sha256  # the trace chain's head
        self.annotations_head = self.genesis_sha256
        self.decisions = 0
        self.annotation_lines = 0
        self._logs: dict[str, AppendLog] = {}
        self._frames: FrameStoreWriter | None = None
        self._lock = threading.Lock()
        self._memory: list[bytes] = []  # the decision in progress
        self._committed: dict[str, int] = {}
        self.failure: EvidenceError | None = None
        self.sealed: TrialResult | None = None
        try:
            for name in (layout.TRACE, layout.RESPONSES, layout.INPUTS, layout.MEMORY, layout.TRIAL_ANNOTATIONS):
                self._logs[name] = AppendLog(folder / name, what=f"{folder.name}/{name}")
            self._frames = FrameStoreWriter(folder / layout.FRAMES, encode_aside)
        except EvidenceError:
            self._close_logs()
            raise
        self._committed = {name: 0 for name in self._logs}

    # -- the sink -------------------------------------------------------------------------------
    def handle(self, event: Event) -> None:
        if isinstance(event, MemoryChanged):
            self._memory.append(json_line(event.op, exclude_unset=True))
        elif isinstance(event, DecisionRecorded):
            self._commit(event)
        elif isinstance(event, AnnotationAdded):
            self.annotate(event.record)
        elif isinstance(event, (TrialStarted, EpisodeStarted)):  # the start frame, stored once
            self._guard(lambda: self._frames.add(event.frame_sha256, event.frame))

    def _guard(self, action: Callable[[], None]) -> None:
        if self.failure is not None:
            raise self.failure
        try:
            action()
        except EvidenceError as exc:
            self._fail(exc)
            raise

    def _fail(self, exc: EvidenceError) -> None:
        self.failure = self.failure or exc
        self._rollback()
        if exc.cause == "disk-full" and self._on_disk_full is not None:
            self._on_disk_full()

    def _commit(self, event: DecisionRecorded) -> None:
        trace = event.trace
        response = event.response
        memory, self._memory = self._scrub(b"".join(self._memory)), []
        response_bytes = self._scrub(json_line(response))
        inputs = b"".join([json_line(i) for i in event.inputs])
        _chain(trace, response_ref(trace.decision_id), self.head, sha256_hex(response_bytes),
               sha256_hex(inputs) if inputs else EMPTY_SHA256, sha256_hex(memory) if memory else EMPTY_SHA256)
        # a trial that is not episodic writes no episode fields: its lines read as they always did
        line = self._scrub(json_line(trace, exclude=trace_line_unwritten(trace) or None))
        logs = self._logs

        def write() -> None:
            logs[layout.RESPONSES].append(response_bytes)
            if inputs:
                logs[layout.INPUTS].append(inputs)
            if memory:
                logs[layout.MEMORY].append(memory)
            self._frames.add(trace.result_frame_sha256, event.frame)
            logs[layout.TRACE].append(line)  # last: the commit point
            if trace.milestones_after != trace.milestones_before:
                self._frames.run_later(self._sync_logs)  # a milestone's evidence to disk, off the loop

        self._guard(write)
        self.head = sha256_hex(line)
        self.decisions = trace.decision_id
        self._committed = {name: log.size for name, log in logs.items()}

    def _scrub(self, data: bytes) -> bytes:
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, b"[redacted]")
        return data

    def _sync_logs(self) -> None:
        for log in list(self._logs.values()):
            log.sync()

    def _rollback(self) -> None:
        """Cut every stream back to the end of the last committed decision."""
        for name, log in self._logs.items():
            if name != layout.TRIAL_ANNOTATIONS:  # tags are committed one by one
                try:
                    log.truncate_to(self._committed.get(name, 0))
                except OSError:
                    pass

    def annotate(self, record) -> None:
        """Append one operator tag (any thread), chained to the previous tag."""
        with self._lock:
            if self.sealed is not None:
                raise EvidenceError(f"trial {self.folder.name} is sealed", "evidence-io-error")
            record.prev_sha256 = self.annotations_head
            line = self._scrub((record.model_dump_json() + "\n").encode())
            log = self._logs[layout.TRIAL_ANNOTATIONS]
            log.append(line)
            log.sync()
            self.annotations_head = sha256_hex(line)
            self.annotation_lines += 1

    # -- the end --------------------------------------------------------------------------------
    def seal(self, result: TrialResult, provider_failure=None, files: dict[str, bytes] | None = None) -> TrialResult:
        """Finish the trial's files and write result.json (and provider-failure.json, when the
        provider ended the trial; and `files`, what the policy kept for the evidence, e.g. a cli
        client's transcript, whose hash the result records). Whatever failed, the result says so.
        Raises EvidenceError only if result.json (or one of `files`) cannot be written."""
        with self._lock:
            frames: FrameStoreSeal | None = None
            if self.failure is not None:
                self._rollback()
                self._frames.abandon()
            else:
                try:
                    frames = self._frames.seal()
                    for log in self._logs.values():
                        log.sync()
                except EvidenceError as exc:
                    self._fail(exc)
            self._close_logs()
            if self.failure is not None and result.outcome in ("success", "game-failure"):
                # The play was valid but its evidence is not whole: not a measurement.
                outcome, cause = classify("evidence-failure", self.failure.cause)
                result = result.model_copy(update={
                    "outcome": outcome, "termination_reason": "evidence-failure", "invalid_cause": cause,
                    "termination_detail": result.termination_reason, "error": str(self.failure)})
            result = result.model_copy(update={"last_decision": self.decisions, "chain": Chain(
                genesis_sha256=self.genesis_sha256, trace_head=self.head, trace_lines=self.decisions,
                annotations_head=self.annotations_head, annotation_lines=self.annotation_lines,
                frames=frames)})
            if provider_failure is not None and result.outcome == "invalid-provider":
                write_atomic(self.folder / layout.PROVIDER_FAILURE,
                             self._scrub((provider_failure.model_dump_json(indent=2) + "\n").encode()))
            for name, content in (files or {}).items():
                write_atomic(self.folder / name, self._scrub(content))
            data = self._scrub((result.model_dump_json(indent=2, exclude={"episodes"} if result.episodes is None
                                                       else None) + "\n").encode())
            try:
                write_atomic(self.folder / layout.RESULT, data)
            except EvidenceError as exc:
                if exc.cause == "disk-full" and self._on_disk_full is not None:
                    self._on_disk_full()
                    write_atomic(self.folder / layout.RESULT, data)  # raises again if still full
                else:
                    raise
            self.sealed = result
            self.result_sha256 = sha256_hex(data)
            return result

    def _close_logs(self) -> None:
        for log in self._logs.values():
            log.close()

    def close(self) -> None:
        """Release everything without sealing (only when the folder is being abandoned)."""
        if self._frames is not None:
            self._frames.abandon()
        self._close_logs()



def policy_files(trial) -> dict[str, bytes]:
    """What a trial's policy kept for its evidence (sessions.execute.cli_client: the client's transcript)."""
    files = getattr(getattr(trial, "policy", None), "evidence_files", None)
    return dict(files) if isinstance(files, dict) else {}
