"""A batch of tasks (seed 003): one experiment folder per task under a batch folder, and a ledger.

    <batch>/
      batch.json                  the ledger: ceiling, policy, and per task its folder, trials and spend
      task-files/<task_id>/       the task file as run, its derived game definition and manifest
      runs/<task_id>/             the task's experiment folder (oakwatch verify / replay / report as any)
      agent-data/<task_id>/       policy cli: the task's data the client may read (OAKWATCH_TASK_DATA)
      reports/                    `oakwatch report <batch>`: tasks.md, tasks.json

The ceiling is the batch's: before each task the ledger's spend is checked (a task that would start
at or past it is recorded as not run), and what is left is the task's token budget and experiment
cost ceiling. Per-task success and the ability average are over these tasks only, kept apart from
any campaign (ladder) result.

The ledger names every planned task from the start and says when the batch finished, so a batch
whose process died (kill -9, power loss) is told apart from a finished one: verify fails it, as it
fails each run folder left unfinished; `recover BATCH` finishes every run folder and lists the task
that was running; `tasks run --resume BATCH` reruns what its folder lacks and runs the tasks left.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from sessions.evidence import layout
from sessions.evidence.folder import EvidenceFolder, TrialFolder
from sessions.tasks.tasks import PolicyChoice, Task, TaskError, TaskFile, compiled_rules, write_task_inputs

LEDGER = "batch.json"
TASK_FILES = "task-files"
AGENT_DATA = "agent-data"  # agent-data/<id>: what a cli client is given to read (outside its manifest's folder)
RUNS = "runs"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ceiling(_Strict):
    tokens: Annotated[int, Field(ge=1)] | None = None
    cost_usd: Annotated[float, Field(gt=0)] | None = None


class EpisodeOutcome(_Strict):
    """One episode of a trial, as its result.json records it (engine.battle.episodes)."""

    episode: int
    first_decision: int
    last_decision: int
    ended: str
    memory_writes: list[str] = []
    team: list[dict] | None = None  # the battle ruleset: the team applied in the episode (engine.battle.battle)


class TrialRow(_Strict):
    trial_key: str
    outcome: str
    termination_reason: str
    success: bool | None  # None: an invalid trial (not a measurement)
    episodes_used: int | None = None  # an episodic trial: the episodes it played
    success_episode: int | None = None  # the episode that reached the goal (None: never)
    tokens: int | None
    cost_usd: float | None


class TaskRow(_Strict):
    task_id: str
    title: str
    task_sha256: str
    status: Literal["run", "not-run: ceiling", "not-run: error"]
    folder: str | None  # relative to the batch
    episode_budget: int | None = None
    battle: dict | None = None  # a battle task's rules, verbatim (seed 004; engine.battle.battle BattleSettings)
    detail: str | None = None
    trials: list[TrialRow] = []
    tokens: int | None = None  # spent by the task's trials (None: some trial's spend is unknown)
    cost_usd: float | None = None


class PlannedTask(_Strict):
    task_id: str
    path: str  # the task file as the batch was started with it (resolved)
    sha256: str


class Ledger(_Strict):
    batch_id: str
    created_utc: str
    policy: dict
    trials_per_task: int
    ceiling: Ceiling
    spent_tokens: int | None = 0
    spent_cost_usd: float | None = 0.0
    tasks: list[TaskRow] = []
    # Every task of the batch in order, written before the first runs (None: a ledger from before planning).
    planned: list[PlannedTask] | None = None
    finished_utc: str | None = None  # set once the last planned task has its row
    stopped: str | None = None  # why the batch ended early (recover: its process died); resume clears it


class BatchError(ValueError):
    """A batch that cannot be recovered or resumed as asked: one line; nothing was written."""


def read_ledger(batch: Path) -> Ledger:
    """The ledger; ValueError (one line) when it is missing or malformed."""
    path = batch / LEDGER
    try:
        return Ledger.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        first = exc.errors()[0] if hasattr(exc, "errors") else {"msg": str(exc), "loc": ()}
        raise ValueError(f"{path}: not a batch ledger ({'.'.join(map(str, first['loc']))}: {first['msg']})") from None


def _write_ledger(batch: Path, ledger: Ledger) -> None:
    from sessions.evidence.durable import write_atomic

    write_atomic(batch / LEDGER, (ledger.model_dump_json(indent=2) + "\n").encode())


def _add(a, b):
    return None if a is None or b is None else a + b


def trial_rows(folder: Path) -> list[TrialRow]:
    """The rows of an experiment folder's trials (voided attempts left out), from their result.json."""
    from engine.loop.outcomes import VALID_OUTCOMES

    rows = []
    for _trial, r in _sealed_results(folder):
        episodes = r.get("episodes")
        success = r["outcome"] == "success" if r["outcome"] in VALID_OUTCOMES else None
        t = r["telemetry"]
        rows.append(TrialRow(
            trial_key=r["trial_key"], outcome=r["outcome"], termination_reason=r["termination_reason"],
            success=success, episodes_used=len(episodes) if episodes else None,
            success_episode=(len(episodes) if episodes else 1) if success else None,
            tokens=t.get("tokens"), cost_usd=t.get("cost_usd")))
    return rows


