"""verify's stream walk over two processes: a big trial's decisions are split at a trace line, a forked
worker walks the second part while this process walks the first (issue 31: two cores).

Only a clean walk is taken from the split: when either part finds any problem (or the streams do not
split cleanly: a damaged trial), the caller walks the whole trial again in one process, so the problems
reported are always the one-process walk's, byte for byte. The memory stream is split too: a fact the
worker's part names without having created it is borrowed, and the merge takes the split only if the
first part created every borrowed fact and no fact was created in both parts. A worker that dies or
fails ends the trial's check with one problem that says so (never a pass, never a hang: its pipe closes
when it dies).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from engine.loop.records import TraceLine
from engine.loop.tally import TraceTally, _add, total_latency
from sessions.audit.verify_context import Report
from sessions.audit.verify_streams import _blocks, _check_leftovers, _Peek, _validate_input, _Walk, _walk
from sessions.evidence import layout
from sessions.evidence.reader import MAX_LINE, FormatProblem, TrialReader

SPLIT_BYTES = 24 << 20  # a trace under this (about 18,000 decisions) is walked in one process: no fork
FRACTION = 0.47  # of the trace's bytes walked here: this process also hashes the worker's part of each file
STREAMS = (layout.TRACE, layout.RESPONSES, layout.INPUTS)


@dataclass(frozen=True)
class _Plan:
    """Where the streams split: the worker starts at decision `k` + 1."""

    k: int
    line_k: bytes  # trace line k: the worker's first decision is checked against it
    prev: TraceLine
    starts: dict[str, int]  # stream name -> byte offset of the worker's first line
    last_capture: int  # the capture frame of the last input line before the split (-1: none)
    memory_lines: int  # memory lines before the worker's first (its lines are numbered after them)


class _RecordingTally(TraceTally):
    """A tally that also keeps each paid decision's figures: their float sums are redone in order."""

    def __init__(self) -> None:
        super().__init__()
        self.paid: list[tuple] = []

    def add(self, t: TraceLine) -> None:
        if t.paid_calls:
            self.paid.append((t.input_tokens, t.output_tokens, t.cached_tokens, t.provider_cost_usd,
                              total_latency(t)))
        super().add(t)


def split_walk(start: Callable[[Report], _Walk], reader: TrialReader, rel: str) -> _Walk | None:
    """The whole walk (its streams read to their ends, leftovers checked) when both parts are clean;
    None when the trial is small, cannot be split or a part found a problem (walk it in one process).
    Raises FormatProblem when the worker died or failed."""
    plan = _plan(reader.folder)
    if plan is None:
        return None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns
        os.close(read_end)
        _work(start, reader.folder, plan, write_end)
    os.close(write_end)
    try:
        w, digests = _first_part(start, reader.folder, plan)
    except BaseException:
        _stop(pid, read_end)
        raise
    if w is None:  # a problem here: the one-process walk reports it
        _stop(pid, read_end)
        return None
    try:
        _hash_rest(reader.folder, plan, digests, w)
    except BaseException:
        _stop(pid, read_end)
        raise
    message = _receive(pid, read_end, rel, plan)
    return _merge(w, message) if message is not None else None


def _plan(folder: Path) -> _Plan | None:
    """The split, or None (a small trial, another thread running, or streams that do not split cleanly)."""
    try:
        paths = {name: folder / name for name in STREAMS}
        if os.path.getsize(paths[layout.TRACE]) < SPLIT_BYTES or threading.active_count() > 1 \
                or not hasattr(os, "fork"):  # a fork copies no other thread
            return None
        k, line_k, trace_start = _trace_split(paths[layout.TRACE])
        prev = TraceLine.__pydantic_validator__.validate_json(line_k)
        if prev.decision_id != k:
            return None
        r_start, r_before = _first_after(paths[layout.RESPONSES], k)
        i_start, i_before = _first_after(paths[layout.INPUTS], k)
        if r_before is None or json.loads(r_before)["decision_id"] != k:
            return None
        last_capture = _validate_input(i_before).capture_frame if i_before is not None else -1
        m_start, memory_lines = _memory_split(folder / layout.MEMORY, k)
    except (OSError, ValueError, KeyError, TypeError, RecursionError, ValidationError, _NoSplit):
        return None
    return _Plan(k, line_k, prev, {layout.TRACE: trace_start, layout.RESPONSES: r_start, layout.INPUTS: i_start,
                                   layout.MEMORY: m_start}, last_capture, memory_lines)


