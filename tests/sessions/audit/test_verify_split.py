"""verify's two-process walk (sessions.audit.verify_split): on a clean trial it is taken and passes; on a
damaged one it reports exactly the problems of the one-process walk (differential, hypothesis); a worker
that is killed or fails ends verify with one problem that says so."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sessions.audit.verify_split as split
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from tests.conftest import run_experiment, write_manifest
from tests.sessions.audit.test_fuzz_evidence import mutate

STREAMS = (layout.TRACE, layout.RESPONSES, layout.INPUTS)


@pytest.fixture(scope="module")
def trial(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("split")
    manifest = write_manifest(tmp, conditions=[{"id": "a", "policy": "random", "seed": 5}],
                              budgets={"accepted_actions": 60}, trials={"per_condition": 1, "blinding_seed": 3})
    folder, _, _ = run_experiment(manifest, tmp / "exp")
    return folder


def _trial_dir(root: Path) -> Path:
    return next((root / "trials").iterdir())


def _copy(src: Path) -> Path:
    root = Path(tempfile.mkdtemp()) / "exp"
    shutil.copytree(src, root)
    return root


def _both(root: Path) -> tuple[list[str], list[str]]:
    """verify's problems walked in one process, and with the split forced (every trial split)."""
    saved = split.SPLIT_BYTES
    try:
        split.SPLIT_BYTES = 1 << 62
        one = verify_experiment(root)
        split.SPLIT_BYTES = 0
        two = verify_experiment(root)
    finally:
        split.SPLIT_BYTES = saved
    return one, two


def test_clean_trial_is_walked_in_two_processes(trial, monkeypatch):
    merged = []
    real_merge = split._merge
    monkeypatch.setattr(split, "_merge", lambda w, m: merged.append(m[1][0]) or real_merge(w, m))
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    plan = split._plan(_trial_dir(trial))
    assert plan is not None and 1 < plan.k < 60
    assert verify_experiment(trial) == []
    assert merged == [60 - plan.k]  # the worker walked the decisions after the split


def test_small_trial_is_not_split(trial):
    assert split._plan(_trial_dir(trial)) is None  # under SPLIT_BYTES: no process started


def _edit_line(path: Path, index: int, how: str) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    index = max(0, min(index, len(lines) - 1))
    line = lines[index]
    if how == "delete":
        del lines[index]
    elif how == "duplicate":
        lines.insert(index, line)
    elif how == "flip":
        lines[index] = line[:10] + bytes([line[10] ^ 1]) + line[11:]
    elif how == "torn":
        lines[index] = line[: len(line) // 2] + b"\n"
    elif how == "json":
        lines[index] = b"{not json\n"
    elif how == "swap":
        lines[index], lines[index - 1] = lines[index - 1], line
    elif how == "decision":
        record = json.loads(line)
        record["decision_id"] += 1
        lines[index] = json.dumps(record, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))


def _line_of(path: Path, k: int) -> int:
    """The index of the first line of `path` whose decision is after k (where the worker starts)."""
    for i, line in enumerate(path.read_bytes().splitlines()):
        if json.loads(line)["decision_id"] > k:
            return i
    return 0


@pytest.mark.parametrize("name", STREAMS)
@pytest.mark.parametrize("how", ["delete", "duplicate", "flip", "torn", "json", "swap", "decision"])
def test_damage_at_the_split_reports_what_one_process_does(trial, monkeypatch, name, how):
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    k = split._plan(_trial_dir(trial)).k
    for offset in (-1, 0, 1):
        root = _copy(trial)
        path = _trial_dir(root) / name
        _edit_line(path, _line_of(path, k) + offset, how)
        one, two = _both(root)
        assert one and one == two


def test_a_broken_chain_link_after_the_split_is_reported(trial, monkeypatch):
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    k = split._plan(_trial_dir(trial)).k
    root = _copy(trial)
    path = _trial_dir(root) / layout.TRACE
    lines = path.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[k])
    record["prev_sha256"] = "0" * 64
    lines[k] = json.dumps(record, separators=(",", ":")).encode() + b"\n"
    path.write_bytes(b"".join(lines))
    one, two = _both(root)
    assert one == two and any(f"trace.jsonl:{k + 1}: hash chain broken" in p for p in two)