def _sealed_results(folder: Path) -> Iterator[tuple[TrialFolder, dict]]:
    """Each sealed trial under trials/ (voided attempts left out), by key, with its result.json as plain data."""
    evidence = EvidenceFolder(folder)
    for trial in evidence.trials(voided=False):
        if trial.sealed():
            yield trial, evidence.json(f"{trial.rel}/{layout.RESULT}")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_batch(tasks: list[Task], choice: PolicyChoice, batch: Path, *, trials: int, ceiling: Ceiling,
              say: Callable[[str], None] = print) -> Ledger:
    """Run every task in order into a new batch folder; the ledger is rewritten after each task."""
    batch.mkdir(parents=True)
    ledger = Ledger(batch_id=batch.name, created_utc=_now(),
                    policy={k: v for k, v in vars(choice).items() if v is not None}, trials_per_task=trials,
                    ceiling=ceiling,
                    planned=[PlannedTask(task_id=t.id, path=str(t.path.resolve()), sha256=t.sha256) for t in tasks])
    _write_ledger(batch, ledger)
    for task in tasks:
        _run_task(task, choice, batch, ledger, say)
    ledger.finished_utc = _now()
    _write_ledger(batch, ledger)
    return ledger


def _row(task: Task) -> TaskRow:
    return TaskRow(task_id=task.id, title=task.file.title, task_sha256=task.sha256, status="run", folder=None,
                   episode_budget=task.file.episodes.budget if task.file.episodes else None,
                   battle=compiled_rules(task))


def _run_task(task: Task, choice: PolicyChoice, batch: Path, ledger: Ledger, say: Callable[[str], None]) -> None:
    """One task into runs/<id>, its row appended to the ledger (written)."""
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import PreflightError, prepare

    row = _row(task)
    tokens_left = _left(ledger.ceiling.tokens, ledger.spent_tokens)
    cost_left = _left(ledger.ceiling.cost_usd, ledger.spent_cost_usd)
    if (tokens_left is not None and tokens_left <= 0) or (cost_left is not None and cost_left <= 0):
        row.status, row.detail = "not-run: ceiling", "the batch's ceiling was spent before this task"
        ledger.tasks.append(row)
        _write_ledger(batch, ledger)
        say(f"  {task.id}: not run (the batch ceiling is spent)")
        return
    out = batch / RUNS / task.id
    with agent_sandbox(task, choice, batch / AGENT_DATA / task.id) as played:
        try:
            manifest = write_task_inputs(task, played, batch / TASK_FILES / task.id, ledger.trials_per_task,
                                         int(tokens_left) if tokens_left is not None else None, cost_left)
            prepared = prepare(manifest, out)
            folder = create_folder(prepared, out)
        except (TaskError, PreflightError) as exc:
            row.status, row.detail = "not-run: error", str(exc)
            ledger.tasks.append(row)
            _write_ledger(batch, ledger)
            say(f"  {task.id}: not run: {exc}")
            return
        ExperimentRunner(prepared, folder).run()
    row.folder = f"{RUNS}/{task.id}"
    ledger.tasks.append(row)
    _settle(row, batch, ledger, choice)
    _said(row, say)


