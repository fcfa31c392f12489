"""Records the loop builds without validation (engine.loop.records.trusted) are the validated records.

Three proofs: (1) for any well-typed values (hypothesis), `trusted` makes the record that strict
validation makes, serialised byte for byte alike, the recorder's exclusions included; (2) the test
suite runs every trial in checked mode (tests/conftest.py), so each record any test's trial builds is
also validated strictly and compared; (3) a real random trial on the bundled cartridge writes the same
inputs, responses and trace (but its clock) with `trusted` as with `build`, and every line validates.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

import engine.loop.trial as trial_module
from engine.loop import records
from engine.loop.records import Attempt, InputLine, ResponseLine, TraceLine, TrialResult, Usage, build
from sessions.evidence import layout
from sessions.evidence.recorder import json_line
from tests.conftest import run_experiment, write_manifest

SHA = st.text("0123456789abcdef", min_size=64, max_size=64)
TEXT = st.text(max_size=12)
OPT_TEXT = st.none() | TEXT
OPT_INT = st.none() | st.integers(-(2**40), 2**40)
OPT_FLOAT = st.none() | st.floats(allow_nan=False, allow_infinity=False)
JSONISH = st.dictionaries(TEXT, st.none() | st.booleans() | st.integers() | TEXT | st.lists(TEXT, max_size=3),
                          max_size=4)
NAMES = st.lists(TEXT, max_size=4)

INPUT_FIELDS = st.fixed_dictionaries({
    "decision_id": st.integers(1, 10**6), "index": st.integers(0, 50), "action": TEXT, "press_frame": OPT_INT,
    "release_frame": OPT_INT, "capture_frame": st.integers(0, 2**40), "frame_sha256": SHA})

ATTEMPTS = st.lists(st.builds(
    lambda raw, valid, latency, usage: build(Attempt, raw=raw, valid=valid, error=None if valid else "bad",
                                             model_id=None, response_id=None, latency_ms=latency,
                                             usage=usage),
    OPT_TEXT, st.booleans(), OPT_FLOAT,
    st.none() | st.builds(lambda i, o: Usage(input_tokens=i, output_tokens=o), OPT_INT, OPT_INT)),
    min_size=1, max_size=3)

TRACE_FIELDS = st.fixed_dictionaries({
    "experiment_id": TEXT, "condition_id": TEXT, "trial_id": st.integers(1, 99), "decision_id": st.integers(1, 10**6),
    "timestamp_utc": TEXT, "frame_sha256": SHA, "prompt_sha256": OPT_TEXT, "model_id": OPT_TEXT,
    "response_id": OPT_TEXT, "input_tokens": OPT_INT, "output_tokens": OPT_INT, "cached_tokens": OPT_INT,
    "provider_cost_usd": OPT_FLOAT, "cost_source": st.none() | NAMES, "latency_ms": OPT_FLOAT,
    "attempts": st.integers(1, 5), "paid_calls": st.integers(0, 5), "aborted": st.booleans(),
    "parsed_actions": NAMES, "accepted_actions": st.integers(0, 9), "invalid_output": st.booleans(),
    "reasoning_summary": OPT_TEXT, "observed": st.none() | JSONISH, "memory_reads": NAMES,
    "memory_writes": st.lists(OPT_TEXT, max_size=3), "milestones_before": NAMES, "milestones_after": NAMES,
    "result_frame_sha256": SHA, "result_frame_index": st.integers(0, 2**40), "termination_reason": OPT_TEXT,
}, optional={
    "prompt_core_sha256": OPT_TEXT, "latency_total_ms": OPT_FLOAT, "raw_response_path": OPT_TEXT,
    "context": st.none() | JSONISH, "episode": st.none() | st.integers(1, 9),
    "episode_end": st.sampled_from([None, "failure", "episode-actions", "reset"]),
    "battle": st.none() | JSONISH, "shortcut": st.none() | JSONISH, "prev_sha256": st.none() | SHA,
    "response_sha256": st.none() | SHA, "inputs_sha256": st.none() | SHA, "memory_sha256": st.none() | SHA,
})


def same_record(record: type, fields: dict, **dump) -> None:
    made = records._trusted(record, **fields)
    strict = record.model_validate(fields, strict=True)
    assert made == strict
    assert made.model_fields_set == strict.model_fields_set
    assert json_line(made, **dump) == json_line(strict, **dump) == (strict.model_dump_json(**dump) + "\n").encode()


@settings(max_examples=150, deadline=None)
@given(INPUT_FIELDS)
def test_an_input_line_is_the_validated_one(fields):
    same_record(InputLine, fields)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10**6), ATTEMPTS)
def test_a_response_line_is_the_validated_one(decision, attempts):
    same_record(ResponseLine, {"decision_id": decision, "attempts": attempts})


@settings(max_examples=200, deadline=None)
@given(TRACE_FIELDS)
def test_a_trace_line_is_the_validated_one_as_the_recorder_writes_it(fields):
    same_record(TraceLine, fields)
    strict = TraceLine.model_validate(fields, strict=True)
    same_record(TraceLine, fields, exclude=records.trace_line_unwritten(strict) or None)


def test_a_missing_or_unknown_field_is_refused():
    fields = {"decision_id": 1, "index": 0, "action": "UP", "press_frame": 1, "release_frame": 3,
              "capture_frame": 9, "frame_sha256": "0" * 64}
    records._trusted(InputLine, **fields)
    with pytest.raises(TypeError, match="missing \\['frame_sha256'\\]"):
        records._trusted(InputLine, **{k: v for k, v in fields.items() if k != "frame_sha256"})
    with pytest.raises(TypeError, match="unknown \\['extra'\\]"):
        records._trusted(InputLine, **fields, extra=1)


def test_a_model_with_a_mutable_default_is_refused():
    with pytest.raises(TypeError, match="skipped_required"):  # its default [] would be shared
        records._trusted(TrialResult)


def test_the_suite_runs_in_checked_mode_and_checked_mode_refuses_a_value_validation_would_change():
    assert records.trusted is records._checked
    fields = {"decision_id": 1, "index": 0, "action": "UP", "press_frame": 1, "release_frame": 3,
              "capture_frame": 9, "frame_sha256": "0" * 64}
    for wrong in (np.int64(9), True, 9.0):  # each written otherwise than the int validation would make
        with pytest.raises(ValidationError):
            records._checked(InputLine, **{**fields, "capture_frame": wrong})


CLOCK = {"timestamp_utc", "prev_sha256"}


def _random_trial(tmp: Path, name: str, builder, monkeypatch) -> Path:
    monkeypatch.setattr(trial_module, "trusted", builder)
    (tmp / name).mkdir()
    manifest = write_manifest(tmp / name, experiment_id="trusted", conditions=[
        {"id": "random", "policy": "random", "seed": 3, "memory_policy": "persistent", "actions_per_decision": 2}],
        trials={"per_condition": 1},
        budgets={"accepted_actions": 300, "model_decisions": None, "wall_time_minutes": None,
                 "unrecoverable_loop_repeats": None})
    out, _, results = run_experiment(manifest, tmp / name / "out")
    assert results[0].outcome in ("success", "game-failure")
    return out / layout.trial_dir(results[0].trial_key)


def test_a_real_trial_writes_the_same_evidence_with_trusted_records_as_with_validated_ones(tmp_path, monkeypatch):
    fast = _random_trial(tmp_path, "fast", records._trusted, monkeypatch)
    slow = _random_trial(tmp_path, "slow", build, monkeypatch)
    for name in (layout.INPUTS, layout.RESPONSES, layout.MEMORY):
        assert (fast / name).read_bytes() == (slow / name).read_bytes()
    models = {layout.INPUTS: InputLine, layout.RESPONSES: ResponseLine, layout.TRACE: TraceLine}
    for name, model in models.items():
        for line in (fast / name).read_bytes().splitlines():
            model.model_validate_json(line)  # as the readers do
    fast_lines = (fast / layout.TRACE).read_text().splitlines()
    slow_lines = (slow / layout.TRACE).read_text().splitlines()
    assert len(fast_lines) == len(slow_lines) > 100
    for a, b in zip(fast_lines, slow_lines, strict=True):
        a, b = json.loads(a), json.loads(b)
        assert list(a) == list(b)  # the same keys in the same order
        assert {k: v for k, v in a.items() if k not in CLOCK} == {k: v for k, v in b.items() if k not in CLOCK}
