"""`oakwatch tasks list|run|derive|data`: the task catalog (seed 003), a batch of its tasks, a derived task.

Exit status: 0 every task ran and every trial succeeded; 1 a task failed, was not run (the batch's
ceiling) or a trial was invalid; 2 bad input (a bad task file, bad options), nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.commands import EXIT_OK, EXIT_PROBLEMS
from app.commands import fail as _fail


def add_parsers(sub) -> None:
    from engine.providers import PROVIDERS

    tasks = sub.add_parser("tasks", help="the task catalog: list its tasks, run a batch of them")
    tsub = tasks.add_subparsers(dest="tasks_command", required=True)
    listing = tsub.add_parser("list", help="every task file of the catalog, checked (templates marked)")
    listing.add_argument("--dir", type=Path, help="a folder of task files (default: the bundled assets/tasks)")
    run = tsub.add_parser("run", help="run tasks as a batch: an experiment folder per task, a ledger, a ceiling")
    run.add_argument("tasks", nargs="*", metavar="TASK",
                     help="task ids of the catalog, or task files (default: every runnable task of the catalog)")
    run.add_argument("--dir", type=Path, help="a folder of task files (default: the bundled assets/tasks)")
    run.add_argument("--output", type=Path, help="new batch folder (required unless --resume)")
    run.add_argument("--resume", type=Path, metavar="BATCH",
                     help="finish a stopped batch (after `oakwatch recover BATCH`): rerun what its run folders lack, "
                          "then run the tasks it did not reach, with its own policy, trials and ceiling")
    run.add_argument("--policy", choices=["scripted", "random", "model", "cli"], default="scripted",
                     help="who plays: each task's reference script (default), a seeded random policy, a model "
                          "(--provider, --model), or your own agent over MCP (--agent)")
    run.add_argument("--agent", metavar="COMMAND", help="with --policy cli: the agent's command, naming {mcp_url} or "
                                                        "{mcp_config} (docs/mcp.md, policy: cli)")
    run.add_argument("--client-reads", action="append", default=[], metavar="PATH",
                     help="with --policy cli: a path the agent may read (its installation; repeat)")
    run.add_argument("--allow-file-and-shell-tools", action="store_true",
                     help="with --policy cli: the agent may use its own file and shell tools (seed 004's sandbox; "
                          "the condition's allow_file_and_shell_tools)")
    run.add_argument("--seed", type=int, default=0, help="with --policy random: the generator seed (default 0)")
    run.add_argument("--provider", choices=list(PROVIDERS), help="with --policy model")
    run.add_argument("--model", help="with --policy model: the exact model id")
    run.add_argument("--base-url", help="with --policy model: the API's address")
    run.add_argument("--api", help="with --policy model: the API (default: the provider's first)")
    run.add_argument("--trials", type=int, default=1, help="trials per task (default 1)")
    run.add_argument("--max-tokens", type=int, metavar="N", help="the batch's token ceiling (input + output)")
    run.add_argument("--max-cost-usd", type=float, metavar="USD", help="the batch's cost ceiling")
    derive = tsub.add_parser("derive", help="a harder battle task from a knobs file (seed 004's difficulty knobs)")
    derive.add_argument("knobs", type=Path, help="the knobs file: base task, new task id, knobs (docs/tasks.md)")
    derive.add_argument("--output", type=Path, required=True, help="the new task file")
    derive.add_argument("--dir", type=Path, help="the catalog the base task id names (default: assets/tasks)")
    data = tsub.add_parser("data", help="a battle task's game data as JSON files (seed 004's sandbox)")
    data.add_argument("task", help="a task id of the catalog, or a task file")
    data.add_argument("--output", type=Path, required=True, help="new folder for species/moves/items/task.json")
    data.add_argument("--dir", type=Path, help="a folder of task files (default: the bundled assets/tasks)")


def run(args: argparse.Namespace) -> int:
    from sessions.tasks.tasks import TASKS_DIR, TaskError, catalog

    folder = args.dir or TASKS_DIR
    if args.tasks_command == "list":
        try:
            tasks = catalog(folder)
        except TaskError as exc:
            return _fail(str(exc))
        for t in tasks:
            f = t.file
            goal = ("rungs " + " ".join(f.goal.milestones)) if f.goal.milestones else "probe " + ", ".join(
                p.model_dump_json(exclude_none=True) for p in f.goal.probe)
            episodes = f" episodes<={f.episodes.budget}" if f.episodes else ""
            if f.battle is not None:  # seed 004's battle rules, in brief
                cap = f.battle.level_cap if f.battle.level_cap is not None else "none"
                episodes += f" party<={f.battle.party_limit} level-cap={cap}"
            state = "template" if t.template else "ready"
            game = t.game.id if t.game else "?"
            print(f"{f.task_id:24} {state:8} {game:30} {f.track:10} {goal}{episodes}  {f.title}")
        return EXIT_OK
    if args.tasks_command == "derive":
        return _derive(args, folder)
    if args.tasks_command == "data":
        return _data(args, folder)
    return _run(args, folder)


def _data(args: argparse.Namespace, folder: Path) -> int:
    from sessions.tasks.task_data import TaskDataError, write_task_data
    from sessions.tasks.tasks import TaskError, catalog, load_task

    try:
        if _is_file(args.task):
            task = load_task(Path(args.task))
        else:
            task = next((t for t in catalog(folder) if t.id == args.task), None)
            if task is None:
                return _fail(f"no task {args.task!r} in {folder} (`oakwatch tasks list` lists them)")
        written = write_task_data(task, args.output)
    except (TaskError, TaskDataError) as exc:
        return _fail(str(exc))
    print(f"oakwatch tasks data: {', '.join(p.name for p in written)} in {args.output}")
    return EXIT_OK


def _derive(args: argparse.Namespace, folder: Path) -> int:
    from sessions.tasks.task_knobs import KnobsError, derive_task
    from sessions.tasks.tasks import load_task

    try:
        path = derive_task(args.knobs, args.output, folder)
    except KnobsError as exc:
        return _fail(str(exc))
    task = load_task(path)
    print(f"oakwatch tasks derive: {path} (task {task.id}, sha256 {task.sha256}; from "
          f"{task.file.battle.derived.base_task} {task.file.battle.derived.base_sha256[:12]})")
    return EXIT_OK


def _run(args: argparse.Namespace, folder: Path) -> int:
    from sessions.tasks.task_batch import Ceiling, run_batch
    from sessions.tasks.tasks import PolicyChoice, TaskError

    if args.resume is not None:
        if _resume_extras(args):
            return _fail("--resume uses the batch's own tasks, policy, trials and ceiling: give nothing else")
        return _resume(args.resume)
    problem = _run_option_problem(args)
    if problem is not None:
        return _fail(problem)
    try:
        tasks = _chosen_tasks(args.tasks, folder)
    except TaskError as exc:
        return _fail(str(exc))
    problem = tasks if isinstance(tasks, str) else _task_problem(tasks, args.policy)
    if problem is not None:
        return _fail(problem)
    choice = PolicyChoice(args.policy, seed=args.seed, provider=args.provider, model=args.model,
                          base_url=args.base_url, api=args.api, agent=args.agent,
                          allow_file_and_shell_tools=args.allow_file_and_shell_tools or None,
                          client_reads=tuple(str(Path(p).resolve()) for p in args.client_reads))
    print(f"oakwatch tasks: {len(tasks)} task(s) → {args.output}")
    ledger = run_batch(tasks, choice, args.output, trials=args.trials,
                       ceiling=Ceiling(tokens=args.max_tokens, cost_usd=args.max_cost_usd))
    print(f"batch: {args.output} (check with: oakwatch verify {args.output}; report: oakwatch report {args.output})")
    ok = all(r.status == "run" and r.trials and all(x.success for x in r.trials) for r in ledger.tasks)
    return EXIT_OK if ok else EXIT_PROBLEMS


def _resume_extras(args: argparse.Namespace) -> bool:
    """Whether anything besides --resume was given (a resumed batch keeps its own options)."""
    given = [o for o in ("tasks", "dir", "output", "provider", "model", "base_url", "api", "max_tokens",
                         "max_cost_usd") if getattr(args, o)]
    return bool(given) or args.policy != "scripted" or args.trials != 1 or args.seed != 0


def _run_option_problem(args: argparse.Namespace) -> str | None:
    """The first bad option of `tasks run` (checked in this order), or None."""
    if args.output is None:
        return "tasks run needs --output BATCH (a new folder), or --resume BATCH"
    problem = _limit_problem(args) or _policy_problem(args)
    if problem is not None:
        return problem
    if args.output.exists():
        return f"output folder already exists: {args.output} (choose a new one)"
    return None


def _limit_problem(args: argparse.Namespace) -> str | None:
    """--trials, --max-tokens and --max-cost-usd out of range."""
    if not 1 <= args.trials <= 1000:
        return f"--trials {args.trials}: give a number from 1 to 1000"
    if args.max_tokens is not None and args.max_tokens < 1:
        return "--max-tokens must be at least 1"
    if args.max_cost_usd is not None and not args.max_cost_usd > 0:
        return "--max-cost-usd must be above 0"
    return None


def _policy_problem(args: argparse.Namespace) -> str | None:
    """Options that go with a policy other than the one given."""
    model_opts = [o for o in ("provider", "model", "base_url", "api") if getattr(args, o) is not None]
    if args.policy == "model" and (args.provider is None or args.model is None):
        return "--policy model needs --provider and --model"
    if args.policy != "model" and model_opts:
        return f"--{model_opts[0].replace('_', '-')} goes with --policy model"
    if (args.policy == "cli") != (args.agent is not None):
        return "--policy cli and --agent COMMAND go together"
    if args.allow_file_and_shell_tools and args.policy != "cli":
        return "--allow-file-and-shell-tools goes with --policy cli"
    return None


def _chosen_tasks(names: list[str], folder: Path) -> list | str:
    """The tasks named (ids of the catalog or task files), or every runnable task of the catalog;
    a message when a name is unknown. Raises TaskError for a bad task file."""
    from sessions.tasks.tasks import catalog, load_task

    if not names:
        return [t for t in catalog(folder) if t.template is None]
    known = {t.id: t for t in catalog(folder)} if any(not _is_file(n) for n in names) else {}
    tasks = []
    for name in names:
        if _is_file(name):
            tasks.append(load_task(Path(name)))
        elif name in known:
            tasks.append(known[name])
        else:
            return f"no task {name!r} in {folder} (`oakwatch tasks list` lists them)"
    return tasks


def _task_problem(tasks: list, policy: str) -> str | None:
    """Why this list of tasks cannot run as a batch under `policy`, or None."""
    for t in tasks:
        if t.template is not None:
            return f"{t.path}: {t.template}"
        if policy == "scripted" and t.file.reference_script is None:
            return f"{t.path}: no reference_script, so --policy scripted cannot play it"
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        return "a task is named twice"
    return None


def _resume(batch: Path) -> int:
    from sessions.tasks.task_batch import BatchError, is_batch, resume_batch

    if not is_batch(batch):
        return _fail(f"{batch}: not a task batch (no batch.json)")
    print(f"oakwatch tasks: resuming {batch}")
    try:
        ledger = resume_batch(batch)
    except BatchError as exc:
        return _fail(str(exc))
    print(f"batch: {batch} (check with: oakwatch verify {batch}; report: oakwatch report {batch})")
    ok = all(r.status == "run" and r.trials and all(x.success for x in r.trials) for r in ledger.tasks)
    return EXIT_OK if ok else EXIT_PROBLEMS


def recover_main(batch: Path) -> int:
    """`oakwatch recover BATCH`: every run folder its run left unfinished, finished as `recover DIR` does;
    the task that was running listed in the ledger; a batch that did not finish marked stopped."""
    from sessions.audit.recover import RecoverRefused
    from sessions.evidence.durable import EvidenceError
    from sessions.evidence.experiment_folder import FolderBusy
    from sessions.tasks.task_batch import BatchError, recover_batch

    try:
        done = recover_batch(batch)
    except (FolderBusy, BatchError) as exc:
        return _fail(str(exc))
    except RecoverRefused as exc:
        print(f"oakwatch recover: {exc}", file=sys.stderr)
        return EXIT_PROBLEMS
    except EvidenceError as exc:
        print(f"oakwatch recover: {exc}; free space and run it again", file=sys.stderr)
        return EXIT_PROBLEMS
    if not done:
        print(f"oakwatch recover: {batch} is finished already; nothing to recover")
        return EXIT_OK
    for line in done:
        print(f"  {line}")
    print(f"oakwatch recover: {batch} recovered; `oakwatch verify {batch}` checks it, `oakwatch tasks run --resume "
          f"{batch}` reruns what is missing and runs the tasks left")
    return EXIT_OK


def _is_file(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name


def verify_main(batch: Path, deep: bool, root_options: bool) -> int:
    """`oakwatch verify BATCH`: each task's run folder audited as any evidence folder, and the ledger
    against the folders' results. Root hashes are per experiment folder: give one to --print-root."""
    from sessions.tasks.task_batch import verify_batch

    if root_options:
        return _fail(f"{batch} is a task batch: --print-root and --expect-root take one of its run folders "
                     f"({batch}/runs/TASK)")
    from sessions.tasks.task_batch import read_ledger

    problems = verify_batch(batch, deep=deep)
    if problems:
        for p in problems:
            print(f"FAIL {p}", file=sys.stderr)
        print(f"oakwatch verify: {len(problems)} problem(s) in {batch}", file=sys.stderr)
        return EXIT_PROBLEMS
    ledger = read_ledger(batch)
    stopped = f"; stopped early ({ledger.stopped}): `oakwatch tasks run --resume {batch}` finishes it" \
        if ledger.stopped else ""
    print(f"oakwatch verify: {batch} OK (every task's run folder verifies; the ledger matches their results{stopped})")
    return EXIT_OK


def report_main(batch: Path, output: Path | None) -> int:
    """`oakwatch report BATCH`: tasks.md, tasks.html and tasks.json (per-task success, the ability average, each
    episodic task's success-within-E curve and change log), in BATCH/reports/ or OUT."""
    import json

    from sessions.tasks.task_batch import batch_report, read_ledger, report_html, report_markdown, unfinished

    try:
        left = unfinished(batch, read_ledger(batch))
        if left:  # a report of a batch still being written, or whose process died, would count part of it
            return _fail(f"{batch} is not finished: {left[0]}; `oakwatch recover {batch}` first")
        doc = batch_report(batch)
    except ValueError as exc:
        return _fail(str(exc))
    out = output or batch / "reports"
    if out.exists() and not out.is_dir():
        return _fail(f"{out}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "tasks.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / "tasks.md").write_text(report_markdown(doc))
        (out / "tasks.html").write_text(report_html(doc))
    except OSError as exc:
        return _fail(f"cannot write the report ({exc.strerror or exc})")
    print(report_markdown(doc), end="")
    print(f"oakwatch report: {out / 'tasks.md'}, tasks.html and tasks.json written")
    return EXIT_OK