def _settle(row: TaskRow, batch: Path, ledger: Ledger, choice: PolicyChoice | None) -> None:
    """The row's trials and spend read from its folder, the batch's spend summed again, the ledger written."""
    row.trials = trial_rows(batch / row.folder)
    row.tokens = _sum(r.tokens for r in row.trials)
    row.cost_usd = _sum(r.cost_usd for r in row.trials)
    paid = _paid(choice) if choice is not None else ledger.policy.get("policy") == "model"
    ledger.spent_tokens, ledger.spent_cost_usd = 0, 0.0
    for r in ledger.tasks:
        if r.status == "run":
            ledger.spent_tokens = _add(ledger.spent_tokens, r.tokens if r.tokens is not None else
                                       (None if paid else 0))
            ledger.spent_cost_usd = _add(ledger.spent_cost_usd, r.cost_usd if r.cost_usd is not None else
                                         (None if paid else 0.0))
    _write_ledger(batch, ledger)


def _said(row: TaskRow, say: Callable[[str], None]) -> None:
    won = sum(1 for r in row.trials if r.success)
    say(f"  {row.task_id}: {won}/{len(row.trials)} trial(s) succeeded"
        + (f" (episodes used: {', '.join(str(r.episodes_used) for r in row.trials)})"
           if row.episode_budget else ""))


# -- a batch whose process died ------------------------------------------------------------------

def run_folders(batch: Path) -> list[Path]:
    runs = batch / RUNS
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []


def unfinished(batch: Path, ledger: Ledger) -> list[str]:
    """Why the batch is not whole (empty: it is): a run folder its run did not finish, one the ledger does
    not list, or a ledger that names tasks it never reached without saying the batch stopped."""
    from sessions.audit.recover import needs_recovery

    listed = {r.folder for r in ledger.tasks if r.folder}
    out = []
    for folder in run_folders(batch):
        rel = f"{RUNS}/{folder.name}"
        if needs_recovery(folder):
            out.append(f"{rel}: its run did not finish (a .lock, a trial without a result or no summary)")
        elif rel not in listed:
            out.append(f"{rel}: a run folder the ledger does not list (the batch stopped after it)")
    if ledger.planned is not None and ledger.finished_utc is None and ledger.stopped is None:
        done = {r.task_id for r in ledger.tasks}
        left = [p.task_id for p in ledger.planned if p.task_id not in done]
        out.append(f"{LEDGER}: the batch did not finish" + (f" ({', '.join(left)} not run)" if left else ""))
    return out


def recover_batch(batch: Path) -> list[str]:
    """Finish every run folder under runs/ (sessions.recover), list in the ledger each task whose folder it
    lacks, and mark a batch that did not finish as stopped. Returns what was done, a line each. Raises
    FolderBusy, RecoverRefused or EvidenceError from a folder's recover, BatchError for the ledger."""
    from sessions.audit.recover import recover

    try:
        ledger = read_ledger(batch)
    except ValueError as exc:
        raise BatchError(str(exc)) from None
    done: list[str] = []
    for folder in run_folders(batch):
        r = recover(folder)
        if not r.nothing_to_do:
            done.append(f"{RUNS}/{folder.name}: {len(r.finished)} trial(s) closed as harness-error (process-died)")
    done += _list_unlisted_folders(batch, ledger)
    if ledger.finished_utc is None and ledger.stopped is None:
        ledger.stopped = "the batch's process died; recovered"
        _write_ledger(batch, ledger)
        left = [p.task_id for p in ledger.planned or [] if p.task_id not in {r.task_id for r in ledger.tasks}]
        done.append(f"{LEDGER}: marked stopped" + (f"; not run yet: {', '.join(left)}" if left else ""))
    return done


def _list_unlisted_folders(batch: Path, ledger: Ledger) -> list[str]:
    """A row in the ledger, in planned order, for each run folder it lacks (a process that died before
    writing it); a line each."""
    done: list[str] = []
    rows = {r.task_id: r for r in ledger.tasks}
    for folder in run_folders(batch):
        if folder.name in rows:
            continue
        row = _recovered_row(batch, folder.name)
        ledger.tasks.append(row)
        order = [p.task_id for p in ledger.planned or []]
        ledger.tasks.sort(key=lambda r: order.index(r.task_id) if r.task_id in order else len(order))
        _settle(row, batch, ledger, None)
        done.append(f"{LEDGER}: listed {row.task_id} ({len(row.trials)} trial(s) in {row.folder})")
    return done


