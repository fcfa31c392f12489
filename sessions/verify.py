"""`oakwatch verify`: audit an evidence folder without trusting its summary."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from sessions.checksums import check_sums
from sessions.evidence import frame_name
from sessions.summary import summarise


def _jsonl(path: Path, problems: list[str]) -> list[dict]:
    rows = []
    if not path.is_file():
        problems.append(f"{path.name} is missing")
        return rows
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            problems.append(f"{path.name}:{n}: not a JSON line")
    return rows


def verify_trial(folder: Path) -> list[str]:
    problems: list[str] = []
    name = folder.name
    trace = _jsonl(folder / "trace.jsonl", problems)
    inputs = _jsonl(folder / "inputs.jsonl", problems)
    by_decision: dict[int, list[dict]] = defaultdict(list)
    for row in inputs:
        by_decision[row["decision_id"]].append(row)
    ids = [t["decision_id"] for t in trace]
    if ids != list(range(1, len(ids) + 1)):
        problems.append(f"{name}/trace.jsonl: decision ids are not 1..{len(ids)} in order")
    stray = sorted(set(by_decision) - set(ids))
    if stray:
        problems.append(f"{name}/inputs.jsonl: actions for decisions absent from the trace: {stray[:5]}")
    invalid_attempts = 0
    for t in trace:
        did = t["decision_id"]
        logged = [r["action"] for r in sorted(by_decision.get(did, []), key=lambda r: r["index"])]
        expected = t["parsed_actions"][: t["accepted_actions"]]
        if logged != expected:
            problems.append(f"{name}: decision {did}: trace accepted {expected} but inputs.jsonl has {logged}")
        if not (folder / frame_name(did)).is_file():
            problems.append(f"{name}: decision {did}: frame {frame_name(did)} is missing")
        response_path = folder / t["raw_response_path"]
        if not response_path.is_file():
            problems.append(f"{name}: decision {did}: {t['raw_response_path']} is missing")
        else:
            attempts = json.loads(response_path.read_text(encoding="utf-8"))["attempts"]
            invalid_attempts += sum(1 for a in attempts if not a["valid"])
            if len(attempts) != t["attempts"]:
                problems.append(f"{name}: decision {did}: trace says {t['attempts']} attempts, "
                                f"{t['raw_response_path']} holds {len(attempts)}")
    result_path = folder / "result.json"
    if not result_path.is_file():
        problems.append(f"{name}/result.json is missing")
        return problems
    result = json.loads(result_path.read_text(encoding="utf-8"))
    tel = result["telemetry"]
    accepted = sum(t["accepted_actions"] for t in trace)
    checks = [("decisions", tel.get("decisions"), len(trace)),
              ("accepted_actions", tel.get("accepted_actions"), accepted),
              ("accepted_actions vs inputs.jsonl", tel.get("accepted_actions"), len(inputs))]
    if trace:
        checks.append(("invalid_outputs", tel.get("invalid_outputs"), invalid_attempts))
        checks.append(("milestones_reached", result["milestones_reached"], trace[-1]["milestones_after"]))
    for label, claimed, actual in checks:
        if claimed != actual:
            problems.append(f"{name}/result.json: {label} is {claimed}, the trace says {actual}")
    frames_by_index = {r["capture_frame"]: r["frame_sha256"] for r in inputs}
    for m in result["milestones"]:
        if frames_by_index.get(m["frame_index"]) != m["frame_sha256"]:
            problems.append(f"{name}/result.json: {m['id']} evidence frame {m['frame_index']} does not "
                            f"match inputs.jsonl")
    points = sum(m["points"] for m in result["milestones"])
    if points != result["progress_points"]:
        problems.append(f"{name}/result.json: progress_points {result['progress_points']} but milestones "
                        f"sum to {points}")
    return problems


def verify_experiment(folder: Path) -> list[str]:
    if not folder.is_dir():
        return [f"{folder}: not a folder"]
    problems = check_sums(folder)
    trials = sorted(p for p in (folder / "trials").iterdir() if p.is_dir()) if (folder / "trials").is_dir() \
        else []
    if not trials:
        problems.append("trials/ holds no trial folders")
    results = []
    for trial in trials:
        problems += verify_trial(trial)
        if (trial / "result.json").is_file():
            results.append(json.loads((trial / "result.json").read_text(encoding="utf-8")))
    summary_path = folder / "summary.json"
    if not summary_path.is_file():
        problems.append("summary.json is missing")
        return problems
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    schedule = json.loads((folder / "schedule.json").read_text(encoding="utf-8"))
    labels = sorted(json.loads((folder / "blinding.json").read_text(encoding="utf-8"))["labels"])
    recomputed = summarise(results, len(schedule["order"]), summary.get("stopped_early", False),
                           summary.get("stop_reason"), labels)
    for key, value in recomputed.items():
        if summary.get(key) != value:
            problems.append(f"summary.json: {key} is {summary.get(key)!r}, the results give {value!r}")
    return problems
