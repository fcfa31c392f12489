"""The recorder's and frame store's fast paths write exactly the bytes of the plain ones
(issue 31 row 1: per-action cost without changing evidence bytes)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import sessions.evidence.framestore as framestore
from app.bench.bench_gba import GBA_DRY_RUN, _random_manifest
from engine.loop.records import Attempt, Fact, InputLine, MemoryOp, ResponseLine, TraceLine, Usage, build
from sessions.evidence.framestore import FrameStoreWriter, pixel_sha256, scan_store
from sessions.evidence.recorder import _chain, json_line
from tests.conftest import run_experiment, write_manifest
from tests.gba.conftest import needs_mgba
from tests.sessions.execute.test_faults import budget

SHA = "ab" * 32


def _trace(**extra) -> TraceLine:
    return build(
        TraceLine, experiment_id="exp-ü", condition_id="X", trial_id=1, decision_id=7,
        timestamp_utc="2026-12-04T11:00:00.000Z", frame_sha256=SHA, prompt_sha256=None, model_id="m\u2028",
        response_id=None, input_tokens=3, output_tokens=None, cached_tokens=0, provider_cost_usd=1e-7,
        cost_source=["provider"], latency_ms=12.5, latency_total_ms=0.1 + 0.2, raw_response_path=None, attempts=1,
        paid_calls=1, aborted=False, parsed_actions=["UP"], accepted_actions=1, invalid_output=False,
        reasoning_summary='quote " backslash \\ tab \t nul \x00 emoji 🐢',
        observed={"certainty": 0.0, "k": [1, None]},
        memory_reads=[], memory_writes=[None, "fact-0001"], milestones_before=[], milestones_after=["a"],
        result_frame_sha256=SHA, result_frame_index=16, termination_reason=None, prev_sha256=None,
        response_sha256=None, inputs_sha256=None, memory_sha256=None, **extra)


RECORDS = [
    lambda: _trace(),
    lambda: _trace(episode=2, episode_end="reset", battle={"tool": "lead", "x": 1.5}),
    lambda: build(InputLine, decision_id=1, index=0, action="NOOP", press_frame=None, release_frame=None,
                  capture_frame=16, frame_sha256=SHA),
    lambda: build(ResponseLine, decision_id=1, attempts=[build(
        Attempt, raw='{"a": "é"}', valid=True, error=None, model_id=None, response_id=None, latency_ms=None,
        usage=build(Usage, input_tokens=1, output_tokens=2, cost_usd=0.000123), identity={"id": "r-1"},
        reply={"nested": [1.0, 2.25, float(10**20)]})]),
]


@pytest.mark.parametrize("make", RECORDS)
def test_json_line_is_model_dump_json_as_bytes(make):
    record = make()
    assert json_line(record) == (record.model_dump_json() + "\n").encode()
    assert json_line(record, exclude={"decision_id"}) == (record.model_dump_json(exclude={"decision_id"})
                                                           + "\n").encode()


def test_json_line_keeps_exclude_unset_for_memory_operations():
    fact = build(Fact, fact_id="fact-0001", kind="event", subject="player", predicate="saw", object="x",
                 status="active", confidence=0.5, confirmed=False, first_seen_decision=1,
                 last_confirmed_decision=None, evidence_frame_sha256=SHA, evidence="", supersedes=None)
    op = build(MemoryOp, op="write", decision_id=1, fact_id="fact-0001", fact=fact)
    assert json_line(op, exclude_unset=True) == (op.model_dump_json(exclude_unset=True) + "\n").encode()
    assert b'"chars"' not in json_line(op, exclude_unset=True)


def test_chain_sets_the_fields_as_setattr_does():
    slow, fast = _trace(), _trace()
    values = ("responses.jsonl#7", "1" * 64, "2" * 64, "3" * 64, "4" * 64)
    for name, value in zip(("raw_response_path", "prev_sha256", "response_sha256", "inputs_sha256",
                            "memory_sha256"), values, strict=True):
        setattr(slow, name, value)
    _chain(fast, *values)
    assert fast.__dict__ == slow.__dict__
    assert fast.model_fields_set == slow.model_fields_set
    assert json_line(fast) == json_line(slow)


def _frames(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.integers(0, 4, (144, 160, 3), dtype=np.uint8) * 85 for _ in range(count)]


def _store(path, frames, repeat: bool = True, encode_aside: bool = False):
    writer = FrameStoreWriter(path, encode_aside)
    for frame in frames + (frames[:5] if repeat else []):  # repeats are stored once
        writer.add(pixel_sha256(frame), frame)
    served = writer._served
    return writer.seal(), served


def test_inline_and_threaded_encoding_write_the_same_store(tmp_path, monkeypatch):
    frames = _frames(3 * framestore.BATCH + 3)
    fast, served_fast = _store(tmp_path / "fast.pack", frames)
    assert served_fast == 0  # every full batch filled fast, with the encoder idle: encoded in the caller
    monkeypatch.setattr(framestore, "MAX_BATCH_AGE", 0.0)  # every frame is a batch of its own, for the thread
    slow, _ = _store(tmp_path / "slow.pack", frames)
    assert (tmp_path / "fast.pack").read_bytes() == (tmp_path / "slow.pack").read_bytes()
    assert (fast.sha256, fast.frames, fast.bytes) == (slow.sha256, slow.frames, slow.bytes) == (
        hashlib.sha256((tmp_path / "slow.pack").read_bytes()).hexdigest(), len(frames), slow.bytes)
    stored, _, problem = scan_store(tmp_path / "fast.pack")
    assert problem is None and [s.sha256 for s in stored] == [pixel_sha256(f) for f in frames]


def _encoding_threads(monkeypatch) -> list[str]:
    """The name of the thread that encodes each frame, from now on."""
    import threading

    names, encode = [], framestore.encode_png

    def encode_png(rgb):
        names.append(threading.current_thread().name)
        return encode(rgb)

    monkeypatch.setattr(framestore, "encode_png", encode_png)
    return names


def test_a_store_that_encodes_aside_hands_every_batch_to_its_thread_and_writes_the_same_bytes(tmp_path, monkeypatch):
    """An emulator that runs without the GIL (mGBA): the thread encodes while it emulates, even when
    frames come fast and the thread is idle, where the default store encodes in the caller."""
    frames = _frames(3 * framestore.BATCH + 3)
    threads = _encoding_threads(monkeypatch)
    inline, _ = _store(tmp_path / "inline.pack", frames)
    assert threads.count("frame-store") == 3  # only the short last batch, handed over at the seal
    del threads[:]
    aside, _ = _store(tmp_path / "aside.pack", frames, encode_aside=True)
    assert threads == ["frame-store"] * len(frames)
    assert (tmp_path / "aside.pack").read_bytes() == (tmp_path / "inline.pack").read_bytes()
    assert (aside.sha256, aside.frames, aside.bytes) == (inline.sha256, inline.frames, inline.bytes)


def test_a_batch_waits_for_the_thread_when_it_has_work_queued(tmp_path, monkeypatch):
    """Order is kept: with a batch still queued for the thread, the next one goes after it, not inline."""
    writer = FrameStoreWriter(tmp_path / "store.pack")
    writer._handed += 1  # as if a batch were still queued
    frames = _frames(framestore.BATCH)
    for frame in frames:
        writer.add(pixel_sha256(frame), frame)
    assert writer.frames == 0 and writer._handed == 2  # handed over, not written here
    writer._served += 1  # the pretend batch done
    assert writer.seal().frames == framestore.BATCH


def test_an_inline_encoder_fault_fails_the_add_and_the_seal(tmp_path, monkeypatch):
    def dying(rgb):
        raise MemoryError("the encoder died")

    monkeypatch.setattr(framestore, "encode_png", dying)
    writer = FrameStoreWriter(tmp_path / "store.pack")
    frames = _frames(framestore.BATCH)
    with pytest.raises(framestore.EvidenceError, match="the encoder died"):
        for frame in frames:
            writer.add(pixel_sha256(frame), frame)
    with pytest.raises(framestore.EvidenceError, match="the encoder died"):
        writer.seal()


def test_a_short_write_is_finished_by_the_loop(tmp_path, monkeypatch):
    import os

    import sessions.evidence.durable as durable

    real, calls = os.write, []

    def short(fd, data):  # at most 7 bytes a call, as a filling disk may give
        calls.append(len(data))
        return real(fd, bytes(data)[:7])

    monkeypatch.setattr(durable.os, "write", short)
    log = durable.AppendLog(tmp_path / "log.jsonl")
    log.append(b"0123456789" * 3)
    log.append(b"")
    log.close()
    monkeypatch.undo()
    assert (tmp_path / "log.jsonl").read_bytes() == b"0123456789" * 3 and log.size == 30
    assert calls == [30, 23, 16, 9, 2]  # nothing written for the empty record


@pytest.mark.parametrize("platform", ["gb", pytest.param("gba", marks=needs_mgba)])
def test_a_trial_encodes_its_frames_aside_only_on_an_emulator_that_runs_without_the_gil(tmp_path, monkeypatch,
                                                                                         platform):
    """End to end on the real emulators: mGBA's frame store encodes every frame on its own thread
    (overlapping the emulation), PyBoy's (which holds the GIL) encodes the full batches in the loop."""
    manifest = (_random_manifest(GBA_DRY_RUN, tmp_path, 60) if platform == "gba" else
                write_manifest(tmp_path, budgets=budget(60), conditions=[{"id": "rnd", "policy": "random", "seed": 3}],
                               trials={"per_condition": 1}))
    threads = _encoding_threads(monkeypatch)
    _folder, _summary, (result,) = run_experiment(manifest, tmp_path / "out")
    assert result.chain.frames.frames == len(threads) > framestore.BATCH
    aside = set(threads) == {"frame-store"}
    assert aside == (platform == "gba"), threads