def _recovered_row(batch: Path, name: str) -> TaskRow:
    """The ledger row of a run folder the ledger lacks, from the task file the batch copied for it."""
    import hashlib

    import yaml

    copy = batch / TASK_FILES / name / "task.yaml"
    try:
        data = copy.read_bytes()
        f = TaskFile.model_validate(yaml.safe_load(data))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise BatchError(f"{copy}: cannot read the task file the batch ran ({exc})") from None
    sha = hashlib.sha256(data).hexdigest()
    return TaskRow(task_id=f.task_id, title=f.title, task_sha256=sha, status="run",
                   folder=f"{RUNS}/{name}", episode_budget=f.episodes.budget if f.episodes else None,
                   battle={**f.battle.model_dump(mode="json"), "task_sha256": sha} if f.battle is not None
                   else None)  # as compiled_rules names them


def resume_batch(batch: Path, say: Callable[[str], None] = print) -> Ledger:
    """Finish a stopped batch: rerun each run folder's missing schedule positions (as `run --resume`),
    then run the planned tasks that have no row yet. BatchError (nothing written) when it cannot."""
    try:
        ledger = read_ledger(batch)
    except ValueError as exc:
        raise BatchError(str(exc)) from None
    if ledger.planned is None:
        raise BatchError(f"{batch / LEDGER}: a ledger from before batches could be resumed (it names no planned "
                         f"tasks)")
    problems = [p for p in unfinished(batch, ledger) if not p.startswith(f"{LEDGER}:")]
    if problems:
        raise BatchError(f"{batch}: {problems[0]}; `oakwatch recover {batch}` first")
    tasks = _tasks_not_reached(ledger)
    choice = PolicyChoice(**ledger.policy)
    changed = ledger.stopped is not None or ledger.finished_utc is None or bool(tasks)
    ledger.stopped = None
    for row in ledger.tasks:
        if row.status == "run" and _rerun_missing(row, batch, ledger, choice, say):
            changed = True
    for task in tasks:
        leftover = batch / TASK_FILES / task.id
        if leftover.is_dir() and not (batch / RUNS / task.id).exists():  # its inputs, written before it died
            import shutil

            shutil.rmtree(leftover)
        _run_task(task, choice, batch, ledger, say)
    if changed:  # a finished batch with nothing to rerun is left as it was
        ledger.finished_utc = _now()
        _write_ledger(batch, ledger)
    else:
        say("  nothing to resume: every task ran and every schedule position holds a valid trial")
    return ledger


def _tasks_not_reached(ledger: Ledger) -> list:
    """The planned tasks without a ledger row, each loaded and checked to be the file the batch started with."""
    tasks = []
    for planned in ledger.planned:
        if planned.task_id in {r.task_id for r in ledger.tasks}:
            continue
        tasks.append(_planned_task(planned))
    return tasks


def _planned_task(planned) -> Task:
    """A planned task loaded from its file, checked to be the file the batch started with."""
    from sessions.tasks.tasks import load_task

    try:
        task = load_task(Path(planned.path))
    except TaskError as exc:
        raise BatchError(f"task {planned.task_id}: {exc}") from None
    if task.sha256 != planned.sha256:
        raise BatchError(f"{planned.path}: not the task file the batch started with (it changed)")
    return task


def _rerun_missing(row, batch: Path, ledger: Ledger, choice: PolicyChoice, say: Callable[[str], None]) -> bool:
    """Rerun the schedule positions a task's run folder lacks (as `run --resume`); whether there were any."""
    from sessions.execute.runner import ExperimentRunner
    from sessions.execute.start import prepare_resume
    from sessions.preflight.experiment import PreflightError

    with _resumed_sandbox(row, batch, ledger, choice):
        try:
            prepared, folder, positions = prepare_resume(batch / row.folder)
        except PreflightError as exc:
            raise BatchError(str(exc)) from None
        if not positions:
            folder.leave_as_found()
            return False
        say(f"  {row.task_id}: rerunning schedule position(s) {', '.join(map(str, positions))}")
        ExperimentRunner(prepared, folder, positions=positions, resumed=True).run()
    _settle(row, batch, ledger, choice)
    _said(row, say)
    return True


