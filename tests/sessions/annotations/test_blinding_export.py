"""Keeping annotators blind: the blinded export (no model id anywhere in it, the evidence untouched)
and `oakwatch unblind` (refused until every layer is frozen, then the summary with condition ids
beside the run's own). A real two-condition run: a model (through its SDK, against a local fake
provider) and a random player."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from app.cli import main
from engine.loop.script import parse_script
from sessions.annotations.annotation_layer import AnnotationLayer, add_label, adjudicate
from sessions.annotations.blinding import MASK, model_ids, unblind_problems, unblinded_labels
from sessions.audit.verify import verify_experiment
from sessions.evidence.checksums import file_sha256
from sessions.preflight.assets import ASSETS
from tests.conftest import read_jsonl, run_experiment, write_manifest
from tests.fakes.provider_server import FakeProviderServer, ok

ASKED = "acme-sonnet-secret-7"
ANSWERED = "acme-sonnet-secret-7-2026-10-01"
WALK = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text(), "walkthrough.txt")


def answer(actions: list[str], n: int) -> dict:
    return {"reasoning_summary": f"walking on; I am {ANSWERED}", "memory_read": [],
            "observed": {"screen": "overworld", "location_guess": "house", "objective_guess": "leave",
                         "certainty": 0.8},
            "memory_write": [{"kind": "location", "value": f"room {n}", "confidence": 0.9, "evidence": "screen"}],
            "actions": actions}


@pytest.fixture(scope="module")
def model_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("blind")
    with FakeProviderServer() as server:
        chunks = [WALK[i:i + 4] for i in range(0, 24, 4)]
        server.script(*[ok(answer(c, n), model=ANSWERED) for n, c in enumerate(chunks)])
        model = {"id": "acme-agent", "policy": "model", "provider": "openai-compatible", "model": ASKED,
                 "base_url": server.base_url("chat"),
                 "request": {"timeout_seconds": 5, "max_attempts": 2, "backoff_seconds": 0.01,
                             "backoff_cap_seconds": 0.1}}
        manifest = write_manifest(tmp, conditions=[model, {"id": "rnd", "policy": "random", "seed": 5}],
                                  budgets={"accepted_actions": 24, "model_decisions": None,
                                           "wall_time_minutes": None})
        folder, summary, results = run_experiment(manifest, tmp / "exp")
    assert {r.outcome for r in results} == {"game-failure"}, [(r.termination_reason, r.error) for r in results]
    assert verify_experiment(folder) == []
    return folder


@pytest.fixture
def run(model_run, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(model_run, dst)
    return dst


def labels(root: Path) -> dict[str, str]:
    return json.loads((root / "blinding.json").read_text())["labels"]


def key_of(root: Path, condition: str) -> str:
    return next(f"{label}-01" for label, cid in labels(root).items() if cid == condition)


def all_bytes(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- the blinded export ---------------------------------------------------------------------------

def test_the_blinded_copy_names_no_model_and_the_evidence_keeps_its_ids(run, tmp_path, capsys):
    model_key = key_of(run, "acme-agent")
    trace = read_jsonl(run / "trials" / model_key / "trace.jsonl")
    assert trace[0]["model_id"] == ANSWERED  # the evidence keeps the exact id
    ids = model_ids(run)
    assert {ASKED, ANSWERED} <= ids
    before = all_bytes(run)
    out = tmp_path / "for-annotators"
    assert main(["export", str(run), "--for-annotators", "--output", str(out)]) == 0
    assert "2 trial(s) written blinded" in capsys.readouterr().out
    # Not one byte of any model id anywhere in the copy (frames included), in any file.
    copied = all_bytes(out)
    for rel, data in copied.items():
        for model in ids:
            assert model.encode() not in data, (model, rel)
        assert b"acme" not in data, rel  # not even the family's name, quoted in the model's own words
    # What is there, and what is not.
    names = set(copied)
    for key in labels(run):
        for name in ("trace.jsonl", "responses.jsonl", "inputs.jsonl", "memory.jsonl", "result.json",
                     "frames/frames.pack"):
            assert f"trials/{key}-01/{name}" in names
        assert f"conditions/{key}.yaml" not in names
        assert f"trials/{key}-01/trial.json" not in names
    assert not any(n.startswith(("conditions/", "annotations/")) for n in names)
    assert "blinding.json" not in names and "schedule.json" not in names and "README.md" in names
    assert copied[f"trials/{model_key}/frames/frames.pack"] == before[f"trials/{model_key}/frames/frames.pack"]
    manifest = yaml.safe_load(copied["manifest.yaml"])
    assert manifest["conditions"] == [{"label": label} for label in sorted(labels(run))]
    for cid in labels(run).values():
        assert cid not in copied["manifest.yaml"].decode()
    masked = read_jsonl(out / "trials" / model_key / "trace.jsonl")
    assert masked[0]["model_id"] == MASK and masked[0]["response_id"] == MASK
    assert [t["parsed_actions"] for t in masked] == [t["parsed_actions"] for t in trace]  # the play is all there
    attempt = read_jsonl(out / "trials" / model_key / "responses.jsonl")[0]["attempts"][0]
    assert attempt["model_id"] == MASK and attempt["reply"] == {"masked": MASK}
    assert f"walking on; I am {MASK}" in attempt["raw"]
    result = json.loads(copied[f"trials/{model_key}/result.json"])
    assert set(result["provenance"]) == {"emulator", "memory_rules", "masked"}
    readme = copied["README.md"].decode()
    assert "model id" in readme and "blinding.json" in readme and MASK in readme
    # The original is exactly as it was, and still verifies.
    assert all_bytes(run) == before
    assert verify_experiment(run) == []
    # An existing output folder or a folder that is not evidence: one line, exit 2, nothing written.
    assert main(["export", str(run), "--for-annotators", "--output", str(out)]) == 2
    assert main(["export", str(tmp_path / "nope"), "--for-annotators", "--output", str(tmp_path / "o2")]) == 2
    assert main(["export", str(run), "--for-annotators"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 3 and not (tmp_path / "o2").exists()


# -- unblinding -----------------------------------------------------------------------------------

def label_both(run: Path) -> tuple[str, str]:
    model_key = key_of(run, "acme-agent")
    memory = read_jsonl(run / "trials" / model_key / "memory.jsonl")
    fact, at = next((m["fact_id"], m["decision_id"]) for m in memory if m["op"] == "write")
    a = add_label(run, "alice", model_key, at + 2, type="omission", severity="material", refers_to=fact)
    b = add_label(run, "bob", model_key, at + 2, type="false-persistence", severity="minor", refers_to=fact)
    return a.id, b.id


def test_unblind_refuses_until_every_layer_is_frozen_then_writes_beside_the_summary(run, capsys):
    summary_before = (run / "summary.json").read_bytes()
    sums_before = (run / "SHA256SUMS").read_bytes()
    assert main(["unblind", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no annotator layer" in err and "trials without labels" in err
    a, b = label_both(run)
    adjudicate(run, [a, b], "accept", "omission it is")
    assert main(["unblind", str(run)]) == 2
    err = capsys.readouterr().err
    assert "layers not frozen: alice, bob, adjudication" in err and key_of(run, "rnd") in err
    assert main(["annotate", "freeze", str(run), "--annotator", "alice"]) == 0
    assert main(["annotate", "freeze", str(run), "--annotator", "bob"]) == 0
    assert unblind_problems(run) == ["layers not frozen: adjudication (`oakwatch annotate freeze DIR "
                                     "--annotator NAME`)", f"trials without labels: {key_of(run, 'rnd')}"]
    assert main(["unblind", str(run)]) == 2 and not (run / "unblinded").exists()
    assert unblinded_labels(run) is None
    AnnotationLayer(run, "adjudication").freeze()
    capsys.readouterr()
    assert main(["unblind", str(run)]) == 0
    assert "unblinded/summary.json" in capsys.readouterr().out
    # The run's summary (labels only) and the evidence's sums are untouched; the unblinded one sits beside.
    assert (run / "summary.json").read_bytes() == summary_before
    assert (run / "SHA256SUMS").read_bytes() == sums_before
    unblinded = json.loads((run / "unblinded" / "summary.json").read_text())
    assert unblinded["conditions"] == labels(run)
    for label, figures in unblinded["per_condition"].items():
        assert figures["condition_id"] == labels(run)[label]
    for seal in unblinded["trials"]:
        assert seal["condition_id"] == labels(run)[seal["trial_key"][0]]
    assert set(unblinded["frozen_layers"]) == {"alice", "bob", "adjudication"}
    assert (run / "unblinded" / "blinding.json").read_bytes() == (run / "blinding.json").read_bytes()
    sums = (run / "unblinded" / "SHA256SUMS").read_text()
    assert f"{file_sha256(run / 'unblinded' / 'summary.json')}  summary.json" in sums
    assert unblinded_labels(run) == labels(run)
    assert verify_experiment(run) == []
    assert main(["unblind", str(run)]) == 2  # once only
    # A changed key in unblinded/ is caught, its own sums regenerated or not.
    key = run / "unblinded" / "blinding.json"
    key.write_text(key.read_text().replace('"labels"', '"labels" '))
    assert any("unblinded/blinding.json" in p for p in verify_experiment(run))


def test_an_unfrozen_operator_layer_keeps_the_folder_blind(run):
    from sessions.annotations.annotation_layer import late_tagger

    a, b = label_both(run)
    AnnotationLayer(run, "alice").freeze()
    AnnotationLayer(run, "bob").freeze()
    late_tagger(run)({"trial_key": key_of(run, "rnd"), "decision_id": 3, "type": "omission",
                      "severity": "minor", "refers_to": "2", "note": ""}, True)
    assert any("layers not frozen: operator" in p for p in unblind_problems(run))
    AnnotationLayer(run, "operator").freeze()
    assert unblind_problems(run) == []
    assert main(["unblind", str(run)]) == 0
    assert verify_experiment(run) == []