def _memory_split(path: Path, k: int) -> tuple[int, int]:
    """(offset of the first memory line after decision k, how many lines come before it): a decision
    may have no memory operation, so the line before may belong to any decision up to k."""
    if os.path.getsize(path) == 0:
        return 0, 0
    start, _ = _first_after(path, k)
    lines = 0
    with path.open("rb") as f:
        left = start
        while left and (block := f.read(min(1 << 20, left))):
            lines += block.count(b"\n")
            left -= len(block)
    return start, lines


class _NoSplit(Exception):
    """The streams do not split cleanly here."""


def _trace_split(path: Path) -> tuple[int, bytes, int]:
    """(k, trace line k, the offset after it): the first whole line after FRACTION of the trace."""
    with path.open("rb") as f:
        f.seek(int(os.path.getsize(path) * FRACTION))
        f.readline(MAX_LINE)
        line = f.readline(MAX_LINE)
        if not line.endswith(b"\n"):
            raise _NoSplit
        return json.loads(line)["decision_id"], line, f.tell()


def _first_after(path: Path, k: int) -> tuple[int, bytes | None]:
    """(offset of the first line whose decision is after k, the line before it or None), by bisection
    over the byte offsets (a stream's lines are in decision order when it is whole)."""
    size = os.path.getsize(path)
    with path.open("rb") as f:
        def line_at(pos: int) -> tuple[int, bytes]:
            if pos:
                f.seek(pos - 1)
                f.readline(MAX_LINE)
            else:
                f.seek(0)
            at = f.tell()
            return at, f.readline(MAX_LINE)

        lo, hi = 0, size
        while lo < hi:
            mid = (lo + hi) // 2
            at, line = line_at(mid)
            if at >= size or json.loads(line)["decision_id"] > k:
                hi = mid
            else:
                lo = mid + 1
        start, _ = line_at(lo)
        return start, _line_before(f, start)


def _line_before(f, start: int) -> bytes | None:
    if start == 0:
        return None
    window = min(start, 1 << 16)
    f.seek(start - window)
    data = f.read(window)
    cut = data.rfind(b"\n", 0, len(data) - 1) + 1
    if not cut and window < start:
        raise _NoSplit
    return data[cut:]


def _ranged(w: _Walk, folder: Path, plan: _Plan, worker: bool) -> dict[str, hashlib._Hash]:
    """Point the walk's streams at this process's part; the digests of the first part, kept going."""
    digests = {} if worker else {name: hashlib.sha256() for name in STREAMS}
    for name in STREAMS:
        start, end = (plan.starts[name], None) if worker else (0, plan.starts[name])
        first = {layout.TRACE: plan.k, layout.RESPONSES: plan.k}.get(name, 0) if worker else 0
        stream = _blocks(folder / name, f"{w.rel}/{name}", name, w.digests, start, end, first, digests.get(name))
        setattr(w, {layout.TRACE: "trace", layout.RESPONSES: "responses", layout.INPUTS: "inputs"}[name], stream)
    # the memory stream's part (its file digest is checked with the experiment's sums, not here)
    start, end = (plan.starts[layout.MEMORY], None) if worker else (0, plan.starts[layout.MEMORY])
    w.memory = _Peek(_blocks(folder / layout.MEMORY, f"{w.rel}/{layout.MEMORY}", layout.MEMORY, {}, start, end,
                             plan.memory_lines if worker else 0))
    return digests


def _first_part(start: Callable[[Report], _Walk], folder: Path, plan: _Plan) -> tuple[_Walk | None, dict]:
    """Decisions 1 to k, here; None when they hold a problem, or the streams' parts are not used up."""
    report = Report()
    w = start(report)
    digests = _ranged(w, folder, plan, worker=False)
    try:
        _walk(w)
    except FormatProblem:
        return None, digests
    ended = next(w.responses, None) is None and next(w.inputs, None) is None and w.memory.peek() is None
    if report.problems or report.interrupted or not ended or w.prev is None or w.prev.decision_id != plan.k \
            or w.tally.decisions != plan.k:
        return None, digests
    return w, digests


def _hash_rest(folder: Path, plan: _Plan, digests: dict, w: _Walk) -> None:
    """Each stream's file digest: the worker's part hashed here (a file's SHA-256 is one sequence)."""
    for name in STREAMS:
        digest = digests[name]
        with (folder / name).open("rb") as f:
            f.seek(plan.starts[name])
            while block := f.read(1 << 20):
                digest.update(block)
        w.digests[name] = digest.hexdigest()