@contextmanager
def agent_sandbox(task: Task, choice: PolicyChoice, data: Path):
    """For your own agent (`policy: cli`): the task's sandbox data (`oakwatch tasks data`) in `data`, the
    batch's agent-data/<task> folder the client may read (`client_reads`), named with the task's id by
    OAKWATCH_TASK_DATA and OAKWATCH_TASK_ID (the condition's `env`); yields the choice the task's manifest
    is written with. The folder stays with the batch: the frozen manifest names it, so a resumed batch
    finds it where its trials were given it (it used to be a temporary folder, gone at resume)."""
    if choice.policy != "cli":
        yield choice
        return
    from dataclasses import replace

    from sessions.tasks.task_data import task_data

    data.mkdir(parents=True, exist_ok=True)
    if task.file.battle is not None:
        for name, content in task_data(task).items():  # the same bytes again at resume
            (data / name).write_text(json.dumps(content, indent=1) + "\n")
    saved = {k: os.environ.get(k) for k in ("OAKWATCH_TASK_ID", "OAKWATCH_TASK_DATA")}
    os.environ.update(OAKWATCH_TASK_ID=task.id, OAKWATCH_TASK_DATA=str(data.resolve()))
    try:
        yield replace(choice, client_reads=(*choice.client_reads, str(data.resolve())),
                      env=("OAKWATCH_TASK_ID", "OAKWATCH_TASK_DATA"))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _resumed_sandbox(row, batch: Path, ledger: Ledger, choice: PolicyChoice):
    """The task's agent data again (policy cli) while a run folder's missing positions are rerun."""
    if choice.policy != "cli":
        yield
        return
    planned = {p.task_id: p for p in ledger.planned or []}.get(row.task_id)
    if planned is None:
        raise BatchError(f"{batch / LEDGER}: task {row.task_id} is not among the planned tasks")
    task = _planned_task(planned)
    with agent_sandbox(task, choice, batch / AGENT_DATA / row.task_id):
        yield


def _paid(choice: PolicyChoice) -> bool:
    return choice.policy == "model"  # a free policy spends nothing: its unknown (null) spend is zero


def _left(limit, spent):
    if limit is None:
        return None
    if spent is None:  # an unknown spend: nothing can be shown to be left
        return 0
    return limit - spent


def _sum(values):
    values = list(values)
    if not values or any(v is None for v in values):
        return None
    return sum(values)


# -- reading a batch back ----------------------------------------------------------------------

def is_batch(folder: Path) -> bool:
    return (folder / LEDGER).is_file()


def verify_batch(batch: Path, deep: bool = False) -> list[str]:
    """Problems: each run folder's own audit (sessions.audit.verify), and the ledger against the folders."""
    try:
        ledger = read_ledger(batch)
    except ValueError as exc:
        return [str(exc)]
    problems: list[str] = unfinished(batch, ledger)
    listed = {r.folder for r in ledger.tasks if r.folder}
    for folder in run_folders(batch):  # a folder the ledger does not list is audited all the same
        if f"{RUNS}/{folder.name}" not in listed:
            problems += _audit_problems(folder, f"{RUNS}/{folder.name}", deep)
    for row in ledger.tasks:
        problems += _row_problems(batch, row, deep)
    spent = [r.tokens for r in ledger.tasks if r.status == "run"]
    if ledger.spent_tokens is not None and None not in spent and sum(spent) != ledger.spent_tokens:
        problems.append(f"{LEDGER}: spent_tokens {ledger.spent_tokens}, the tasks spent {sum(spent)}")
    allowed = {e.name for e in batch.iterdir()} - {LEDGER, TASK_FILES, RUNS, AGENT_DATA, "reports"}
    problems += [f"{name}: an unknown file in the batch folder" for name in sorted(allowed)]
    return problems


def _audit_problems(folder: Path, rel: str, deep: bool) -> list[str]:
    """A run folder's own audit (sessions.audit.verify), each problem under its place in the batch."""
    from sessions.audit.verify import audit

    report = audit(folder, deep=deep)
    return [f"{rel}: {p}" for p in report.interrupted + report.problems]


