"""`oakwatch export DIR --format inspect --output OUT`: each trial as an Inspect AI eval log.

One `<trial key>.eval` per trial in trials/ (the attempts that count) and one
`void-<n>-<trial key>.eval` per attempt of a voided block (void-<n>/: the invalid trial that voided
it and its block-mates, kept as evidence and tagged `voided`), built with inspect_ai's own log
models and written with its `write_eval_log`, so `inspect view OUT` opens them and
`read_eval_log` reads them back. Inspect's schema is the reader's contract, not ours: we only fill
its public models.

What goes where (docs/inspect.md):
- the log: one sample (the trial); `status` success for a valid trial (success or game-failure),
  error for an invalid one (its `invalid_cause` is the error); `results` the trial's scores.
- the sample: `messages` a user/assistant pair per decision (what the agent saw, by frame hash,
  and the accepted raw response); `events` a span per decision with a model event per paid call
  (an info event for a call that was not a model's), the trace line itself, and a score event per
  milestone awarded; `scores` success, progress points and every rung of the ladder.
- usage: Inspect's ModelUsage has no "unknown" (its token counts default to 0), so a count we did
  not measure is never put in one: a call or a trial whose tokens are unknown has no ModelUsage,
  and the exact figures, nulls kept, are in the metadata (`usage`, the trace line).

inspect_ai is imported inside `export_inspect`: its import takes seconds, and no other command needs it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from engine.loop.records import Attempt, ResponseLine, TraceLine, TrialGenesis, TrialResult, Usage, trace_line_unwritten
from engine.text import printable
from sessions.analysis.inspect_tools import TOOL_POLICIES, Screens, ToolExportProblem, tool_decision, trace_data
from sessions.evidence import layout
from sessions.evidence.checksums import file_sha256
from sessions.evidence.folder import EvidenceFolder, TrialFolder, evidence_problem
from sessions.evidence.reader import FormatProblem, parse, short_error
from sessions.evidence.records import BlindingFile
from sessions.preflight.manifest import Condition, Manifest, ManifestError, load_manifest

SCORER = "oakwatch"
# Where the trace hash chain lives: the evidence's own integrity, not something a viewer shows.
CHAIN_FIELDS = {"prev_sha256", "response_sha256", "inputs_sha256", "memory_sha256"}
# A budget's termination reason as the kind of limit Inspect names (the rest are "custom").
LIMIT_KINDS = {"budget:wall_time": "time", "budget:tokens": "token", "budget:total_cost": "cost",
               "operator-abort": "operator", "operator-quit": "operator"}


class InspectExportError(ValueError):
    """Bad input or a folder that cannot be exported; the message is one line."""


class _Rung(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the verification rules are the game's, not the export's
    id: str
    name: str
    points: int


class _Scoring(BaseModel):
    """scoring/milestones.yaml: the frozen ladder (only the rungs' ids, names and points are used here)."""

    model_config = ConfigDict(extra="ignore")
    milestones: list[_Rung]


class _ByDecision:
    """`dict(pairs).get(n)` for a stream of (decision id, value) pairs, read only as far as the ids
    asked for: the export asks in the trace's order and a trial's responses and inputs come in
    decision order, so one decision's value is held at a time, not the trial's. A stream that is not
    `ordered` (the check pass says), or questions out of order, get the whole dict from a fresh read."""

    def __init__(self, pairs: Callable[[], Iterator[tuple[int, Any]]], ordered: bool):
        self._pairs = pairs
        self._it = pairs()
        self._ahead: tuple[int, Any] | None = None  # the first pair past the last id asked for
        self._asked = -1
        self._whole: dict[int, Any] | None = None if ordered else dict(pairs())

    def get(self, n: int, default: Any = None) -> Any:
        if self._whole is None and n <= self._asked:
            self._whole = dict(self._pairs())
        if self._whole is not None:
            return self._whole.get(n, default)
        self._asked = n
        found = default
        while True:
            pair = self._ahead if self._ahead is not None else next(self._it, None)
            self._ahead = None
            if pair is None:
                return found
            if pair[0] > n:
                self._ahead = pair
                return found
            if pair[0] == n:
                found = pair[1]  # the last of equal ids wins, as in a dict


def _ordered(ids: Iterator[int]) -> bool:
    """Whether the ids never go down (each trial's records are written in decision order)."""
    last = None
    ok = True
    for n in ids:
        ok = ok and (last is None or n >= last)
        last = n
    return ok


class _Trial:
    """One trial folder read back through sessions.evidence.reader. `check` reads every line once
    (validated) without keeping them; `decisions` streams them again, one decision at a time, when
    the trial is written (memory does not grow with the run's decisions)."""

    def __init__(self, trial: TrialFolder):
        folder, rel = trial.path, trial.rel
        void = rel.split("/", 1)[0] if trial.voided else None
        self.reader = reader = trial.reader()
        if not trial.sealed():
            raise InspectExportError(f"{rel}: no {layout.RESULT} (an unfinished run: `oakwatch recover` it first)")
        self.key = folder.name
        self.rel = rel
        self.void = void  # "void-<n>" for an attempt of a voided block, else None
        self.name = f"{void}-{folder.name}.eval" if void else f"{folder.name}.eval"
        self.genesis: TrialGenesis = reader.genesis()[0]
        self.result: TrialResult
        self.result, self.result_sha256 = reader.result()
        self.paid_calls = False  # any decision made a paid call
        self.store = folder / layout.FRAMES
        self.check()

    def check(self) -> None:
        """Read and validate every trace, response and input line (in that order), keeping nothing."""
        for line in self.reader.trace():
            self.paid_calls = self.paid_calls or bool(line.paid_calls)
        self.responses_ordered = _ordered(r.decision_id for r in self.reader.responses())
        self.inputs_ordered = _ordered(i.decision_id for i in self.reader.inputs())

    def decisions(self) -> Iterator[tuple[TraceLine, ResponseLine | None, list[str]]]:
        """Each trace line with its decision's response (None without one) and pressed buttons."""
        responses = _ByDecision(lambda: ((r.decision_id, r) for r in self.reader.responses()),
                                self.responses_ordered)
        pressed = _ByDecision(lambda: ((n, [i.action for i in lines]) for n, lines in self.reader.inputs_by_decision()),
                              self.inputs_ordered)
        for line in self.reader.trace():
            yield line, responses.get(line.decision_id), pressed.get(line.decision_id, [])


def _read_yaml_model(path: Path, model: type[BaseModel], where: str) -> Any:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InspectExportError(f"{where} is missing") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InspectExportError(f"{where}: unreadable ({printable(str(exc).splitlines()[0])})") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InspectExportError(f"{where}: {short_error(exc)}") from None


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _seconds_since(start: str, stamp: str) -> float:
    return max(0.0, (_when(stamp) - _when(start)).total_seconds())


def _model_name(condition: Condition | None, policy: str) -> str:
    """Inspect's "provider/model"; a policy that is not a model is named as oakwatch's own."""
    if condition is not None and condition.policy == "model" and condition.model:
        return f"{condition.provider}/{condition.model}"
    return f"{SCORER}/{policy}"


def _usage_or_none(usage: Usage | None):
    """Inspect's ModelUsage when both token counts are known; None otherwise (never a made-up 0)."""
    from inspect_ai.model import ModelUsage

    if usage is None or usage.input_tokens is None or usage.output_tokens is None:
        return None
    return ModelUsage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                      total_tokens=usage.input_tokens + usage.output_tokens,
                      input_tokens_cache_read=usage.cached_tokens, total_cost=usage.cost_usd)


