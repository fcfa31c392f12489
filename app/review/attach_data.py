"""`oakwatch attach DIR`: an evidence folder, as it grows, turned into console events and overview rows.

Pure (no Textual). Every read goes through `aiofiles`, so the console's event loop never blocks on
disk. JSONL streams are tailed by byte offset: each poll reads only what was appended since the
last one, and a torn last line (still being written) is left for the next poll. The frame store
is tailed the same way (whole records only). result.json and run.jsonl are re-read when they change
(size or mtime); a file that shrank or was replaced (`oakwatch recover`, a voided block moved away)
restarts that trial's reading from scratch.

Each trial's records become the events the live console consumes (engine.loop.events), fed into a
ConsoleSink per trial, so the drilled-in view reuses the live panes unchanged. Frames are decoded
only for the trial being looked at.

Blinding as in review: labels only, model ids masked (`[model]`: the sink redacts every id the
trace or a response names, and the manifest's), and neither conditions/ nor blinding.json is read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import aiofiles
import aiofiles.os
import numpy as np
import yaml

from app.console.console_state import ConsoleSink, LadderSnapshot
from app.review.review_data import Rung, contradictions
from engine.figures import money
from engine.loop.events import (
    AnnotationAdded,
    BudgetUpdated,
    DecisionRecorded,
    FrameCaptured,
    MemoryChanged,
    MilestoneReached,
    TrialEnded,
    TrialStarted,
)
from engine.loop.records import (
    Annotation,
    MemoryOp,
    MilestoneAward,
    ResponseLine,
    TraceLine,
    TrialGenesis,
    TrialResult,
)
from panes.lines import outcome_words
from sessions.evidence import layout
from sessions.evidence.folder import MILESTONES, EvidenceFolder
from sessions.evidence.framestore import HEADER, MAGIC, MAX_FRAME_BYTES, decode_png
from sessions.evidence.reader import FormatProblem, parse
from sessions.evidence.records import RunEvent, ScheduleFile, Summary

BLANK = np.zeros((144, 160, 3), dtype=np.uint8)
FACT_WRITING_OPS = frozenset({"write", "update", "supersede", "complete"})
BUDGET_KEYS = ("accepted_actions", "model_decisions", "wall_time_minutes", "total_cost_usd", "tokens")


class Restart(Exception):
    """A followed file shrank or was replaced: read the trial again from the start."""


# -- tailing --------------------------------------------------------------------------------------

async def _stat(path: Path):
    try:
        return await aiofiles.os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def split_whole(data: bytes) -> tuple[list[bytes], int]:
    """The whole lines in `data` and the bytes they span (a torn tail is left out)."""
    end = data.rfind(b"\n")
    if end < 0:
        return [], 0
    return data[:end + 1].splitlines(keepends=True), end + 1


class Tail:
    """A JSONL stream read incrementally by byte offset."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.ino: int | None = None

    async def read(self) -> list[bytes]:
        st = await _stat(self.path)
        if st is None:
            if self.offset:
                raise Restart(f"{self.path.name} vanished")
            return []
        if self.ino is not None and st.st_ino != self.ino or st.st_size < self.offset:
            raise Restart(f"{self.path.name} was replaced or truncated")
        self.ino = st.st_ino
        if st.st_size == self.offset:
            return []
        async with aiofiles.open(self.path, "rb") as f:
            await f.seek(self.offset)
            data = await f.read(st.st_size - self.offset)
        lines, used = split_whole(data)
        self.offset += used
        return lines


class Watched:
    """A whole file re-read when its size or mtime changes."""

    def __init__(self, path: Path):
        self.path = path
        self.sig: tuple | None = None

    async def changed(self) -> bytes | None:
        st = await _stat(self.path)
        sig = None if st is None else (st.st_size, st.st_mtime_ns, st.st_ino)
        if sig == self.sig or st is None:
            return None
        try:
            async with aiofiles.open(self.path, "rb") as f:
                data = await f.read()
        except OSError:
            return None
        self.sig = sig
        return data