def _row_problems(batch: Path, row, deep: bool) -> list[str]:
    """One ledger row against the batch: a task run has its run folder (audited), its task file's copy
    as the ledger hashed it, and the trials its folder's results list; one not run lists neither."""
    import hashlib

    if row.status != "run":
        if row.folder is not None or row.trials:
            return [f"{LEDGER}: task {row.task_id} is {row.status}, yet lists a folder or trials"]
        return []
    folder = batch / (row.folder or "")
    if row.folder != f"{RUNS}/{row.task_id}" or not folder.is_dir():
        return [f"{LEDGER}: task {row.task_id}: no run folder {row.folder}"]
    problems = _audit_problems(folder, row.folder, deep)
    try:
        task_copy = (batch / TASK_FILES / row.task_id / "task.yaml").read_bytes()
    except OSError:
        problems.append(f"{TASK_FILES}/{row.task_id}/task.yaml: missing")
    else:
        if hashlib.sha256(task_copy).hexdigest() != row.task_sha256:
            problems.append(f"{TASK_FILES}/{row.task_id}/task.yaml: not the task file the ledger ran")
    if trial_rows(folder) != row.trials:
        problems.append(f"{LEDGER}: task {row.task_id}: the trials it lists differ from {row.folder}'s results")
    return problems


def success_curve(rows: list[TrialRow], budget: int) -> list[float | None]:
    """Seed 004's success within E episodes: for E = 1..budget, the fraction of valid trials whose goal
    was reached in an episode <= E (None when no trial is valid)."""
    valid = [r for r in rows if r.success is not None]
    if not valid:
        return [None] * budget
    return [round(sum(1 for r in valid if r.success_episode is not None and r.success_episode <= e) / len(valid), 6)
            for e in range(1, budget + 1)]


def batch_report(batch: Path) -> dict:
    """Per-task success, the ability average over tasks, the success-within-E curve of episodic tasks,
    and each episodic trial's change log (its memory writes per episode), from the ledger and results."""
    ledger = read_ledger(batch)
    tasks = []
    pooled_rows: list[TrialRow] = []
    for row in ledger.tasks:
        entry = _task_entry(batch, row)
        if "episode_budget" in entry:
            pooled_rows += row.trials
        tasks.append(entry)
    listed = {r.task_id for r in ledger.tasks}
    for planned in ledger.planned or []:  # a batch that stopped early: the tasks it never reached
        if planned.task_id not in listed:
            tasks.append({"task_id": planned.task_id, "title": None, "status": "not-run: stopped", "trials": 0,
                          "valid_trials": 0, "success_rate": None, "tokens": None, "cost_usd": None})
    rates = [t["success_rate"] for t in tasks if t["success_rate"] is not None]
    budgets = [t["episode_budget"] for t in tasks if "episode_budget" in t]
    # every episodic trial of the batch together (seed 004's headline curve), up to the largest budget
    pooled = success_curve(pooled_rows, max(budgets)) if budgets else None
    return {"batch_id": ledger.batch_id, "policy": ledger.policy, "ceiling": ledger.ceiling.model_dump(),
            "stopped": ledger.stopped,
            "spent_tokens": ledger.spent_tokens, "spent_cost_usd": ledger.spent_cost_usd,
            # the mean of per-task success rates, each task weighted alike; campaign results are not in it
            "ability_average": round(sum(rates) / len(rates), 6) if rates else None,
            "tasks_counted": len(rates), "success_within_episodes_pooled": pooled,
            "first_episode_win_rate_pooled": pooled[0] if pooled else None, "tasks": tasks}


def _task_entry(batch: Path, row: TaskRow) -> dict:
    """One task's line of the report; an episodic task that ran adds its curve and change log."""
    valid = [r for r in row.trials if r.success is not None]
    rate = round(sum(1 for r in valid if r.success) / len(valid), 6) if valid else None
    entry = {"task_id": row.task_id, "title": row.title, "status": row.status, "trials": len(row.trials),
             "valid_trials": len(valid), "success_rate": rate, "tokens": row.tokens, "cost_usd": row.cost_usd}
    if row.battle is not None:
        entry["battle"] = row.battle
    if row.episode_budget is not None and row.status == "run":
        entry["episode_budget"] = row.episode_budget
        entry["success_within_episodes"] = success_curve(row.trials, row.episode_budget)
        entry["first_episode_win_rate"] = entry["success_within_episodes"][0]
        entry["change_log"] = change_logs(batch / row.folder)
    return entry


