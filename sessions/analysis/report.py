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
from datetime import UTC, datetime
from pathlib import Path

from engine.figures import money  # the one rendering every display uses
from sessions.analysis.metrics import (
    MEMORY_TYPES,
    SEVERITIES,
    SUMMARY_METRICS,
    blocks_of,
    condition_summary,
    confirmed_labels,
    kappa,
    load_game,
    read_annotation_layers,
    trial_metrics,
    unblinded,
    variant_comparison,
)
from sessions.analysis.report_plots import Plot, plots, type_severity
from sessions.audit.package import EVIDENCE_SUMS, GAME_COPY, PACKAGE_INFO, PACKAGE_MANIFEST, package_info
from sessions.evidence import layout
from sessions.evidence.reader import TrialReader

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
    from statistics import median

    problems: list[str] = []
    try:
        summary = json.loads((root / layout.SUMMARY).read_text())
    except (OSError, ValueError) as exc:
        return {"ok": False, "problems": [f"{layout.SUMMARY}: unreadable ({exc})"]}
    current = [r for r in rows if r["folder"].startswith(layout.TRIALS + "/")]
    valid = [r for r in current if r["valid"]]

    def spread(values):
        if not values or any(v is None for v in values):
            return {"median": None, "min": None, "max": None}
        return {"median": median(values), "min": min(values), "max": max(values)}

    for label, claimed in sorted(summary.get("per_condition", {}).items()):
        mine = sorted((r for r in valid if r["condition"] == label), key=lambda r: r["trial_key"])
        done = sum(r["outcome"] == "success" for r in mine)
        ours = {"valid": len(mine), "successful": done, "completion_rate": done / len(mine) if mine else None,
                "zero_progress": sum(r["zero_progress"] for r in mine),
                "progress_points": spread([r["points"] for r in mine]),
                "accepted_actions": spread([r["accepted_actions"] for r in mine]),
                "decisions": spread([r["model_decisions"] for r in mine]),
                "cost_usd": spread([r["cost_usd"] for r in mine])}
        for key, value in ours.items():
            if key in claimed and claimed[key] != value:
                problems.append(f"{layout.SUMMARY}: per_condition.{label}.{key} is {claimed[key]!r}, the trial rows "
                                f"give {value!r}")
    for key, value in (("valid", len(valid)), ("successful", sum(r["outcome"] == "success" for r in valid))):
        if summary.get(key) != value:
            problems.append(f"{layout.SUMMARY}: {key} is {summary.get(key)!r}, the trial rows give {value!r}")
    for r in rows:
        try:
            result = json.loads((root / r["folder"] / layout.RESULT).read_text())
        except (OSError, ValueError):
            problems.append(f"{r['folder']}/{layout.RESULT}: unreadable")
            continue
        tel = result.get("telemetry") or {}
        pairs = [("points", result.get("progress_points")), ("outcome", result.get("outcome")),
                 ("accepted_actions", tel.get("accepted_actions", r["accepted_actions"])),
                 ("model_decisions", tel.get("decisions", r["model_decisions"])),
                 ("cost_usd", tel.get("cost_usd")), ("deepest", result.get("deepest_milestone"))]
        for name, value in pairs:
            if r[name] != value:
                problems.append(f"{r['folder']}: {name} is {r[name]!r} in the report, {value!r} in result.json")
    return {"ok": not problems, "problems": problems,
            "checked": f"{len(rows)} trial rows against their result.json; per-condition counts, medians and "
                       f"ranges against {layout.SUMMARY}"}


def _genesis(root: Path, rows: list[dict]) -> dict[str, dict]:
    out = {}
    for r in rows:
        try:
            out[r["folder"]] = json.loads((root / r["folder"] / layout.TRIAL).read_text())
        except (OSError, ValueError):
            out[r["folder"]] = {}
    return out


