"""The trial loop: one agent's attempt from the canonical state to a mechanical end.

Each decision runs four named stages:
  ask the policy     observe, call, validate against the contract, retry as configured;
  apply memory       the response's observation, memory reads and writes;
  press              each accepted action with fixed timing, then probe, ladder, routes;
  close the decision the trace record, committed by the recorder (the first sink).
Between decisions the loop obeys the run control (pause, step, end) and the budgets.

The loop owns no files and no screen. It emits typed records (engine.loop.records) through its
sinks; the first is the trial's recorder, whose failure (SinkFailure) ends the trial as an
invalid run. The result counts only what the recorder committed.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from engine.battle.battle import BattleRefused, BattleSettings, Plan, make_judge
from engine.battle.episodes import EpisodeRules, Step, episode_records
from engine.emulators.emulator import Emulator, EmulatorError, StepResult, Timing, frame_sha256
from engine.games.controls import start_differences
from engine.games.gamedef import GameDefinition, Sample
from engine.games.gameplay import GameplayView
from engine.games.goals import GOAL_MET, GoalCheck
from engine.games.ladder import Ladder, deepest, skipped_required
from engine.games.probe import Probe
from engine.games.tracks import Track, structured_view
from engine.loop.budgets import BudgetLimits, Budgets
from engine.loop.contract import AgentResponse, ContractError, Observed, ShortcutResponse, parse_response
from engine.loop.control import RunControl, TagForAnotherTrial
from engine.loop.display import wanted
from engine.loop.events import (
    AnnotationAdded,
    BudgetUpdated,
    DecisionRecorded,
    EpisodeStarted,
    Event,
    FrameCaptured,
    MemoryChanged,
    MilestoneReached,
    Sink,
    SinkFailure,
    StateChanged,
    TrialStarted,
)
from engine.loop.memory import STORE_CHANGING_OPS, MemoryPolicy, MemoryRules, MemoryStore
from engine.loop.outcomes import EndRequest, classify
from engine.loop.records import (
    Annotation,
    Attempt,
    InputLine,
    MemoryOp,
    ProviderFailureRecord,
    ReplyOversize,
    ResponseLine,
    TraceLine,
    TrialResult,
    Usage,
    build,
    trusted,
)
from engine.loop.routes import RouteTracker
from engine.loop.shortcuts import ShortcutCall, ShortcutRefused, Shortcuts
from engine.loop.tally import TraceTally
from engine.policies.policy import Observation, Policy, PolicyExhausted, PolicyReply, ProviderFailure

GB_FPS = 4194304 / 70224  # frames per second of DMG/CGB hardware, for pacing
FACT_ID = re.compile(r"fact-\d{4,}")


_second: list = [None, ""]  # the last whole second formatted, reused within it (one call per decision)


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds, e.g. 2026-11-30T10:40:04.123Z."""
    now = time.time()
    whole = int(now)
    if _second[0] != whole:
        _second[0], _second[1] = whole, datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_second[1]}.{int((now - whole) * 1000):03d}Z"


@dataclass(frozen=True)
class TrialConfig:
    experiment_id: str
    label: str  # the blinded condition label
    trial_number: int  # within the condition
    position: int  # in the schedule, from 0
    schedule_length: int
    timing: Timing
    max_actions: int
    allowed_actions: tuple[str, ...]
    invalid_output_retries: int
    recent_window: int
    memory_policy: MemoryPolicy
    limits: BudgetLimits
    loop_repeats: int | None = 3
    expected_first_frame_sha256: str | None = None
    # the hidden state the preflight probed right after the restore (the definition's stable fields):
    # a restore that reads otherwise ends the trial as a harness error
    expected_start: dict | None = None
    attempt: int = 1
    fps: float = GB_FPS
    memory_rules: MemoryRules = MemoryRules()  # the manifest's agent.memory
    information_track: Track = "visual"  # the manifest's agent.information_track (engine.games.tracks)
    goal: str | None = None  # the manifest's game.goal (engine.games.goals): met ends the trial, not the final rung
    episodes: EpisodeRules | None = None  # the manifest's episodes (engine.battle.episodes): None, one episode
    battle: BattleSettings | None = None  # the battle ruleset's rules (engine.battle.battle): None, no battle tools
    shortcuts: tuple[str, ...] = ()  # the manifest's agent.shortcuts (engine.loop.shortcuts): the ones permitted

    @property
    def trial_key(self) -> str:
        return trial_key(self.label, self.trial_number)


def trial_key(label: str, number: int) -> str:
    return f"{label}-{number:02d}"


class StartStateMismatch(Exception):
    """The start state restored to hidden state other than the preflight probed."""


class TagRefused(ValueError):
    """An operator tag that cannot be recorded as given; the message says why."""


@dataclass
class Decision:
    """One decision in the making: what each stage found and did."""

    id: int
    seen_frame_sha256: str
    attempts: list[Attempt] = field(default_factory=list)
    replies: list[PolicyReply] = field(default_factory=list)
    response: AgentResponse | None = None
    aborted: bool = False
    exhausted: bool = False  # a retry found the policy with nothing left
    failure: ProviderFailure | None = None
    observed: dict | None = None  # the valid response's observation, as recorded
    memory_reads: list[str] = field(default_factory=list)
    memory_writes: list[str | None] = field(default_factory=list)
    milestones_before: list[str] = field(default_factory=list)
    inputs: list[InputLine] = field(default_factory=list)
    end: EndRequest | None = None
    episode_end: str | None = None  # engine.battle.episodes: failure, episode-actions or reset
    battle: Plan | None = None  # an accepted battle tool call (engine.battle.battle): its RAM writes, then presses
    shortcut: ShortcutCall | None = None  # an accepted shortcut (engine.loop.shortcuts): pressed step by step
    # What only the loop counts, added to the trial's totals once the decision is committed.
    frames: int = 0  # emulated
    rejected_actions: int = 0
    ignored_inputs: int = 0


@dataclass
class LoopCounts:
    """The loop's own counters over committed decisions (the trace cannot give these)."""

    rejected_actions: int = 0
    ignored_inputs: int = 0
    frames: int = 0
    repeated_navigation_actions: int = 0
    repeated_position_loops: int = 0


