"""The trial loop: one agent's attempt from the canonical state to a mechanical end.

observe -> policy decides (contract-checked, retried as configured) -> memory operations ->
press buttons with fixed timing -> probe hidden state -> ladder, routes, budgets -> events.
The loop owns no files and no screen: sinks write evidence and draw displays.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from engine.budgets import BudgetLimits, Budgets
from engine.contract import AgentResponse, ContractError, parse_response
from engine.control import OperatorControl
from engine.emulator import Emulator, EmulatorError, Timing, frame_sha256
from engine.events import (
    AnnotationAdded,
    Attempt,
    BudgetUpdated,
    DecisionRecorded,
    Event,
    FrameCaptured,
    InputRecord,
    MemoryChanged,
    MilestoneReached,
    Sink,
    StateChanged,
    TrialEnded,
    TrialStarted,
)
from engine.gamedef import GameDefinition, Sample
from engine.ladder import Ladder
from engine.memory import STORE_CHANGING_OPS, MemoryPolicy, MemoryStore
from engine.policy import Observation, Policy, PolicyExhausted, ProviderFailure
from engine.probe import Probe
from engine.routes import RouteTracker

GB_FPS = 4194304 / 70224  # frames per second of DMG/CGB hardware, for pacing

OUTCOME_BY_REASON = {
    "final-milestone": "success",
    "provider-failure": "invalid-provider",
    "emulator-error": "harness-error",
    "harness-error": "harness-error",
}


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-11-30T10:40:04.123Z."""
    now = datetime.now(UTC)
    return f"{now:%Y-%m-%dT%H:%M:%S}.{now.microsecond // 1000:03d}Z"


@dataclass(frozen=True)
class TrialConfig:
    experiment_id: str
    label: str  # the blinded condition label
    trial_number: int
    trials_total: int
    timing: Timing
    max_actions: int
    allowed_actions: tuple[str, ...]
    invalid_output_retries: int
    recent_window: int
    memory_policy: MemoryPolicy
    limits: BudgetLimits
    loop_repeats: int | None = 3
    expected_first_frame_sha256: str | None = None
    fps: float = GB_FPS

    @property
    def trial_key(self) -> str:
        return f"{self.label}-{self.trial_number:02d}"