def change_logs(folder: Path) -> dict[str, list[dict]]:
    """Per trial, per episode: what the agent changed (its memory store's writes), from result.json, each
    write with the fact it wrote as memory.jsonl recorded it (kind, predicate, object)."""
    out = {}
    for trial, r in _sealed_results(folder):
        if r.get("episodes"):
            facts = _written_facts(trial.path / layout.MEMORY)
            out[r["trial_key"]] = [{**e, "writes": [{"fact_id": f, **facts.get(f, {})} for f in e["memory_writes"]]}
                                   for e in r["episodes"]]
    return out


def _written_facts(memory: Path) -> dict[str, dict]:
    facts = {}
    try:
        lines = memory.read_text().splitlines()
    except OSError:
        return facts
    for line in lines:
        op = json.loads(line)
        fact = op.get("fact") if op.get("op") == "write" else None
        if fact and op.get("fact_id"):
            facts[op["fact_id"]] = {k: fact.get(k) for k in ("kind", "predicate", "object")}
    return facts


def report_markdown(doc: dict) -> str:
    lines = [f"# Task batch {doc['batch_id']}", "",
             f"Policy: {json.dumps(doc['policy'])}. Ceiling: {json.dumps(doc['ceiling'])}; spent "
             f"{doc['spent_tokens']} tokens, ${doc['spent_cost_usd']}.", "",
             "| task | status | trials | valid | success rate |", "|---|---|---|---|---|"]
    for t in doc["tasks"]:
        rate = "n/a" if t["success_rate"] is None else f"{t['success_rate']:.3f}"
        lines.append(f"| {t['task_id']} | {t['status']} | {t['trials']} | {t['valid_trials']} | {rate} |")
    avg = doc["ability_average"]
    if doc.get("success_within_episodes_pooled"):
        curve = doc["success_within_episodes_pooled"]
        lines += ["", "Pooled over every episodic trial: success within E episodes "
                  + ", ".join(f"E={e}: {'n/a' if v is None else f'{v:.3f}'}" for e, v in enumerate(curve, 1))
                  + f"; first-episode win rate {_rate(doc['first_episode_win_rate_pooled'])}."]
    lines += ["", f"Ability average (mean per-task success over {doc['tasks_counted']} task(s); campaign "
              f"results are reported apart, never in it): {'n/a' if avg is None else f'{avg:.3f}'}"]
    for t in doc["tasks"]:
        if "battle" in t:
            b = t["battle"]
            lines += ["", f"{t['task_id']}'s battle rules: party limit {b['party_limit']}, level cap "
                      f"{b['level_cap'] if b['level_cap'] is not None else 'none'}, difficulty "
                      f"{json.dumps(b['difficulty'], sort_keys=True)}, pool {json.dumps(b['pool'], sort_keys=True)}"]
    for t in doc["tasks"]:
        if "success_within_episodes" in t:
            lines += _markdown_episodic(t)
    return "\n".join(lines) + "\n"


def _markdown_episodic(t: dict) -> list[str]:
    """An episodic task's section: its success-within-E table and its change log."""
    lines = ["", f"## {t['task_id']}: success within E episodes (budget {t['episode_budget']})", "",
             "| E | " + " | ".join(str(e) for e in range(1, t["episode_budget"] + 1)) + " |",
             "|---|" + "---|" * t["episode_budget"],
             "| success | " + " | ".join("n/a" if v is None else f"{v:.3f}"
                                        for v in t["success_within_episodes"]) + " |",
             "", f"First-episode win rate: {_rate(t.get('first_episode_win_rate'))}.",
             "", "Change log (the memory store's writes per episode, and the team applied in it):", ""]
    for key, episodes in t["change_log"].items():
        for e in episodes:
            writes = "; ".join(f"{w['fact_id']} {w.get('kind')}: {w.get('object')}" for w in e["writes"]) or "none"
            team = (f"; team {', '.join(m['species'] for m in e['team'])}" if e.get("team") else "")
            lines.append(f"- {key} episode {e['episode']} (decisions {e['first_decision']}-"
                         f"{e['last_decision']}, ended {e['ended']}): wrote {writes}{team}")
    return lines


