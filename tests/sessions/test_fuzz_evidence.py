"""Malformed evidence folders: `verify`, `replay` and `recover` answer with problems, one line
each, and never with a traceback (property-based, with hypothesis)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.experiment import PreflightError
from sessions.experiment_folder import FolderBusy
from sessions.reader import FormatProblem
from sessions.recover import RecoverRefused, recover
from sessions.replay import Divergence, replay_trial
from sessions.verify import verify_experiment
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
