"""verify: one trial's streams walked in step with its trace (the hot loop: 100,000s of decisions, flat memory)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from engine.battle.episodes import Step, episode_records
from engine.loop.records import InputLine, MemoryOp, ResponseLine, TraceLine, TrialResult
from engine.loop.tally import TraceTally
from sessions.audit.verify_context import EMPTY, Context, Report, _short, _variant_entry
from sessions.audit.verify_response import _check_response, _plain_response
from sessions.audit.verify_tools import check_battle_line
from sessions.evidence import layout
from sessions.evidence.reader import (
    MAX_LINE,
    FormatProblem,
    TrialReader,
    parse,
    short_error,
)

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


BLOCK = 1 << 16  # a stream is read 64 KiB at a time (bigger blocks fall out of the CPU cache)


def _stream(reader: TrialReader, name: str, digests: dict[str, str]) -> Iterator[tuple[int, bytes]]:
    """A stream's (line number, line) read and hashed a block at a time (a few calls per block instead
    of a read, a check and a hash update per line); `digests[name]` is the file's SHA-256 once every
    line has been read. Problems are iter_lines's (sessions.evidence.reader), raised at the same line."""
    path = reader.folder / name
    if not path.is_file():
        raise FormatProblem(f"{reader.where(name)} is missing")
    return _blocks(path, reader.where(name), name, digests)


def _blocks(path: Path, where: str, name: str, digests: dict[str, str], start: int = 0, end: int | None = None,
            first: int = 0, digest=None) -> Iterator[tuple[int, bytes]]:
    """The lines of bytes [start, end) of a stream (both at line starts), numbered from `first` + 1; the
    file's digest is set in `digests` only when the whole file was read (verify_split reads it in parts)."""
    whole_file = start == 0 and end is None
    digest = digest if digest is not None else hashlib.sha256() if whole_file else None
    n = first
    pending: list[bytes] = []  # the start of a line a block cut
    left = end - start if end is not None else -1
    with path.open("rb") as f:
        f.seek(start)
        while block := f.read(BLOCK if left < 0 else min(BLOCK, left)):
            if left > 0:
                left -= len(block)
            if digest is not None:
                digest.update(block)
            cut = block.rfind(b"\n") + 1
            if not cut:
                pending.append(block)
                continue
            whole = b"".join((*pending, block[:cut])) if pending else block[:cut]
            pending = [block[cut:]] if cut < len(block) else []
            lines, count = _block_lines(whole, n, where)
            yield from lines
            n += count
    if pending:
        raise FormatProblem(f"{where}:{n + 1}: torn last line (no newline): the process died mid-write")
    if whole_file:
        digests[name] = digest.hexdigest()


def _block_lines(whole: bytes, n: int, where: str) -> tuple[Iterator[tuple[int, bytes]], int]:
    """A block's whole lines, numbered from n + 1, and how many."""
    if len(whole) > MAX_LINE or b"\r" in whole:  # a line that may be too long, or a \r splitlines cuts at
        return _checked_lines(whole, n, where), whole.count(b"\n")
    lines = whole.splitlines(keepends=True)  # every line ends with its \n here: the whole block's do
    return enumerate(lines, n + 1), len(lines)


def _checked_lines(whole: bytes, n: int, where: str) -> Iterator[tuple[int, bytes]]:
    """A block's lines one by one: each is checked against MAX_LINE as it comes."""
    lines = whole.split(b"\n")
    lines.pop()
    for line in lines:
        n += 1
        line += b"\n"
        if len(line) > MAX_LINE:
            raise FormatProblem(f"{where}:{n}: line too long")
        yield n, line


def _bad_line(exc: ValidationError, rel: str, name: str, n: int) -> FormatProblem:
    """A line its record model refuses, as one problem (the hot loop calls the models' validators itself)."""
    return FormatProblem(f"{rel}/{name}:{n}: {short_error(exc)}")


@dataclass(slots=True)
class _Walk:
    """One trial's streams walked in step with its trace, and what the walk has gathered so far.
    Its fields are read as attributes once per decision (not per line) to keep the hot loop lean."""

    rel: str
    report: Report
    ctx: Context
    result: TrialResult | None
    responses: Iterator[tuple[int, bytes]]
    inputs: Iterator[tuple[int, bytes]]
    trace: Iterator[tuple[int, bytes]]
    memory: _Peek
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
    # verify_split's worker: facts its part names but did not create (the first part's, or a problem the
    # merge sends back to the one-process walk); None: every such name is a problem at once
    borrowed: set[str] | None = None
    digests: dict[str, str] = field(default_factory=dict)  # stream name -> its SHA-256, once read to its end


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
    digests: dict[str, str] = {}
    return _Walk(rel=rel, report=report, ctx=ctx, result=result, digests=digests,
                 responses=_stream(reader, layout.RESPONSES, digests), inputs=_stream(reader, layout.INPUTS, digests),
                 trace=_stream(reader, layout.TRACE, digests), memory=_Peek(reader.lines(layout.MEMORY)),
                 first_frame=_first_frame(ctx, trial_number),
                 episodes=m.episodes if m is not None else None,
                 cap=m.agent.max_reply_bytes if m is not None else None,
                 awards=awards, evidence=evidence, head=genesis_sha)