class FrameTail:
    """The frame store's whole records, indexed by pixel hash as they are appended."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.index: dict[str, tuple[int, int]] = {}  # sha -> (offset of the PNG, length)
        self.problem: str | None = None

    async def read(self) -> None:
        st = await _stat(self.path)
        if st is None or st.st_size <= self.offset or self.problem:
            if st is not None and st.st_size < self.offset:
                raise Restart("the frame store shrank")
            return
        async with aiofiles.open(self.path, "rb") as f:
            while self.offset + HEADER.size <= st.st_size:
                await f.seek(self.offset)
                head = await f.read(HEADER.size)
                if len(head) < HEADER.size:
                    return
                magic, sha, length = HEADER.unpack(head)
                if magic != MAGIC or length > MAX_FRAME_BYTES:
                    self.problem = f"frame store: no record at byte {self.offset}"
                    return
                start = self.offset + HEADER.size
                if start + length > st.st_size:
                    return  # torn: still being written
                self.index.setdefault(sha.hex(), (start, length))
                self.offset = start + length

    async def pixels(self, sha: str) -> np.ndarray | None:
        where = self.index.get(sha)
        if where is None:
            return None
        try:
            async with aiofiles.open(self.path, "rb") as f:
                await f.seek(where[0])
                data = await f.read(where[1])
            return decode_png(data)
        except (OSError, ValueError):
            return None


# -- the experiment's own files --------------------------------------------------------------------

def read_ladder_text(text: str) -> tuple[Rung, ...]:
    try:
        data = yaml.safe_load(text)
        return tuple(Rung(str(m["id"]), str(m.get("name", m["id"])), int(m.get("points", 0)),
                          bool(m.get("required", True))) for m in data["milestones"])
    except (ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
        return ()


def manifest_facts(text: str) -> tuple[dict, list[str]]:
    """The budget limits and (only to mask them) the model ids of a frozen manifest."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}, []
    budgets = data.get("budgets") if isinstance(data, dict) else None
    limits = {k: budgets.get(k) for k in BUDGET_KEYS} if isinstance(budgets, dict) else {}
    models = [c["model"] for c in (data.get("conditions") or []) if isinstance(c, dict) and c.get("model")]
    return limits, models


@dataclass
class Row:
    """One trial in the overview."""

    key: str
    label: str
    status: str  # waiting, running, ended, voided
    outcome: str | None = None
    reason: str | None = None
    invalid_cause: str | None = None
    deepest: str | None = None
    decisions: int = 0
    actions: int = 0
    cost_usd: float | None = 0.0  # None: unknown (a paid call without a price)
    points: int = 0
    total_points: int = 0
    series: list[tuple[int, int]] = field(default_factory=list)
    max_actions: int | None = None
    held: str | None = None  # a running trial's operator state from the control channel: paused, stepping

    @property
    def paused(self) -> bool:
        return self.held is not None

    def status_text(self) -> str:
        """The outcome in the words of the console's end line (without the operator's own words),
        or waiting / running / paused / stepping."""
        if self.status in ("ended", "voided") and self.outcome is not None:
            words = outcome_words({"outcome": self.outcome, "termination_reason": self.reason,
                                   "invalid_cause": self.invalid_cause}, detail=False)
            return words if self.status == "ended" else f"voided · {words}"
        if self.status == "voided":
            return "voided"
        if self.status == "running" and self.held:
            return self.held
        return self.status

    def cost_text(self) -> str:
        return "" if self.status == "waiting" else money(self.cost_usd)


# -- one trial ---------------------------------------------------------------------------------------