def _accepted_raw(response: ResponseLine | None) -> str | None:
    """The raw text of the decision's valid attempt (the last one that answered if none was valid)."""
    if response is None:
        return None
    answered = [a for a in response.attempts if a.raw is not None]
    valid = [a for a in answered if a.valid]
    return (valid or answered or [None])[-1].raw if answered else None


def _attempt_event(attempt: Attempt, n: int, user, span: str, at: datetime, start: float, model: str):
    from inspect_ai.event import InfoEvent, ModelEvent
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, GenerateConfig, ModelOutput

    detail = attempt.model_dump(mode="json", exclude={"raw", "reply"})
    if attempt.model_id is None and attempt.usage is None:  # a scripted, random or human policy: no model call
        return InfoEvent(source=f"{SCORER}/policy", data={"decision": n, "raw": attempt.raw, **detail},
                         span_id=span, timestamp=at, working_start=start)
    reply = ChatMessageAssistant(content=attempt.raw or "", model=attempt.model_id, source="generate")
    output = ModelOutput(model=attempt.model_id or model, choices=[ChatCompletionChoice(message=reply)],
                         completion=attempt.raw or "", usage=_usage_or_none(attempt.usage),
                         time=attempt.latency_ms / 1000 if attempt.latency_ms is not None else None,
                         response_id=attempt.response_id, error=attempt.error)
    return ModelEvent(model=attempt.model_id or model, input=[user], tools=[], tool_choice="none",
                      config=GenerateConfig(), output=output, error=attempt.error, span_id=span, timestamp=at,
                      working_start=start, metadata={"decision": n, **detail},
                      working_time=attempt.latency_ms / 1000 if attempt.latency_ms is not None else None)