def _check_trace_line(w: _Walk, t: TraceLine, n: int, line: bytes) -> None:
    """The trace line against the one before: the hash chain and numbering (and the first decision's
    prompt core against the provenance), then continuity (no decision after the end, the same
    milestones, the same frame). One function, in the order the problems are reported, as it runs for
    every decision (its line's own fields follow in `_check_line_fields`)."""
    add, rel, prev = w.report.add, w.rel, w.prev
    # the hash chain and the numbering
    if t.prev_sha256 != w.head:
        add(f"{rel}/{layout.TRACE}:{n}: hash chain broken (prev_sha256 does not match the "
            f"{'genesis' if n == 1 else f'line {n - 1}'})")
    w.head = hashlib.sha256(line).hexdigest()
    if t.decision_id != n:
        add(f"{rel}/{layout.TRACE}:{n}: decision_id {t.decision_id}, expected {n}")
    if n == 1:
        _check_prompt_core(w, t)
    # continuity: after an episode's last decision the start state was restored (the agent sees its frame again)
    seen = w.first_frame
    if prev is not None:
        seen = w.first_frame if prev.episode_end is not None else prev.result_frame_sha256
        if prev.termination_reason is not None:
            add(f"{rel}/{layout.TRACE}:{n}: a decision after the one that ended the trial")
        if t.milestones_before != prev.milestones_after:
            add(f"{rel}/{layout.TRACE}:{n}: milestones_before differs from the previous decision's "
                f"milestones_after")
    if seen is not None and t.frame_sha256 != seen:
        add(f"{rel}/{layout.TRACE}:{n}: the agent saw frame {t.frame_sha256[:12]}…, but the previous "
            f"decision left {seen[:12]}…")


def _check_line_fields(w: _Walk, t: TraceLine, n: int) -> None:
    """Episode fields only in an episodic trial (numbered in turn within the budget), the battle facts,
    no milestone lost, and the response the line points at."""
    add, rel, episodes = w.report.add, w.rel, w.episodes
    if episodes is None:
        if t.episode is not None or t.episode_end is not None:
            add(f"{rel}/{layout.TRACE}:{n}: an episode field in a trial that is not episodic")
    else:
        _check_episode(w, t, n, episodes)
    # the line's own fields
    if t.battle is not None:
        check_battle_line(w.ctx.manifest, t, f"{rel}/{layout.TRACE}:{n}", w.report)
    frames_seen = w.frames_seen
    frames_seen.add(t.frame_sha256)
    frames_seen.add(t.result_frame_sha256)
    before, after = t.milestones_before, t.milestones_after
    if before != after and not set(before) <= set(after):
        add(f"{rel}/{layout.TRACE}:{n}: a milestone was lost")
    if t.raw_response_path != f"{layout.RESPONSES}#{n}":
        add(f"{rel}/{layout.TRACE}:{n}: raw_response_path {t.raw_response_path!r}, expected {layout.RESPONSES}#{n}")


def _check_prompt_core(w: _Walk, t: TraceLine) -> None:
    """The first decision's prompt core against the provenance."""
    result = w.result
    if result is not None and "prompt_core_sha256" in result.provenance \
            and result.provenance["prompt_core_sha256"] != t.prompt_core_sha256:
        w.report.add(f"{w.rel}/{layout.RESULT}: provenance.prompt_core_sha256 is not the first decision's "
                     f"({_short(t.prompt_core_sha256)} in {layout.TRACE})")


