"""EvidenceFolder: the one reader of an evidence folder, on folders a real run wrote."""

from __future__ import annotations

import shutil

import pytest

from sessions.audit.recover import recover
from sessions.evidence.folder import EvidenceFolder
from sessions.evidence.reader import FormatProblem
from tests.conftest import run_experiment, write_manifest


def test_reads_every_experiment_record_typed_with_its_hash(dry_run):
    import hashlib

    root, summary, results = dry_run
    folder = EvidenceFolder(root)
    schedule, sha = folder.schedule()
    assert sha == hashlib.sha256((root / "schedule.json").read_bytes()).hexdigest()
    assert schedule.order == [r.trial_key for r in results]  # results come back in run order
    assert folder.experiment_id() == schedule.experiment_id
    got, _ = folder.summary()
    assert got.valid == summary.valid and got.trials == summary.trials
    events, good, problems = folder.run_log()
    assert problems == [] and good == (root / "run.jsonl").stat().st_size
    assert [e.event for e in events][0] == "run-started" and events[-1].event == "run-finished"
    blinding, _ = folder.blinding()
    assert len(blinding.labels) == len(folder.manifest_data()["conditions"])
    assert folder.unblinded_labels() is None  # not unblinded yet: the key stays closed


def test_trials_in_order_with_their_streams(dry_run):
    root, _, results = dry_run
    folder = EvidenceFolder(root)
    trials = folder.trials()
    assert [t.key for t in trials] == sorted(p.name for p in (root / "trials").iterdir())
    assert all(t.rel == f"trials/{t.key}" and not t.voided and t.sealed() for t in trials)
    by_key = {r.trial_key: r for r in results}
    for t in trials:
        result = t.result_or_none()
        assert result is not None and result.outcome == by_key[t.key].outcome
        assert sum(1 for _ in t.reader().trace()) == result.last_decision
    assert set(folder.results()) == {t.key for t in trials}
    assert [t.key for t, _ in folder.sealed_results()] == [t.key for t in trials]


def test_voided_attempts_follow_trials_in_void_order(tmp_path):
    manifest = write_manifest(tmp_path, conditions=[{"id": "a", "policy": "random", "seed": 1},
                                                    {"id": "b", "policy": "random", "seed": 2}],
                              budgets={"accepted_actions": 6}, trials={"per_condition": 2, "blinding_seed": 3})
    root, _, _ = run_experiment(manifest, tmp_path / "exp")
    # As a kill -9 inside X-02 leaves it: recover ends it invalid and voids its block (X-02, Y-02).
    log = (root / "run.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(log) if b'"trial-sealed"' in line and b'"X-02"' in line)
    (root / "run.jsonl").write_bytes(b"".join(log[:cut]))
    (root / "trials" / "X-02" / "result.json").unlink()
    (root / "summary.json").unlink()
    recover(root)
    folder = EvidenceFolder(root)
    assert [(t.rel, t.void) for t in folder.trials()] == [
        ("trials/X-01", None), ("trials/Y-01", None), ("void-1/X-02", 1), ("void-1/Y-02", 1)]
    assert [t.key for t in folder.trials(voided=False)] == ["X-01", "Y-01"]
    (void,) = folder.voids()
    record, _ = void.record()
    assert void.n == record.void == 1 and sorted(record.trial_keys) == ["X-02", "Y-02"]
    (root / "void-x").mkdir()  # not a void: verify reports it as unknown, the reader skips it
    assert [v.n for v in folder.voids()] == [1]


def test_a_damaged_part_is_one_line_naming_it(dry_run, tmp_path):
    root = tmp_path / "exp"
    shutil.copytree(dry_run[0], root)
    folder = EvidenceFolder(root)
    (root / "summary.json").write_text('{"valid": "many"}\n')
    with pytest.raises(FormatProblem, match=r"^summary\.json: ") as exc:
        folder.summary()
    assert "\n" not in str(exc.value)
    (root / "schedule.json").unlink()
    with pytest.raises(FormatProblem, match=r"^schedule\.json is missing$"):
        folder.schedule()
    assert folder.experiment_id() is None
    key = folder.trials()[0].key
    (root / "trials" / key / "result.json").write_text("not json\n")
    assert folder.trials()[0].result_or_none() is None
    assert key not in folder.results()
    with pytest.raises(FormatProblem, match=r"^manifest\.yaml: not YAML"):
        (root / "manifest.yaml").write_text("a: [\n")
        folder.manifest_data()