def _decisions(trial: _Trial, model: str, image_scale: int) -> tuple[list, list]:
    """The per-decision messages and events. A model was shown the screen (a user message with the
    image it was sent); a tool-server agent made tool calls (sessions.analysis.inspect_tools); any other policy
    is shown by the frame's hash."""
    from inspect_ai.event import InfoEvent, ScoreEvent, SpanBeginEvent, SpanEndEvent
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ContentText
    from inspect_ai.scorer import Score

    policy = trial.genesis.policy
    tool_policy = policy in TOOL_POLICIES
    screens = Screens(trial.store, image_scale)
    awards: dict[int, list] = {}
    for award in trial.result.milestones:
        awards.setdefault(award.decision_id, []).append(award)
    messages: list = []
    events: list = []
    began = trial.result.started_utc

    def working_start(at: datetime) -> float:
        return max(0.0, (at - _when(began)).total_seconds())

    for line, response, pressed in trial.decisions():
        n = line.decision_id
        at, start, span = _when(line.timestamp_utc), _seconds_since(began, line.timestamp_utc), f"decision-{n}"
        events.append(SpanBeginEvent(id=span, name=f"decision {n}", type="decision", timestamp=at,
                                     working_start=start))
        if tool_policy:
            try:
                calls, call_events = tool_decision(line, response, pressed, screens, span=span,
                                                   working_start=working_start)
            except ToolExportProblem as exc:
                raise InspectExportError(f"{trial.rel}/{layout.RESPONSES}: {exc}") from None
            messages += calls
            events += call_events
        else:
            text = (f"Decision {n}: the screen with pixel SHA-256 {line.frame_sha256} (frame store: "
                    f"frames/frames.pack); milestones so far: {', '.join(line.milestones_before) or 'none'}")
            user = ChatMessageUser(
                content=[ContentText(text=text), screens.content(line.frame_sha256)] if policy == "model" else text,
                source="input", metadata={"decision": n, "frame_sha256": line.frame_sha256,
                                          "prompt_sha256": line.prompt_sha256})
            reply = ChatMessageAssistant(
                content=_accepted_raw(response) or "", model=line.model_id, source="generate",
                metadata={"decision": n, "parsed_actions": line.parsed_actions,
                          "accepted_actions": line.accepted_actions, "invalid_output": line.invalid_output,
                          "reasoning_summary": line.reasoning_summary, "milestones_after": line.milestones_after})
            messages += [user, reply]
            for attempt in response.attempts if response is not None else []:
                events.append(_attempt_event(attempt, n, user, span, at, start, model))
        events.append(InfoEvent(source=f"{SCORER}/trace", span_id=span, timestamp=at, working_start=start,
                                data=trace_data(line, CHAIN_FIELDS | trace_line_unwritten(line), tool_policy)))
        for award in awards.get(n, []):
            events.append(ScoreEvent(score=Score(value=award.points, answer=award.id, explanation=award.name,
                                                 metadata=award.model_dump(mode="json")),
                                     intermediate=True, scorer="milestone", span_id=span, timestamp=at,
                                     working_start=start))
        events.append(SpanEndEvent(id=span, timestamp=at, working_start=start))
    return messages, events


