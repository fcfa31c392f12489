"""The vertical slice on the real cartridge in real PyBoy: run, verify, replay."""

import io
import json
import subprocess
import sys

from app.console.headless import HeadlessPrinter
from engine.loop.records import Attempt, ResponseLine
from sessions.audit.replay import Divergence, replay_trial
from sessions.audit.verify import verify_experiment
from sessions.evidence.framestore import scan_store
from tests.conftest import read_jsonl, run_experiment, write_manifest


def test_dry_run_reaches_m8_with_evidence(dry_run):
    folder, summary, results = dry_run
    (r,) = results
    assert r.outcome == "success" and r.termination_reason == "final-milestone" and r.invalid_cause is None
    assert r.milestones_reached == [f"M{i}" for i in range(1, 9)]
    assert r.progress_points == 20 and r.deepest_milestone == "M8"
    assert summary.all_succeeded and summary.success_rate == 1.0
    trial = folder / "trials" / r.trial_key
    trace = read_jsonl(trial / "trace.jsonl")
    seed_fields = {"experiment_id", "condition_id", "trial_id", "decision_id", "timestamp_utc", "frame_sha256",
                   "prompt_sha256", "model_id", "response_id", "input_tokens", "output_tokens", "cached_tokens",
                   "provider_cost_usd", "latency_ms", "raw_response_path", "parsed_actions", "accepted_actions",
                   "invalid_output", "memory_reads", "memory_writes", "milestones_before", "milestones_after",
                   "termination_reason"}
    assert seed_fields <= set(trace[0])
    assert trace[0]["input_tokens"] is None and trace[0]["provider_cost_usd"] is None  # unmeasured, not zero
    assert trace[-1]["termination_reason"] == "final-milestone"
    # Every decision-boundary frame is stored once by its pixel hash.
    frames, _, problem = scan_store(trial / "frames" / "frames.pack")
    stored = {f.sha256 for f in frames}
    assert problem is None and {trace[0]["frame_sha256"]} | {t["result_frame_sha256"] for t in trace} == stored
    for m in r.milestones:
        assert trace[m.decision_id - 1]["milestones_after"][-1] == m.id
    for name in ["manifest.yaml", "prompts/system.txt", "prompts/action-schema.json", "scoring/milestones.yaml",
                 "scoring/memory-error-rubric.yaml", "summary.json", "SHA256SUMS", "run.jsonl",
                 "schemas/trace-line.schema.json", "schemas/result.schema.json"]:
        assert (folder / name).is_file(), name
    assert r.provenance["rom_sha256"] and r.provenance["emulator"]["name"] == "pyboy"
    assert not (folder / ".lock").exists() and not (folder / ".reserve").exists()


def test_sha256sums_checks_with_coreutils(dry_run):
    out = subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=dry_run[0],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SHA256SUMS" not in (dry_run[0] / "SHA256SUMS").read_text()


def test_verify_and_replay_pass(dry_run):
    folder, _, results = dry_run
    assert verify_experiment(folder) == []
    report = replay_trial(folder / "trials" / results[0].trial_key)
    assert report["milestones"][-1] == "M8"


def test_verify_catches_an_altered_frame(dry_run_copy):
    store = next((dry_run_copy / "trials").glob("*/frames/frames.pack"))
    data = bytearray(store.read_bytes())
    data[-20] ^= 0xFF
    store.write_bytes(bytes(data))
    problems = verify_experiment(dry_run_copy)
    assert any("frames/frames.pack: content differs" in p for p in problems)


def test_verify_catches_an_altered_trace_line(dry_run_copy):
    trace = next((dry_run_copy / "trials").glob("*/trace.jsonl"))
    lines = trace.read_text().splitlines()
    record = json.loads(lines[4])
    record["parsed_actions"] = ["SELECT"]
    lines[4] = json.dumps(record)
    trace.write_text("\n".join(lines) + "\n")
    problems = verify_experiment(dry_run_copy)
    assert any("trace.jsonl: content differs" in p for p in problems)
    assert any("decision 5: trace accepted ['SELECT']" in p for p in problems)


