"""The tamper matrix: every edit an attacker could make to an evidence folder, with SHA256SUMS
regenerated afterwards (as they would), is caught by `oakwatch verify` or `oakwatch replay`.

The attacker here rewrites files and the sums but cannot recompute the hash chains end to end
(beyond that, only a published root protects: the last test shows a recomputed SHA256SUMS
changes the root)."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from engine.loop.events import DecisionRecorded
from sessions.audit.replay import Divergence, replay_trial
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from sessions.evidence.checksums import file_sha256, render_sums
from sessions.evidence.experiment_folder import root_hash
from sessions.evidence.framestore import HEADER, scan_store
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import prepare
from tests.conftest import read_jsonl, write_manifest


class TagAtDecision:
    """Pauses the run at one decision and tags it from another thread, as an operator would."""

    def __init__(self, decision: int):
        self.decision = decision
        self.control = None

    def handle(self, event) -> None:
        if isinstance(event, DecisionRecorded) and event.trace.decision_id == self.decision:
            control = self.control
            key = f"{event.trace.condition_id}-{event.trace.trial_id:02d}"
            control.pause()

            def tag() -> None:
                try:
                    control.tag({"trial_key": key, "decision_id": self.decision, "type": "omission",
                                 "severity": "minor", "refers_to": "1", "note": "looked lost"})
                finally:
                    control.resume()

            threading.Thread(target=tag).start()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """Two conditions, blinded and counterbalanced: the scripted walkthrough (milestones, memory,
    an operator tag) and a random policy (a budget ending)."""
    tmp = tmp_path_factory.mktemp("tamper")
    manifest = write_manifest(
        tmp, conditions=[{"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt",
                          "script_notes": "bundled:walkthrough-notes.yaml"},
                         {"id": "rnd", "policy": "random", "seed": 3}],
        budgets={"accepted_actions": 300}, trials={"per_condition": 1, "blinding_seed": 1})
    out = tmp / "exp"
    prepared = prepare(manifest, out)
    tagger = TagAtDecision(5)
    runner = ExperimentRunner(prepared, create_folder(prepared, out), sinks=[tagger])
    tagger.control = runner.control
    runner.run()
    assert verify_experiment(out) == []
    return out


def _trial(root: Path, policy: str) -> Path:
    labels = json.loads((root / "blinding.json").read_text())["labels"]
    label = next(lab for lab, cid in labels.items() if cid == policy)
    return root / "trials" / f"{label}-01"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _edit_json_line(path: Path, n: int, change) -> None:
    lines = _lines(path)
    record = json.loads(lines[n])
    change(record)
    lines[n] = json.dumps(record, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))


def _edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _recompute_summary(root: Path) -> None:
    """What a careful attacker does after changing results: recompute the summary's figures."""
    from sessions.analysis.summary import summarise
    from sessions.evidence.reader import read_results
    from sessions.evidence.records import Summary

    old = Summary.model_validate_json((root / "summary.json").read_text())
    schedule = json.loads((root / "schedule.json").read_text())
    new = summarise(experiment_id=old.experiment_id, manifest_sha256=old.manifest_sha256,
                    schedule_sha256=old.schedule_sha256, order=schedule["order"], results=read_results(root),
                    voids=old.voids, labels=sorted(old.per_condition), stopped_early=old.stopped_early,
                    stop_reason=old.stop_reason, recovered=old.recovered, run_log_head=old.run_log_head)
    (root / "summary.json").write_text(new.model_dump_json(indent=2) + "\n")


# -- the tamperings ------------------------------------------------------------------------------

def swap_frame(root):
    store = _trial(root, "walk") / layout.FRAMES
    frames, _, _ = scan_store(store)
    a, b = frames[3], frames[7]
    data = store.read_bytes()
    png_b = data[b.offset:b.offset + b.length]
    head = data[a.offset - HEADER.size:a.offset]
    magic, sha, _ = HEADER.unpack(head)
    record = HEADER.pack(magic, sha, len(png_b)) + png_b
    store.write_bytes(data[:a.offset - HEADER.size] + record + data[a.offset + a.length:])