def _scores(result: TrialResult, ladder: list[_Rung]) -> dict:
    from inspect_ai.scorer import Score

    valid = result.invalid_cause is None
    scores = {
        "progress": Score(value=result.progress_points, answer=result.deepest_milestone,
                          explanation=f"{result.progress_points} of {result.total_points} points",
                          metadata={"total_points": result.total_points, "skipped_required": result.skipped_required,
                                    "pre_satisfied": result.pre_satisfied}),
        "milestones": Score(value={r.id: int(r.id in result.milestones_reached) for r in ladder},
                            explanation=", ".join(result.milestones_reached) or "none reached",
                            metadata={"awards": [a.model_dump(mode="json") for a in result.milestones]}),
    }
    if valid:  # an invalid trial measured nothing about the agent: it has no success score, not a 0
        scores["success"] = Score(value=1 if result.outcome == "success" else 0, answer=result.outcome,
                                  explanation=result.termination_reason)
    return scores


def _usage_metadata(result: TrialResult) -> dict:
    t = result.telemetry
    names = ("input_tokens", "output_tokens", "cached_tokens", "tokens", "cost_usd", "cost_source")
    return {name: getattr(t, name) if t is not None else None for name in names}


def _trial_usage(trial: _Trial, model: str) -> dict:
    """{model: ModelUsage} for a trial that made paid calls and whose tokens are all known; else {}."""
    t = trial.result.telemetry
    if t is None or not trial.paid_calls:
        return {}
    usage = _usage_or_none(Usage(input_tokens=t.input_tokens, output_tokens=t.output_tokens,
                                 cached_tokens=t.cached_tokens, cost_usd=t.cost_usd))
    return {model: usage} if usage is not None else {}


def _limit(result: TrialResult, manifest: Manifest):
    from inspect_ai.log import EvalSampleLimit

    reason = result.termination_reason
    if not (reason.startswith("budget:") or reason in LIMIT_KINDS):
        return None
    budgets = manifest.budgets
    value = {"budget:accepted_actions": budgets.accepted_actions, "budget:model_decisions": budgets.model_decisions,
             "budget:wall_time": budgets.wall_time_minutes * 60 if budgets.wall_time_minutes else None,
             "budget:tokens": budgets.tokens, "budget:total_cost": budgets.total_cost_usd}.get(reason)
    return EvalSampleLimit(type=LIMIT_KINDS.get(reason, "custom"), limit=float(value) if value is not None else 0.0,
                           reason=reason)


def _eval_log(trial: _Trial, manifest: Manifest, condition: Condition | None, ladder: list[_Rung],
              system_prompt: str | None, schedule_sha256: str):
    from inspect_ai.log import EvalLog, EvalPlan, EvalPlanStep, EvalResults, EvalStats

    result, genesis = trial.result, trial.genesis
    model = _model_name(condition, genesis.policy)
    usage = _trial_usage(trial, model)
    scores = _scores(result, ladder)
    error = _eval_error(result)
    sample = _sample(trial, manifest, ladder, system_prompt, model, usage, scores, error)
    return EvalLog(
        status="success" if error is None else "error", eval=_spec(trial, manifest, condition, model, schedule_sha256),
        plan=EvalPlan(name="oakwatch", steps=[EvalPlanStep(solver=f"{SCORER}/{genesis.policy}")]),
        results=EvalResults(total_samples=1, completed_samples=1, scores=_result_scores(result, scores)),
        stats=EvalStats(started_at=result.started_utc, completed_at=result.ended_utc, model_usage=usage),
        error=error, samples=[sample])