class TrialFollower:
    """One trial folder read as it grows, fed as events into its own ConsoleSink."""

    def __init__(self, key: str, folder: Path, *, experiment_id: str, ladder: tuple[Rung, ...], limits: dict,
                 models: list[str], schedule_length: int, position: int | None):
        self.key = key
        self.folder = folder
        self.ladder = ladder
        self.limits = limits
        self.schedule_length = schedule_length
        self.position = position
        self.sink = ConsoleSink(experiment_id)
        self.sink.blind(models)
        self.sink.preset_ladder(tuple((r.id, r.name, r.points) for r in ladder),
                                tuple(r.id for r in ladder if not r.required))
        self.points = {r.id: r.points for r in ladder}
        self.names = {r.id: r.name for r in ladder}
        self.problems: list[str] = []
        self.genesis: TrialGenesis | None = None
        self.genesis_bytes: bytes | None = None
        self.result: TrialResult | None = None
        self.started = False
        self._trace = Tail(folder / layout.TRACE)
        self._responses = Tail(folder / layout.RESPONSES)
        self._memory = Tail(folder / layout.MEMORY)
        self._annotations = Tail(folder / layout.TRIAL_ANNOTATIONS)
        self._result = Watched(folder / layout.RESULT)
        self.frames = FrameTail(folder / layout.FRAMES)
        self._pending_responses: dict[int, ResponseLine] = {}
        self._pending_memory: list[MemoryOp] = []
        self._pending_traces: list[TraceLine] = []
        self._facts: OrderedDict[str, dict] = OrderedDict()
        self.pre_satisfied: tuple[str, ...] = ()
        self.awarded: dict[str, int] = {}  # rung -> decision
        self.decisions = 0
        self.actions = 0
        self.calls = 0
        self.cost: float | None = 0.0
        self.tokens: int | None = 0
        self.series: list[tuple[int, int]] = []
        self.result_frames: list[tuple[int, str, int]] = []  # (decision, sha, frame index)
        self.first_frame: str | None = None
        self._pixels = BLANK
        self._shown_frame: str | None = None

    def _parse(self, model, line: bytes, name: str):
        try:
            return parse(model, line, f"{layout.trial_dir(self.key)}/{name}")
        except FormatProblem as exc:
            if len(self.problems) < 20:
                self.problems.append(str(exc))
            return None

    async def poll(self, frames: bool = False) -> bool:
        """Read what was appended since the last poll and feed it to the sink; True if anything was.
        Raises Restart when the trial must be read again from scratch."""
        if self.genesis is None and not await self._read_genesis():
            return False
        annotations, result = await self._read_streams()
        if not self.started and not self._pending_traces and result is None:
            return False  # the trial has begun but not yet decided anything: nothing to show
        changed = bool(self._pending_traces or annotations or result)
        # The frame to show, read before any event is fed (so the sink never shows a stale one).
        self._note_frames()
        frame_event = await self._frame_event() if frames else None
        if not self.started:
            self._start()
        self._feed_traces()
        for a in annotations:
            self.sink.handle(AnnotationAdded(a))
        if frame_event is not None:
            self.sink.handle(frame_event)
        if result is not None:
            self._end(result)
        return changed or frame_event is not None

    def _note_frames(self) -> None:
        """The pending decisions' result frames (and the trial's first frame) as candidates to show."""
        for t in self._pending_traces:
            self.result_frames.append((t.decision_id, t.result_frame_sha256, t.result_frame_index))
            if self.first_frame is None:
                self.first_frame = t.frame_sha256

    async def _read_genesis(self) -> bool:
        """Read trial.json; whether it is there and well formed (written whole by an atomic rename, so a bad
        one stays a problem)."""
        try:
            async with aiofiles.open(self.folder / layout.TRIAL, "rb") as f:
                data = await f.read()
        except OSError:
            return False
        genesis = self._parse(TrialGenesis, data, layout.TRIAL)
        if genesis is None:
            return False
        self.genesis, self.genesis_bytes = genesis, data
        return True

    async def _read_streams(self) -> tuple[list[Annotation], TrialResult | None]:
        """Read every stream's new lines: traces, responses and memory operations pend until fed; the new
        annotations and a changed result are returned. Frames are read too."""
        # The trace first: every other stream's bytes for a decision are written before its line.
        traces = [t for t in (self._parse(TraceLine, line, layout.TRACE) for line in await self._trace.read()) if t]
        for line in await self._responses.read():
            r = self._parse(ResponseLine, line, layout.RESPONSES)
            if r is not None:
                self._pending_responses[r.decision_id] = r
        self._pending_memory += [op for op in (self._parse(MemoryOp, line, layout.MEMORY)
                                               for line in await self._memory.read()) if op]
        annotations = [a for a in (self._parse(Annotation, line, layout.TRIAL_ANNOTATIONS)
                                   for line in await self._annotations.read()) if a]
        result_bytes = await self._result.changed()
        result = self._parse(TrialResult, result_bytes, layout.RESULT) if result_bytes else None
        await self.frames.read()
        self._pending_traces += traces
        return annotations, result

    async def _frame_event(self) -> FrameCaptured | None:
        """The newest decision-boundary frame the store holds (it is written a little behind the trace)."""
        candidates = self.result_frames[-64:][::-1]
        if not candidates and self.first_frame:
            candidates = [(0, self.first_frame, 0)]
        for decision, sha, index in candidates:
            if sha == self._shown_frame:
                return None
            if sha in self.frames.index:
                pixels = await self.frames.pixels(sha)
                if pixels is None:
                    return None
                self._pixels, self._shown_frame = pixels, sha
                return FrameCaptured(decision, pixels, sha, index)
        return None

    def _start(self) -> None:
        g = self.genesis
        first = self._pending_traces[0] if self._pending_traces else None
        self.pre_satisfied = tuple(first.milestones_before) if first is not None else ()
        self.started = True
        self.sink.handle(TrialStarted(
            trial_key=self.key, label=g.condition, trial_number=g.trial, position=g.position,
            schedule_length=self.schedule_length, frame=self._pixels,
            frame_sha256=self.first_frame or "", frame_index=0,
            milestones=tuple((r.id, r.name, r.points) for r in self.ladder), pre_satisfied=self.pre_satisfied,
            budgets=self._budgets(), optional=tuple(r.id for r in self.ladder if not r.required)))

    def _feed_traces(self) -> None:
        traces, self._pending_traces = self._pending_traces, []
        if not traces:
            return
        last_reads: tuple[str, ...] = ()
        memory_changed = False
        for t in traces:
            d = t.decision_id
            if self._apply_memory(d):
                memory_changed = True
            last_reads = tuple(t.memory_reads)
            response = self._pending_responses.pop(d, None) or ResponseLine(decision_id=d, attempts=[])
            self.sink.handle(DecisionRecorded(t, response, (), self._pixels))
            self.decisions = d
            self.actions += t.accepted_actions
            self.calls += t.attempts
            if t.paid_calls:
                self._add_spend(t)
            self._award(t)
            self.series.append((self.actions, self.points_now()))
        if memory_changed or last_reads:
            facts = tuple(self._facts.values())
            self.sink.handle(MemoryChanged(op=None, facts=facts,
                                           contradictions=contradictions(facts), last_read=last_reads))
        self.sink.handle(BudgetUpdated(self._budgets()))

    def _apply_memory(self, decision: int) -> bool:
        """Apply the memory operations up to `decision` to the facts held; whether there were any."""
        ops = self._take_memory(decision)
        for op in ops:
            if op.op in FACT_WRITING_OPS and op.fact_id and op.fact is not None:
                self._facts[op.fact_id] = op.fact.model_dump()
            elif op.op == "evict" and op.fact_id:
                self._facts.pop(op.fact_id, None)
        return bool(ops)

    def _add_spend(self, t: TraceLine) -> None:
        """A paid decision's cost and tokens added (unknown once any part is unknown)."""
        self.cost = None if self.cost is None or t.provider_cost_usd is None else self.cost + t.provider_cost_usd
        if self.tokens is not None and t.input_tokens is not None and t.output_tokens is not None:
            self.tokens += t.input_tokens + t.output_tokens
        else:
            self.tokens = None

    def _award(self, t: TraceLine) -> None:
        """Each ladder rung first reached at this decision (not satisfied before the trial), sent to the sink."""
        d = t.decision_id
        for rung in t.milestones_after:
            if rung in self.awarded or rung in self.pre_satisfied or rung not in self.points:
                continue
            self.awarded[rung] = d
            self.sink.handle(MilestoneReached(MilestoneAward(
                id=rung, name=self.names[rung], points=self.points[rung], decision_id=d,
                frame_index=t.result_frame_index, frame_sha256=t.result_frame_sha256, probe={})))

    def _take_memory(self, decision: int) -> list[MemoryOp]:
        mine = [op for op in self._pending_memory if op.decision_id <= decision]
        if mine:
            self._pending_memory = [op for op in self._pending_memory if op.decision_id > decision]
        return mine

    def points_now(self) -> int:
        return sum(self.points.get(r, 0) for r in self.awarded)

    def _budgets(self) -> dict:
        lim = self.limits
        wall = None
        if self.result is not None and self.result.telemetry is not None \
                and self.result.telemetry.wall_time_seconds is not None:
            wall = round(self.result.telemetry.wall_time_seconds / 60, 4)
        return {"accepted_actions": {"used": self.actions, "limit": lim.get("accepted_actions")},
                "model_decisions": {"used": self.calls, "limit": lim.get("model_decisions")},
                "wall_time_minutes": {"used": wall, "limit": lim.get("wall_time_minutes")},
                "total_cost_usd": {"used": self.cost, "limit": lim.get("total_cost_usd")},
                "tokens": {"used": self.tokens, "limit": lim.get("tokens")}}

    def _end(self, result: TrialResult) -> None:
        first = self.result is None
        self.result = result
        tel = result.telemetry
        if tel is not None:
            self.actions, self.calls = tel.accepted_actions, tel.model_calls
            self.cost, self.tokens = tel.cost_usd, tel.tokens
        # The sealed awards (their exact frames) replace what the trace implied.
        awards = {a.id: a.model_dump() for a in result.milestones}
        for rung, award in awards.items():
            self.awarded.setdefault(rung, award["decision_id"])
        with self.sink._lock:  # noqa: SLF001 - the same sink, corrected in place
            lad = self.sink._ladder
            self.sink._ladder = LadderSnapshot(lad.milestones, tuple(result.pre_satisfied), awards,
                                               lad.version + 1, lad.optional)
        self.sink.handle(BudgetUpdated(self._budgets()))
        if first:
            self.sink.handle(TrialEnded(result))

    def row(self, status: str | None = None) -> Row:
        r = self.result
        total = sum(self.points.values())
        row = Row(self.key, self.key.split("-", 1)[0], status or ("ended" if r is not None else "running"),
                  decisions=self.decisions, actions=self.actions, cost_usd=self.cost, points=self.points_now(),
                  total_points=total, series=list(self.series), max_actions=self.limits.get("accepted_actions"))
        if r is not None:
            row.outcome, row.reason, row.invalid_cause = r.outcome, r.termination_reason, r.invalid_cause
            row.deepest = r.deepest_milestone
            row.points, row.total_points = r.progress_points, r.total_points or total
            row.decisions = r.last_decision
        else:
            snap = self.sink.ladder()
            from panes.trial.ladder import deepest

            row.deepest = deepest(snap)
        return row