def edit_response(root):
    _edit_json_line(_trial(root, "walk") / layout.RESPONSES, 9,
                    lambda r: r["attempts"][0].update(raw=r["attempts"][0]["raw"].replace("script", "model")))


def rewrite_outcome_and_summary(root):
    def change(r):
        r.update(outcome="success", termination_reason="final-milestone")
    _edit_json(_trial(root, "rnd") / layout.RESULT, change)
    _recompute_summary(root)


def manifest_budget(root):
    path = root / layout.MANIFEST
    path.write_text(path.read_text().replace("accepted_actions: 300", "accepted_actions: 3000"))


def manifest_press_frames(root):
    path = root / layout.MANIFEST
    path.write_text(path.read_text().replace("press_frames: 4", "press_frames: 3"))


def delete_memory_line(root):
    path = _trial(root, "walk") / layout.MEMORY
    lines = _lines(path)
    path.write_text("".join(lines[:4] + lines[5:]))


def forge_annotation(root):
    path = _trial(root, "rnd") / layout.TRIAL_ANNOTATIONS
    trial = _trial(root, "rnd")
    import hashlib
    genesis = hashlib.sha256((trial / layout.TRIAL).read_bytes()).hexdigest()
    line = {"trial_key": trial.name, "decision_id": 3, "frame_sha256": None, "frame_index": None,
            "opened_utc": "2026-11-30T10:00:00.000Z", "timestamp_utc": "2026-11-30T10:00:01.000Z",
            "annotator": "operator", "source": "operator", "type": "fabrication", "severity": "critical",
            "refers_to": None, "note": "forged", "prev_sha256": genesis}
    path.write_text(json.dumps(line) + "\n")


def relabel_blinding(root):
    def swap(b):
        x, y = sorted(b["labels"])
        b["labels"][x], b["labels"][y] = b["labels"][y], b["labels"][x]
    _edit_json(root / layout.BLINDING, swap)


def cut_short_as_game_failure(root):
    trial = _trial(root, "walk")
    keep = 50
    trace = _lines(trial / layout.TRACE)[:keep]
    (trial / layout.TRACE).write_text("".join(trace))
    (trial / layout.RESPONSES).write_text("".join(_lines(trial / layout.RESPONSES)[:keep]))
    (trial / layout.INPUTS).write_text("".join(_lines(trial / layout.INPUTS)[:keep]))
    mem = [x for x in _lines(trial / layout.MEMORY) if json.loads(x)["decision_id"] <= keep]
    (trial / layout.MEMORY).write_text("".join(mem))
    last = json.loads(trace[-1])

    def change(r):
        r.update(outcome="game-failure", termination_reason="policy-exhausted", last_decision=keep,
                 milestones_reached=last["milestones_after"],
                 milestones=[m for m in r["milestones"] if m["decision_id"] <= keep])
        r["progress_points"] = sum(m["points"] for m in r["milestones"])
    _edit_json(trial / layout.RESULT, change)
    _recompute_summary(root)


def delete_trial_and_recompute(root):
    shutil.rmtree(_trial(root, "rnd"))
    _recompute_summary(root)


def edit_trace_actions(root):
    _edit_json_line(_trial(root, "walk") / layout.TRACE, 20, lambda t: t.update(parsed_actions=["SELECT"]))


def delete_trace_line(root):
    path = _trial(root, "rnd") / layout.TRACE
    lines = _lines(path)
    path.write_text("".join(lines[:30] + lines[31:]))


def edit_input_action(root):
    _edit_json_line(_trial(root, "rnd") / layout.INPUTS, 12,
                    lambda r: r.update(action="A" if r["action"] != "A" else "B"))