def _eval_error(result: TrialResult):
    """An invalid trial's cause as Inspect's EvalError; None for a valid one."""
    from inspect_ai.log import EvalError

    if result.invalid_cause is None:
        return None
    return EvalError(message=f"{result.outcome}: {result.invalid_cause}"
                             + (f": {result.termination_detail}" if result.termination_detail else ""),
                     traceback=result.error or "", traceback_ansi=result.error or "")


def _sample_metadata(trial: _Trial) -> dict:
    result, genesis, t = trial.result, trial.genesis, trial.result.telemetry
    return {
        "experiment_id": result.experiment_id, "condition": result.condition, "trial": result.trial,
        "position": result.position, "attempt": result.attempt, "policy": genesis.policy,
        "outcome": result.outcome, "termination_reason": result.termination_reason,
        "termination_detail": result.termination_detail, "invalid_cause": result.invalid_cause,
        "recovered": result.recovered, "last_decision": result.last_decision,
        "milestones_reached": result.milestones_reached, "deepest_milestone": result.deepest_milestone,
        "goal": result.goal.model_dump(mode="json") if result.goal is not None else None,  # run --goal
        "usage": _usage_metadata(result), "telemetry": t.model_dump(mode="json") if t is not None else None,
        "limiter_wait_s": result.limiter_wait_s, "derived": result.derived,
        "provenance": result.provenance, "result_sha256": trial.result_sha256,
        "evidence": trial.rel, "voided": trial.void,
    }


def _sample(trial: _Trial, manifest: Manifest, ladder: list[_Rung], system_prompt: str | None, model: str,
            usage, scores: dict, error):
    """The trial as Inspect's one sample: its decisions as messages and events, scores and metadata."""
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageSystem, ModelOutput

    result, genesis, t = trial.result, trial.genesis, trial.result.telemetry
    messages, events = _decisions(trial, model, manifest.agent.image_scale)
    if system_prompt is not None and genesis.policy == "model":
        messages.insert(0, ChatMessageSystem(content=system_prompt, source="input"))
    final = ladder[-1].id if ladder else ""
    last_reply = next((m for m in reversed(messages) if m.role == "assistant"), None)
    return EvalSample(
        id=trial.key, epoch=1, target=final,
        input=f"Play {manifest.game.title} from its start state (SHA-256 {genesis.initial_state_sha256}) "
              f"until milestone {final}" + (f" ({ladder[-1].name})" if ladder else "") + ".",
        messages=messages, events=events, scores=scores, metadata=_sample_metadata(trial), model_usage=usage,
        output=ModelOutput(model=model, completion=last_reply.text if last_reply is not None else ""),
        started_at=result.started_utc, completed_at=result.ended_utc,
        total_time=t.wall_time_seconds if t is not None else None,
        working_time=t.active_seconds if t is not None else None,
        error=error, limit=_limit(result, manifest))


def _result_scores(result: TrialResult, scores: dict) -> list:
    from inspect_ai.log import EvalMetric, EvalScore

    out = []
    if "success" in scores:
        out.append(EvalScore(name="success", scorer=SCORER, scored_samples=1, unscored_samples=0,
                             metrics={"accuracy": EvalMetric(name="accuracy", value=float(scores["success"].value))}))
    out.append(EvalScore(name="progress", scorer=SCORER, scored_samples=1, unscored_samples=0,
                         metrics={"mean": EvalMetric(name="mean", value=float(result.progress_points))}))
    return out