def _rate(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _curve_svg(curves: list[tuple[str, list[float | None]]], width: int = 420, height: int = 180) -> str:
    """Success within E episodes as lines (E on x, 0..1 on y); None points are left out."""
    n = max((len(c) for _, c in curves), default=1)
    pad = 30

    def x(e: int) -> float:
        return pad + (width - 2 * pad) * (e - 1) / max(n - 1, 1)

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * v

    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
              "#17becf", "#000000"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
             f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="#888"/>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{y(1)}" stroke="#888"/>',
             f'<text x="4" y="{y(1) + 4}" font-size="10">1</text><text x="4" y="{y(0) + 4}" font-size="10">0</text>',
             f'<text x="{width - pad}" y="{height - 8}" font-size="10">E={n}</text>']
    for i, (name, curve) in enumerate(curves):
        pts = " ".join(f"{x(e):.1f},{y(v):.1f}" for e, v in enumerate(curve, 1) if v is not None)
        color = colors[i % len(colors)]
        width_px = 3 if name == "pooled" else 1.5
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="{width_px}" points="{pts}">'
                     f'<title>{html.escape(name)}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def report_html(doc: dict) -> str:
    """The batch report as one self-contained HTML page: the per-task table, the success-within-E curves
    (per task and pooled) drawn as SVG, first-episode win rates, and each trial's team change log."""
    esc = html.escape
    rows = "".join(
        f"<tr><td>{esc(t['task_id'])}</td><td>{esc(t['status'])}</td><td>{t['trials']}</td><td>{t['valid_trials']}</td>"
        f"<td>{_rate(t['success_rate'])}</td><td>{_rate(t.get('first_episode_win_rate'))}</td>"
        f"<td>{esc(str(t['battle']['party_limit']) if 'battle' in t else '')}</td>"
        f"<td>{esc(str(t['battle']['level_cap']) if 'battle' in t else '')}</td></tr>" for t in doc["tasks"])
    curves = [(t["task_id"], t["success_within_episodes"]) for t in doc["tasks"] if "success_within_episodes" in t]
    if doc.get("success_within_episodes_pooled"):
        curves.append(("pooled", doc["success_within_episodes_pooled"]))
    legend = "".join(f"<li>{esc(name)}: {', '.join(_rate(v) for v in c)}</li>" for name, c in curves)
    logs = []
    for t in doc["tasks"]:
        for key, episodes in t.get("change_log", {}).items():
            def team(e: dict) -> str:
                return ", ".join(m["species"] for m in e["team"]) if e.get("team") else "none"
            items = "".join(
                f"<li>episode {e['episode']} (decisions {e['first_decision']}-{e['last_decision']}, ended "
                f"{esc(str(e['ended']))}): team {esc(team(e))}"
                f"; wrote {esc('; '.join(str(w['fact_id']) for w in e['writes']) or 'none')}</li>" for e in episodes)
            logs.append(f"<h3>{esc(t['task_id'])} {esc(key)}</h3><ul>{items}</ul>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Task batch " + esc(doc["batch_id"])
            + "</title><style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 6px}"
            "table{border-collapse:collapse}</style></head><body>"
            f"<h1>Task batch {esc(doc['batch_id'])}</h1><p>Policy: {esc(json.dumps(doc['policy']))}. Ability average: "
            f"{_rate(doc['ability_average'])}; pooled first-episode win rate: "
            f"{_rate(doc.get('first_episode_win_rate_pooled'))}.</p>"
            "<table><tr><th>task</th><th>status</th><th>trials</th><th>valid</th><th>success rate</th>"
            "<th>first-episode win rate</th><th>party limit</th><th>level cap</th></tr>" + rows + "</table>"
            "<h2>Success within E episodes</h2>" + (_curve_svg(curves) if curves else "<p>no episodic task</p>")
            + f"<ul>{legend}</ul><h2>Change log (team per episode)</h2>" + "".join(logs) + "</body></html>\n")
