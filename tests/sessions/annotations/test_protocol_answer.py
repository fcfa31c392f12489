"""The issue's whole path, through the commands a user types: a two-condition run, two blind
annotators, an adjudication, freezing, unblinding and the report, whose numbers trace back to the
records in the folder."""

from __future__ import annotations

import json

import yaml

from app.cli import main
from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.conftest import write_manifest


def test_run_annotate_blind_adjudicate_freeze_unblind_report(tmp_path, capsys):
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    conditions = data["conditions"] + [{"id": "wander", "policy": "random", "seed": 5}]
    manifest = write_manifest(tmp_path, conditions=conditions, trials={**data["trials"], "per_condition": 2},
                              budgets={**data["budgets"], "accepted_actions": 250})
    exp = tmp_path / "exp"
    assert main(["run", str(manifest), "--headless", "--output", str(exp)]) == 1  # the random player fails
    labels = json.loads((exp / "blinding.json").read_text())["labels"]
    walk = next(label for label, cid in labels.items() if cid == "walkthrough")

    # Annotators work from a blinded copy; the labels go into the experiment's own layers.
    assert main(["export", str(exp), "--for-annotators", "--output", str(tmp_path / "blind")]) == 0
    assert not (tmp_path / "blind" / "blinding.json").exists()
    key = f"{walk}-01"
    add = ["annotate", "add", str(exp), "--trial", key, "--decision", "40", "--refers-to", "fact-0002"]
    assert main([*add, "--annotator", "alice", "--type", "omission", "--severity", "minor", "--recovered", "45"]) == 0
    assert main([*add, "--annotator", "bob", "--type", "omission", "--severity", "material"]) == 0
    assert main(["annotate", "add", str(exp), "--annotator", "bob", "--trial", key, "--decision", "60",
                 "--refers-to", "20", "--type", "duplicate-objective", "--severity", "minor"]) == 0
    assert main(["annotate", "adjudicate", str(exp), "--resolves", "alice-1", "bob-1", "--resolution", "relabel",
                 "--type", "omission", "--severity", "material", "--reason", "six actions lost"]) == 0
    capsys.readouterr()
    assert main(["unblind", str(exp)]) == 2  # nothing frozen yet: the folder stays blind
    assert "not frozen" in capsys.readouterr().err
    for layer in ("alice", "bob", "adjudication"):
        assert main(["annotate", "freeze", str(exp), "--annotator", layer]) == 0
    assert main(["annotate", "add", *add[2:], "--annotator", "alice", "--type", "omission",
                 "--severity", "minor"]) == 2  # a frozen layer takes no more labels
    assert main(["unblind", str(exp)]) == 0
    assert main(["report", str(exp)]) == 0
    assert main(["verify", str(exp)]) == 0  # the report and the layers sit beside the evidence

    report = json.loads((exp / "reports" / "report.json").read_text())
    assert report["blinded"] is False
    summary = report["summary"]["conditions"]
    assert {c["condition_id"] for c in summary.values()} == {"walkthrough", "wander"}
    for row in report["trials"]:  # every trial row is its result.json
        result = json.loads((exp / "trials" / row["trial_key"] / "result.json").read_text())
        assert (row["points"], row["deepest"], row["outcome"]) == (
            result["progress_points"], result["deepest_milestone"], result["outcome"])
        assert row["accepted_actions"] == result["telemetry"]["accepted_actions"]
    # The four quantities side by side, per condition: progress, cost, actions, memory failures.
    walked = summary[walk]["metrics"]
    assert walked["points"]["median"] == 20 and walked["accepted_actions"]["median"] == 187
    assert walked["cost_usd"]["median"] == 0  # a scripted player costs nothing, and that is known
    row = next(r for r in report["trials"] if r["trial_key"] == key)
    # adjudicated: alice-1 and bob-1 are one material omission; bob's lone duplicate is a disagreement,
    # listed and not counted until adjudicated (docs/metrics.md)
    assert row["material_errors"] == 1 and row["memory_errors"] == 1
    assert [(d["trial_key"], d["decision_id"]) for d in report["disputed"]] == [(key, 60)]
    agreement = report["agreement"]
    assert agreement, "two annotators: Cohen's kappa is reported"
    assert all(line["status"] != "fail" for line in report["checklist"])