def checklist(root: Path, rows: list[dict], audit_problems: list[str], recon: dict, game,
              layers: dict, confirmed) -> list[dict]:
    """Seed 000's verification checklist, each line checked against the folder."""
    valid = [r for r in rows if r["valid"] and not r["folder"].startswith("void-")]
    gen = _genesis(root, valid)
    items = []

    def item(text: str, status: str, detail: str) -> None:
        items.append({"check": text, "status": status, "detail": detail})

    # A suite (sessions.variants.suites) plays several variants: each variant's trials must match across conditions.
    variant_of = {r["folder"]: r.get("variant_index") for r in valid}
    groups = sorted({variant_of[f] for f in gen}, key=lambda v: -1 if v is None else v)
    per_variant = f" per variant ({len(groups)} variants)" if groups != [None] else ""
    keys = ("manifest_sha256", "schedule_sha256", "rom_sha256", "initial_state_sha256")
    same = bool(gen)
    for v in groups:
        mine = [g for f, g in gen.items() if variant_of[f] == v]
        same = same and all(len({g.get(k) for g in mine}) <= 1 for k in keys)
    conds = {g.get("condition_sha256") for g in gen.values()}
    item("The ROM, initial save state, emulator configuration, prompts, schemas, and budgets have matching hashes "
         "across conditions.", "pass" if same and not audit_problems else "fail",
         f"every valid trial's trial.json names one manifest, schedule (frozen prompts, schemas, scoring), ROM and "
         f"start-state SHA-256{per_variant} ({len(conds)} condition files); verify: "
         f"{'clean' if not audit_problems else f'{len(audit_problems)} problem(s)'}" if gen else "no valid trial")

    firsts: dict[str, tuple] = {}
    for r in valid:
        reader = TrialReader(root / r["folder"], r["folder"])
        first = next(reader.trace(), None)
        firsts[r["trial_key"]] = (r.get("variant_index"), first.frame_sha256 if first else None)
    distinct = set(firsts.values())
    ok = bool(firsts) and len(distinct) == len({v for v, _ in distinct}) and None not in {f for _, f in distinct}
    item("The first captured frame is identical in every valid trial.", "pass" if ok else "fail",
         f"{len(firsts)} valid trials, {len(distinct)} distinct first frame(s){per_variant}")

    cores: dict[object, dict[str, str]] = {}  # variant -> trial -> the first decision's prompt core
    for r in valid:
        try:
            prov = json.loads((root / r["folder"] / layout.RESULT).read_text()).get("provenance") or {}
        except (OSError, ValueError):
            prov = {}
        if prov.get("model") is not None and prov.get("prompt_core_sha256") is not None:
            cores.setdefault(r.get("variant_index"), {})[r["trial_key"]] = prov["prompt_core_sha256"]
    odd = [f"{key} ({core[:12]}…)" for group in cores.values() for key, core in group.items()
           if core != next(iter(group.values()))]
    item("Model conditions were sent the same system prompt, response schema and first screen.",
         "not applicable" if not cores else "pass" if not odd else "fail",
         "no valid model trial" if not cores else
         f"{sum(map(len, cores.values()))} valid model trials, one prompt_core_sha256{per_variant}" if not odd else
         f"prompt_core_sha256 differs from the first trial's in: {', '.join(odd[:5])}")

    leaks = []
    for r in rows:
        written: set[str] = set()
        reader = TrialReader(root / r["folder"], r["folder"])
        if not reader.exists(layout.MEMORY):
            continue
        for op in reader.memory():
            if op.op == "write" and op.fact_id:
                written.add(op.fact_id)
            for fid in (op.fact_ids or []) if op.op in ("retrieve", "read") else []:
                if fid not in written and op.op == "retrieve":
                    leaks.append(f"{r['folder']}: decision {op.decision_id} retrieved {fid} before any write")
    item("No trial begins with memory, conversation, or cache state from a previous trial.",
         "pass" if not leaks else "fail",
         "every fact retrieved was written earlier in the same trial" if not leaks else "; ".join(leaks[:5]))

    mismatch = []
    for r in rows:
        reader = TrialReader(root / r["folder"], r["folder"])
        per = {}
        for row in reader.inputs():
            per[row.decision_id] = per.get(row.decision_id, 0) + 1
        for t in reader.trace():
            if per.get(t.decision_id, 0) != t.accepted_actions:
                mismatch.append(f"{r['folder']} decision {t.decision_id}")
    item("Every accepted controller action appears in both the trace and emulator input log.",
         "pass" if not mismatch else "fail",
         f"trace accepted_actions equal inputs.jsonl lines per decision in {len(rows)} trials"
         if not mismatch else ", ".join(mismatch[:5]))

    calls = []
    for r in rows:
        reader = TrialReader(root / r["folder"], r["folder"])
        if not reader.exists(layout.RESPONSES):
            continue
        for t, resp in zip(reader.trace(), reader.responses(), strict=False):
            if len(resp.attempts) != t.attempts:
                calls.append(f"{r['folder']} decision {t.decision_id}")
    item("Every model call, including retries, appears in cost and latency totals.", "pass" if not calls else "fail",
         "every attempt in responses.jsonl is counted in its trace line (attempts, paid calls, cost, latency); "
         "verify recomputes the totals" if not calls else ", ".join(calls[:5]))

    missing = [f"{r['folder']} {m['id']}" for r in rows for m in _awards(root, r) if not m.get("frame_sha256")]
    item("Every milestone has frame, video, or hidden-oracle evidence.", "pass" if not missing else "fail",
         "each award carries its frame hash and the probe's hidden-state sample" if not missing
         else ", ".join(missing[:5]))

    lacking = [f"{lab.trial_key} d{lab.decision_id}" for lab in confirmed.labels
               if lab.is_memory and (lab.refers_to is None or lab.decision_id is None)]
    if confirmed.basis == "none":
        item("Every confirmed memory error cites an earlier fact and the later contradictory decision.",
             "not applicable", "no memory-error labels in any layer")
    else:
        item("Every confirmed memory error cites an earlier fact and the later contradictory decision.",
             "pass" if not lacking else "fail",
             f"{len(confirmed.labels)} confirmed labels ({confirmed.basis})" if not lacking else ", ".join(lacking))

    replayed = all(r["state_source"] == "replay" for r in valid) and bool(valid)
    declared = game is not None and bool(game.required_backtracking)
    item("Required backtracking is excluded from repeated-route penalties.",
         "pass" if declared and replayed else "not applicable" if not declared else "fail",
         "the game definition declares required_backtracking and every valid trial's state was replayed"
         if declared and replayed else "the game definition declares no required_backtracking" if not declared
         else "declared, but some trials' state could not be replayed (screen-based routes)")

    annotators = [n for n in layers if n not in ("operator", "adjudication")]
    frozen = {n: any(a.kind == "freeze" for a in layers[n]) for n in annotators}
    is_unblinded = (root / layout.UNBLINDED).is_dir()
    if not annotators:
        item("Annotators were blinded until labels were frozen.", "not applicable", "no annotator layers")
    else:
        ok = all(frozen.values()) or not is_unblinded
        item("Annotators were blinded until labels were frozen.", "pass" if ok else "fail",
             f"layers frozen: {', '.join(f'{n} {frozen[n]}' for n in annotators)}; unblinded: {is_unblinded}")

    item("Raw trial rows reconcile with summary statistics.", "pass" if recon["ok"] else "fail",
         recon.get("checked", "") if recon["ok"] else "; ".join(recon["problems"][:5]))
    item("sha256sum --check SHA256SUMS succeeds.", "pass" if not audit_problems else "fail",
         "oakwatch verify: every file matches its SHA256SUMS entry and every chain holds" if not audit_problems
         else "; ".join(audit_problems[:5]))
    return items