def _spec(trial: _Trial, manifest: Manifest, condition: Condition | None, model: str, schedule_sha256: str):
    from importlib.metadata import version

    from inspect_ai.log import EvalConfig, EvalDataset, EvalSpec

    result, genesis = trial.result, trial.genesis
    return EvalSpec(
        eval_id=trial.result_sha256[:22], run_id=schedule_sha256[:22], created=genesis.started_utc,
        task=result.experiment_id, task_id=genesis.manifest_sha256[:22], task_version=manifest.protocol_version,
        task_args={"condition": result.condition}, solver=f"{SCORER}/{genesis.policy}",
        tags=[f"condition:{result.condition}", f"outcome:{result.outcome}"] + (["voided"] if trial.void else []),
        dataset=EvalDataset(name=result.experiment_id, samples=1, sample_ids=[trial.key]),
        model=model, model_base_url=condition.base_url if condition is not None else None,
        config=EvalConfig(epochs=1), packages={"oakwatch": version("oakwatch")},
        metadata={"trial_key": trial.key, "manifest_sha256": genesis.manifest_sha256,
                  "schedule_sha256": genesis.schedule_sha256, "rom_sha256": genesis.rom_sha256,
                  "initial_state_sha256": genesis.initial_state_sha256, "policy_seed": genesis.policy_seed})


def _conditions(root: Path, manifest: Manifest) -> dict[str, Condition]:
    """Label -> the manifest's condition, through blinding.json (the export is not blinded)."""
    try:
        data = EvidenceFolder(root).bytes(layout.BLINDING)
    except FormatProblem:
        raise InspectExportError(f"{layout.BLINDING} is missing or unreadable") from None
    try:
        blinding = parse(BlindingFile, data, layout.BLINDING)
    except FormatProblem as exc:
        raise InspectExportError(str(exc)) from None
    by_id = {c.id: c for c in manifest.conditions}
    return {label: by_id[cid] for label, cid in blinding.labels.items() if cid in by_id}


def export_inspect(root: Path, out: Path) -> dict:
    """Write OUT/<trial key>.eval for every trial in ROOT/trials (and each voided attempt);
    {"trials": n, "files": [names]}.
    Everything is read and checked first and written to a temporary folder renamed to OUT at the
    end, so on any refusal nothing is written."""
    problem = evidence_problem(root)
    if problem is not None:
        raise InspectExportError(problem)
    if out.exists():
        raise InspectExportError(f"{printable(str(out))}: exists already (give a new folder)")
    if not out.parent.is_dir():
        raise InspectExportError(f"{printable(str(out.parent))}: no such folder")
    try:
        manifest = load_manifest(root / layout.MANIFEST)
    except ManifestError as exc:
        raise InspectExportError(f"{layout.MANIFEST}: {exc}") from None
    ladder = _read_yaml_model(root / "scoring" / "milestones.yaml", _Scoring, "scoring/milestones.yaml").milestones
    conditions = _conditions(root, manifest)
    system_prompt = EvidenceFolder(root).system_prompt()
    try:
        schedule_sha256 = file_sha256(root / layout.SCHEDULE)  # the run's id: every trial of a run shares it
    except OSError:
        raise InspectExportError(f"{layout.SCHEDULE} is missing or unreadable") from None
    try:
        # trials/, then void-<n>/ in order; every line is read and checked here, none kept
        trials = [_Trial(trial) for trial in EvidenceFolder(root).trials()]
    except FormatProblem as exc:
        raise InspectExportError(str(exc)) from None
    if not trials:
        raise InspectExportError(f"{printable(str(root))}: no trials to export")

    from inspect_ai.log import write_eval_log  # slow to import: only once the input is known good

    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        names = []
        for trial in trials:
            log = _eval_log(trial, manifest, conditions.get(trial.result.condition), ladder, system_prompt,
                            schedule_sha256)
            write_eval_log(log, location=str(staging / trial.name), format="eval")
            del log  # one trial's log at a time: not this one's beside the next one's while it is built
            names.append(trial.name)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp's 0700 would make OUT private: give it a folder's usual mode
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return {"trials": len(trials), "files": names}