class Trial:
    def __init__(self, config: TrialConfig, emulator: Emulator, start_state: bytes,
                 game: GameDefinition, policy: Policy, sinks: list[Sink],
                 control: OperatorControl | None = None, provenance: dict | None = None):
        self.config = config
        self.emulator = emulator
        self.start_state = start_state
        self.game = game
        self.policy = policy
        self.sinks = sinks
        self.control = control or OperatorControl()
        self.provenance = provenance or {}
        self.probe = Probe(game)
        self.budgets = Budgets(config.limits)
        self.routes = RouteTracker(config.loop_repeats)
        self.memory = MemoryStore(config.memory_policy, log=self._memory_log,
                                  recent_window=config.recent_window)
        self._emit_lock = threading.Lock()
        self._decision_id = 0
        self._frame_sha = ""
        self._frame_index = 0
        self._t = {"invalid_outputs": 0, "rejected_actions": 0, "ignored_inputs": 0,
                   "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "frames": 0}
        self._token_known = {"input_tokens": True, "output_tokens": True, "cached_tokens": True}
        self._cost_sources: set[str] = set()
        self._decisions = 0

    # -- event plumbing --------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        with self._emit_lock:
            for sink in self.sinks:
                sink.handle(event)

    def _memory_log(self, op: dict) -> None:
        m = self.memory
        if op["op"] in STORE_CHANGING_OPS:  # displays get the store only when it changed
            facts, conflicts = tuple(f.record() for f in m.facts.values()), tuple(m.contradictions())
        else:
            facts, conflicts = None, None
        self._emit(MemoryChanged({"timestamp_utc": utc_now(), **op}, facts, conflicts, m.last_read))

    def _tag(self, annotation: dict) -> dict:
        record = {"timestamp_utc": utc_now(), "trial": self.config.trial_key,
                  "decision_id": self._decision_id, "frame_sha256": self._frame_sha,
                  "frame_index": self._frame_index, "source": "operator", **annotation}
        self._emit(AnnotationAdded(record))
        return record

    # -- the loop --------------------------------------------------------------------------
    async def run(self) -> dict:
        started_utc = utc_now()
        t0 = time.monotonic()
        reason, error = "harness-error", None
        self.control.attach(self._tag)
        self.control.on_state(lambda s: self._emit(StateChanged(s)))
        try:
            reason = await self._run_decisions(t0)
        except EmulatorError as exc:
            reason, error = "emulator-error", str(exc)
        except ProviderFailure as exc:
            reason, error = "provider-failure", str(exc)
        except Exception as exc:  # a bug of ours: record it, keep the evidence whole
            reason, error = "harness-error", f"{type(exc).__name__}: {exc}"
        finally:
            self.control.attach(None)
            self.budgets.active_seconds = max(0.0, time.monotonic() - t0 - self.control.held_seconds)
        result = self._result(reason, error, started_utc)
        self._emit(StateChanged("ended", reason))
        self._emit(TrialEnded(result))
        return result

    async def _run_decisions(self, t0: float) -> str:
        cfg = self.config
        self.emulator.restore(self.start_state)
        frame = self.emulator.frame()
        self._frame_sha = frame_sha256(frame)
        self._frame_index = self.emulator.frame_index
        if cfg.expected_first_frame_sha256 and self._frame_sha != cfg.expected_first_frame_sha256:
            raise EmulatorError(
                f"canonical state restored to frame {self._frame_sha[:16]}…, expected "
                f"{cfg.expected_first_frame_sha256[:16]}…: emulator or state differs")
        sample = self.probe(self.emulator.read_range)
        ladder = Ladder(self.game, sample)
        self.ladder = ladder
        self._emit(TrialStarted(cfg.trial_key, cfg.label, cfg.trial_number, cfg.trials_total, frame,
                                self._frame_sha, self._frame_index,
                                tuple((m.id, m.name, m.points) for m in self.game.milestones),
                                tuple(sorted(ladder.pre_satisfied)), self.budgets.snapshot()))
        self._emit(StateChanged("paused" if self.control.paused else "running"))

        while True:
            self.budgets.active_seconds = time.monotonic() - t0 - self.control.held_seconds
            exhausted = self.budgets.exhausted()
            if exhausted:
                return exhausted
            if (reason := self.control.checkpoint()) is not None:
                return f"operator-terminate: {reason}"
            decision_started = time.monotonic()
            self._decision_id += 1
            try:
                outcome, frame, sample = await self._decide_and_act(ladder, frame, sample)
            except PolicyExhausted:
                self._decision_id -= 1
                return self._exhausted_reason()
            if outcome:
                return outcome
            frames = self._last_decision_frames
            if (reason := self.control.pace(frames / cfg.fps, decision_started)) is not None:
                return f"operator-terminate: {reason}"

    async def _decide_and_act(self, ladder: Ladder, frame, sample: Sample):
        cfg = self.config
        did = self._decision_id
        working = self.memory.working()
        retrieved = self.memory.retrieve()
        attempts: list[Attempt] = []
        response: AgentResponse | None = None
        feedback = None
        replies = []
        exhausted = False
        for _ in range(cfg.invalid_output_retries + 1):
            obs = Observation(did, frame, self._frame_sha, working.recent_actions,
                              working.recent_observations, working.current_objective, retrieved,
                              cfg.max_actions, cfg.allowed_actions, feedback)
            try:
                reply = await self.policy.decide(obs)
            except PolicyExhausted:
                if not attempts:
                    raise  # nothing happened in this decision: it does not exist
                exhausted = True  # a retry had nothing to give: record what was tried, then end
                break
            if not replies:
                self.memory.log_retrieval(did, retrieved)  # the decision happens: its read is evidence
            replies.append(reply)
            self.budgets.add_call(reply.usage)
            self._account_usage(reply.usage)
            try:
                response = parse_response(reply.text, cfg.max_actions, frozenset(cfg.allowed_actions))
                error = None
            except ContractError as exc:
                error = str(exc)
                self._t["invalid_outputs"] += 1
                self._t["rejected_actions"] += _count_listed_actions(reply.text)
            attempts.append(Attempt(reply.text, error is None, error, reply.model_id, reply.response_id,
                                    reply.latency_ms, asdict(reply.usage) if reply.usage else None))
            if response is not None:
                break
            feedback = f"Your previous response was rejected: {error}"
        self._decisions += 1

        milestones_before = ladder.reached
        memory_reads: list[str] = []
        memory_writes: list[str | None] = []
        if response is not None:
            self.memory.note_observation(did, response.observed.model_dump())
            memory_reads = list(response.memory_read)
            if memory_reads:
                self.memory.read(memory_reads, did)
            for item in response.memory_write:
                memory_writes.append(self.memory.write(item, did, self._frame_sha))

        observed_sha = self._frame_sha
        inputs: list[InputRecord] = []
        end_reason: str | None = None
        planned = list(response.actions) if response else []
        frames_before = self.emulator.frame_index
        for index, action in enumerate(planned):
            if (left := self.budgets.actions_left()) is not None and left <= 0:
                end_reason = "budget:accepted_actions"
                self._t["rejected_actions"] += len(planned) - index
                break
            before_pos = self._position(sample)
            before_sha, before_sample = self._frame_sha, sample
            step = self.emulator.step(action, cfg.timing, self.probe)
            self.budgets.accepted_actions += 1
            self.memory.note_action(action)
            frame, sample = step.frame, step.ram_last
            self._frame_sha, self._frame_index = step.frame_sha256, step.frame_index
            press = step.press_frame if step.press_frame >= 0 else None
            release = press + cfg.timing.press_frames if press is not None else None
            inputs.append(InputRecord(did, index, action, press, release, step.frame_index,
                                      step.frame_sha256))
            self._emit(FrameCaptured(did, frame, step.frame_sha256, step.frame_index))
            if step.frame_sha256 == before_sha and sample == before_sample:
                self._t["ignored_inputs"] += 1
            for award in ladder.update(step.ram_before_last, sample, decision_id=did,
                                       frame_index=step.frame_index, frame_sha256=step.frame_sha256):
                self.routes.progress()
                self._emit(MilestoneReached(award))
            if any(before_sample.get(f) != sample.get(f) for f in self.game.progress_fields):
                self.routes.progress()
            looped = self.routes.record(before_pos, action, self._position(sample)) \
                if before_pos is not None else False
            if ladder.final_reached:
                end_reason = "final-milestone"
            elif looped:
                end_reason = "unrecoverable-loop"
            if end_reason:
                self._t["rejected_actions"] += len(planned) - index - 1
                break
        self._last_decision_frames = self.emulator.frame_index - frames_before
        self._t["frames"] += self._last_decision_frames

        if exhausted:
            end_reason = self._exhausted_reason()
        elif end_reason is None and (budget := self.budgets.exhausted()) is not None \
                and budget != "budget:wall_time":
            end_reason = budget
        trace = self._trace_line(did, observed_sha, replies, attempts, response, inputs,
                                 memory_reads, memory_writes, milestones_before, ladder.reached, end_reason)
        self._emit(DecisionRecorded(trace, tuple(attempts), tuple(inputs), frame,
                                    response.observed.model_dump() if response else None))
        self._emit(BudgetUpdated(self.budgets.snapshot()))
        return end_reason, frame, sample

    def _exhausted_reason(self) -> str:
        """Why a policy had nothing more: the operator ended the trial (waking a waiting human
        policy), or its script or recording ran out."""
        reason = self.control.terminate_reason
        return f"operator-terminate: {reason}" if reason is not None else "policy-exhausted"

    # -- records ---------------------------------------------------------------------------
    def _position(self, sample: Sample) -> tuple[int, int, int] | None:
        pos = self.game.position
        if pos is None:
            return None
        return (int(sample[pos.map]), int(sample[pos.x]), int(sample[pos.y]))

    def _account_usage(self, usage) -> None:
        if usage is None:
            return
        for key in self._token_known:
            value = getattr(usage, key)
            if value is None:
                self._token_known[key] = False
            else:
                self._t[key] += value
        if usage.cost_source:
            self._cost_sources.add(usage.cost_source)

    def _trace_line(self, did, observed_sha, replies, attempts, response, inputs, reads, writes,
                    before, after, end_reason) -> dict:
        cfg = self.config
        last = replies[-1]

        def total(key: str):
            values = [getattr(r.usage, key) if r.usage else None for r in replies]
            return None if any(v is None for v in values) else sum(values)

        latencies = [r.latency_ms for r in replies]
        return {
            "experiment_id": cfg.experiment_id,
            "condition_id": cfg.label,
            "trial_id": cfg.trial_number,
            "decision_id": did,
            "timestamp_utc": utc_now(),
            "frame_sha256": observed_sha,
            "prompt_sha256": last.prompt_sha256,
            "model_id": last.model_id,
            "response_id": last.response_id,
            "input_tokens": total("input_tokens"),
            "output_tokens": total("output_tokens"),
            "cached_tokens": total("cached_tokens"),
            "provider_cost_usd": total("cost_usd"),
            "cost_source": sorted({r.usage.cost_source for r in replies if r.usage and r.usage.cost_source})
            or None,
            "latency_ms": None if any(v is None for v in latencies) else round(sum(latencies), 3),
            "raw_response_path": f"responses/{did:06d}.json",
            "attempts": len(attempts),
            "parsed_actions": list(response.actions) if response else [],
            "accepted_actions": len(inputs),
            "invalid_output": any(not a.valid for a in attempts),
            "observed": response.observed.model_dump() if response else None,
            "memory_reads": reads,
            "memory_writes": writes,
            "milestones_before": before,
            "milestones_after": after,
            "result_frame_sha256": self._frame_sha,
            "result_frame_index": self._frame_index,
            "termination_reason": end_reason,
        }

    def _result(self, reason: str, error: str | None, started_utc: str) -> dict:
        cfg = self.config
        ladder = getattr(self, "ladder", None)
        b = self.budgets
        outcome = OUTCOME_BY_REASON.get(reason, "game-failure")
        reached = ladder.reached if ladder else []
        points = ladder.points if ladder else 0
        tokens = {k: (self._t[k] if self._token_known[k] else None) for k in self._token_known}
        milestones = len(reached)
        cost = b.cost_usd
        return {
            "experiment_id": cfg.experiment_id,
            "condition": cfg.label,
            "trial": cfg.trial_number,
            "trial_key": cfg.trial_key,
            "outcome": outcome,
            "termination_reason": reason,
            "error": error,
            "started_utc": started_utc,
            "ended_utc": utc_now(),
            "milestones": [ladder.awards[m].as_record() for m in reached] if ladder else [],
            "milestones_reached": reached,
            "pre_satisfied": sorted(ladder.pre_satisfied) if ladder else [],
            "deepest_milestone": ladder.deepest if ladder else None,
            "progress_points": points,
            "total_points": self.game.total_points,
            "telemetry": {
                "decisions": self._decisions,
                "model_calls": b.model_decisions,
                "accepted_actions": b.accepted_actions,
                "rejected_actions": self._t["rejected_actions"],
                "invalid_outputs": self._t["invalid_outputs"],
                "ignored_inputs": self._t["ignored_inputs"],
                "repeated_position_loops": self.routes.loops_detected,
                "repeated_navigation_actions": self.routes.repeated_actions,
                **tokens,
                "tokens": b.tokens,
                "cost_usd": cost,
                "cost_source": sorted(self._cost_sources) or None,
                "wall_time_seconds": round(b.active_seconds, 3),
                "held_seconds": round(self.control.held_seconds, 3),
                "frames": self._t["frames"],
            },
            "derived": {
                "cost_per_verified_milestone": _ratio(cost, milestones),
                "actions_per_verified_milestone": _ratio(b.accepted_actions, milestones),
                "progress_efficiency": _ratio(points, cost),
                "repeat_overhead": _ratio(self.routes.repeated_actions, b.accepted_actions),
            },
            "provenance": {"emulator": {"name": self.emulator.name, "version": self.emulator.version},
                           **self.provenance},
        }


def _ratio(numerator, denominator):
    """A ratio, or None where either side is unknown or the denominator is zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, 6)


def _count_listed_actions(raw: str) -> int:
    import json

    try:
        actions = json.loads(raw).get("actions")
    except (ValueError, AttributeError):
        return 0
    return len(actions) if isinstance(actions, list) else 0