def _awards(root: Path, r: dict) -> list[dict]:
    try:
        return json.loads((root / r["folder"] / layout.RESULT).read_text()).get("milestones", [])
    except (OSError, ValueError):
        return []


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

    def med(label, metric):
        return conds[label]["metrics"][metric]["median"]

    def deepest_median(label):
        ranks = sorted(order.get(d, -1) if d else -1 for d in conds[label]["deepest"])
        if not ranks:
            return None
        return ranks[(len(ranks) - 1) // 2]  # the lower median: a rung that was reached

    def rung(rank):
        return "none" if rank is None or rank < 0 else game.milestones[rank].id if game is not None else str(rank)

    a, b = labels[0], labels[1]
    if (med(a, "points") or 0) > (med(b, "points") or 0):
        a, b = b, a  # state it for the condition that progressed further
    da, db = deepest_median(a), deepest_median(b)
    depth = "a deeper" if (db or -1) > (da or -1) else "the same" if db == da else "a shallower"

    def compare(metric, fewer, more):
        x, y = med(b, metric), med(a, metric)
        if x is None or y is None:
            return None, x, y
        return (fewer if x < y else more if x > y else "as many"), x, y

    word, xa, ya = compare("accepted_actions", "fewer", "more")
    errs, xe, ye = compare("material_memory_error_rate", "fewer", "more")
    cost_b, cost_a = med(b, "cost_usd"), med(a, "cost_usd")
    n = min(conds[lab]["n_valid"] for lab in labels)
    text = (f"Under the frozen {title} protocol ({experiment_id}; {n} valid trial(s) per condition at the least), "
            f"condition {b} reached {depth} median milestone ({rung(db)} against {rung(da)} for condition {a})")
    text += f" with {word} accepted actions (median {_fmt(xa)} against {_fmt(ya)})" if word else \
        " (accepted actions unknown)"
    if errs is None:
        text += " and material memory errors not measured (not every valid trial was annotated)"
    else:
        text += f" and {errs} material memory errors (median {_fmt(xe)} against {_fmt(ye)} per 100 decisions)"
    text += (f", while total cost was measured from all logged calls (median {money(cost_b)} against "
             f"{money(cost_a)})." if cost_a is not None and cost_b is not None else
             ", while total cost is unknown for at least one trial (never counted as zero).")
    if not summary["significance_supported"]:
        text += " " + summary["significance_note"].capitalize() + "."
    return text


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
    labels = sorted(summary["conditions"])
    head = ["quantity"] + [f"condition {lab}" for lab in labels]
    body = []
    row = ["valid trials"] + [str(summary["conditions"][lab]["n_valid"]) for lab in labels]
    body.append(row)
    row = ["completion rate (Wilson 95%)"]
    for lab in labels:
        c = summary["conditions"][lab]
        ci = c["completion_ci95"]
        row.append(f"{_fmt(c['completion_rate'])} [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else "unknown")
    body.append(row)
    body.append(["zero-progress trials"] + [str(summary["conditions"][lab]["zero_progress"]) for lab in labels])
    body.append(["memory: annotated trials"] + [f"{summary['conditions'][lab].get('n_annotated', 0)} of "
                                                f"{summary['conditions'][lab]['n_valid']}" for lab in labels])
    for name, metric in SIDE_BY_SIDE:
        row = [name]
        for lab in labels:
            c = summary["conditions"][lab]
            s = c["metrics"][metric]
            if metric in MEMORY_METRICS and s["median"] is None and c.get("n_annotated", 0) < c["n_valid"]:
                row.append("not annotated" if not c.get("n_annotated") else "unknown: not every trial annotated")
                continue
            row.append(f"{_fmt(s['median'])} ({_fmt(s['min'])} to {_fmt(s['max'])})" +
                       (f", {s['excluded']} excluded" if s["excluded"] else ""))
        body.append(row)
    if any(summary["conditions"][lab].get("client_totals") for lab in labels):
        # A cli client's report of its own usage: oakwatch's cost stays unknown for these trials.
        for name, metric in CLIENT_ROWS:
            row = [name]
            for lab in labels:
                totals = summary["conditions"][lab].get("client_totals")
                s = totals[metric] if totals else None
                show = money if metric == "client_cost_usd" else _fmt
                row.append("no client" if s is None else "unknown" if s["median"] is None else
                           f"{show(s['median'])} ({show(s['min'])} to {show(s['max'])})")
            body.append(row)
    return head, body


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


def _html_table(head: list[str], body: list[list[str]]) -> str:
    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in body)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{rows}</tbody></table>"


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


CSS = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
       "table{border-collapse:collapse;margin:.5em 0;font-size:.85em}td,th{border:1px solid #bbb;padding:.25em .5em;"
       "text-align:left}th{background:#eee}.pass{color:#060}.fail{color:#a00}.na{color:#666}"
       "section{margin-bottom:2em}svg{max-width:100%;height:auto}code{background:#f4f4f4}"
       "figure.plot{margin:.5em 0}.no-plot{color:#555;font-style:italic}"
       ".plot-notes{color:#555;font-size:.85em;margin:.2em 0 .8em}")