def test_replay_names_the_first_divergence(dry_run_copy):
    trial = next((dry_run_copy / "trials").iterdir())
    inputs = read_jsonl(trial / "inputs.jsonl")
    inputs[2]["action"] = "NOOP" if inputs[2]["action"] != "NOOP" else "A"
    (trial / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))
    try:
        replay_trial(trial)
    except Divergence as exc:
        assert f"decision {inputs[2]['decision_id']}" in str(exc)
    else:
        raise AssertionError("replay did not notice the changed input")


def test_random_policy_on_tiny_budget_is_game_failure(tmp_path):
    manifest = write_manifest(tmp_path, conditions=[{"id": "rnd", "policy": "random", "seed": 3}],
                              budgets={"accepted_actions": 12})
    folder, summary, (r,) = run_experiment(manifest, tmp_path / "out")
    assert r.outcome == "game-failure" and r.termination_reason == "budget:accepted_actions"
    assert r.telemetry.accepted_actions == 12
    assert summary.failed == 1 and summary.success_rate == 0.0
    assert verify_experiment(folder) == []


def test_counterbalanced_blinded_trials_each_start_fresh(tmp_path):
    manifest = write_manifest(
        tmp_path, conditions=[{"id": "alpha", "policy": "random", "seed": 1},
                              {"id": "beta", "policy": "random", "seed": 2}],
        budgets={"accepted_actions": 5}, trials={"per_condition": 2, "blinding_seed": 4})
    out = io.StringIO()
    folder, summary, results = run_experiment(manifest, tmp_path / "out", sinks=[HeadlessPrinter(out)])
    lines = out.getvalue().splitlines()
    order = json.loads((folder / "schedule.json").read_text())["order"]
    assert [o[0] for o in order] == ["X", "Y", "Y", "X"] and [r.trial_key for r in results] == order
    labels = json.loads((folder / "blinding.json").read_text())["labels"]
    assert sorted(labels.values()) == ["alpha", "beta"]
    assert "alpha" not in "".join(order) and all(r.condition in ("X", "Y") for r in results)
    firsts = {read_jsonl(folder / "trials" / k / "trace.jsonl")[0]["frame_sha256"] for k in order}
    assert len(firsts) == 1  # the canonical state restored before every trial
    # Each trial of a random condition plays its own recorded seed, derived from the condition's.
    x1, x2 = (read_jsonl(folder / "trials" / k / "inputs.jsonl") for k in ("X-01", "X-02"))
    assert [r["action"] for r in x1] != [r["action"] for r in x2]
    seeds = {k: json.loads((folder / "trials" / k / "trial.json").read_text())["policy_seed"] for k in order}
    assert len(set(seeds.values())) == 4 and all(r.provenance["policy_seed"] == seeds[r.trial_key] for r in results)
    # The headers count trials across conditions.
    headers = [line for line in lines if "started, first frame" in line]
    assert [h.split("(")[1].split(")")[0] for h in headers] == ["1/4", "2/4", "3/4", "4/4"]
    assert summary.completed == 4 and verify_experiment(folder) == []


def _response(actions, valid=True):
    if not valid:
        return "I think I should press up"
    return json.dumps({"reasoning_summary": "r", "observed": {"screen": "overworld", "location_guess": "room",
                       "objective_guess": "leave", "certainty": 0.5}, "memory_read": [],
                       "memory_write": [{"kind": "location", "value": "bedroom", "confidence": 0.9,
                                         "evidence": "bed visible"}], "actions": actions})


def _recorded_trial(tmp_path, decisions: list[list[str]]):
    """A trial folder holding just what the replay policy reads: its responses stream."""
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    with open(recorded / "responses.jsonl", "w") as responses:
        for i, attempts in enumerate(decisions, 1):
            line = ResponseLine(decision_id=i, attempts=[Attempt(
                raw=a, valid=True, error=None, model_id=None, response_id=None, latency_ms=None, usage=None)
                for a in attempts])
            responses.write(line.model_dump_json() + "\n")
    (recorded / "trace.jsonl").write_text("")
    return recorded