# what a reset call reports it saw: nothing (engine.policies.base's UNKNOWN_OBSERVATION)
_UNKNOWN_SEEN = Observed(screen="unknown", location_guess="unknown", objective_guess="", certainty=0.0)


class Trial:
    """One trial. The emulator and the policy are made inside `run` (from the factories), so a
    failure to start either is recorded like any other failure, and both are always closed."""

    def __init__(self, config: TrialConfig, emulator: Callable[[], Emulator], policy: Callable[[], Policy],
                 start_state: bytes, game: GameDefinition, sinks: list[Sink],
                 control: RunControl | None = None, provenance: dict | None = None):
        self.config = config
        self._make_emulator = emulator
        self._make_policy = policy
        self.emulator: Emulator | None = None
        self.policy: Policy | None = None
        self.start_state = start_state
        self.game = game
        self.sinks = sinks
        self.control = control or RunControl()
        self.provenance = provenance or {}
        self.probe = Probe(game)
        self._structured = structured_view(game, config.information_track)
        # The gameplay track's word for what each of the last decision's presses did (engine.games.gameplay).
        self._outcomes = isinstance(self._structured, GameplayView) and game.tracks.gameplay.outcomes is not None
        self._action_results: list[dict] = []
        self.budgets = Budgets(config.limits)
        self.routes = RouteTracker.for_game(self.game, config.loop_repeats)
        self._route_resets = self.game.route_resets
        self.memory = MemoryStore(config.memory_policy, log=self._memory_log,
                                  recent_window=config.recent_window, rules=config.memory_rules)
        self.tally = TraceTally()  # committed decisions only
        self.ladder: Ladder | None = None
        self.goal: GoalCheck | None = None  # the run's goal, from the start sample on
        # One lock for every sink call and for what a commit changes, so a tag (from the UI
        # thread) always sees whole decisions; re-entrant because a tag emits under it.
        self._emit_lock = threading.RLock()
        self._frame = np.zeros((1, 1, 3), np.uint8)
        self._frame_sha = ""
        self._frame_index = 0
        self._sample: Sample = {}
        self.counts = LoopCounts()  # committed decisions only, like self.tally
        self._award_actions: dict[str, int] = {}  # rung -> accepted actions up to the one that reached it
        self._allowed = frozenset(config.allowed_actions)
        # What only a live display shows (budget meters, every frame, the whole memory store) costs
        # work per action: it is built only when a display asks for it (engine.loop.display).
        self._budget_watchers = wanted(sinks, "wants_budgets")
        self._frame_watchers = wanted(sinks, "wants_frames")
        self._store_watchers = wanted(sinks, "wants_memory_store")
        self._task: asyncio.Task | None = None
        self.emulator_busy_since: float | None = None  # set while inside the emulator
        self._calling = False  # inside policy.decide
        self._cancelling = False  # we cancelled the task to stop a call in flight
        self._started_utc: str | None = None
        self._t0: float | None = None  # monotonic start: the origin of the wall-time and active clocks
        self._policy_seconds = 0.0  # time inside policy calls, less the holds within them (limiter waits)
        self._closed = False
        self.provider_failure: ProviderFailureRecord | None = None  # provider-failure.json, when it failed
        # The first decision's prompt core (system prompt, schema, the canonical first screen): what
        # every model condition must have been sent alike; None for a policy that sends no prompt.
        self._first_prompt_core: str | None = None
        self._init_task_rules(config, game)

    def _init_task_rules(self, config: TrialConfig, game: GameDefinition) -> None:
        """What the task adds to the loop: episodes, the battle judge and the permitted shortcuts."""
        # Episodes (engine.battle.episodes): the one in play, the accepted actions when it began, a reset asked
        # for, each committed decision's episode facts, and the note the next observation carries.
        self._episodes = config.episodes
        self._failure = config.episodes.failure_test() if config.episodes else None
        self.episode = 1
        self._episode_start_actions = 0
        self._reset_requested = False
        self._steps: list[Step] = []
        self._episode_note: str | None = None
        # The battle ruleset's judge (engine.battle.battle): one episode's team, lead and active slot.
        self._battle = make_judge(game.battle, config.battle) if config.battle and game.battle else None
        # Mechanical shortcuts (engine.loop.shortcuts): the permitted ones, as the presses they stand for.
        self._shortcuts = Shortcuts(game, config.shortcuts, self._allowed) if config.shortcuts else None
        self._permitted = config.shortcuts if config.shortcuts else None

    def request_reset(self) -> None:
        """End the current episode with the decision in progress (or the next one) and restore the start
        state as a new episode. Ignored outside an episodic trial."""
        if self._episodes is not None:
            self._reset_requested = True

    # -- event plumbing -------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        with self._emit_lock:
            for sink in self.sinks:
                sink.handle(event)

    def _memory_log(self, op: MemoryOp) -> None:
        m = self.memory
        if self._store_watchers and op.op in STORE_CHANGING_OPS:  # the store, only when it changed
            facts, conflicts = tuple(f.model_dump() for f in m.facts.values()), tuple(m.contradictions())
        else:
            facts, conflicts = None, None
        self._emit(MemoryChanged(op, facts, conflicts, m.last_read))

    def _tag(self, annotation: dict, commit: bool = True) -> Annotation:
        """An operator tag for this trial (called from the UI thread), checked before it is written;
        with commit=False only checked."""
        cfg = self.config
        if annotation.get("trial_key", cfg.trial_key) != cfg.trial_key:
            raise TagForAnotherTrial(annotation["trial_key"])
        with self._emit_lock:
            return self._tag_committed(annotation, commit)

    def _tag_committed(self, annotation: dict, commit: bool) -> Annotation:
        cfg = self.config
        decided = self.tally.decisions
        decision = annotation.get("decision_id", decided)
        if not isinstance(decision, int) or not 0 <= decision <= decided:
            raise TagRefused(f"decision {decision} is not a recorded decision of {cfg.trial_key}")
        refers = annotation.get("refers_to")
        if refers is not None:
            check_reference(refers, decision, self.memory.ever_held)
        record = build_annotation(annotation, cfg.trial_key, decision)
        if commit:
            self._emit(AnnotationAdded(record))
        return record

    def _cancel_inflight(self) -> None:
        """Runs on the event loop, so only while the trial's task is suspended: if it is suspended
        inside a policy call, cancel that call (no extra task per decision is needed for this)."""
        task = self._task
        if self._calling and task is not None and not task.done():
            self._cancelling = True
            task.cancel()

    # -- the loop -------------------------------------------------------------------------------
    async def run(self) -> TrialResult:
        """Play the trial to its end; always returns a truthful result (never raises for our faults)."""
        started_utc = utc_now()
        t0 = self._t0 = time.monotonic()
        end, error = EndRequest("harness-error"), None
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self.control.begin_trial(self._tag, lambda: loop.call_soon_threadsafe(self._cancel_inflight))
        self._started_utc = started_utc
        try:
            self.emulator_busy_since = time.monotonic()
            self.emulator = self._make_emulator()
            self.emulator_busy_since = None
            self.policy = self._make_policy()
            end = await self._play(t0)
        except EmulatorError as exc:
            end, error = EndRequest("emulator-error"), str(exc)
        except StartStateMismatch as exc:
            end, error = EndRequest("harness-error", str(exc), "start-state-mismatch"), str(exc)
        except ProviderFailure as exc:
            end, error = EndRequest("provider-failure"), str(exc)
            self._provider_failed(exc.kind if self.tally.decisions or self.policy else "startup", str(exc),
                                  exc.status)
        except SinkFailure as exc:
            end, error = EndRequest("evidence-failure", cause=exc.cause), str(exc)
        except Exception as exc:  # a bug of ours: record it, keep the evidence whole
            end, error = EndRequest("harness-error"), f"{type(exc).__name__}: {exc}"
        finally:
            self.emulator_busy_since = None  # an emulator that raised has returned
            self.control.end_of_trial()
            self.budgets.active_seconds = max(0.0, time.monotonic() - t0 - self.control.held_seconds)
            aclose = getattr(self.policy, "aclose", None)  # a model policy's client closes asynchronously
            if aclose is not None:
                try:
                    await aclose()
                except Exception:
                    pass
            self._close()
        if end.reason == "agent-disconnected":  # the agent's side failed, as a provider can: its record says how
            self._provider_failed("agent-disconnected", end.detail or "the agent disconnected")
        if end.reason in ("budget:cost_unknown", "budget:tokens_unknown"):
            self._provider_failed("usage-unknown", f"the provider did not report what decision "
                                                   f"{self.tally.decisions} cost, under a {end.reason[7:-8]} budget")
        return self._result(end, error, started_utc)

    def _provider_failed(self, kind: str, message: str, status: int | None = None) -> None:
        last = self.tally.last
        policy = self.policy
        self.provider_failure = build(
            ProviderFailureRecord, kind=kind, message=message, status=status,
            provider=getattr(policy, "provider", None), api=getattr(policy, "api", None),
            model=getattr(policy, "model_id", None), decision_id=last.decision_id if last else None,
            attempts=last.attempts if last else 0)

    def _close(self) -> None:
        # Closing a broken policy or emulator must not mask what ended the trial.
        if self._closed:
            return
        self._closed = True
        for part in (self.policy, self.emulator):
            if part is not None:
                try:
                    part.close()
                except Exception:
                    pass

    def hung(self, detail: str) -> TrialResult:
        """The result when the emulator stopped returning (a watchdog ends the trial from another
        thread; this one is stuck inside the emulator, which is never touched again)."""
        if self._t0 is not None:  # the clocks up to now: the loop never reached its own final reading
            self.budgets.active_seconds = max(0.0, time.monotonic() - self._t0 - self.control.held_seconds)
        return self._result(EndRequest("emulator-error", detail, "emulator-fault"), detail,
                            self._started_utc or utc_now())

    def interrupted(self, detail: str, cause: str = "interrupted") -> TrialResult:
        """The result when `run` never returned (interrupted from outside, or never started)."""
        self._close()
        return self._result(EndRequest("harness-error", detail, cause), detail, self._started_utc or utc_now())

    async def _play(self, t0: float) -> EndRequest:
        cfg = self.config
        self._restore_start()
        self.ladder = Ladder(self.game, self._sample)
        self.goal = GoalCheck(cfg.goal, self.game, self._sample) if cfg.goal else None
        self._emit(TrialStarted(cfg.trial_key, cfg.label, cfg.trial_number, cfg.position, cfg.schedule_length,
                                self._frame, self._frame_sha, self._frame_index,
                                tuple((m.id, m.name, m.points) for m in self.game.milestones),
                                tuple(sorted(self.ladder.pre_satisfied)), self.budgets.snapshot(),
                                tuple(m.id for m in self.game.milestones if not m.required)))
        self._emit(StateChanged(self.control.state))  # a pause made before this trial still holds
        while True:
            self.budgets.active_seconds = time.monotonic() - t0 - self.control.held_seconds
            # Between decisions only time can run out; every other budget is spent, and checked,
            # by the decision that spends it.
            if self.budgets.wall_time_exhausted():
                return EndRequest("budget:wall_time")
            if (request := await self.control.checkpoint_async()) is not None:
                return request
            decision_started = time.monotonic()
            d = Decision(self.tally.decisions + 1, self._frame_sha)
            if not await self._ask_policy(d):  # the decision never happened
                return self.control.request or EndRequest("policy-exhausted")
            self._apply_memory(d)
            self._press(d)
            self._close_decision(d)
            if d.failure is not None:
                raise d.failure  # recorded with its decision; the run() handler names it
            if d.end is not None:
                return d.end
            if d.episode_end is not None:
                self._new_episode(d.episode_end)
            if (request := await self.control.pace_async(d.frames / cfg.fps, decision_started)) is not None:
                return request

    def _restore_start(self) -> None:
        """Restore the start state and check it restored to what the preflight saw (frame and hidden state)."""
        cfg = self.config
        self.emulator_busy_since = time.monotonic()
        self.emulator.restore(self.start_state)
        self.emulator_busy_since = None
        self._frame = self.emulator.frame()
        self._frame_sha = frame_sha256(self._frame)
        self._frame_index = self.emulator.frame_index
        if cfg.expected_first_frame_sha256 and self._frame_sha != cfg.expected_first_frame_sha256:
            raise EmulatorError(
                f"canonical state restored to frame {self._frame_sha[:16]}…, expected "
                f"{cfg.expected_first_frame_sha256[:16]}…: emulator or state differs")
        self._sample = self.probe(self.emulator.read_range)
        if cfg.expected_start and (differ := start_differences(cfg.expected_start, self._sample)):
            raise StartStateMismatch(f"canonical state restored to other hidden state than the preflight "
                                     f"probed: {'; '.join(differ)}")

    def _new_episode(self, why: str) -> None:
        """The next episode: the start state again (checked as at the trial's start), memory kept."""
        self._restore_start()
        self.routes.progress()  # a new episode retraces the last one's path by design: not a loop
        self.episode += 1
        self._episode_start_actions = self.budgets.accepted_actions
        self._reset_requested = False
        if self._battle is not None:
            self._battle.new_episode()
        budget = self._episodes.budget
        self._episode_note = (f"Episode {self.episode} of {budget} begins: the previous one ended ({why}) and the "
                              f"task's start state was restored. Your memory is kept.")
        self._emit(EpisodeStarted(self.config.trial_key, self.episode, budget, why, self._frame, self._frame_sha,
                                  self._frame_index))

    # -- stage 1: ask the policy ----------------------------------------------------------------
    async def _ask_policy(self, d: Decision) -> bool:
        """Call the policy until a response passes the contract or the retries run out: the
        contract's retries for the agent's invalid outputs, the policy's own limits for a
        provider's transport faults. Every call is an attempt, logged and charged.
        False when nothing happened at all (the policy had nothing to give)."""
        cfg = self.config
        working = self.memory.working()
        retrieved = self.memory.retrieve()
        feedback, self._episode_note = self._episode_note, None  # a new episode is announced once
        invalid = faults = 0
        # Read once per decision, from the settled screen and the last sample: only the allowlist.
        structured = self._structured_view()
        battle = self._battle_view()
        while True:
            if d.attempts and self.budgets.calls_left() == 0:
                break  # another call would go beyond the decision budget
            obs = Observation(d.id, self._frame, self._frame_sha, working.recent_actions,
                              working.recent_observations, working.current_objective, retrieved,
                              cfg.max_actions, cfg.allowed_actions, feedback, working.refused_writes,
                              structured, battle)
            try:
                reply = await self._call(obs)
            except PolicyExhausted:
                if not d.attempts:
                    return False
                d.exhausted = True  # a retry had nothing to give: record what was tried, then end
                break
            except asyncio.CancelledError:
                if not self._cancelled_in_call(d, retrieved):
                    return False  # nothing was spent and nothing answered
                break
            except ProviderFailure as exc:
                faults += 1
                if self._retry_after_fault(d, retrieved, exc, faults):
                    continue
                break
            response, error = self._judge_and_charge(d, retrieved, reply)
            if response is not None:
                d.response = response
                break
            invalid += 1
            if invalid > cfg.invalid_output_retries:
                break
            feedback = _rejection_feedback(error, reply.oversize)
        return True

    def _judge_and_charge(self, d: Decision, retrieved: tuple[dict, ...],
                          reply: PolicyReply) -> tuple[AgentResponse | None, str | None]:
        """Judge a reply (_judge_reply) and charge it as an attempt: its text and reply kept unless oversized."""
        judged = self._judge_reply(d, reply)
        error = judged[1]
        over = reply.oversize
        self._charge(d, retrieved, build(
            Attempt, raw=reply.text if over is None else None, valid=error is None, error=error, aborted=False,
            model_id=reply.model_id, response_id=reply.response_id, latency_ms=reply.latency_ms,
            usage=reply.usage, prompt_sha256=reply.prompt_sha256, stop_reason=reply.stop_reason,
            identity=reply.identity, reply=reply.reply if over is None else None, oversize=over), reply)
        return judged

    def _battle_view(self) -> dict | None:
        """observe's battle screen, read once per decision (None: no battle rules)."""
        return self._battle.snapshot(self.emulator.read_range) if self._battle is not None else None

    def _structured_view(self) -> object | None:
        """The structured track's view of the settled screen and the last sample (None: no track)."""
        if isinstance(self._structured, GameplayView):
            return self._structured(self._sample, self.emulator.read_range, self._action_results)
        if self._structured is not None:
            return self._structured(self._sample, self.emulator.read_range)
        return None

    def _cancelled_in_call(self, d: Decision, retrieved: tuple[dict, ...]) -> bool:
        """Called while handling a CancelledError from a policy call. Our own stop: the call in flight
        is recorded as aborted (True), or False when nothing was spent and nothing answered. Anyone
        else's cancellation is re-raised (the bare `raise`s re-raise the error being handled)."""
        if not self._cancelling:
            raise  # not our own stop: let the caller's cancellation through
        self._cancelling = False
        if asyncio.current_task().uncancel() > 0:
            raise  # someone else cancelled the run as well
        if not self.policy.paid and not d.attempts:
            return False
        # The call in flight is part of the decision; a paid one's cost is unknown, never zero.
        self._charge(d, retrieved, build(
            Attempt, raw=None, valid=False, error="aborted: the trial was ended during the call",
            aborted=True, model_id=self.policy.model_id, response_id=None, latency_ms=None,
            usage=Usage() if self.policy.paid else None), None)
        d.aborted = True
        return True

    def _retry_after_fault(self, d: Decision, retrieved: tuple[dict, ...], exc: ProviderFailure, faults: int) -> bool:
        """Charge a provider's transport fault; True after waiting out a retryable one the policy's
        limits still allow, False when the decision ends (failed, or aborted during the wait)."""
        self._charge(d, retrieved, self._failed_attempt(exc), None)
        transport = getattr(self.policy, "transport", None)
        if not (exc.retryable and transport is not None and faults < transport.max_attempts):
            d.failure = exc
            return False
        wait = transport.backoff_seconds * 2 ** (faults - 1)
        if exc.retry_after is not None:
            wait = exc.retry_after
        # Waiting out the provider is not the agent's time: excluded from the wall-time budget.
        if self.control.hold(min(wait, transport.backoff_cap_seconds)) is not None:
            d.aborted = True
            return False
        return True

    def _judge_reply(self, d: Decision, reply: PolicyReply) -> tuple[AgentResponse | None, str | None]:
        """The reply as a response the contract admits, or None and why it was refused."""
        over = reply.oversize
        if over is not None:  # past the reply cap: nothing of it was kept to judge
            return None, f"oversized reply: {over.describe()}"
        if reply.reset:
            return self._reset_response()
        if reply.battle is not None:
            return self._battle_response(d, reply.battle)
        try:
            response = parse_response(reply.text, self.config.max_actions, self._allowed, self._permitted)
            if isinstance(response, ShortcutResponse) and response.shortcut is not None:
                d.shortcut = self._shortcuts.plan(response.shortcut.model_dump(), self._sample,
                                                  self.emulator.read_range)
        except ContractError as exc:
            d.rejected_actions += _count_listed_actions(reply.text)
            return None, str(exc)
        except ShortcutRefused as exc:  # well formed, but not on this screen: an invalid output
            return None, str(exc)
        return response, None

    def _reset_response(self) -> tuple[AgentResponse | None, str | None]:
        """A reset call (PolicyReply.reset): the decision presses nothing and its episode ends as `reset`;
        refused, as an invalid output, where no new episode can begin."""
        eps = self._episodes
        if eps is None:
            return None, "reset: this trial is not episodic (its manifest has no episodes): there is nothing to reset"
        if self.episode >= eps.budget:
            return None, (f"reset: episode {self.episode} is the last of the trial's budget of {eps.budget}: "
                          f"no episode is left to start")
        self.request_reset()
        # built, not parsed: the contract asks every answer for at least one action, a reset has none
        return AgentResponse.model_construct(reasoning_summary="reset tool call",
                                             observed=_UNKNOWN_SEEN, memory_read=[],
                                             memory_write=[], actions=[], notebook=None), None

    def _battle_response(self, d: Decision, call: dict) -> tuple[AgentResponse | None, str | None]:
        """A battle tool call (PolicyReply.battle): judged by the rules (engine.battle.battle) into RAM writes and
        presses; refused, as an invalid output, with the rule's reason."""
        tool, arguments = call.get("tool"), call.get("arguments") or {}
        if self._battle is None:
            return None, f"{tool}: this trial has no battle rules (the battle ruleset, on a game with a battle adapter)"
        try:
            plan = self._battle.plan(tool, arguments, self.emulator.read_range)
        except BattleRefused as exc:
            why = str(exc)
            return None, why if why.startswith(f"{tool}:") else f"{tool}: {why}"
        if stray := sorted(set(plan.presses) - self._allowed):  # the adapter's buttons, held to the manifest's
            return None, (f"{tool}: the game's buttons for it include {', '.join(stray)}, which the manifest's "
                          f"agent.allowed_actions lacks")
        d.battle = plan
        # built, not parsed: the presses are the harness's translation of the call, not the agent's
        return AgentResponse.model_construct(reasoning_summary=f"{tool} tool call", observed=_UNKNOWN_SEEN,
                                             memory_read=[], memory_write=[], actions=list(plan.presses),
                                             notebook=None), None

    def _failed_attempt(self, exc: ProviderFailure) -> Attempt:
        """A call the provider failed. Charged: nothing where it says so (a refused request), else
        unknown (a timeout may have been billed), never a guessed zero."""
        if exc.billed is False:
            usage = Usage(input_tokens=0, output_tokens=0, cached_tokens=0, cost_usd=0.0)
        else:
            usage = Usage() if self.policy.paid else None
        kind = "" if exc.kind == ProviderFailure.kind else f" ({exc.kind})"
        return build(Attempt, raw=None, valid=False, error=f"provider failure{kind}: {exc}", aborted=False,
                     model_id=self.policy.model_id, response_id=None, latency_ms=exc.latency_ms, usage=usage,
                     failure=exc.kind)

    async def _call(self, obs: Observation) -> PolicyReply:
        """One policy call; an end request made while it waits cancels it (see _cancel_inflight)."""
        self._calling = True
        started, held = time.monotonic(), self.control.held_seconds
        try:
            return await self.policy.decide(obs)
        finally:
            self._calling = False
            # Model thinking is not game time; a hold inside the call (a limiter wait) is already held time.
            self._policy_seconds += max(0.0, time.monotonic() - started - (self.control.held_seconds - held))

    def active_seconds(self) -> float:
        """The active game time so far (docs/metrics.md): wall time less held time less policy time."""
        if self._t0 is None:
            return 0.0
        return max(0.0, time.monotonic() - self._t0 - self.control.held_seconds - self._policy_seconds)

    def _charge(self, d: Decision, retrieved, attempt: Attempt, reply: PolicyReply | None) -> None:
        if not d.attempts:
            self.memory.log_retrieval(d.id, retrieved)  # the decision happens: its read is evidence
        d.attempts.append(attempt)
        if reply is not None:
            d.replies.append(reply)
        self.budgets.add_call(attempt.usage)

    # -- stage 2: apply memory ------------------------------------------------------------------
    def _apply_memory(self, d: Decision) -> None:
        response = d.response
        if response is None:
            return
        d.observed = response.observed.model_dump()
        self.memory.note_observation(d.id, d.observed)
        d.memory_reads = list(response.memory_read)
        if d.memory_reads:
            self.memory.read(d.memory_reads, d.id)
        for item in response.memory_write:
            d.memory_writes.append(self.memory.write(item, d.id, self._frame_sha))

    # -- stage 3: press -------------------------------------------------------------------------
    def _press(self, d: Decision) -> None:
        d.milestones_before = self.ladder.reached
        planned = list(d.response.actions) if d.response else []
        frames_before = self.emulator.frame_index
        if d.battle is not None and d.response is not None:
            self._battle_writes(d.battle)
        sample = self._sample
        results: list[dict] = []
        dialogue = self._structured.dialogue(self.emulator.read_range) if self._outcomes else None
        for index, action in enumerate(self._presses(d, planned)):
            if self._out_of_actions(d, index, planned):
                break
            if d.shortcut is not None:
                d.shortcut.expansion.append(action)
            before_pos = self._position(sample)
            before_sha, before_sample = self._frame_sha, sample
            step = self._step(d, index, action)
            sample = step.ram_last
            if step.frame_sha256 == before_sha and sample == before_sample:
                d.ignored_inputs += 1
            if self._outcomes:
                now = self._structured.dialogue(self.emulator.read_range)
                results.append({"action": action,
                                "result": self._structured.outcome(action, before_sample, sample, dialogue, now)})
                dialogue = now
            self._award(d, step, sample)
            looped = self._route_step(before_pos, action, before_sample, sample)
            self._judge_step(d, step, sample, looped)
            if d.end is not None or d.episode_end is not None:
                d.rejected_actions += max(0, len(planned) - index - 1)
                break
        self._sample = sample
        if self._outcomes and results:  # a decision that pressed nothing keeps the last results
            self._action_results = results
        d.frames = self.emulator.frame_index - frames_before

    def _presses(self, d: Decision, planned: list) -> Iterable[str]:
        """The decision's presses: its planned actions, or a shortcut's, each chosen from the state the last left."""
        if d.shortcut is not None and d.response is not None:
            return self._shortcuts.presses(d.shortcut, lambda: self.probe(self.emulator.read_range))
        return planned

    def _out_of_actions(self, d: Decision, index: int, planned: list) -> bool:
        """True (and the decision ends on the action budget) when no accepted action is left."""
        if (left := self.budgets.actions_left()) is not None and left <= 0:
            d.end = EndRequest("budget:accepted_actions")
            d.rejected_actions += len(planned) - index if d.shortcut is None else 1
            return True
        return False

    def _step(self, d: Decision, index: int, action: str) -> StepResult:
        """Press one action on the emulator: charged, noted, its frame kept and its input line recorded."""
        timing = self.config.timing
        self.emulator_busy_since = time.monotonic()  # a watchdog's view: an emulator that never returns
        step = self.emulator.step(action, timing, self.probe)
        self.emulator_busy_since = None
        self.budgets.accepted_actions += 1
        self.memory.note_action(action)
        self._frame = step.frame
        self._frame_sha, self._frame_index = step.frame_sha256, step.frame_index
        press = step.press_frame if step.press_frame >= 0 else None
        d.inputs.append(trusted(InputLine,
            decision_id=d.id, index=index, action=action, press_frame=press,
            release_frame=press + timing.press_frames if press is not None else None,
            capture_frame=step.frame_index, frame_sha256=step.frame_sha256))
        if self._frame_watchers:
            self._emit(FrameCaptured(d.id, step.frame, step.frame_sha256, step.frame_index))
        return step

    def _award(self, d: Decision, step: StepResult, sample: Sample) -> None:
        """The rungs this press reached: each noted with the action count, and route progress made."""
        for award in self.ladder.update(step.ram_before_last, sample, decision_id=d.id,
                                        frame_index=step.frame_index, frame_sha256=step.frame_sha256,
                                        active_seconds=self.active_seconds):
            self._award_actions[award.id] = self.budgets.accepted_actions
            self.routes.progress()
            self._emit(MilestoneReached(award))

    def _route_step(self, before_pos: tuple[int, int, int] | None, action: str, before: Sample,
                    sample: Sample) -> bool:
        """Track the route; True when this press closed an unrecoverable loop."""
        for f in self._route_resets:  # a loop, not any(<generator>): this runs after every action
            if before.get(f) != sample.get(f):
                self.routes.progress()
                break
        if before_pos is None:
            return False
        return self.routes.record(before_pos, action, self._position(sample), self.ladder.awards)

    def _judge_step(self, d: Decision, step: StepResult, sample: Sample, looped: bool) -> None:
        """Whether this press ends the trial (goal, ladder, loop) or the episode."""
        if self.goal is not None and self.goal.update(step.ram_before_last, sample, decision_id=d.id,
                                                      frame_index=step.frame_index,
                                                      frame_sha256=step.frame_sha256):
            d.end = EndRequest(GOAL_MET)  # with a goal, it alone ends the trial as a success
        elif self.ladder.ending is not None and self.goal is None:  # the final rung, or every required rung
            d.end = EndRequest(self.ladder.ending)
        elif self._episodes is not None and (why := self._episode_over(step.ram_before_last, sample)):
            d.episode_end = why  # the rest of the decision's actions are not pressed
        elif looped:
            d.end = EndRequest("unrecoverable-loop")

    def _battle_writes(self, plan: Plan) -> None:
        """An accepted battle call's RAM writes (apply_team, lead), before its presses; the sample is read again."""
        if plan.writes:
            self.emulator_busy_since = time.monotonic()
            for address, data in plan.writes:
                self.emulator.write(address, bytes(data))
            self.emulator_busy_since = None
            self._sample = self.probe(self.emulator.read_range)
        self._battle.accepted(plan)

    def _episode_over(self, previous: Sample, current: Sample) -> str | None:
        if self._failure is not None and self.game.is_ready(current) and self._failure(previous, current):
            return "failure"
        limit = self._episodes.actions
        if limit is not None and self.budgets.accepted_actions - self._episode_start_actions >= limit:
            return "episode-actions"
        return None

    # -- stage 4: close the decision ------------------------------------------------------------
    def _close_decision(self, d: Decision) -> None:
        self._end_of_decision(d)
        trace = self._trace_line(d)
        response = trusted(ResponseLine, decision_id=d.id, attempts=d.attempts)
        with self._emit_lock:
            self._emit(DecisionRecorded(trace, response, tuple(d.inputs), self._frame))
            if not self.tally.decisions:
                self._first_prompt_core = trace.prompt_core_sha256
            self.tally.add(trace)  # committed: the recorder returned without failing
            if self._episodes is not None:
                self._steps.append(Step(trace.decision_id, self.episode, d.episode_end, tuple(d.memory_writes),
                                        d.battle.team if d.battle is not None else None))
        c = self.counts
        c.rejected_actions += d.rejected_actions
        c.ignored_inputs += d.ignored_inputs
        c.frames += d.frames
        c.repeated_navigation_actions = self.routes.repeated_actions
        c.repeated_position_loops = self.routes.loops_detected
        if self._budget_watchers:
            self._emit(BudgetUpdated(self.budgets.snapshot()))

    def _end_of_decision(self, d: Decision) -> None:
        """Settle how the decision ends the episode or the trial, if it does."""
        self._end_of_episode(d)
        if d.failure is not None:
            d.end = EndRequest("provider-failure")
        elif d.aborted:
            d.end = self.control.request or EndRequest("harness-error")
        elif d.end is None and self.ladder.ending is not None and self.goal is None:
            d.end = EndRequest(self.ladder.ending)  # e.g. every required rung held at the start: no action needed
        elif d.exhausted:
            d.end = self.control.request or EndRequest("policy-exhausted")
        elif d.end is None:
            d.end = self._budget_end(d)

    def _end_of_episode(self, d: Decision) -> None:
        """A reset asked for ends the episode with this decision; the last episode's end ends the trial."""
        if self._episodes is not None and d.end is None and d.episode_end is None and self._reset_requested:
            d.episode_end = "reset"
        if d.episode_end is not None and d.end is None and self.episode >= self._episodes.budget:
            d.end = EndRequest("episode-budget")  # the last episode ended without the goal

    def _budget_end(self, d: Decision) -> EndRequest | None:
        """The budget that ends an otherwise open decision (None: none does; wall time is the watchdog's)."""
        if (budget := self.budgets.exhausted()) is not None and budget != "budget:wall_time":
            return EndRequest(budget)
        if d.response is None and self.budgets.calls_left() == 0:
            return EndRequest("budget:model_decisions")  # its retries ran into the decision budget
        return None

    def _trace_line(self, d: Decision) -> TraceLine:
        """The decision's trace line, from the loop's own typed values (engine.loop.records.trusted)."""
        cfg = self.config
        attempts = d.attempts
        final = attempts[-1]
        paid = [a for a in attempts if a.usage is not None]
        last = d.replies[-1] if d.replies else None
        response = d.response
        fields = dict(
            experiment_id=cfg.experiment_id, condition_id=cfg.label, trial_id=cfg.trial_number,
            decision_id=d.id, timestamp_utc=utc_now(), frame_sha256=d.seen_frame_sha256,
            prompt_sha256=last.prompt_sha256 if last else None,
            model_id=final.model_id, response_id=final.response_id, **_usage_totals(paid),
            **decision_latency(attempts),
            prompt_core_sha256=last.prompt_core_sha256 if last else None,
            raw_response_path=None, attempts=len(attempts), paid_calls=len(paid), aborted=d.aborted,
            parsed_actions=list(response.actions) if response else [], accepted_actions=len(d.inputs),
            invalid_output=not all([a.valid for a in attempts]),
            reasoning_summary=response.reasoning_summary if response else None,
            observed=d.observed, memory_reads=d.memory_reads, memory_writes=d.memory_writes,
            milestones_before=d.milestones_before, milestones_after=self.ladder.reached,
            result_frame_sha256=self._frame_sha, result_frame_index=self._frame_index,
            termination_reason=d.end.reason if d.end else None,
            prev_sha256=None, response_sha256=None, inputs_sha256=None, memory_sha256=None)
        if last is not None and last.context is not None:
            fields["context"] = last.context
        if self._episodes is not None:
            fields["episode"], fields["episode_end"] = self.episode, d.episode_end
        if d.battle is not None:
            fields["battle"] = d.battle.record()
        if d.shortcut is not None:
            fields["shortcut"] = d.shortcut.record()
        return trusted(TraceLine, **fields)

    # -- the result -----------------------------------------------------------------------------
    def _position(self, sample: Sample) -> tuple[int, int, int] | None:
        pos = self.game.position
        if pos is None:
            return None
        return (int(sample[pos.map]), int(sample[pos.x]), int(sample[pos.y]))

    def _result(self, end: EndRequest, error: str | None, started_utc: str) -> TrialResult:
        cfg = self.config
        tally = self.tally
        outcome, cause = classify(end.reason, end.cause)
        # Only what the recorder committed counts: an award in a decision that never reached
        # the disk is not evidence.
        awards = {}
        if self.ladder is not None:
            awards = {k: a for k, a in self.ladder.awards.items() if a.decision_id <= tally.decisions}
        reached = [m.id for m in self.game.milestones if m.id in awards]
        points = sum(a.points for a in awards.values())  # pre-satisfied rungs are never awarded: 0 points
        accepted = tally.accepted_actions
        telemetry = tally.telemetry(
            rejected_actions=self.counts.rejected_actions, ignored_inputs=self.counts.ignored_inputs,
            repeated_position_loops=self.counts.repeated_position_loops,
            repeated_navigation_actions=self.counts.repeated_navigation_actions,
            wall_time_seconds=round(self.budgets.active_seconds, 3),
            held_seconds=round(self.control.held_seconds, 3), frames=self.counts.frames,
            policy_seconds=round(self._policy_seconds, 3),
            active_seconds=round(max(0.0, self.budgets.active_seconds - self._policy_seconds), 3))
        cost = telemetry.cost_usd
        ladder = self.ladder
        pre = sorted(ladder.pre_satisfied) if ladder else []
        deepest_id = deepest(self.game, reached, pre)
        derived = derived_figures(cost, len(reached), points, accepted, self.counts.repeated_navigation_actions)
        awarded = deepest_id if deepest_id in awards else None  # a rung held at the start took no actions
        derived |= path_figures(self.game, awarded, self._award_actions.get(awarded) if awarded else None,
                                self.provenance.get("rom_sha256"))
        return build(TrialResult,
            experiment_id=cfg.experiment_id, condition=cfg.label, trial=cfg.trial_number,
            trial_key=cfg.trial_key, position=cfg.position, attempt=cfg.attempt,
            outcome=outcome, termination_reason=end.reason, termination_detail=end.detail,
            invalid_cause=cause, error=error, recovered=False, started_utc=started_utc, ended_utc=utc_now(),
            last_decision=tally.decisions,
            milestones=[awards[m] for m in reached], milestones_reached=reached,
            pre_satisfied=pre, skipped_required=skipped_required(self.game, reached, pre),
            deepest_milestone=deepest_id, progress_points=points,
            total_points=self.game.total_points, telemetry=telemetry,
            derived=derived,
            provenance={"emulator": {"name": getattr(self.emulator, "name", None),
                                     "version": getattr(self.emulator, "version", None)}, **self.provenance,
                        # what a policy records of itself (the tool server's exposed tools: engine.policies.tools)
                        **(getattr(self.policy, "provenance", None) or {}),
                        "prompt_core_sha256": self._first_prompt_core,
                        "information_track": cfg.information_track,
                        # what that track showed: the definition's allowlist (null on the visual track)
                        "information_allowlist": (getattr(self.game.tracks, cfg.information_track).allowlist
                                                  if self._structured else None),
                        # the mechanical shortcuts the task permitted (engine.loop.shortcuts): none is []
                        "shortcuts": list(cfg.shortcuts)},
            **({"episodes": episode_records(self._steps, end.reason, outcome == "success")}
               if self._episodes is not None else {}),
            chain=None, goal=self._goal_result(tally.decisions))

    def _goal_result(self, committed: int):
        """The goal as recorded: met only in a decision the recorder committed."""
        if self.goal is None:  # no goal chosen, or the trial ended before its start was probed
            return None
        met = self.goal.result
        return met if met is not None and met.decision_id <= committed else self.goal.final.model_copy(
            update={"met": False, "decision_id": None, "frame_index": None, "frame_sha256": None, "species": [],
                    "probe": None})