def build_report(root: Path, output: Path | None = None, *, seed: int = 0,
                 progress: Callable[[str], None] | None = None, replay: bool = True) -> dict:
    """Write the report files; return report.json's content (and `paths`)."""
    from sessions.analysis.game_rom_note import game_and_rom
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
    by_trial: dict[str, list[dict]] = {}
    for lab in confirmed.labels:
        by_trial.setdefault(lab.trial_key, []).append({"id": lab.id, "type": lab.type, "severity": lab.severity,
                                                       "decision_id": lab.decision_id, "role": lab.role})
    for r in rows:
        r["_labels"] = [] if r["memory_errors"] is None else _counted_dicts(confirmed, r["trial_key"])
    say("summarising conditions")
    summary = condition_summary(rows, paired_blocks=blocks_of(root), seed=seed)
    decisions = {r["trial_key"]: r["curve"][-1]["decision"] if r["curve"] else 0
                 for r in rows if r["folder"].startswith(layout.TRIALS + "/")}
    agreement = kappa(layers, decisions)
    from sessions.analysis.hand_scoring import hand_scoring
    from sessions.annotations.annotation_layer import ladder_ids

    hand = hand_scoring(layers, ladder_ids(root))  # milestones and rooms scored by hand (games without a probe)
    say("reconciling rows with summary.json")
    recon = reconcile(root, rows)
    say("checking the verification checklist")
    checks = checklist(root, rows, audit_problems, recon, game, layers, confirmed)
    try:
        experiment_id = json.loads((root / layout.SCHEDULE).read_text())["experiment_id"]
    except (OSError, ValueError, KeyError):
        experiment_id = root.name
    sentence = conclusion(summary, rows, game, experiment_id)
    say("drawing plots")
    figures = plots(rows, game)
    lh = game.long_horizon if game is not None else None
    doc = {
        "report_version": 1, "experiment_id": experiment_id, "generated_utc": datetime.now(UTC).isoformat(),
        "blinded": unblinded(root) is None,
        "scorers": {"protocol": PROTOCOL_SCORER,
                    "long_horizon": {"used": lh is not None, "constants": lh.model_dump() if lh else None,
                                     "reason": None if lh else (game_error or "the game definition has no "
                                                                             "long_horizon section"),
                                     "formula": "overall = 70 m/M + F (40 log2(1 + T_ref/t) + "
                                                "10 clamp((L0 - L)/(L0 - Lfull), 0, 1)) (seed 002)"}},
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
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "report.json": json.dumps(doc, indent=1, default=str) + "\n",
        "trials.csv": _csv([_scalar_row(r) for r in rows], TRIAL_COLUMNS),
        "conditions.csv": _csv(_condition_rows(summary), ["condition", "condition_id", "metric", "n", "median",
                                                          "min", "max", "unknown", "excluded", "note"]),
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
    doc["paths"] = {name: str(out / name) for name in files}
    say(f"report written to {out} in {time.monotonic() - t0:.1f} s")
    return doc


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


def _figure_html(fig: Plot) -> str:
    """A drawn plot with its notes under it, or the sentence that stands in for it (no empty axis)."""
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in (fig.notes if fig.svg else fig.notes[1:]))
    notes = f'<ul class="plot-notes">{notes}</ul>' if notes else ""
    if fig.svg is None:
        return f'<p class="no-plot">{html.escape(fig.notes[0])}</p>{notes}'
    return f'<figure class="plot">{fig.svg}</figure>{notes}'


