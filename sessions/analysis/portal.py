"""`oakwatch portal DIR…`: one self-contained static results site (issue 32 item 5).

Two benchmarks are kept apart, never averaged together: **PokeBench focused** (task batches: per-task
success, the ability average = mean of per-task success rates, docs/tasks.md) and **PokeBench Long**
(campaign folders: a whole playthrough's ladder, seed 002's overall long-horizon score from
sessions.analysis.metrics.long_horizon, per trial, averaged). Every figure links to the evidence
folder it came from and shows that folder's root (`oakwatch verify --print-root`). No network, inline CSS.

A model is one id across every folder given (the condition's model, else its policy): a task two batches ran
with the same model is one row pooling their trials and linking both folders. Every link is relative to the
site, so the site and its evidence copied elsewhere together still link up.
"""

from __future__ import annotations

import html
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from sessions.evidence.folder_kind import evidence_problem
from sessions.evidence.roots import folder_root
from sessions.tasks.task_batch import is_batch

FOCUSED, LONG = "PokeBench focused", "PokeBench Long"
CSS = """body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%;table-layout:auto;margin:1rem 0}
th,td{border:1px solid #ccc;padding:.35rem .6rem;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{background:#f2f2f2}code{font-size:12px;overflow-wrap:anywhere}nav{margin-bottom:1rem}
nav a{margin-right:1rem}.note{color:#555}"""


class PortalError(ValueError):
    """Bad input: one line, exit 2, nothing written."""


@dataclass
class Row:
    """One figure: a benchmark, a task (or the campaign), a model, its value and its evidence."""

    benchmark: str
    task: str
    model: str
    trials: int
    value: float | None  # success rate (focused) or long-horizon score (Long); None when no valid trial
    folder: Path
    root: str | None
    detail: str = ""
    successes: int = 0  # focused rows: the valid trials won (what pooling batches adds up)
    more: list[tuple[Path, str | None]] = field(default_factory=list)  # pooled rows' folders and roots


@dataclass
class Site:
    rows: list[Row] = field(default_factory=list)


def _model_of_batch(ledger: dict) -> str:
    policy = ledger.get("policy") or {}
    name = policy.get("model") or policy.get("policy") or "unknown"
    return str(name)


def _read_json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PortalError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(doc, dict):
        raise PortalError(f"{path}: not a JSON object")
    return doc


def _batch_rows(batch: Path) -> list[Row]:
    ledger = _read_json(batch / "batch.json")
    model = _model_of_batch(ledger)
    rows = []
    for task in ledger.get("tasks", []):
        folder = batch / str(task.get("folder") or f"runs/{task['task_id']}")
        valid = [t for t in task.get("trials", []) if t.get("outcome") in ("success", "failure")]
        rate = sum(bool(t.get("success")) for t in valid) / len(valid) if valid else None
        root = folder_root(folder) if folder.is_dir() else None
        rows.append(Row(FOCUSED, str(task["task_id"]), model, len(valid), rate, folder, root,
                        str(task.get("status") or ""), sum(bool(t.get("success")) for t in valid)))
    return rows


def _condition_model(folder: Path, label: str) -> str:
    """A campaign condition's model id as a batch names its model: the frozen condition's model, else its
    policy (conditions/<label>.yaml); the label when that file does not say."""
    import yaml

    try:
        doc = yaml.safe_load((folder / "conditions" / f"{label}.yaml").read_text())
    except (OSError, ValueError):
        return label
    if not isinstance(doc, dict):
        return label
    return str(doc.get("model") or doc.get("policy") or label)


def _pooled(rows: list[Row]) -> list[Row]:
    """Focused rows of one task and model from several batches as one: trials and wins added up."""
    joined: dict[tuple[str, str], Row] = {}
    out = []
    for r in rows:
        first = joined.get((r.task, r.model)) if r.benchmark == FOCUSED else None
        if first is None:
            out.append(r)
            if r.benchmark == FOCUSED:
                joined[(r.task, r.model)] = r
            continue
        first.trials += r.trials
        first.successes += r.successes
        first.value = first.successes / first.trials if first.trials else None
        first.more.append((r.folder, r.root))
    return out


def _campaign_rows(folder: Path) -> list[Row]:
    """Per condition the mean of seed 002's overall score (sessions.analysis.metrics.long_horizon) over
    valid trials; null, with the scorer's reason, when any trial's score is unknown."""
    from engine.loop.records import TrialResult
    from sessions.analysis.metrics import load_game, long_horizon

    game, _ = load_game(folder)
    by_condition: dict[str, list[dict]] = {}
    for result_path in sorted(folder.glob("trials/*/result.json")):
        doc = _read_json(result_path)
        if doc.get("outcome") not in ("success", "failure"):
            continue  # invalid trials never count
        try:
            result = TrialResult.model_validate(doc)
        except ValueError:
            raise PortalError(f"{result_path}: not a trial result") from None
        by_condition.setdefault(result.condition, []).append(long_horizon(result, game, None))
    root = folder_root(folder)
    rows = []
    for condition, scores in sorted(by_condition.items()):
        known = [s["overall"] for s in scores if s.get("overall") is not None]
        value = sum(known) / len(known) if known and len(known) == len(scores) else None
        reason = next((s.get("reason") for s in scores if s.get("overall") is None), None) or ""
        rows.append(Row(LONG, "campaign", _condition_model(folder, condition), len(scores), value, folder, root,
                        reason))
    return rows