@settings(max_examples=40, deadline=20_000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_streams_report_what_one_process_does(trial, data):
    root = _copy(trial)
    name = data.draw(st.sampled_from((*STREAMS, layout.RESULT)))
    kind = data.draw(st.sampled_from(["truncate", "flip", "insert", "line", "duplicate"]))
    mutate(root, f"{_trial_dir(root).relative_to(root).as_posix()}/{name}", kind,
           data.draw(st.integers(0, 1 << 20)), data.draw(st.binary(max_size=32)),
           data.draw(st.none() | st.integers() | st.dictionaries(st.sampled_from(["decision_id", "x"]),
                                                                 st.integers(-2, 80), max_size=2)))
    one, two = _both(root)
    assert one == two


def test_a_killed_worker_fails_verify_with_a_clear_problem(trial, monkeypatch):
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    monkeypatch.setattr(split, "_second_part", lambda *a: os.kill(os.getpid(), signal.SIGKILL))
    k = split._plan(_trial_dir(trial)).k
    problems = verify_experiment(trial)
    assert problems == [f"{_trial_dir(trial).relative_to(trial).as_posix()}/{layout.TRACE}: decisions after {k} "
                        f"were not checked: verify's worker process was killed by signal 9 (SIGKILL) before it "
                        f"finished"]


def test_a_worker_that_raises_fails_verify_with_a_clear_problem(trial, monkeypatch):
    def boom(*_args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    monkeypatch.setattr(split, "_second_part", boom)
    problems = verify_experiment(trial)
    assert len(problems) == 1
    assert problems[0].endswith("were not checked: verify's worker process failed (RuntimeError: disk on fire)")


# -- a trial with memory operations (the bundled dry-run's script notes: writes, supersedes, retrieves) ------------

def _memory_lines(root: Path) -> list[dict]:
    return [json.loads(line) for line in (_trial_dir(root) / layout.MEMORY).read_bytes().splitlines()]


def test_a_trial_with_memory_operations_is_walked_in_two_processes(dry_run, monkeypatch):
    root = dry_run[0]
    merged = []
    real_merge = split._merge
    monkeypatch.setattr(split, "_merge", lambda w, m: merged.append(m) or real_merge(w, m))
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    plan = split._plan(_trial_dir(root))
    assert plan is not None and plan.starts[layout.MEMORY] > 0
    ops = _memory_lines(root)
    after = [op for op in ops if op["decision_id"] > plan.k]
    assert after and plan.memory_lines == len(ops) - len(after)
    # the worker's part names facts only the first part wrote: it borrows them, and the merge finds them
    written_after = {op["fact_id"] for op in after if op["op"] == "write"}
    named_after = {f for op in after for f in (op.get("fact_ids") or [op.get("fact_id")])} - written_after
    assert named_after
    assert verify_experiment(root) == []
    assert len(merged) == 1 and merged[0][-1] == named_after


def _rewrite_memory(root: Path, edit) -> None:
    path = _trial_dir(root) / layout.MEMORY
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    edit(lines)
    path.write_bytes(b"".join(json.dumps(op, separators=(",", ":")).encode() + b"\n" for op in lines))


@pytest.mark.parametrize("how", ["delete", "duplicate", "flip", "torn", "json", "swap", "decision"])
def test_memory_damage_at_the_split_reports_what_one_process_does(dry_run, monkeypatch, how):
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    k = split._plan(_trial_dir(dry_run[0])).k
    for offset in (-1, 0, 1):
        root = _copy(dry_run[0])
        path = _trial_dir(root) / layout.MEMORY
        _edit_line(path, _line_of(path, k) + offset, how)
        one, two = _both(root)
        assert one and one == two


@pytest.mark.parametrize("change", ["borrows an unwritten fact", "writes a first-part fact again", "nothing"])
def test_the_merge_sends_a_fact_problem_back_to_the_one_process_walk(dry_run, monkeypatch, change):
    """A memory line can only be tampered with along with the chain that hashes it, so the worker's side of the
    seam is changed here: what its part borrowed or wrote as the merge receives it. A borrowed fact the first part
    never wrote, or a fact both parts wrote, must not be merged: the one-process walk decides (and reports)."""
    monkeypatch.setattr(split, "SPLIT_BYTES", 0)
    real_second, real_split = split._second_part, split.split_walk
    first_fact = next(op["fact_id"] for op in _memory_lines(dry_run[0]) if op["op"] == "write")

    def second_part(*args):
        message = real_second(*args)
        if change == "borrows an unwritten fact":
            message[-1].add("fact-9999")
        elif change == "writes a first-part fact again":
            message[6].add(first_fact)  # the worker's facts
        return message

    taken = []
    monkeypatch.setattr(split, "_second_part", second_part)
    monkeypatch.setattr(split, "split_walk", lambda *a: taken.append(real_split(*a)) or taken[-1])
    assert verify_experiment(dry_run[0]) == []  # the trial is whole: one process finds nothing either way
    assert len(taken) == 1 and (taken[0] is None) == (change != "nothing")


@settings(max_examples=30, deadline=20_000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_memory_and_trace_report_what_one_process_does(dry_run, data):
    root = _copy(dry_run[0])
    name = data.draw(st.sampled_from((layout.MEMORY, layout.TRACE)))
    kind = data.draw(st.sampled_from(["truncate", "flip", "insert", "line", "duplicate"]))
    mutate(root, f"{_trial_dir(root).relative_to(root).as_posix()}/{name}", kind,
           data.draw(st.integers(0, 1 << 20)), data.draw(st.binary(max_size=32)),
           data.draw(st.none() | st.integers() | st.dictionaries(st.sampled_from(["decision_id", "fact_id", "x"]),
                                                                 st.integers(-2, 200), max_size=2)))
    one, two = _both(root)
    assert one == two
