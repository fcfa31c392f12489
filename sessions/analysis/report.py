"""`oakwatch report DIR`: the protocol's answer from an evidence folder (seed 000, "Calculate the result").

Writes report.md, a self-contained report.html (inline SVG from matplotlib, drawn by
sessions.analysis.report_plots: no network, no external CSS or JS), report.json, trials.csv and conditions.csv
into DIR/reports/ (the folder's report layer, with its own SHA256SUMS) or --output. Every figure
comes from sessions.analysis.metrics over the records; report.json holds each trial's numbers next to the
result.json values they came from. Before unblinding (no unblinded/ folder) conditions appear by
label only.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from engine.figures import money  # the one rendering every display uses
from sessions.analysis.metrics import (
    MEMORY_TYPES,
    SEVERITIES,
    SUMMARY_METRICS,
    actions_per_decision,
    blocks_of,
    condition_summary,
    confirmed_labels,
    kappa,
    load_game,
    read_annotation_layers,
    trial_metrics,
    variant_comparison,
)
from sessions.analysis.report_plots import Plot, plots, type_severity
from sessions.audit.package import package_info
from sessions.evidence import layout
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.layout import EVIDENCE_SUMS, GAME_COPY, PACKAGE_INFO, PACKAGE_MANIFEST
from sessions.evidence.reader import FormatProblem, TrialReader

PRODUCTIVE_DEFINITION = (
    "Productive action: an accepted action that changed the probed state (the position and every field the game "
    "definition names for progress, recovery, battle or a milestone) or the screen (the captured frame's hash), "
    "and is not part of a repeated route segment (the same ordered 4 transitions again with no milestone, "
    "progress or recovery event between; required backtracking excluded). Where the state could not be "
    "replayed, the screen alone decides and a transition is (frame before, action, frame after).")
PROTOCOL_SCORER = ("seed 000 protocol scoring: deepest ordered milestone and weighted points (the game "
                   "definition's ladder), with cost, actions and memory errors side by side")
TRIAL_COLUMNS = [
    "trial_key", "condition", "condition_id", "trial", "position", "attempt", "outcome", "valid", "end_reason",
    "variant", "deepest", "milestones", "points", "total_points", "cost_usd", "accepted_actions", "model_decisions",
    "tokens", "model_latency_s", "wall_s", "invalid_outputs", "rejected_actions", "productive_actions",
    "productive_action_rate", "battle_actions", "navigation_actions", "repeated_navigation_actions",
    "required_backtracking_actions", "repeat_overhead", "memory_errors", "material_errors", "memory_error_rate",
    "material_memory_error_rate", "memory_recovery_cost", "storage_quality", "use_quality", "cost_per_milestone",
    "cost_per_point", "actions_per_milestone", "progress_efficiency", "path_efficiency", "path_optimal_presses",
    "path_actions", "zero_progress", "state_source",
    "long_horizon_overall", "folder", "client_cost_usd", "client_tokens"]


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.0f}" \
            if abs(value) < 1e15 else str(value)
    return str(value)



# -- checks ----------------------------------------------------------------------------------------

def reconcile(root: Path, rows: list[dict]) -> dict:
    """Raw trial rows against summary.json: the run's own per-condition figures recomputed from the
    rows (trials/ only, valid ones), and each row's numbers against its result.json."""
    try:
        summary = json.loads((root / layout.SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        return {"ok": False, "problems": [f"{layout.SUMMARY}: unreadable ({exc})"]}
    current = [r for r in rows if r["folder"].startswith(layout.TRIALS + "/")]
    valid = [r for r in current if r["valid"]]
    problems = _against_summary(summary, valid)
    for r in rows:
        problems += _against_result(root, r)
    return {"ok": not problems, "problems": problems,
            "checked": f"{len(rows)} trial rows against their result.json; per-condition counts, medians and "
                       f"ranges against {layout.SUMMARY}"}


def _median_range(values: list) -> dict:
    from statistics import median

    if not values or any(v is None for v in values):
        return {"median": None, "min": None, "max": None}
    return {"median": median(values), "min": min(values), "max": max(values)}


def _summary_figures(mine: list[dict]) -> dict:
    """A condition's figures as summary.json states them, from its valid trial rows."""
    done = sum(r["outcome"] == "success" for r in mine)
    return {"valid": len(mine), "successful": done, "completion_rate": done / len(mine) if mine else None,
            "zero_progress": sum(r["zero_progress"] for r in mine),
            "progress_points": _median_range([r["points"] for r in mine]),
            "accepted_actions": _median_range([r["accepted_actions"] for r in mine]),
            "decisions": _median_range([r["model_decisions"] for r in mine]),
            "cost_usd": _median_range([r["cost_usd"] for r in mine])}


def _against_summary(summary: dict, valid: list[dict]) -> list[str]:
    """summary.json's per-condition and overall counts that the valid trial rows do not give."""
    problems = []
    for label, claimed in sorted(summary.get("per_condition", {}).items()):
        mine = sorted((r for r in valid if r["condition"] == label), key=lambda r: r["trial_key"])
        for key, value in _summary_figures(mine).items():
            if key in claimed and claimed[key] != value:
                problems.append(f"{layout.SUMMARY}: per_condition.{label}.{key} is {claimed[key]!r}, the trial rows "
                                f"give {value!r}")
    for key, value in (("valid", len(valid)), ("successful", sum(r["outcome"] == "success" for r in valid))):
        if summary.get(key) != value:
            problems.append(f"{layout.SUMMARY}: {key} is {summary.get(key)!r}, the trial rows give {value!r}")
    return problems


def _against_result(root: Path, r: dict) -> list[str]:
    """A trial row's numbers that its result.json does not give."""
    try:
        result = EvidenceFolder(root).json(f"{r['folder']}/{layout.RESULT}")
    except FormatProblem:
        return [f"{r['folder']}/{layout.RESULT}: unreadable"]
    tel = result.get("telemetry") or {}
    pairs = [("points", result.get("progress_points")), ("outcome", result.get("outcome")),
             ("accepted_actions", tel.get("accepted_actions", r["accepted_actions"])),
             ("model_decisions", tel.get("decisions", r["model_decisions"])),
             ("cost_usd", tel.get("cost_usd")), ("deepest", result.get("deepest_milestone"))]
    return [f"{r['folder']}: {name} is {r[name]!r} in the report, {value!r} in result.json"
            for name, value in pairs if r[name] != value]


def _json_or(root: Path, rel: str, default):
    """A JSON file of the evidence folder as plain data (EvidenceFolder.json); `default` when it is
    missing, unreadable or not JSON."""
    try:
        return EvidenceFolder(root).json(rel)
    except FormatProblem:
        return default


def _genesis(root: Path, rows: list[dict]) -> dict[str, dict]:
    return {r["folder"]: _json_or(root, f"{r['folder']}/{layout.TRIAL}", {}) for r in rows}


@dataclass(frozen=True)
class _Folder:
    """What every checklist line reads: the folder, its trial rows and what verify and the
    reconciliation found."""
    root: Path
    rows: list[dict]
    valid: list[dict]  # valid trials outside void blocks
    genesis: dict[str, dict]  # folder -> trial.json of each valid trial
    per_variant: str  # " per variant (N variants)" for a suite, else ""
    audit_problems: list[str]
    recon: dict
    game: object
    layers: dict
    confirmed: object

    def readers(self, rows: list[dict] | None = None):
        for r in self.rows if rows is None else rows:
            yield r, TrialReader(self.root / r["folder"], r["folder"])


def _item(text: str, status: str, detail: str) -> dict:
    return {"check": text, "status": status, "detail": detail}


def _same_inputs(f: _Folder) -> dict:
    gen = f.genesis
    # A suite (sessions.variants.suites) plays several variants: each variant's trials must match across conditions.
    variant_of = {r["folder"]: r.get("variant_index") for r in f.valid}
    groups = sorted({variant_of[g] for g in gen}, key=lambda v: -1 if v is None else v)
    keys = ("manifest_sha256", "schedule_sha256", "rom_sha256", "initial_state_sha256")
    same = bool(gen)
    for v in groups:
        mine = [g for folder, g in gen.items() if variant_of[folder] == v]
        same = same and all(len({g.get(k) for g in mine}) <= 1 for k in keys)
    conds = {g.get("condition_sha256") for g in gen.values()}
    audit_problems = f.audit_problems
    return _item("The ROM, initial save state, emulator configuration, prompts, schemas, and budgets have matching "
                 "hashes across conditions.", "pass" if same and not audit_problems else "fail",
                 f"every valid trial's trial.json names one manifest, schedule (frozen prompts, schemas, scoring), "
                 f"ROM and start-state SHA-256{f.per_variant} ({len(conds)} condition files); verify: "
                 f"{'clean' if not audit_problems else f'{len(audit_problems)} problem(s)'}" if gen
                 else "no valid trial")


def _first_frames(f: _Folder) -> dict:
    firsts: dict[str, tuple] = {}
    for r, reader in f.readers(f.valid):
        first = next(reader.trace(), None)
        firsts[r["trial_key"]] = (r.get("variant_index"), first.frame_sha256 if first else None)
    distinct = set(firsts.values())
    ok = bool(firsts) and len(distinct) == len({v for v, _ in distinct}) and None not in {h for _, h in distinct}
    return _item("The first captured frame is identical in every valid trial.", "pass" if ok else "fail",
                 f"{len(firsts)} valid trials, {len(distinct)} distinct first frame(s){f.per_variant}")


def _prompt_cores(f: _Folder) -> dict:
    cores: dict[object, dict[str, str]] = {}  # variant -> trial -> the first decision's prompt core
    for r in f.valid:
        prov = _json_or(f.root, f"{r['folder']}/{layout.RESULT}", {}).get("provenance") or {}
        if prov.get("model") is not None and prov.get("prompt_core_sha256") is not None:
            cores.setdefault(r.get("variant_index"), {})[r["trial_key"]] = prov["prompt_core_sha256"]
    odd = [f"{key} ({core[:12]}…)" for group in cores.values() for key, core in group.items()
           if core != next(iter(group.values()))]
    return _item("Model conditions were sent the same system prompt, response schema and first screen.",
                 "not applicable" if not cores else "pass" if not odd else "fail",
                 "no valid model trial" if not cores else
                 f"{sum(map(len, cores.values()))} valid model trials, one prompt_core_sha256{f.per_variant}"
                 if not odd else f"prompt_core_sha256 differs from the first trial's in: {', '.join(odd[:5])}")


def _early_retrievals(folder: str, reader: TrialReader) -> list[str]:
    """Facts a trial retrieved before writing them: memory carried in from elsewhere."""
    written: set[str] = set()
    leaks = []
    for op in reader.memory():
        if op.op == "write" and op.fact_id:
            written.add(op.fact_id)
        for fid in (op.fact_ids or []) if op.op in ("retrieve", "read") else []:
            if fid not in written and op.op == "retrieve":
                leaks.append(f"{folder}: decision {op.decision_id} retrieved {fid} before any write")
    return leaks


def _fresh_memory(f: _Folder) -> dict:
    leaks = [leak for r, reader in f.readers() if reader.exists(layout.MEMORY)
             for leak in _early_retrievals(r["folder"], reader)]
    return _item("No trial begins with memory, conversation, or cache state from a previous trial.",
                 "pass" if not leaks else "fail",
                 "every fact retrieved was written earlier in the same trial" if not leaks else "; ".join(leaks[:5]))


def _actions_logged(f: _Folder) -> dict:
    mismatch = []
    for r, reader in f.readers():
        # The compact array, not a dict: a dict entry per decision was 45 MB at a million (issue 31 item 8)
        per, _count = actions_per_decision(reader.inputs())
        mismatch += [f"{r['folder']} decision {t.decision_id}" for t in reader.trace()
                     if per.get(t.decision_id, 0) != t.accepted_actions]
    return _item("Every accepted controller action appears in both the trace and emulator input log.",
                 "pass" if not mismatch else "fail",
                 f"trace accepted_actions equal inputs.jsonl lines per decision in {len(f.rows)} trials"
                 if not mismatch else ", ".join(mismatch[:5]))


def _calls_counted(f: _Folder) -> dict:
    calls = [f"{r['folder']} decision {t.decision_id}" for r, reader in f.readers() if reader.exists(layout.RESPONSES)
             for t, resp in zip(reader.trace(), reader.responses(), strict=False) if len(resp.attempts) != t.attempts]
    return _item("Every model call, including retries, appears in cost and latency totals.",
                 "pass" if not calls else "fail",
                 "every attempt in responses.jsonl is counted in its trace line (attempts, paid calls, cost, "
                 "latency); verify recomputes the totals" if not calls else ", ".join(calls[:5]))


def _milestone_evidence(f: _Folder) -> dict:
    missing = [f"{r['folder']} {m['id']}" for r in f.rows for m in _awards(f.root, r) if not m.get("frame_sha256")]
    return _item("Every milestone has frame, video, or hidden-oracle evidence.", "pass" if not missing else "fail",
                 "each award carries its frame hash and the probe's hidden-state sample" if not missing
                 else ", ".join(missing[:5]))


def _memory_errors_cite(f: _Folder) -> dict:
    text = "Every confirmed memory error cites an earlier fact and the later contradictory decision."
    confirmed = f.confirmed
    if confirmed.basis == "none":
        return _item(text, "not applicable", "no memory-error labels in any layer")
    lacking = [f"{lab.trial_key} d{lab.decision_id}" for lab in confirmed.labels
               if lab.is_memory and (lab.refers_to is None or lab.decision_id is None)]
    return _item(text, "pass" if not lacking else "fail",
                 f"{len(confirmed.labels)} confirmed labels ({confirmed.basis})" if not lacking
                 else ", ".join(lacking))


def _backtracking(f: _Folder) -> dict:
    replayed = all(r["state_source"] == "replay" for r in f.valid) and bool(f.valid)
    declared = f.game is not None and bool(f.game.required_backtracking)
    return _item("Required backtracking is excluded from repeated-route penalties.",
                 "pass" if declared and replayed else "not applicable" if not declared else "fail",
                 "the game definition declares required_backtracking and every valid trial's state was replayed"
                 if declared and replayed else "the game definition declares no required_backtracking"
                 if not declared else "declared, but some trials' state could not be replayed (screen-based routes)")


def _blinding(f: _Folder) -> dict:
    text = "Annotators were blinded until labels were frozen."
    annotators = [n for n in f.layers if n not in ("operator", "adjudication")]
    if not annotators:
        return _item(text, "not applicable", "no annotator layers")
    frozen = {n: any(a.kind == "freeze" for a in f.layers[n]) for n in annotators}
    is_unblinded = (f.root / layout.UNBLINDED).is_dir()
    ok = all(frozen.values()) or not is_unblinded
    return _item(text, "pass" if ok else "fail",
                 f"layers frozen: {', '.join(f'{n} {frozen[n]}' for n in annotators)}; unblinded: {is_unblinded}")


def _reconciled(f: _Folder) -> dict:
    recon = f.recon
    return _item("Raw trial rows reconcile with summary statistics.", "pass" if recon["ok"] else "fail",
                 recon.get("checked", "") if recon["ok"] else "; ".join(recon["problems"][:5]))


def _sums(f: _Folder) -> dict:
    return _item("sha256sum --check SHA256SUMS succeeds.", "pass" if not f.audit_problems else "fail",
                 "oakwatch verify: every file matches its SHA256SUMS entry and every chain holds"
                 if not f.audit_problems else "; ".join(f.audit_problems[:5]))


# Seed 000's verification checklist, in its order: one function per line.
CHECKS: tuple[Callable[[_Folder], dict], ...] = (
    _same_inputs, _first_frames, _prompt_cores, _fresh_memory, _actions_logged, _calls_counted,
    _milestone_evidence, _memory_errors_cite, _backtracking, _blinding, _reconciled, _sums)


def checklist(root: Path, rows: list[dict], audit_problems: list[str], recon: dict, game,
              layers: dict, confirmed) -> list[dict]:
    """Seed 000's verification checklist, each line checked against the folder."""
    valid = [r for r in rows if r["valid"] and not r["folder"].startswith("void-")]
    gen = _genesis(root, valid)
    groups = {r.get("variant_index") for r in valid if r["folder"] in gen}
    per_variant = f" per variant ({len(groups)} variants)" if groups != {None} else ""
    folder = _Folder(root, rows, valid, gen, per_variant, audit_problems, recon, game, layers, confirmed)
    return [check(folder) for check in CHECKS]


def _awards(root: Path, r: dict) -> list[dict]:
    return _json_or(root, f"{r['folder']}/{layout.RESULT}", {}).get("milestones", [])


# -- the conclusion ---------------------------------------------------------------------------------

def conclusion(summary: dict, rows: list[dict], game, experiment_id: str) -> str:
    """Seed 000's specific conclusion, filled from the numbers (and honest where they do not support it)."""
    conds = summary["conditions"]
    labels = sorted(conds)
    title = game.title if game is not None else "game"
    if len(labels) < 2:
        return (f"Under the frozen {title} protocol ({experiment_id}), only one condition was run: there is no "
                f"comparison to state.")
    order = {m.id: i for i, m in enumerate(game.milestones)} if game is not None else {}
    a, b = labels[0], labels[1]
    if (_median_of(conds, a, "points") or 0) > (_median_of(conds, b, "points") or 0):
        a, b = b, a  # state it for the condition that progressed further
    da, db = _deepest_median(conds[a], order), _deepest_median(conds[b], order)
    depth = "a deeper" if (db or -1) > (da or -1) else "the same" if db == da else "a shallower"
    n = min(conds[lab]["n_valid"] for lab in labels)
    text = (f"Under the frozen {title} protocol ({experiment_id}; {n} valid trial(s) per condition at the least), "
            f"condition {b} reached {depth} median milestone ({_rung(db, game)} against {_rung(da, game)} for "
            f"condition {a})")
    text += _actions_and_errors(conds, a, b) + _cost_clause(conds, a, b)
    if not summary["significance_supported"]:
        text += " " + summary["significance_note"].capitalize() + "."
    return text


def _median_of(conds: dict, label: str, metric: str):
    return conds[label]["metrics"][metric]["median"]


def _deepest_median(cond: dict, order: dict[str, int]) -> int | None:
    """The lower median of the trials' deepest rungs (a rung that was reached), by ladder rank; -1: none."""
    ranks = sorted(order.get(d, -1) if d else -1 for d in cond["deepest"])
    if not ranks:
        return None
    return ranks[(len(ranks) - 1) // 2]


def _rung(rank: int | None, game) -> str:
    return "none" if rank is None or rank < 0 else game.milestones[rank].id if game is not None else str(rank)


def _compare(conds: dict, a: str, b: str, metric: str) -> tuple[str | None, object, object]:
    """("fewer"/"more"/"as many" of b against a, b's median, a's median); None when either is unknown."""
    x, y = _median_of(conds, b, metric), _median_of(conds, a, metric)
    if x is None or y is None:
        return None, x, y
    return ("fewer" if x < y else "more" if x > y else "as many"), x, y


def _actions_and_errors(conds: dict, a: str, b: str) -> str:
    word, xa, ya = _compare(conds, a, b, "accepted_actions")
    errs, xe, ye = _compare(conds, a, b, "material_memory_error_rate")
    text = f" with {word} accepted actions (median {_fmt(xa)} against {_fmt(ya)})" if word else \
        " (accepted actions unknown)"
    if errs is None:
        return text + " and material memory errors not measured (not every valid trial was annotated)"
    return text + f" and {errs} material memory errors (median {_fmt(xe)} against {_fmt(ye)} per 100 decisions)"


def _cost_clause(conds: dict, a: str, b: str) -> str:
    cost_b, cost_a = _median_of(conds, b, "cost_usd"), _median_of(conds, a, "cost_usd")
    return (f", while total cost was measured from all logged calls (median {money(cost_b)} against "
            f"{money(cost_a)})." if cost_a is not None and cost_b is not None else
            ", while total cost is unknown for at least one trial (never counted as zero).")


# -- writing -------------------------------------------------------------------------------------------

def _scalar_row(r: dict) -> dict:
    out = {k: r.get(k) for k in TRIAL_COLUMNS if k != "long_horizon_overall"}
    out["long_horizon_overall"] = (r.get("long_horizon") or {}).get("overall")
    return out


def _csv(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r.get(k) is None else r.get(k) for k in columns})
    return buf.getvalue()


def _condition_rows(summary: dict) -> list[dict]:
    out = []
    for label, c in sorted(summary["conditions"].items()):
        ci = c["completion_ci95"]
        out.append({"condition": label, "condition_id": c["condition_id"], "metric": "completion_rate",
                    "n": c["n_valid"], "median": c["completion_rate"], "min": ci[0] if ci else None,
                    "max": ci[1] if ci else None, "unknown": 0, "excluded": 0,
                    "note": "min/max: Wilson 95% interval"})
        out.append({"condition": label, "condition_id": c["condition_id"], "metric": "zero_progress_trials",
                    "n": c["n_valid"], "median": c["zero_progress"], "min": None, "max": None, "unknown": 0,
                    "excluded": 0, "note": "count"})
        for metric, s in c["metrics"].items():
            out.append({"condition": label, "condition_id": c["condition_id"], "metric": metric, "n": s["n"],
                        "median": s["median"], "min": s["min"], "max": s["max"], "unknown": s["unknown"],
                        "excluded": s["excluded"], "note": ""})
        for metric, s in (c.get("client_totals") or {}).items():
            out.append({"condition": label, "condition_id": c["condition_id"], "metric": metric, "n": s["n"],
                        "median": s["median"], "min": s["min"], "max": s["max"], "unknown": s["unknown"],
                        "excluded": s["excluded"], "note": CLIENT_NOTE})
    return out


CLIENT_NOTE = "the client's own total, as it reported it (not counted by oakwatch)"
CLIENT_ROWS = [("cost: the client's own total, median USD", "client_cost_usd"),
               ("tokens: the client's own total, median", "client_tokens")]


SIDE_BY_SIDE = [("progress: median points", "points"), ("progress: median milestones", "milestones"),
                ("cost: median USD", "cost_usd"), ("cost: median USD per point", "cost_per_point"),
                ("actions: median accepted", "accepted_actions"),
                ("actions: median per milestone", "actions_per_milestone"),
                ("actions: productive rate", "productive_action_rate"), ("actions: repeat overhead", "repeat_overhead"),
                ("memory: material errors per 100 decisions", "material_memory_error_rate"),
                ("memory: recovery cost (actions)", "memory_recovery_cost"),
                ("memory: storage quality", "storage_quality"), ("memory: use quality", "use_quality")]


MEMORY_METRICS = frozenset({"material_memory_error_rate", "memory_recovery_cost", "storage_quality", "use_quality"})


def _side_by_side(summary: dict) -> tuple[list[str], list[list[str]]]:
    conds = summary["conditions"]
    labels = sorted(conds)
    head = ["quantity"] + [f"condition {lab}" for lab in labels]
    body = [["valid trials"] + [str(conds[lab]["n_valid"]) for lab in labels],
            ["completion rate (Wilson 95%)"] + [_completion_cell(conds[lab]) for lab in labels],
            ["zero-progress trials"] + [str(conds[lab]["zero_progress"]) for lab in labels],
            ["memory: annotated trials"] + [f"{conds[lab].get('n_annotated', 0)} of {conds[lab]['n_valid']}"
                                            for lab in labels]]
    body += [[name] + [_metric_cell(conds[lab], metric) for lab in labels] for name, metric in SIDE_BY_SIDE]
    if any(conds[lab].get("client_totals") for lab in labels):
        # A cli client's report of its own usage: oakwatch's cost stays unknown for these trials.
        body += [[name] + [_client_cell(conds[lab].get("client_totals"), metric) for lab in labels]
                 for name, metric in CLIENT_ROWS]
    return head, body


def _completion_cell(c: dict) -> str:
    ci = c["completion_ci95"]
    return f"{_fmt(c['completion_rate'])} [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "unknown"


def _metric_cell(c: dict, metric: str) -> str:
    """A condition's median and range of one metric; a memory figure of trials not all annotated says so."""
    s = c["metrics"][metric]
    if metric in MEMORY_METRICS and s["median"] is None and c.get("n_annotated", 0) < c["n_valid"]:
        return "not annotated" if not c.get("n_annotated") else "unknown: not every trial annotated"
    return (f"{_fmt(s['median'])} ({_fmt(s['min'])} to {_fmt(s['max'])})" +
            (f", {s['excluded']} excluded" if s["excluded"] else ""))


def _client_cell(totals: dict | None, metric: str) -> str:
    s = totals[metric] if totals else None
    show = money if metric == "client_cost_usd" else _fmt
    return ("no client" if s is None else "unknown" if s["median"] is None else
            f"{show(s['median'])} ({show(s['min'])} to {show(s['max'])})")


def _variant_rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    """A suite's comparison (sessions.analysis.metrics.variant_comparison) as table rows."""
    head = ["condition", "variants", "valid trials", "successful", "completion rate", "points",
            "path efficiency"]

    def cell(s: dict) -> str:
        return "unknown" if s["median"] is None else f"{_fmt(s['median'])} ({_fmt(s['min'])}–{_fmt(s['max'])})"

    body = []
    for label, kinds in sorted(doc["variants"].items()):
        for kind, c in kinds.items():
            body.append([label, kind, str(c["n_valid"]), str(c["successful"]), _fmt(c["completion_rate"]),
                         cell(c["points"]), cell(c["path_efficiency"])])
    return head, body


def _md_table(head: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(lines)


def trial_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Seed 000's trial-level template (Condition, Trial, Deepest milestone, Progress points, Cost, Actions,
    Decisions, Memory errors, Repeat overhead, End reason), with validity beside it."""
    head = ["Condition", "Trial", "Deepest milestone", "Progress points", "Cost", "Actions", "Decisions",
            "Memory errors", "Repeat overhead", "End reason", "Valid"]
    body = [[r["condition"] + (f" ({r['condition_id']})" if r["condition_id"] else ""),
             f"{r['trial']}" + (f" (attempt {r['attempt']})" if r["attempt"] > 1 else ""),
             r["deepest"] or "none", f"{r['points']}/{r['total_points']}", money(r["cost_usd"])
             + (f" (client's own: {money(r['client']['client_cost_usd'])})" if r.get("client") else ""),
             str(r["accepted_actions"]), str(r["model_decisions"]),
             "not annotated" if r["memory_errors"] is None else
             f"{r['memory_errors']} ({r['material_errors']} material+)", _fmt(r["repeat_overhead"]),
             r["end_reason"], "yes" if r["valid"] else f"no ({r['outcome']})"] for r in rows]
    return head, body


def build_report(root: Path, output: Path | None = None, *, seed: int = 0,
                 progress: Callable[[str], None] | None = None, replay: bool = True) -> dict:
    """Write the report files; return report.json's content (and `paths`)."""
    from sessions.analysis.game_rom_note import game_and_rom
    from sessions.analysis.hand_scoring import hand_scoring
    from sessions.annotations.annotation_layer import ladder_ids
    from sessions.audit.verify import audit
    from sessions.evidence.roots import cited

    say = progress or (lambda _m: None)
    t0 = time.monotonic()
    out = output or root / layout.REPORTS
    say(f"auditing {root} (oakwatch verify)")
    report = audit(root)
    audit_problems = report.interrupted + report.problems
    game, game_error = load_game(root)
    say("reading annotation layers")
    layers = read_annotation_layers(root)
    confirmed = confirmed_labels(layers)
    say("computing trial metrics")
    rows = trial_metrics(root, replay=replay, progress=say, layers=layers)
    for r in rows:
        r["_labels"] = [] if r["memory_errors"] is None else _counted_dicts(confirmed, r["trial_key"])
    say("summarising conditions")
    summary = condition_summary(rows, paired_blocks=blocks_of(root), seed=seed)
    agreement = kappa(layers, _last_decisions(rows))
    hand = hand_scoring(layers, ladder_ids(root))  # milestones and rooms scored by hand (games without a probe)
    say("reconciling rows with summary.json")
    recon = reconcile(root, rows)
    say("checking the verification checklist")
    checks = checklist(root, rows, audit_problems, recon, game, layers, confirmed)
    experiment_id = _experiment_id(root)
    sentence = conclusion(summary, rows, game, experiment_id)
    say("drawing plots")
    figures = plots(rows, game)
    doc = {
        "report_version": 1, "experiment_id": experiment_id, "generated_utc": datetime.now(UTC).isoformat(),
        "blinded": EvidenceFolder(root).unblinded_labels() is None, "scorers": _scorers(game, game_error),
        "definitions": {"productive_action": PRODUCTIVE_DEFINITION},
        "integrity": {"ok": not audit_problems, "problems": audit_problems},
        "trials": [{k: v for k, v in r.items() if k not in ("_labels",)} for r in rows],
        "summary": summary, "variants": variant_comparison(rows), "agreement": agreement, "hand_scoring": hand,
        "annotation_basis": confirmed.basis, "disputed": confirmed.disputed,
        "reconciliation": recon, "checklist": checks, "conclusion": sentence,
        "roots": cited(root),  # what it was computed from: a reader checks the layers it used
        "game_and_rom": game_and_rom(root, game.title if game is not None else None),
    }
    say("writing report files")
    names = _write_report(root, out, doc, rows, figures)
    doc["paths"] = {name: str(out / name) for name in names}
    say(f"report written to {out} in {time.monotonic() - t0:.1f} s")
    return doc


def _last_decisions(rows: list[dict]) -> dict[str, int]:
    """trial key -> its last decision, for the trials outside void blocks (agreement's units)."""
    return {r["trial_key"]: r["curve"][-1]["decision"] if r["curve"] else 0
            for r in rows if r["folder"].startswith(layout.TRIALS + "/")}


def _experiment_id(root: Path) -> str:
    try:
        return EvidenceFolder(root).json(layout.SCHEDULE)["experiment_id"]
    except (FormatProblem, KeyError):
        return root.name


def _scorers(game, game_error: str | None) -> dict:
    lh = game.long_horizon if game is not None else None
    return {"protocol": PROTOCOL_SCORER,
            "long_horizon": {"used": lh is not None, "constants": lh.model_dump() if lh else None,
                             "reason": None if lh else (game_error or "the game definition has no "
                                                                     "long_horizon section"),
                             "formula": "overall = 70 m/M + F (40 log2(1 + T_ref/t) + "
                                        "10 clamp((L0 - L)/(L0 - Lfull), 0, 1)) (seed 002)"}}


def _write_report(root: Path, out: Path, doc: dict, rows: list[dict], figures: dict) -> list[str]:
    """report.json (streamed: the curves grow with the run), the CSVs, report.md and report.html, and
    the sums file when the report sits in the evidence folder; the names written."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "report.json").open("w", encoding="utf-8") as f:  # json.dump's indented encoder streams lists
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")
    files = {
        "trials.csv": _csv([_scalar_row(r) for r in rows], TRIAL_COLUMNS),
        "conditions.csv": _csv(_condition_rows(doc["summary"]), ["condition", "condition_id", "metric", "n",
                                                                 "median", "min", "max", "unknown", "excluded",
                                                                 "note"]),
        "report.md": render_md(doc, rows, figures),
        "report.html": render_html(doc, rows, figures),
    }
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    if out.resolve() == (root / layout.REPORTS).resolve():
        from sessions.evidence.checksums import file_sha256, render_sums
        from sessions.evidence.durable import write_atomic

        names = sorted(p.name for p in out.iterdir() if p.is_file() and p.name != layout.SUMS)
        write_atomic(out / layout.SUMS, render_sums({n: file_sha256(out / n) for n in names}).encode())
    return ["report.json", *files]


def _counted_dicts(confirmed, key: str) -> list[dict]:
    from sessions.analysis.metrics import counted

    labs = [lab for lab in confirmed.labels if lab.trial_key == key]
    return [{"type": lab.type, "severity": lab.severity} for lab in counted(labs, lambda lab: lab.is_memory)]


# -- rendering --------------------------------------------------------------------------------------------

def _effects_rows(summary: dict) -> list[list[str]]:
    body = []
    for pair, effects in summary["effects"].items():
        for name, e in effects.items():
            ci = e["ci95"]
            body.append([pair, name.replace("_", " "), _fmt(e["estimate"]),
                         f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "none", str(e["n"]),
                         "paired by block" if e["paired"] else "unpaired", e["reason"] or ""])
    return body


EFFECT_HEAD = ["comparison", "effect", "estimate", "bootstrap 95%", "n", "design", "note"]


def _lh_rows(rows: list[dict]) -> list[list[str]]:
    body = []
    for r in rows:
        lh = r["long_horizon"] or {}
        trimmed = lh.get("trimmed")
        body.append([r["trial_key"], _fmt(lh.get("progress")), _fmt(lh.get("speed")), _fmt(lh.get("discipline")),
                     _fmt(lh.get("gate")), _fmt(lh.get("overall")), _fmt(lh.get("active_hours")),
                     ", ".join(trimmed) if trimmed else "", lh.get("reason") or ""])
    return body


# active h: active game time to the final rung; trimmed: rungs reached after the budget (not counted)
LH_HEAD = ["trial", "progress", "speed", "discipline", "gate F", "overall", "active h", "trimmed", "note"]


def _agreement_rows(agreement: dict) -> tuple[list[list[str]], list[list[str]]]:
    pairs, dis = [], []
    for p in agreement["pairs"]:
        x, y = p["annotators"]
        pairs.append([f"{x} / {y}", "overall", _fmt(p["kappa"]), _fmt(p["observed_agreement"]), str(p["units"])])
        for t, k in p["per_type"].items():
            pairs.append([f"{x} / {y}", t, _fmt(k["kappa"]), _fmt(k["observed_agreement"]), str(p["units"])])
        for d in p["disagreements"]:
            adj = d["adjudication"]
            dis.append([d["trial_key"], str(d["decision_id"]), f"{x}: {', '.join(d[x])}", f"{y}: {', '.join(d[y])}",
                        "unresolved" if adj is None else f"{adj['resolution']} ({adj['reason']})"])
    return pairs, dis


def _memory_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Counted memory errors per condition, type and severity over the annotated valid trials; a
    condition with none annotated shows "not annotated", never 0."""
    head = ["condition", "annotated trials", "type"] + list(SEVERITIES)
    body = []
    for label in sorted({r["condition"] for r in rows}):
        mine = [r for r in rows if r["condition"] == label and r["valid"]]
        annotated = [r for r in mine if r["memory_errors"] is not None]
        share = f"{len(annotated)} of {len(mine)}"
        if not annotated:
            body.append([label, share, "any"] + ["not annotated"] * len(SEVERITIES))
            continue
        for t in MEMORY_TYPES:
            body.append([label, share, t] + [str(sum(type_severity(r, t, s) for r in annotated)) for s in SEVERITIES])
    return head, body


PLOT_TITLES = {"progress_vs_actions": "Progress against accepted actions", "progress_vs_cost": "Progress against cost",
               "memory_errors": "Memory errors by type and severity"}


def _plot_notes_md(figures: dict) -> list[str]:
    """What report.html draws, and every sentence said in place of a plot or beside it."""
    lines = []
    for key, title in PLOT_TITLES.items():
        fig: Plot = figures[key]
        notes = fig.notes if fig.svg else fig.notes[1:]
        lines.append(f"- {title}: drawn" if fig.svg else f"- {title}: not drawn. {fig.notes[0]}")
        lines += [f"  - {note}" for note in notes]
    drawn = sum(t.svg is not None for t in figures["timelines"].values())
    lines.append(f"- Milestone timelines: {drawn} of {len(figures['timelines'])} trial(s) drawn")
    lines += [f"  - {note}" for t in figures["timelines"].values() if t.svg is None for note in t.notes]
    return lines


def render_md(doc: dict, rows: list[dict], figures: dict) -> str:
    s = doc["summary"]
    lines = [f"# Report: {doc['experiment_id']}", ""]
    lines += [("Blinded: conditions appear by label only (no unblinded/ folder)." if doc["blinded"]
               else "Unblinded: condition ids shown beside labels."), ""]
    lines += ["## Conclusion", "", doc["conclusion"], ""]
    if doc.get("game_and_rom"):
        lines += ["## Game and ROM", "", " ".join(doc["game_and_rom"]["sentences"]), ""]
    lines += ["## Trial-level results", "", _md_table(*trial_table(rows)), ""]
    lines += ["## Per-condition summary (median, full range)", "", _md_table(*_side_by_side(s)), ""]
    lines += [f"Bootstrap: seed {s['bootstrap']['seed']}, {s['bootstrap']['resamples']} resamples, "
              f"{s['bootstrap']['method']}, {s['bootstrap']['pairing']}.", ""]
    if s["significance_note"]:
        lines += [f"**{s['significance_note']}.**", ""]
    if s["effects"]:
        lines += ["### Effect sizes", "", _md_table(EFFECT_HEAD, _effects_rows(s)), ""]
    if doc["variants"]:
        lines += ["## Seen against held-out variants (median, full range)", "", _md_table(*_variant_rows(doc)), ""]
    lines += ["## Plots", "", "The plots are in report.html:", "", *_plot_notes_md(figures), ""]
    lines += ["## Memory errors by type and severity", "", _md_table(*_memory_rows(rows)), ""]
    pairs, dis = _agreement_rows(doc["agreement"])
    lines += ["## Annotator agreement", ""]
    lines += [doc["agreement"]["note"], ""] if doc["agreement"]["note"] else []
    if pairs:
        lines += [_md_table(["annotators", "type", "Cohen's kappa", "observed agreement", "decisions"], pairs), ""]
    if dis:
        lines += ["Disagreements:", "", _md_table(["trial", "decision", "first", "second", "adjudication"], dis), ""]
    lines += ["## Long-horizon score (seed 002)", "", _scorer_text(doc), "", _md_table(LH_HEAD, _lh_rows(rows)), ""]
    lines += ["## Verification checklist", ""]
    lines += [f"- [{'x' if c['status'] == 'pass' else ' '}] {c['check']} **{c['status']}**: {c['detail']}"
              for c in doc["checklist"]]
    rec = doc["reconciliation"]
    lines += ["", "## Reconciliation", "", "Raw trial rows reconcile with summary.json." if rec["ok"] else
              "Raw trial rows do NOT reconcile with summary.json:", ""]
    lines += [f"- {p}" for p in rec["problems"]]
    from sessions.evidence.roots import cited_lines

    lines += ["", "## Computed from", ""] + [f"- {line}" for line in cited_lines(doc.get("roots"))]
    lines += ["", "## Definitions", "", doc["definitions"]["productive_action"],
              "", "Every metric's definition: docs/metrics.md.", ""]
    return "\n".join(lines)


def _scorer_text(doc: dict) -> str:
    sc = doc["scorers"]
    lh = sc["long_horizon"]
    text = f"Scorers used: {sc['protocol']}; "
    if lh["used"]:
        c = lh["constants"]
        text += (f"and seed 002's long-horizon scorer, offered beside it ({lh['formula']}; constants from the game "
                 f"definition: required milestones {c['required_milestones'] or 'the required rungs'}, reference "
                 f"{c['reference_hours']} h, budget {c['budget_hours']} h, levels "
                 f"{c['level_full']}/{c['level_zero']}).")
    else:
        text += f"the long-horizon scorer is not applied: {lh['reason']}."
    return text


def _escape(value) -> Markup:
    """Every `{{ }}` value escaped as html.escape does (&#x27; for '), so the page keeps the bytes the
    string-built report had; markupsafe's own escape writes &#39;. Markup (a macro's output) passes as is."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


@cache
def _templates() -> Environment:
    """report_templates/ beside this module (shipped in the wheel: hatch packages every file under sessions/)."""
    return Environment(loader=FileSystemLoader(Path(__file__).resolve().parent / "report_templates"),
                       autoescape=True, finalize=_escape, undefined=StrictUndefined, keep_trailing_newline=True)


def render_html(doc: dict, rows: list[dict], figures: dict) -> str:
    """report.html from report_templates/report.html.j2: the tables' rows are built here, the markup there."""
    from sessions.evidence.roots import cited_lines

    s = doc["summary"]
    pairs, disagreements = _agreement_rows(doc["agreement"])
    return _templates().get_template("report.html.j2").render(
        doc=doc, summary=s, figures=figures, trials=trial_table(rows), side_by_side=_side_by_side(s),
        effect_head=EFFECT_HEAD, effects=_effects_rows(s) if s["effects"] else [],
        variants=_variant_rows(doc) if doc["variants"] else None, memory=_memory_rows(rows),
        pairs=pairs, disagreements=disagreements, scorer_text=_scorer_text(doc), lh_head=LH_HEAD,
        lh_rows=_lh_rows(rows), cited=cited_lines(doc.get("roots")))


__all__ = ["build_report", "SUMMARY_METRICS"]


# -- the publishable package (seed 000, "What a complete experiment package contains") ----------------------

PATH_KEYS = frozenset({"rom", "state", "definition", "script", "script_notes", "replay_trace", "file"})
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
PUBLIC_TRIAL_FILES = (layout.TRIAL, layout.RESULT, layout.TRACE, layout.INPUTS, layout.MEMORY,
                      layout.TRIAL_ANNOTATIONS, layout.PROVIDER_FAILURE)
RAW_TRIAL_FILES = (layout.RESPONSES, layout.FRAMES, layout.CLIENT_TRANSCRIPT)  # the transcript may name the model


class ExportError(ValueError):
    """A package that cannot be written as asked; the message says why."""


def _redact_value(key: str | None, value):
    if isinstance(value, dict):
        return {k: _redact_value(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(key, v) for v in value]
    if isinstance(value, str):
        local = value.startswith(("/", "~", "./", "../")) or (len(value) > 2 and value[1] == ":" and value[2] in "\\/")
        if local or (key in PATH_KEYS and not value.startswith("bundled:")):
            return "<local path redacted>"
    return value


def _secrets() -> list[str]:
    import os

    return [v for k, v in os.environ.items() if any(w in k.upper() for w in SECRET_WORDS) and len(v) >= 8]


def _scrub(text: str, local: list[str], secrets: list[str]) -> tuple[str, bool]:
    changed = False
    for s in secrets:
        if s in text:
            text, changed = text.replace(s, "<secret redacted>"), True
    for p in sorted(set(local), key=len, reverse=True):
        if p and len(p) > 1 and p in text:
            text, changed = text.replace(p, "<local path>"), True
    return text, changed


def _game_definition_copy(root: Path, manifest: dict) -> bytes | None:
    """The game definition's bytes when the manifest names a local file (redacted in the package), if it
    is still there and is the one the trials used (the SHA-256 trial.json recorded)."""
    where = str((manifest.get("game") or {}).get("definition", ""))
    if not where or where.startswith("bundled:"):
        return None
    path = Path(where) if Path(where).is_absolute() else root / where
    try:
        data = path.read_bytes()
    except OSError:
        return None
    evidence = EvidenceFolder(root)
    for trial in evidence.trials():
        try:  # the definition's SHA-256 each trial recorded (result.json provenance)
            pinned = (evidence.json(f"{trial.rel}/{layout.RESULT}").get("provenance") or {}).get(
                "game_definition_sha256")
        except (FormatProblem, AttributeError):
            continue
        if pinned is not None and pinned != hashlib.sha256(data).hexdigest():
            return None
        break
    return data


def write_package(root: Path, output: Path, *, include_raw: bool = False, seed: int = 0,
                  progress: Callable[[str], None] | None = None) -> dict:
    """The package a reader audits without trusting the summary: protocol, redacted manifest,
    prompts, schemas, rubrics, trial rows, annotation disagreements, analysis code and an integrity
    file. No ROM or state ever; frames and raw provider payloads only with include_raw. It is built
    under a temporary name beside `output` and renamed into place whole: a failure (a malformed
    layer, a full disk) leaves nothing at `output`."""
    import os
    import shutil
    import uuid

    if output.exists():
        raise ExportError(f"{output} exists: give a new folder")
    if not (root / layout.MANIFEST).is_file():
        raise ExportError(f"{root}: not an evidence folder (no {layout.MANIFEST})")
    output.parent.mkdir(parents=True, exist_ok=True)
    building = output.with_name(f".{output.name}.creating-{uuid.uuid4().hex[:8]}")
    try:
        done = _write_package(root, building, include_raw=include_raw, seed=seed, progress=progress)
        os.rename(building, output)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return done


@dataclass
class _Package:
    """An export being written: where from, where to, what to scrub, and what was redacted so far."""

    root: Path
    output: Path
    include_raw: bool
    local: list[str]
    secrets: list[str]
    blinded: bool
    redacted: list[str] = field(default_factory=list)

    def put(self, rel: str, data: bytes) -> None:
        """Write one file, its text scrubbed of local paths and secrets (binary files as they are)."""
        path = self.output / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            path.write_bytes(data)
            return
        clean, changed = _scrub(text, self.local, self.secrets)
        if changed:
            self.redacted.append(rel)
        path.write_text(clean, encoding="utf-8")


def _package_inputs(pk: _Package, manifest: dict) -> bytes | None:
    """The redacted manifest, the game definition copy, the header files and the input folders;
    returns the game definition copy (None when the manifest named a bundled one)."""
    import yaml

    root, put = pk.root, pk.put
    put(PACKAGE_MANIFEST, yaml.safe_dump(_redact_value(None, manifest), sort_keys=False).encode())
    game_copy = _game_definition_copy(root, manifest)
    if game_copy is not None:  # a local definition (its path is redacted): replay needs it, and it holds no ROM
        put(GAME_COPY, game_copy)
    names = [layout.SCHEDULE, layout.SUMMARY, layout.RUN_LOG, layout.SUMS] + ([] if pk.blinded else [layout.BLINDING])
    for name in names:
        if (root / name).is_file():
            put(name if name != layout.SUMS else EVIDENCE_SUMS, (root / name).read_bytes())
    subs = ("prompts", "schemas", "scoring", "pricing") + (() if pk.blinded else ("conditions", layout.UNBLINDED))
    for sub in subs:
        for p in sorted((root / sub).rglob("*")) if (root / sub).is_dir() else []:
            if not p.is_file():
                continue
            rel = p.relative_to(root).as_posix()
            if sub == "conditions":
                put(rel, yaml.safe_dump(_redact_value(None, yaml.safe_load(p.read_text())), sort_keys=False).encode())
            else:
                put(rel, p.read_bytes())
    return game_copy


def _package_trials(pk: _Package) -> None:
    """Each trial's records (frames and raw payloads with include_raw), the voids, the annotations."""
    import shutil

    root, output, put = pk.root, pk.output, pk.put
    for trial in EvidenceFolder(root).trials():
        folder, rel = trial.path, trial.rel
        for name in PUBLIC_TRIAL_FILES + (RAW_TRIAL_FILES if pk.include_raw else ()):
            if not (folder / name).is_file():
                continue
            if name == layout.FRAMES:
                (output / rel / "frames").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / name, output / rel / name)
            else:
                put(f"{rel}/{name}", (folder / name).read_bytes())
    for p in sorted(root.glob("void-*/void.json")):
        put(p.relative_to(root).as_posix(), p.read_bytes())
    for p in sorted((root / layout.ANNOTATIONS).rglob("*")) if (root / layout.ANNOTATIONS).is_dir() else []:
        if p.is_file():
            put(p.relative_to(root).as_posix(), p.read_bytes())


def _package_report(pk: _Package, seed: int, say: Callable[[str], None]) -> dict:
    """The report (scrubbed), the annotation disagreements, and the code that computed every figure."""
    doc = build_report(pk.root, pk.output / "report", seed=seed, progress=say)
    disagreements = {"unresolved": doc["disputed"],
                     "pairs": [{"annotators": p["annotators"], "disagreements": p["disagreements"]}
                               for p in doc["agreement"]["pairs"]]}
    pk.put("annotation-disagreements.json", (json.dumps(disagreements, indent=1) + "\n").encode())
    for rel in ("report/report.json", "report/report.md", "report/report.html", "report/trials.csv",
                "report/conditions.csv"):
        path = pk.output / rel
        clean, changed = _scrub(path.read_text(encoding="utf-8"), pk.local, pk.secrets)
        if changed:
            pk.redacted.append(rel)
            path.write_text(clean, encoding="utf-8")
    here = Path(__file__).resolve().parent
    project = here.parents[1]
    for src in (here / "metrics.py", here / "report.py", here / "report_plots.py", project / "docs" / "metrics.md"):
        if src.is_file():
            pk.put(f"analysis/{src.name}", src.read_bytes())
    return doc


def _package_readme(pk: _Package, doc: dict, manifest: dict, game_copy: bytes | None) -> str:
    """The package's README: what a reader runs, and what is here."""
    from sessions.evidence.experiment_folder import root_hash

    include_raw = pk.include_raw
    first_trial = next((t.rel for t in EvidenceFolder(pk.root).trials()), "trials/<key>")
    local_rom = str((manifest.get("game") or {}).get("rom", "")).startswith("bundled:") is False
    readme = [
        f"# {doc['experiment_id']}: published experiment package", "",
        "## What a reader runs", "",
        "```",
        "sha256sum --check SHA256SUMS                  # every file of the package, as written",
        "oakwatch verify .                             # package mode: sums, provenance from the evidence, "
        "every hash chain",
        f"oakwatch replay {first_trial}" + (" --rom YOUR.gb" if local_rom else "")
        + "   # re-plays the recorded inputs; every frame must match",
        "```", "",
        "`oakwatch verify` on a package checks what it holds: SHA256SUMS; every file shipped under an evidence "
        "file's name against `evidence-SHA256SUMS` (those rewritten at export are named, with why, in "
        "`package.json`); each trial's trace chain from its trial.json, each decision's inputs and memory "
        "operations (and responses, when shipped), each result against the trace and the run log's seal. "
        "`oakwatch replay` needs the ROM (`--rom`, checked against the SHA-256 in the manifest), and the start "
        "state (`--state`) when the manifest's path to it was redacted; the game definition is read from "
        "`game/definition.yaml` when the manifest named a local one.", "",
        "## What is here", "",
        "Written by `oakwatch export`. Audit the comparison without trusting its summary:", "",
        "- `manifest.redacted.yaml`: the frozen manifest, local paths redacted; the ROM and start-state SHA-256 "
        "identify the bytes without containing any of them.",
        "- `prompts/`, `schemas/` (trace and record schemas), `scoring/` (milestone rubric, memory-error rubric), "
        "`pricing/<sha256>.yaml` (each price schedule a condition names, the bytes its derived costs came from).",
        "- `trials/<key>/`: trial.json, result.json, trace.jsonl, inputs.jsonl, memory.jsonl, annotations.jsonl"
        + (", responses.jsonl (raw provider payloads) and frames/frames.pack" if include_raw else
           " (no frames, no raw provider payloads: `--include-raw` adds them)") + ".",
        "- `report/`: trial rows (trials.csv), per-condition figures (conditions.csv), report.json/.md/.html.",
        "- `annotations/` and `annotation-disagreements.json`: every label, adjudications, and the disagreements.",
        "- `analysis/`: the code and definitions that computed every figure.",
        "- `evidence-SHA256SUMS`: the evidence folder's own sums; `SHA256SUMS`: this package's files; "
        "`package.json`: the files rewritten at export (so they differ from the evidence's sums), and why.",
        *(["- `game/definition.yaml`: the game definition the trials used (the manifest's path to it is "
           "redacted)."] if game_copy is not None else []),
        f"- root hash of the evidence folder (the evidence and every annotation layer, unblinded/ too; "
        f"`oakwatch verify --expect-root`): `{root_hash(pk.root)}`.", "",
        "Never included: the ROM, start states, secrets." + (" Conditions and the blinding key are left out: the "
                                                             "run is not unblinded yet." if pk.blinded else ""),
    ]
    if pk.redacted:
        readme += ["", "Files whose text was redacted (they differ from the evidence's sums): "
                   + ", ".join(pk.redacted)]
    return "\n".join(readme) + "\n"


def _package_rewritten(pk: _Package) -> dict[str, str]:
    """The package's files that differ from the evidence's sums of the same name, and why."""
    from sessions.evidence.checksums import file_sha256, parse_sums

    sums = pk.root / layout.SUMS
    evidence_sums = parse_sums(sums.read_text(encoding="utf-8")) if sums.is_file() else {}
    rewritten = {}
    for rel in sorted(p.relative_to(pk.output).as_posix() for p in pk.output.rglob("*") if p.is_file()):
        if rel in evidence_sums and file_sha256(pk.output / rel) != evidence_sums[rel]:
            rewritten[rel] = ("text redacted (local paths or secrets)" if rel in pk.redacted else
                              "re-written with its local paths redacted")
    return rewritten


def _write_package(root: Path, output: Path, *, include_raw: bool, seed: int,
                   progress: Callable[[str], None] | None) -> dict:
    import os

    import yaml

    from sessions.evidence.checksums import file_sha256, render_sums
    from sessions.evidence.experiment_folder import root_hash

    say = progress or (lambda _m: None)
    if output.exists():
        raise ExportError(f"{output} exists: give a new folder")
    if not (root / layout.MANIFEST).is_file():
        raise ExportError(f"{root}: not an evidence folder (no {layout.MANIFEST})")
    output.mkdir(parents=True)
    pk = _Package(root, output, include_raw, local=[str(root.resolve()), str(root), str(Path.home()), os.getcwd()],
                  secrets=_secrets(), blinded=EvidenceFolder(root).unblinded_labels() is None)
    say("writing the redacted manifest")
    manifest = yaml.safe_load((root / layout.MANIFEST).read_text())
    game_copy = _package_inputs(pk, manifest)
    say("copying trial records" + (" with frames and raw provider payloads" if include_raw else ""))
    _package_trials(pk)
    say("computing trial rows, summary and disagreements")
    doc = _package_report(pk, seed, say)
    pk.put("README.md", _package_readme(pk, doc, manifest, game_copy).encode())
    pk.put(PACKAGE_INFO, package_info(doc["experiment_id"], root_hash(root), include_raw, _package_rewritten(pk),
                                      GAME_COPY if game_copy is not None else None))
    say("writing the integrity file")
    files = sorted(p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file())
    (output / layout.SUMS).write_text(render_sums({f: file_sha256(output / f) for f in files}), encoding="utf-8")
    return {"files": len(files) + 1, "redacted": pk.redacted, "include_raw": include_raw, "output": str(output)}