def collect(folders: list[Path]) -> Site:
    """Read every folder first; any bad one raises PortalError before anything is written."""
    site = Site()
    for folder in folders:
        if is_batch(folder):
            site.rows += _batch_rows(folder)
            continue
        problem = evidence_problem(folder)
        if problem is not None:
            raise PortalError(problem)
        site.rows += _campaign_rows(folder)
    if not site.rows:
        raise PortalError("no task batch or campaign with a result among the folders given")
    site.rows = _pooled(site.rows)
    return site


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def _e(text: object) -> str:
    return html.escape(str(text))


def _value(row: Row) -> str:
    return "null" if row.value is None else f"{row.value:.3f}"


def _evidence(row: Row, site_dir: Path) -> str:
    """Each folder of the row, linked relative to the site's folder, with its root."""
    cells = []
    for folder, root in [(row.folder, row.root), *row.more]:
        href = quote(Path(os.path.relpath(folder.resolve(), site_dir.resolve())).as_posix()) + "/"
        shown = _e(root) if root else "null"
        cells.append(f'<a href="{_e(href)}">{_e(folder.name)}</a><br><code>root {shown}</code>')
    return "<br>".join(cells)


def _page(title: str, body: str) -> str:
    nav = '<nav><a href="index.html">Index</a></nav>'
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{CSS}</style></head><body>{nav}<h1>{_e(title)}</h1>{body}</body></html>\n")


def _table(rows: list[Row], site_dir: Path) -> str:
    columns = ("benchmark", "task", "model", "valid trials", "value", "note", "evidence")
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    cells = []
    for r in rows:
        task = f'<a href="task-{slug(r.task)}.html">{_e(r.task)}</a>'
        model = f'<a href="model-{slug(r.model)}.html">{_e(r.model)}</a>'
        bench = f'<a href="bench-{slug(r.benchmark)}.html">{_e(r.benchmark)}</a>'
        cells.append(f"<tr><td>{bench}</td><td>{task}</td><td>{model}</td><td>{r.trials}</td>"
                     f"<td>{_value(r)}</td><td>{_e(r.detail)}</td><td>{_evidence(r, site_dir)}</td></tr>")
    return f"<table>{head}{''.join(cells)}</table>"


def ability_average(rows: list[Row]) -> float | None:
    """Focused rows only: the mean of per-task success rates (tasks with no valid trial left out)."""
    rates = [r.value for r in rows if r.benchmark == FOCUSED and r.value is not None]
    return sum(rates) / len(rates) if rates else None


def pages(site: Site, site_dir: Path) -> dict[str, str]:
    rows = site.rows
    out: dict[str, str] = {}
    benches = sorted({r.benchmark for r in rows})
    models = sorted({r.model for r in rows})
    items = "".join(f'<li><a href="bench-{slug(b)}.html">{_e(b)}</a></li>' for b in benches)
    mitems = "".join(f'<li><a href="model-{slug(m)}.html">{_e(m)}</a></li>' for m in models)
    out["index.html"] = _page("oakwatch results", f'<p class="note">{FOCUSED} and {LONG} are separate '
                              f"benchmarks: the Long campaign never enters the focused ability average.</p>"
                              f"<h2>Benchmarks</h2><ul>{items}</ul><h2>Models</h2><ul>{mitems}</ul>")
    for bench in benches:
        mine = [r for r in rows if r.benchmark == bench]
        summary = ""
        if bench == FOCUSED:
            summary = "".join(
                f"<p>{_e(m)}: ability average {_fmt(ability_average([r for r in mine if r.model == m]))}</p>"
                for m in models if any(r.model == m for r in mine))
        out[f"bench-{slug(bench)}.html"] = _page(bench, summary + _table(mine, site_dir))
    for task in sorted({r.task for r in rows}):
        out[f"task-{slug(task)}.html"] = _page(f"Task {task}", _table([r for r in rows if r.task == task], site_dir))
    for model in models:
        mine = [r for r in rows if r.model == model]
        focus = f"<p>{FOCUSED} ability average: {_fmt(ability_average(mine))}</p>"
        out[f"model-{slug(model)}.html"] = _page(f"Model {model}", focus + _table(mine, site_dir))
    return out


def _fmt(value: float | None) -> str:
    return "null" if value is None else f"{value:.3f}"


def build_portal(folders: list[Path], output: Path) -> list[Path]:
    site = collect(folders)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise PortalError(f"{output}: exists and is not an empty folder")
    written = pages(site, output)
    output.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in written.items():
        (output / name).write_text(text)
        paths.append(output / name)
    return paths