def test_invalid_outputs_logged_retried_and_counted(tmp_path):
    recorded = _recorded_trial(tmp_path, [
        [_response(None, valid=False), _response(["DOWN"])],
        [_response(["UP"] * 5), _response(["UP"] * 6)],  # too many actions: rejected, never truncated
        [_response(["RIGHT", "LEFT"])]])
    manifest = write_manifest(tmp_path, conditions=[{"id": "rp", "policy": "replay", "replay_trace": str(recorded)}])
    folder, _, (r,) = run_experiment(manifest, tmp_path / "out")
    trial = folder / "trials" / r.trial_key
    trace = read_jsonl(trial / "trace.jsonl")
    assert [t["attempts"] for t in trace] == [2, 2, 1]
    assert [t["invalid_output"] for t in trace] == [True, True, False]
    assert [t["accepted_actions"] for t in trace] == [1, 0, 2]
    t = r.telemetry
    assert (t.model_calls, t.invalid_outputs, t.accepted_actions) == (5, 3, 3)
    assert t.rejected_actions == 11
    raw = read_jsonl(trial / "responses.jsonl")[0]["attempts"][0]
    assert trace[0]["raw_response_path"] == "responses.jsonl#1"
    assert raw["raw"] == "I think I should press up" and not raw["valid"] and "not a JSON object" in raw["error"]
    memory_ops = [m["op"] for m in read_jsonl(trial / "memory.jsonl")]
    assert "write" in memory_ops and "retrieve" in memory_ops
    assert r.termination_reason == "policy-exhausted" and verify_experiment(folder) == []