# -- the experiment ------------------------------------------------------------------------------------

class AttachFolder:
    """An experiment folder followed as it grows: the schedule's trials, each with its follower."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.evidence = EvidenceFolder(self.root)  # where each part lives (read here as it grows)
        self.experiment_id = ""
        self.order: list[str] = []
        self.ladder: tuple[Rung, ...] = ()
        self.limits: dict = {}
        self.models: list[str] = []
        self.followers: dict[str, TrialFollower] = {}
        self.voided: set[str] = set()
        self.run_events: list[RunEvent] = []
        self.run_state = "waiting for the run"  # running, finished
        self.problems: list[str] = []
        self._run_log = Tail(self.evidence.path(layout.RUN_LOG))
        self._schedule = Watched(self.evidence.path(layout.SCHEDULE))
        self._manifest_read = False
        # From the control channel's status op, when there is one (the folder records no pause):
        # trial key -> paused or stepping.
        self.held: dict[str, str] = {}
        self._summary_file = Watched(self.evidence.path(layout.SUMMARY))
        self._summary: Summary | None = None
        self._finished_head: str | None = None  # SHA-256 of the run log's last run-finished line

    @property
    def paused_trials(self) -> set[str]:
        return set(self.held)

    @property
    def summary(self) -> Summary | None:
        """The run's summary once it is over: summary.json written after the run log's last
        run-finished line (a resumed run's earlier summary is not this run's)."""
        s = self._summary
        if s is None or self._finished_head is None or s.run_log_head != self._finished_head:
            return None
        return s

    def results(self) -> list[TrialResult]:
        """The sealed results of the trials followed (voided ones included), in the order they ended."""
        found = [f.result for f in self.followers.values() if f.result is not None]
        return sorted(found, key=lambda r: (r.ended_utc, r.position))

    async def _setup(self) -> None:
        data = await self._schedule.changed()
        if data:
            try:
                schedule = parse(ScheduleFile, data, layout.SCHEDULE)
                self.order, self.experiment_id = list(schedule.order), schedule.experiment_id
            except FormatProblem as exc:
                self.problems.append(str(exc))
        if not self._manifest_read:
            try:
                async with aiofiles.open(self.evidence.path(layout.MANIFEST), encoding="utf-8") as f:
                    self.limits, self.models = manifest_facts(await f.read())
                async with aiofiles.open(self.evidence.path(MILESTONES), encoding="utf-8") as f:
                    self.ladder = read_ladder_text(await f.read())
                self._manifest_read = True
            except OSError:
                pass

    async def _trial_path(self, key: str) -> Path | None:
        """trials/<key> once it has begun, else its attempt in the last void that holds one (None: neither)."""
        direct = self.evidence.trial(key).path
        if await aiofiles.os.path.isfile(direct / layout.TRIAL):
            return direct
        for void in reversed(self.evidence.voids()):  # by n: the last void first
            if await aiofiles.os.path.isdir(void.path / key):
                return void.path / key
        return None

    async def poll(self, focus: str | None = None) -> bool:
        """Read everything new; frames only for `focus` (the trial drilled into). True if anything changed."""
        await self._setup()
        changed = await self._poll_run_log()
        changed |= await self._poll_summary()
        for key in self.order:
            changed |= await self._poll_trial(key, focus)
        return changed

    async def _poll_run_log(self) -> bool:
        try:
            lines = await self._run_log.read()
        except Restart:
            self._run_log = Tail(self.evidence.path(layout.RUN_LOG))
            self.run_events, lines = [], await self._run_log.read()
        changed = False
        for line in lines:
            try:
                event = RunEvent.model_validate_json(line)
            except ValueError:
                continue
            self.run_events.append(event)
            changed = True
            if event.event == "run-finished":
                self.run_state = "finished" + (f" ({event.stop_reason})" if event.stop_reason else "")
                self._finished_head = hashlib.sha256(line).hexdigest()
            elif event.event == "run-started":  # a resumed run starts again after a finish
                self.run_state = "running"
                self._finished_head = None
        return changed

    async def _poll_summary(self) -> bool:
        data = await self._summary_file.changed()
        if not data:
            return False
        try:
            self._summary = parse(Summary, data, layout.SUMMARY)
            return True
        except FormatProblem as exc:
            self._summary = None
            self.problems.append(str(exc))
            return False

    async def _poll_trial(self, key: str, focus: str | None) -> bool:
        """The newest attempt of one schedule slot (trials/, or the last void that holds it)."""
        path = await self._trial_path(key)
        follower = self.followers.get(key)
        if path is None:
            return False
        voided = path.parent.name != layout.TRIALS
        if voided:
            self.voided.add(key)
        else:
            self.voided.discard(key)
        changed = False
        if follower is None or follower.folder != path or await self._replaced(follower):
            follower = self._new_follower(key, path)
            changed = True
        try:
            changed |= await follower.poll(frames=key == focus)
        except Restart:
            self.followers[key] = self._new_follower(key, path)
            changed = True
        return changed

    async def _replaced(self, follower: TrialFollower) -> bool:
        """A new attempt of the slot (after a void and --resume) writes a new trial.json."""
        if follower.genesis_bytes is None:
            return False
        try:
            async with aiofiles.open(follower.folder / layout.TRIAL, "rb") as f:
                return await f.read() != follower.genesis_bytes
        except OSError:
            return True

    def _new_follower(self, key: str, path: Path) -> TrialFollower:
        position = self.order.index(key) if key in self.order else None
        follower = TrialFollower(key, path, experiment_id=self.experiment_id, ladder=self.ladder,
                                 limits=self.limits, models=self.models, schedule_length=len(self.order),
                                 position=position)
        self.followers[key] = follower
        return follower

    def rows(self) -> list[Row]:
        total = sum(r.points for r in self.ladder)
        out = []
        for key in self.order:
            follower = self.followers.get(key)
            if follower is None or not follower.started:
                status = "running" if follower is not None else "waiting"
                out.append(Row(key, key.split("-", 1)[0], status, total_points=total,
                               max_actions=self.limits.get("accepted_actions"),
                               held=self.held.get(key) if status == "running" else None))
            else:
                row = follower.row("voided" if key in self.voided else None)
                row.held = self.held.get(key) if row.status == "running" else None
                out.append(row)
        return out

    def counts(self) -> dict[str, int]:
        rows = self.rows()
        return {s: sum(1 for r in rows if r.status == s) for s in ("waiting", "running", "ended", "voided")}


def is_evidence_folder(root: Path) -> bool:
    return os.path.isdir(Path(root) / layout.TRIALS) or os.path.isfile(Path(root) / layout.SCHEDULE)


def dumps(rows: list[Row]) -> str:
    """The overview as JSON (for scripts and tests)."""
    return json.dumps([r.__dict__ for r in rows], default=str)
