"""Malformed evidence folders: `verify`, `replay` and `recover` answer with problems, one line
each, and never with a traceback (property-based, with hypothesis)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.audit.recover import RecoverRefused, recover
from sessions.audit.replay import Divergence, replay_trial
from sessions.audit.verify import verify_experiment
from sessions.evidence.experiment_folder import FolderBusy
from sessions.evidence.reader import FormatProblem
from sessions.preflight.experiment import PreflightError
from tests.conftest import run_experiment, write_manifest

FUZZ = settings(max_examples=60, deadline=10_000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("fuzz")
    manifest = write_manifest(tmp, conditions=[{"id": "a", "policy": "random", "seed": 1},
                                               {"id": "b", "policy": "random", "seed": 2}],
                              budgets={"accepted_actions": 15}, trials={"per_condition": 1, "blinding_seed": 3})
    folder, _, _ = run_experiment(manifest, tmp / "exp")
    assert verify_experiment(folder) == []
    return folder


@st.composite
def mutations(draw, root: Path):
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    target = draw(st.sampled_from(files))
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "line", "delete", "replace", "duplicate"]))
    return target, kind, draw(st.integers(0, 1 << 20)), draw(st.binary(max_size=64)), \
        draw(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                     max_size=3), max_leaves=8))


def mutate(root: Path, target: str, kind: str, at: int, blob: bytes, value) -> None:
    import json

    path = root / target
    data = path.read_bytes()
    pos = at % (len(data) + 1)
    if kind == "truncate":
        path.write_bytes(data[:pos])
    elif kind == "flip" and data:
        i = at % len(data)
        path.write_bytes(data[:i] + bytes([data[i] ^ (1 + at % 255)]) + data[i + 1:])
    elif kind == "insert":
        path.write_bytes(data[:pos] + blob + data[pos:])
    elif kind == "line":
        lines = data.splitlines(keepends=True) or [b""]
        lines[at % len(lines)] = json.dumps(value).encode() + b"\n"
        path.write_bytes(b"".join(lines))
    elif kind == "delete":
        path.unlink()
    elif kind == "replace":
        path.write_bytes(blob)
    elif kind == "duplicate":
        lines = data.splitlines(keepends=True)
        if lines:
            lines.insert(at % len(lines), lines[at % len(lines)])
        path.write_bytes(b"".join(lines))


def _copy(small: Path) -> Path:
    root = Path(tempfile.mkdtemp()) / "exp"
    shutil.copytree(small, root)
    return root


@FUZZ
@given(data=st.data())
def test_verify_reports_problems_never_a_traceback(small, data):
    root = _copy(small)
    try:
        mutate(root, *data.draw(mutations(root)))
        problems = verify_experiment(root)
        assert all(isinstance(p, str) and "\n" not in p for p in problems)
    finally:
        shutil.rmtree(root.parent)


@settings(max_examples=20, deadline=20_000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_replay_and_recover_report_problems_never_a_traceback(small, data):
    root = _copy(small)
    try:
        target, kind, at, blob, value = data.draw(mutations(root))
        mutate(root, target, kind, at, blob, value)
        for trial in sorted((root / "trials").iterdir()):
            try:
                replay_trial(trial)
            except (Divergence, FormatProblem, PreflightError) as exc:
                assert "\n" not in str(exc)
        try:
            recover(root)
        except (RecoverRefused, FolderBusy) as exc:
            assert "\n" not in str(exc)
    finally:
        shutil.rmtree(root.parent)



def test_recover_refuses_a_sealed_trial_whose_result_was_deleted(small, tmp_path):
    """Found by the property above: a result is durable before its seal, so a sealed trial
    without one was changed afterwards; recover must not write it a new (invalid) outcome."""
    root = tmp_path / "exp"
    shutil.copytree(small, root)
    (root / "trials" / "X-01" / "result.json").unlink()
    with pytest.raises(RecoverRefused, match="X-01/result.json is missing but run.jsonl sealed"):
        recover(root)
    assert not (root / "trials" / "X-01" / "result.json").exists() and not list(root.glob("void-*"))


def test_recover_voids_a_block_holding_a_trial_its_loop_has_not_reached(tmp_path):
    """Schedule X-01, Y-01, Y-02, X-02: the process dies inside X-02. Recover ends X-02 invalid
    and voids its block, which moves Y-02 (later by name) before the loop gets to it."""
    import json

    manifest = write_manifest(tmp_path, conditions=[{"id": "a", "policy": "random", "seed": 1},
                                                    {"id": "b", "policy": "random", "seed": 2}],
                              budgets={"accepted_actions": 6}, trials={"per_condition": 2, "blinding_seed": 3})
    root, _, _ = run_experiment(manifest, tmp_path / "exp")
    order = json.loads((root / "schedule.json").read_text())["order"]
    assert order[2:] == ["Y-02", "X-02"]
    # Undo what happened from X-02's seal on, as a kill -9 inside X-02 would have left it.
    log = (root / "run.jsonl").read_bytes().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(log) if b'"trial-sealed"' in line and b'"X-02"' in line)
    (root / "run.jsonl").write_bytes(b"".join(log[:cut]))
    (root / "trials" / "X-02" / "result.json").unlink()
    (root / "summary.json").unlink()
    done = recover(root)
    assert done.finished == ["X-02"] and done.voided == [1]
    void = json.loads((root / "void-1" / "void.json").read_text())
    assert sorted(void["trial_keys"]) == ["X-02", "Y-02"]
    assert sorted(p.name for p in (root / "trials").iterdir()) == ["X-01", "Y-01"]
    assert verify_experiment(root) == []