def _rejection_feedback(error: str | None, over: ReplyOversize | None) -> str:
    """What the next attempt is told of a rejected reply: the contract's reason, or the reply cap it passed."""
    if over is None:
        return f"Your previous response was rejected: {error}"
    return (f"Your previous response was rejected: it was longer than the {over.cap_bytes:,} bytes a "
            f"reply may have. Answer with the JSON object only.")


_NO_USAGE = {"input_tokens": None, "output_tokens": None, "cached_tokens": None, "provider_cost_usd": None,
             "cost_source": None}


def _usage_totals(paid: list[Attempt]) -> dict:
    """A decision's tokens and cost over its paid calls: null when none was paid or any is unknown."""
    if not paid:
        return _NO_USAGE

    def total(key: str):
        values = [getattr(a.usage, key) for a in paid]
        return None if None in values else sum(values)

    sources = sorted({a.usage.cost_source for a in paid if a.usage.cost_source})
    return {"input_tokens": total("input_tokens"), "output_tokens": total("output_tokens"),
            "cached_tokens": total("cached_tokens"), "provider_cost_usd": total("cost_usd"),
            "cost_source": sources or None}


def decision_latency(attempts: list[Attempt]) -> dict[str, float | None]:
    """The trace's two latencies: the accepted attempt's (null when no response was accepted), and
    the total over every attempt, retries and failed calls included (null when any is unmeasured).
    verify recomputes both from responses.jsonl with this function."""
    accepted = attempts[-1].latency_ms if attempts and attempts[-1].valid else None
    latencies = [a.latency_ms for a in attempts]
    total = None if not latencies or None in latencies else round(sum(latencies), 3)
    return {"latency_ms": accepted, "latency_total_ms": total}