def render_html(doc: dict, rows: list[dict], figures: dict) -> str:
    s = doc["summary"]
    e = html.escape

    def section(sid: str, title: str, body: str) -> str:
        return f'<section id="{sid}"><h2>{e(title)}</h2>{body}</section>'

    parts = [f"<h1>Report: {e(doc['experiment_id'])}</h1>",
             f"<p>{e('Blinded: conditions appear by label only.' if doc['blinded'] else 'Unblinded.')}</p>"]
    parts.append(section("conclusion", "Conclusion", f"<p>{e(doc['conclusion'])}</p>"))
    if doc.get("game_and_rom"):
        parts.append(section("game-and-rom", "Game and ROM", f"<p>{e(' '.join(doc['game_and_rom']['sentences']))}</p>"))
    parts.append(section("trials", "Trial-level results", _html_table(*trial_table(rows))))
    summ = _html_table(*_side_by_side(s))
    b = s["bootstrap"]
    summ += f"<p>Bootstrap: seed {b['seed']}, {b['resamples']} resamples, {e(b['method'])}, {e(b['pairing'])}.</p>"
    if s["significance_note"]:
        summ += f"<p><strong>{e(s['significance_note'])}.</strong></p>"
    if s["effects"]:
        summ += "<h3>Effect sizes</h3>" + _html_table(EFFECT_HEAD, _effects_rows(s))
    parts.append(section("conditions", "Per-condition summary: progress, cost, actions, memory failures", summ))
    if doc["variants"]:
        parts.append(section("variants", "Seen against held-out variants", _html_table(*_variant_rows(doc))))
    parts.append(section("progress-actions", "Progress against accepted actions",
                         _figure_html(figures["progress_vs_actions"])))
    parts.append(section("progress-cost", "Progress against cost", _figure_html(figures["progress_vs_cost"])))
    parts.append(section("timelines", "Milestone timeline per trial",
                         "".join(f'<div class="timeline" id="timeline-{e(k.replace("/", "-"))}">{_figure_html(v)}'
                                 '</div>' for k, v in figures["timelines"].items())))
    parts.append(section("memory-errors", "Memory errors by type and severity",
                         _figure_html(figures["memory_errors"]) + _html_table(*_memory_rows(rows))))
    pairs, dis = _agreement_rows(doc["agreement"])
    agree = f"<p>{e(doc['agreement']['note'])}</p>" if doc["agreement"]["note"] else ""
    if pairs:
        agree += _html_table(["annotators", "type", "Cohen's kappa", "observed agreement", "decisions"], pairs)
    if dis:
        agree += "<h3>Disagreements</h3>" + _html_table(["trial", "decision", "first", "second", "adjudication"], dis)
    parts.append(section("agreement", "Annotator agreement", agree or "<p>No annotations.</p>"))
    parts.append(section("long-horizon", "Long-horizon score (seed 002)",
                         f"<p>{e(_scorer_text(doc))}</p>" + _html_table(LH_HEAD, _lh_rows(rows))))
    items = "".join(f'<li class="{ {"pass": "pass", "fail": "fail"}.get(c["status"], "na") }">'
                    f'<strong>{e(c["status"])}</strong>: {e(c["check"])} <em>{e(c["detail"])}</em></li>'
                    for c in doc["checklist"])
    parts.append(section("checklist", "Verification checklist", f"<ul>{items}</ul>"))
    rec = doc["reconciliation"]
    rec_html = "<p>Raw trial rows reconcile with summary.json.</p>" if rec["ok"] else \
        "<p>Raw trial rows do NOT reconcile with summary.json:</p><ul>" + \
        "".join(f"<li>{e(p)}</li>" for p in rec["problems"]) + "</ul>"
    parts.append(section("reconciliation", "Reconciliation", rec_html))
    from sessions.evidence.roots import cited_lines

    cited = "".join(f"<li>{e(line)}</li>" for line in cited_lines(doc.get("roots")))
    parts.append(section("roots", "Computed from", f"<ul>{cited}</ul>"))
    parts.append(section("definitions", "Definitions",
                         f"<p>{e(doc['definitions']['productive_action'])}</p>"
                         "<p>Every metric's definition: docs/metrics.md.</p>"))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Report: {e(doc['experiment_id'])}</title><style>{CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")


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
    from sessions.analysis.metrics import trial_folders

    where = str((manifest.get("game") or {}).get("definition", ""))
    if not where or where.startswith("bundled:"):
        return None
    path = Path(where) if Path(where).is_absolute() else root / where
    try:
        data = path.read_bytes()
    except OSError:
        return None
    for folder, _rel, _voided in trial_folders(root):
        try:  # the definition's SHA-256 each trial recorded (result.json provenance)
            pinned = (json.loads((folder / layout.RESULT).read_text()).get("provenance") or {}).get(
                "game_definition_sha256")
        except (OSError, ValueError, AttributeError):
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


def _write_package(root: Path, output: Path, *, include_raw: bool, seed: int,
                   progress: Callable[[str], None] | None) -> dict:
    import os
    import shutil

    import yaml

    from sessions.evidence.checksums import file_sha256, render_sums
    from sessions.evidence.experiment_folder import root_hash

    say = progress or (lambda _m: None)
    if output.exists():
        raise ExportError(f"{output} exists: give a new folder")
    if not (root / layout.MANIFEST).is_file():
        raise ExportError(f"{root}: not an evidence folder (no {layout.MANIFEST})")
    output.mkdir(parents=True)
    local = [str(root.resolve()), str(root), str(Path.home()), os.getcwd()]
    secrets = _secrets()
    redacted: list[str] = []
    blinded = unblinded(root) is None

    def put(rel: str, data: bytes) -> None:
        path = output / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            path.write_bytes(data)
            return
        clean, changed = _scrub(text, local, secrets)
        if changed:
            redacted.append(rel)
        path.write_text(clean, encoding="utf-8")

    say("writing the redacted manifest")
    manifest = yaml.safe_load((root / layout.MANIFEST).read_text())
    put(PACKAGE_MANIFEST, yaml.safe_dump(_redact_value(None, manifest), sort_keys=False).encode())
    game_copy = _game_definition_copy(root, manifest)
    if game_copy is not None:  # a local definition (its path is redacted): replay needs it, and it holds no ROM
        put(GAME_COPY, game_copy)
    names = [layout.SCHEDULE, layout.SUMMARY, layout.RUN_LOG, layout.SUMS]
    if not blinded:
        names += [layout.BLINDING]
    for name in names:
        if (root / name).is_file():
            put(name if name != layout.SUMS else EVIDENCE_SUMS, (root / name).read_bytes())
    for sub in ("prompts", "schemas", "scoring", "pricing") + (() if blinded else ("conditions", layout.UNBLINDED)):
        for p in sorted((root / sub).rglob("*")) if (root / sub).is_dir() else []:
            if p.is_file():
                rel = p.relative_to(root).as_posix()
                if sub == "conditions":
                    data = yaml.safe_dump(_redact_value(None, yaml.safe_load(p.read_text())), sort_keys=False)
                    put(rel, data.encode())
                else:
                    put(rel, p.read_bytes())
    say("copying trial records" + (" with frames and raw provider payloads" if include_raw else ""))
    from sessions.analysis.metrics import trial_folders

    for folder, rel, _voided in trial_folders(root):
        for name in PUBLIC_TRIAL_FILES + (RAW_TRIAL_FILES if include_raw else ()):
            if (folder / name).is_file():
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
    say("computing trial rows, summary and disagreements")
    doc = build_report(root, output / "report", seed=seed, progress=say)
    disagreements = {"unresolved": doc["disputed"],
                     "pairs": [{"annotators": p["annotators"], "disagreements": p["disagreements"]}
                               for p in doc["agreement"]["pairs"]]}
    put("annotation-disagreements.json", (json.dumps(disagreements, indent=1) + "\n").encode())
    for rel in ("report/report.json", "report/report.md", "report/report.html", "report/trials.csv",
                "report/conditions.csv"):
        path = output / rel
        clean, changed = _scrub(path.read_text(encoding="utf-8"), local, secrets)
        if changed:
            redacted.append(rel)
            path.write_text(clean, encoding="utf-8")
    here = Path(__file__).resolve().parent
    project = here.parents[1]
    for src in (here / "metrics.py", here / "report.py", here / "report_plots.py", project / "docs" / "metrics.md"):
        if src.is_file():
            put(f"analysis/{src.name}", src.read_bytes())
    first_trial = next((rel for _f, rel, _v in trial_folders(root)), "trials/<key>")
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
        f"`oakwatch verify --expect-root`): `{root_hash(root)}`.", "",
        "Never included: the ROM, start states, secrets." + (" Conditions and the blinding key are left out: the "
                                                             "run is not unblinded yet." if blinded else ""),
    ]
    if redacted:
        readme += ["", "Files whose text was redacted (they differ from the evidence's sums): " + ", ".join(redacted)]
    put("README.md", ("\n".join(readme) + "\n").encode())
    from sessions.evidence.checksums import parse_sums

    evidence_sums = parse_sums((root / layout.SUMS).read_text(encoding="utf-8")) if (root / layout.SUMS).is_file() \
        else {}
    rewritten = {}
    for rel in sorted(p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file()):
        if rel in evidence_sums and file_sha256(output / rel) != evidence_sums[rel]:
            rewritten[rel] = ("text redacted (local paths or secrets)" if rel in redacted else
                              "re-written with its local paths redacted")
    put(PACKAGE_INFO, package_info(doc["experiment_id"], root_hash(root), include_raw, rewritten,
                                   GAME_COPY if game_copy is not None else None))
    say("writing the integrity file")
    files = sorted(p.relative_to(output).as_posix() for p in output.rglob("*") if p.is_file())
    (output / layout.SUMS).write_text(render_sums({f: file_sha256(output / f) for f in files}), encoding="utf-8")
    return {"files": len(files) + 1, "redacted": redacted, "include_raw": include_raw, "output": str(output)}