def test_cli_headless_dry_run(tmp_path):
    out = tmp_path / "cli"
    proc = subprocess.run([sys.executable, "-m", "app.cli", "run", "--headless", "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "M8 Dex received" in proc.stdout and "success" in proc.stdout
    verify = subprocess.run([sys.executable, "-m", "app.cli", "verify", str(out)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
    trial = next((out / "trials").iterdir())
    replay = subprocess.run([sys.executable, "-m", "app.cli", "replay", str(trial)], capture_output=True, text=True)
    assert replay.returncode == 0 and "matches" in replay.stdout


def test_policy_running_out_on_a_retry_still_records_the_decision(tmp_path):
    # The second decision's retry has nothing left to replay.
    recorded = _recorded_trial(tmp_path, [[_response(["DOWN"])], [_response(None, valid=False)]])
    manifest = write_manifest(tmp_path, conditions=[{"id": "rp", "policy": "replay", "replay_trace": str(recorded)}])
    folder, _, (r,) = run_experiment(manifest, tmp_path / "out")
    trace = read_jsonl(folder / "trials" / r.trial_key / "trace.jsonl")
    assert [t["attempts"] for t in trace] == [1, 1] and trace[-1]["invalid_output"]
    assert trace[-1]["termination_reason"] == "policy-exhausted" == r.termination_reason
    assert r.telemetry.invalid_outputs == 1 and verify_experiment(folder) == []


def test_dry_run_exercises_the_memory_store(dry_run):
    folder, _, (r,) = dry_run
    trial = folder / "trials" / r.trial_key
    ops = read_jsonl(trial / "memory.jsonl")
    assert {"write", "supersede", "complete", "read", "retrieve"} <= {o["op"] for o in ops}
    assert not [o for o in ops if o["op"] == "reject"]
    final: dict[str, dict] = {}
    for o in ops:
        if "fact" in o:
            final[o["fact_id"]] = o["fact"]
    parcel = next(f for f in final.values() if f["object"] == "PARCEL")
    assert parcel["status"] == "superseded"  # delivered: possession is no longer active
    delivered = next(f for f in final.values() if f["object"].startswith("delivered the PARCEL"))
    assert delivered["supersedes"] == parcel["fact_id"] and delivered["evidence_frame_sha256"]
    guess = next(f for f in final.values() if f["object"] == "head north out of town")
    assert not guess["confirmed"] and guess["evidence_frame_sha256"] is None
    trace = read_jsonl(trial / "trace.jsonl")
    assert trace[120]["memory_reads"] == ["fact-0017", "fact-0018"]
    assert trace[119]["observed"]["location_guess"] == "SHOP"


def test_script_notes_are_validated(tmp_path):
    from sessions.preflight.experiment import PreflightError, prepare

    notes = tmp_path / "notes.yaml"
    notes.write_text("notes:\n  3:\n    observed: {screen: map, location_guess: x, objective_guess: y, certainty: 2}\n")
    conditions = [{"id": "s", "policy": "scripted", "script": "bundled:walkthrough.txt",
                   "script_notes": str(notes)}]
    manifest = write_manifest(tmp_path, conditions=conditions)
    try:
        prepare(manifest, tmp_path / "out")
    except PreflightError as exc:
        assert "notes.yaml:3: notes.3.observed.screen" in str(exc)
    else:
        raise AssertionError("bad notes accepted")
    assert not (tmp_path / "out").exists()


def test_every_logged_memory_operation_belongs_to_a_recorded_decision(dry_run_copy, tmp_path):
    # A script that stops short: its last, never-made decision must leave no memory line.
    trial = next((dry_run_copy / "trials").iterdir())
    decided = {t["decision_id"] for t in read_jsonl(trial / "trace.jsonl")}
    assert {m["decision_id"] for m in read_jsonl(trial / "memory.jsonl")} <= decided
    script = tmp_path / "short.txt"
    script.write_text("\n".join(["RIGHT"] * 6 + ["UP"] * 3 + ["DOWN"] * 12) + "\n")
    conditions = [{"id": "s", "policy": "scripted", "script": str(script),
                   "script_notes": "bundled:walkthrough-notes.yaml"}]
    folder, _, (r,) = run_experiment(write_manifest(tmp_path, conditions=conditions), tmp_path / "out")
    short = folder / "trials" / r.trial_key
    assert r.termination_reason == "policy-exhausted"
    decided = {t["decision_id"] for t in read_jsonl(short / "trace.jsonl")}
    assert max(decided) == 21 and {m["decision_id"] for m in read_jsonl(short / "memory.jsonl")} <= decided


def test_awards_carry_ordered_active_time_stamps(dry_run):
    """On the real cartridge every award records the active game time when its rung was reached
    (docs/metrics.md, "Active time"): reached in order, never after the trial's active total, which is
    its wall time less the policy's time."""
    (r,) = dry_run[2]
    stamps = [m.active_seconds for m in sorted(r.milestones, key=lambda m: (m.decision_id, m.frame_index))]
    tel = r.telemetry
    assert len(stamps) == 8 and None not in stamps and stamps == sorted(stamps) and stamps[0] >= 0
    assert tel.active_seconds is not None and stamps[-1] <= tel.active_seconds <= tel.wall_time_seconds
    assert abs(tel.wall_time_seconds - tel.policy_seconds - tel.active_seconds) <= 0.002


def test_verify_checks_the_active_time_stamps(dry_run_copy):
    result = next((dry_run_copy / "trials").glob("*/result.json"))
    data = json.loads(result.read_text())
    awards = {m["id"]: m for m in data["milestones"]}
    awards["M4"]["active_seconds"] = awards["M3"]["active_seconds"] - 0.5  # earlier than the rung before it
    awards["M8"]["active_seconds"] = data["telemetry"]["active_seconds"] + 1  # after the trial's end
    del awards["M2"]["active_seconds"]
    result.write_text(json.dumps(data, indent=2) + "\n")
    problems = verify_experiment(dry_run_copy)
    assert any("M4 reached after M3 at active_seconds" in p for p in problems)
    assert any("M8 stamped after the trial's active time" in p for p in problems)
    assert any("M2 has no active_seconds stamp" in p for p in problems)