def derived_figures(cost: float | None, milestones: int, points: int, actions: int,
                    repeated: int) -> dict[str, float | None]:
    return {
        "cost_per_verified_milestone": _ratio(cost, milestones),
        "actions_per_verified_milestone": _ratio(actions, milestones),
        "progress_efficiency": _ratio(points, cost),
        "repeat_overhead": _ratio(repeated, actions),
    }


PATH_KEYS = ("path_efficiency", "path_optimal_presses", "path_actions")


def path_figures(game: GameDefinition | None, deepest_id: str | None, actions: int | None,
                 rom_sha256: str | None = None) -> dict[str, float | None]:
    """Path efficiency, as navigation benchmarks weight success by path length: the fewest presses to
    the deepest rung reached in order (the game definition's optimal_presses, when solved on the ROM
    played) over the accepted actions, NOOP included, up to the one that reached it. Unknown parts are
    null, never 0."""
    optimal = (game.optimal_presses or {}).get(deepest_id) if game is not None and deepest_id else None
    if optimal is not None and game.optimal_presses_for not in (None, rom_sha256):
        optimal = None  # solved on another ROM: no yardstick for this one
    used = actions if actions else None
    return {"path_efficiency": _ratio(optimal, used), "path_optimal_presses": optimal, "path_actions": used}