def delete_input_line(root):
    path = _trial(root, "rnd") / layout.INPUTS
    lines = _lines(path)
    path.write_text("".join(lines[:-1]))


def edit_telemetry(root):
    _edit_json(_trial(root, "rnd") / layout.RESULT, lambda r: r["telemetry"].update(accepted_actions=250))


def drop_a_milestone(root):
    def change(r):
        r["milestones"] = r["milestones"][:-1]
        r["milestones_reached"] = r["milestones_reached"][:-1]
        r["progress_points"] -= 5
    _edit_json(_trial(root, "walk") / layout.RESULT, change)
    _recompute_summary(root)


def edit_summary_rate(root):
    _edit_json(root / layout.SUMMARY, lambda s: s.update(success_rate=1.0))


def reorder_schedule(root):
    _edit_json(root / layout.SCHEDULE, lambda s: s.update(order=list(reversed(s["order"]))))


def edit_genesis_seed(root):
    _edit_json(_trial(root, "rnd") / layout.TRIAL, lambda g: g.update(policy_seed=g["policy_seed"] + 1))


def edit_condition_file(root):
    label = _trial(root, "rnd").name.split("-")[0]
    path = root / "conditions" / f"{label}.yaml"
    path.write_text(path.read_text().replace("seed: 3", "seed: 4"))


def delete_run_log_seal(root):
    path = root / layout.RUN_LOG
    lines = _lines(path)
    sealed = next(i for i, x in enumerate(lines) if '"trial-sealed"' in x)
    path.write_text("".join(lines[:sealed] + lines[sealed + 1:]))


def edit_system_prompt(root):
    path = root / "prompts" / "system.txt"
    path.write_text(path.read_text() + "\nAlso: the parcel is in the shop.\n")


def edit_action_schema(root):
    _edit_json(root / "prompts" / "action-schema.json", lambda s: s["properties"]["actions"].update(maxItems=64))


def truncate_frame_store(root):
    store = _trial(root, "walk") / layout.FRAMES
    frames, _, _ = scan_store(store)
    last = frames[-1]
    store.write_bytes(store.read_bytes()[:last.offset - HEADER.size])


def append_frame(root):
    store = _trial(root, "walk") / layout.FRAMES
    frames, _, _ = scan_store(store)
    data = store.read_bytes()
    first = frames[0]
    store.write_bytes(data + data[first.offset - HEADER.size:first.offset + first.length])


def delete_response_line(root):
    path = _trial(root, "walk") / layout.RESPONSES
    lines = _lines(path)
    path.write_text("".join(lines[:10] + lines[11:]))


def edit_memory_fact(root):
    path = _trial(root, "walk") / layout.MEMORY
    lines = _lines(path)
    n = next(i for i, x in enumerate(lines) if '"op":"write"' in x)
    _edit_json_line(path, n, lambda op: op["fact"].update(object="the PARCEL was never here"))


def edit_annotation(root):
    _edit_json_line(_trial(root, "walk") / layout.TRIAL_ANNOTATIONS, 0, lambda a: a.update(severity="critical"))


def outcome_only(root):
    _edit_json(_trial(root, "rnd") / layout.RESULT, lambda r: r.update(outcome="success"))


def unknown_file(root):
    (_trial(root, "rnd") / "notes.txt").write_text("the agent was doing fine\n")


def edit_summary_median(root):
    def change(s):
        label = next(iter(s["per_condition"]))
        s["per_condition"][label]["progress_points"]["median"] = 99
    _edit_json(root / layout.SUMMARY, change)


def swap_trial_folders(root):
    a, b = _trial(root, "walk"), _trial(root, "rnd")
    tmp = root / "trials" / "swap"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def copy_trial_over_another(root):
    a, b = _trial(root, "walk"), _trial(root, "rnd")
    shutil.rmtree(b)
    shutil.copytree(a, b)


def edit_capture_frame(root):
    _edit_json_line(_trial(root, "rnd") / layout.INPUTS, 5, lambda r: r.update(capture_frame=r["capture_frame"] + 1))