def _work(start: Callable[[Report], _Walk], folder: Path, plan: _Plan, out: int) -> None:
    """The worker: decisions k + 1 to the end; sends what the walk gathered, or that it found a problem."""
    status = 1
    try:
        try:
            message = _second_part(start, folder, plan)
        except FormatProblem:
            message = ("problem",)
        except Exception as exc:  # sent to the parent, which reports it as the trial's problem
            message = ("failed", f"{type(exc).__name__}: {exc}")
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(out, "wb") as pipe:
            pipe.write(data)
        status = 0
    finally:
        os._exit(status)


def _second_part(start: Callable[[Report], _Walk], folder: Path, plan: _Plan) -> tuple:
    report = Report()
    w = start(report)
    _ranged(w, folder, plan, worker=True)
    w.prev, w.head, w.last_capture = plan.prev, hashlib.sha256(plan.line_k).hexdigest(), plan.last_capture
    w.tally = _RecordingTally()
    w.borrowed = set()  # facts named here that the first part must have created
    _walk(w)
    _check_leftovers(w)
    if report.problems or report.interrupted:
        return ("problem",)
    t = w.tally
    counts = (t.decisions, t.model_calls, t.aborted_calls, t.invalid_outputs, t.accepted_actions, t.paid_calls)
    return ("clean", counts, t.paid, t.cost_sources, t.last, t.award_actions, w.facts, w.frames_seen,
            w.award_frames, w.steps, w.clients, w.prev, w.head, w.inputs_read, w.last_capture, w.borrowed)


def _receive(pid: int, read_end: int, rel: str, plan: _Plan) -> tuple | None:
    """The worker's message: None for a problem it found; FormatProblem if it died or failed."""
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    message = None
    if data:
        try:
            message = pickle.loads(data)
        except Exception:  # a message cut short
            message = None
    where = f"{rel}/{layout.TRACE}: decisions after {plan.k} were not checked"
    if message is None or status != 0:
        raise FormatProblem(f"{where}: verify's worker process {_death(status)}")
    if message[0] == "failed":
        raise FormatProblem(f"{where}: verify's worker process failed ({message[1]})")
    return message if message[0] == "clean" else None


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"was killed by signal {sig} ({signal.Signals(sig).name}) before it finished"
    return f"exited with status {os.waitstatus_to_exitcode(status)} before it finished"


def _stop(pid: int, read_end: int) -> None:
    """End a worker whose part is no longer needed."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)
    os.close(read_end)


def _merge(w: _Walk, message: tuple) -> _Walk | None:
    """The first part's walk continued with the worker's: as if one process had walked both."""
    (_, counts, paid, cost_sources, last, award_actions, facts, frames_seen, award_frames, steps, clients,
     prev, head, inputs_read, last_capture, borrowed) = message
    if len(w.clients.keys() | clients.keys()) > 1:  # two MCP sessions: the one-process walk reports it
        return None
    if borrowed - w.facts or facts & w.facts:  # a fact never created, or created twice: the same
        return None
    t = w.tally
    t.decisions, t.model_calls, t.aborted_calls, t.invalid_outputs, t.accepted_actions, t.paid_calls = (
        a + b for a, b in zip((t.decisions, t.model_calls, t.aborted_calls, t.invalid_outputs, t.accepted_actions,
                               t.paid_calls), counts, strict=True))
    for inp, out, cached, cost, latency in paid:  # in order: float sums as one walk makes them
        t.input_tokens, t.output_tokens = _add(t.input_tokens, inp), _add(t.output_tokens, out)
        t.cached_tokens, t.cost_usd = _add(t.cached_tokens, cached), _add(t.cost_usd, cost)
        t.model_latency_ms = _add(t.model_latency_ms, latency)
    t.cost_sources |= cost_sources
    t.last = last
    for key, count in award_actions.items():
        t.award_actions.setdefault(key, w.inputs_read + count)
    w.facts |= facts
    w.frames_seen |= frames_seen
    w.award_frames |= award_frames
    w.steps += steps
    for client, first in clients.items():
        w.clients.setdefault(client, first)
    w.prev, w.head, w.inputs_read, w.last_capture = prev, head, w.inputs_read + inputs_read, last_capture
    return w