def build_annotation(annotation: dict, trial_key: str, decision: int) -> Annotation:
    """The record of an operator tag: what the dialog captured when it opened, and what was typed."""
    try:
        return Annotation.model_validate({
            "trial_key": trial_key, "decision_id": decision,
            "frame_sha256": annotation.get("frame_sha256") or None, "frame_index": annotation.get("frame_index"),
            "opened_utc": annotation.get("opened_utc") or utc_now(), "timestamp_utc": utc_now(),
            "annotator": annotation.get("annotator") or "operator", "type": annotation.get("type"),
            "severity": annotation.get("severity"), "refers_to": annotation.get("refers_to"),
            "note": annotation.get("note") or ""})
    except ValueError as exc:
        raise TagRefused(f"not a valid tag: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}") from None


def check_reference(refers: str, decision: int, ever_held: Callable[[str], bool]) -> None:
    """`refers to` names an earlier decision (a number) or a fact the agent's memory has held."""
    text = str(refers).strip()
    if text.isdigit():
        if not 1 <= int(text) <= decision:
            raise TagRefused(f"refers to decision {text}, but only decisions 1..{decision} exist")
        return
    if not FACT_ID.fullmatch(text):
        raise TagRefused(f"refers to {text!r}: give a fact id (fact-0003) or a decision number")
    if not ever_held(text):
        raise TagRefused(f"refers to {text}, which the agent's memory never held")


def _ratio(numerator, denominator):
    """A ratio, or None where either side is unknown or the denominator is zero."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, 6)


def _count_listed_actions(raw: str) -> int:
    try:
        actions = json.loads(raw).get("actions")
    except (ValueError, AttributeError, TypeError, RecursionError):
        return 0
    return len(actions) if isinstance(actions, list) else 0