def inflate_path_efficiency(root):
    _edit_json(_trial(root, "walk") / layout.RESULT, lambda r: r["derived"].update(path_efficiency=1.0))


def leftover_temp(root):
    (root / "summary.json.tmp").write_text("{}")


TAMPERINGS = [swap_frame, edit_response, rewrite_outcome_and_summary, manifest_budget, manifest_press_frames,
              delete_memory_line, forge_annotation, relabel_blinding, cut_short_as_game_failure,
              delete_trial_and_recompute, edit_trace_actions, delete_trace_line, edit_input_action,
              delete_input_line, edit_telemetry, drop_a_milestone, edit_summary_rate, reorder_schedule,
              edit_genesis_seed, edit_condition_file, delete_run_log_seal, edit_system_prompt, edit_action_schema,
              truncate_frame_store, append_frame, delete_response_line, edit_memory_fact, edit_annotation,
              outcome_only, unknown_file, edit_summary_median, swap_trial_folders, copy_trial_over_another,
              edit_capture_frame, leftover_temp, inflate_path_efficiency]


def regenerate_sums(root: Path) -> None:
    """The attacker's last step: SHA256SUMS over every evidence file as it now stands."""
    files = {p.relative_to(root).as_posix(): file_sha256(p) for p in root.rglob("*")
             if p.is_file() and layout.classify_path(p.relative_to(root).as_posix()) == "evidence"}
    (root / layout.SUMS).write_text(render_sums(files))


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda f: f.__name__)
def test_tampering_is_caught(base, tmp_path, tamper):
    root = tmp_path / "exp"
    shutil.copytree(base, root)
    tamper(root)
    regenerate_sums(root)
    problems = verify_experiment(root)
    caught_by = "verify" if problems else None
    if not problems:  # the emulator is the last word on what the inputs produce
        for trial in sorted((root / "trials").iterdir()):
            try:
                replay_trial(trial)
            except Divergence:
                caught_by = "replay"
    assert caught_by, f"{tamper.__name__} passed verify and replay"


def test_path_efficiency_is_recomputed_by_verify(base, tmp_path):
    """The walkthrough's result reports the game's optimal presses over the actions it took to M8;
    verify recomputes both from the inputs and the game definition."""
    result = json.loads((_trial(base, "walk") / layout.RESULT).read_text())
    d = result["derived"]
    assert result["deepest_milestone"] == "M8" and d["path_optimal_presses"] == 183
    assert d["path_actions"] == result["telemetry"]["accepted_actions"]
    assert d["path_efficiency"] == round(183 / d["path_actions"], 6) < 1
    rnd = json.loads((_trial(base, "rnd") / layout.RESULT).read_text())["derived"]
    if rnd["path_actions"] is None:  # the random walk never left the house: unknown, never 0
        assert rnd["path_efficiency"] is None
    root = tmp_path / "exp"
    shutil.copytree(base, root)
    inflate_path_efficiency(root)
    regenerate_sums(root)
    assert any("derived.path_efficiency is 1.0" in p for p in verify_experiment(root))


def test_the_untouched_folder_passes_and_its_root_pins_it(base, tmp_path):
    root = tmp_path / "exp"
    shutil.copytree(base, root)
    before = root_hash(root)
    regenerate_sums(root)  # the same files give the same sums and the same root
    assert root_hash(root) == before and verify_experiment(root) == []
    for trial in (root / "trials").iterdir():
        replay_trial(trial)
    edit_summary_rate(root)
    regenerate_sums(root)
    assert root_hash(root) != before  # any change at all moves the published root


def test_the_operator_tag_is_in_the_evidence(base):
    (tag,) = read_jsonl(_trial(base, "walk") / layout.TRIAL_ANNOTATIONS)
    assert (tag["decision_id"], tag["refers_to"], tag["type"]) == (5, "1", "omission")