def _check_episode(w: _Walk, t: TraceLine, n: int, episodes) -> None:
    """An episodic trial's episode fields: numbered in turn within the budget."""
    add, rel, prev = w.report.add, w.rel, w.prev
    expected_episode = 1 if prev is None else prev.episode + (prev.episode_end is not None)
    if t.episode != expected_episode or t.episode > episodes.budget:
        add(f"{rel}/{layout.TRACE}:{n}: episode {t.episode}, expected {expected_episode} (budget "
            f"{episodes.budget})")
    if t.episode_end is not None and t.termination_reason is None and t.episode >= episodes.budget:
        add(f"{rel}/{layout.TRACE}:{n}: the last episode ended, yet the trial did not")
    w.steps.append(Step(n, t.episode or 0, t.episode_end, tuple(t.memory_writes),
                        t.battle.get("team") if t.battle is not None else None))


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
    try:
        parsed = _validate_response(rbytes)
    except ValidationError as exc:
        raise _bad_line(exc, rel, layout.RESPONSES, rn) from None
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
    evidence, last_capture, inputs_read = w.evidence, w.last_capture, w.inputs_read
    for i, (k, b) in enumerate(chunk):
        try:
            r = _validate_input(b)
        except ValidationError as exc:
            raise _bad_line(exc, rel, layout.INPUTS, k) from None
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
    if accepted == 1 and (item := next(inputs, None)) is not None:  # the common case
        return [item]
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
        _check_memory_op(op, facts, f"{rel}/{layout.MEMORY}:{item[0]}", w.report, w.borrowed)
    if (hashlib.sha256(b"".join(mem)).hexdigest() if mem else EMPTY) != t.memory_sha256:
        add(f"{rel}/{layout.MEMORY}: decision {n}'s memory operations differ from what it recorded")
    for fid in t.memory_writes:
        if fid is not None and fid not in facts:
            if w.borrowed is not None:
                w.borrowed.add(fid)
            else:
                add(f"{rel}/{layout.TRACE}:{n}: memory_writes names {fid}, which no memory operation created")


def _memory_op(w: _Walk, item: tuple[int, bytes]) -> MemoryOp:
    """The operation on the memory stream's next line, parsed once: a line that belongs to a later
    decision is looked at by every decision until then."""
    if w.op_item is not item:
        w.op_item, w.op = item, parse(MemoryOp, item[1], f"{w.rel}/{layout.MEMORY}:{item[0]}")
    return w.op


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
    for name in (layout.TRACE, layout.RESPONSES, layout.INPUTS):
        if name in w.digests:
            w.ctx.streamed[f"{rel}/{name}"] = w.digests[name]
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
    from sessions.audit.verify_split import split_walk  # it builds on this module

    def start(into: Report) -> _Walk:
        return _start_walk(reader, genesis_sha, rel, into, ctx, result, trial_number)

    w = split_walk(start, reader, rel)  # two processes on a big trial; None: walk it here
    if w is None:
        w = start(report)
        _walk(w)
        _check_leftovers(w)
    w.report = report
    _check_walk_end(w)
    return w.facts, w.frames_seen, w.tally, w.prev, w.head


def _walk(w: _Walk) -> None:
    """Every decision of `w.trace`, the other streams in step (numbered from the trace's own numbers)."""
    validate, tally_add, memory, rel = _validate_trace, w.tally.add, w.memory, w.rel
    # one decision's checks, in the order their problems are reported (messages and order are pinned by tests)
    for n, line in w.trace:
        try:
            t = validate(line)
        except ValidationError as exc:
            raise _bad_line(exc, rel, layout.TRACE, n) from None
        _check_trace_line(w, t, n, line)
        _check_line_fields(w, t, n)
        _check_decision_response(w, t, n, line)
        _check_decision_inputs(w, t, n, line)
        # a decision with no memory operation, none recorded and no fact written has nothing to check there
        if memory.peek() is not None or t.memory_sha256 != EMPTY or t.memory_writes:
            _check_decision_memory(w, t, n, line)
        tally_add(t)
        w.prev = t


# The record models' own validators, called straight from the hot loop.
_validate_trace = TraceLine.__pydantic_validator__.validate_json
_validate_response = ResponseLine.__pydantic_validator__.validate_json
_validate_input = InputLine.__pydantic_validator__.validate_json


# An operation that names facts an earlier write must have created: (the names, the problem if one is unknown).
_REFERENCES = {
    **{op: (lambda o: [o.fact_id], lambda o, unknown: f"{o.op} of {o.fact_id}, which no earlier write created")
       for op in ("update", "complete", "supersede", "evict")},
    "retrieve": (lambda o: o.fact_ids or [], lambda o, unknown: f"retrieves {unknown}, which no earlier write created"),
    "read": (lambda o: o.fact_ids or [],
             lambda o, unknown: f"reads {unknown} as found, but no earlier write created them"),
}


def _check_memory_op(op: MemoryOp, facts: set[str], where: str, report: Report,
                     borrowed: set[str] | None = None) -> None:
    """One memory operation against the facts created before it (`borrowed`: see _Walk.borrowed)."""
    if op.op == "write":
        if op.fact_id in facts:
            report.add(f"{where}: writes {op.fact_id} a second time")
        facts.add(op.fact_id)
        return
    if op.op not in _REFERENCES:
        return
    names, problem = _REFERENCES[op.op]
    unknown = [f for f in names(op) if f not in facts]
    if unknown and borrowed is not None:
        borrowed.update(unknown)
    elif unknown:
        report.add(f"{where}: {problem(op, unknown)}")
