"""The trial's evidence writer: a sink that puts every event on disk, append-only.

Lines are written whole and flushed, so a killed run leaves readable files. PNG encoding,
the one heavy piece, happens in a separate process (sessions.evidence_worker) with its own
GIL, on the second core; a thread would contend with the emulator for the GIL.
"""

from __future__ import annotations

import json
import mmap
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from engine.events import (
    AnnotationAdded,
    DecisionRecorded,
    Event,
    MemoryChanged,
    TrialEnded,
    TrialStarted,
)
from sessions.evidence_worker import HEADER, RING_HEADER


class JsonlWriter:
    """An append-only JSON Lines file; each line is written whole and flushed."""

    def __init__(self, path: Path):
        self.path = path
        self._f = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self._f.write(line)
            self._f.flush()

    def close(self) -> None:
        with self._lock:
            self._f.close()


def _widen_pipe(stream) -> None:
    """Room for a dozen frames in the pipe, so the emulator thread never waits on the writer."""
    try:
        import fcntl

        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):  # not Linux, or over the system's limit: the default still works
        pass


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class FrameWriter:
    """The parent's end of sessions.evidence_worker: frames through a shared ring where the
    system has memfd (Linux), else down the pipe; small messages down the pipe, in order."""

    SLOTS = 32

    def __init__(self, folder: Path, frame_bytes: int = 240 * 160 * 3):  # room for GBA frames
        args = [sys.executable, "-m", "sessions.evidence_worker", str(folder)]
        self._ring = None
        self._slot_bytes = frame_bytes
        self._sent = 0
        pass_fds: tuple[int, ...] = ()
        if hasattr(os, "memfd_create"):
            fd = os.memfd_create("oakwatch-frames")
            os.ftruncate(fd, RING_HEADER + self.SLOTS * frame_bytes)
            self._ring = mmap.mmap(fd, RING_HEADER + self.SLOTS * frame_bytes)
            self._done = memoryview(self._ring)[:RING_HEADER].cast("Q")
            pass_fds = (fd,)
            args += [str(fd), str(self.SLOTS), str(frame_bytes)]
        self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, pass_fds=pass_fds)
        for fd in pass_fds:
            os.close(fd)  # the mapping and the child keep the memory alive
        self._lock = threading.Lock()
        _widen_pipe(self._proc.stdin)
        self.sync()  # the child is up and has its imports done before the trial starts

    def send(self, *message) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            try:
                self._proc.stdin.write(HEADER.pack(len(payload)) + payload)
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                raise RuntimeError(f"evidence writer stopped: {self._stderr()}") from None

    def send_frame(self, rel: str, frame: np.ndarray) -> None:
        height, width = frame.shape[:2]
        if self._ring is None or frame.nbytes > self._slot_bytes:
            self.send("png", rel, width, height, frame.tobytes())
            return
        # Wait until the child has encoded the frame that last used this slot.
        while self._sent - self._done[0] >= self.SLOTS:
            if self._proc.poll() is not None:
                raise RuntimeError(f"evidence writer stopped: {self._stderr()}")
            time.sleep(0.0002)
        slot = self._sent % self.SLOTS
        start = RING_HEADER + slot * self._slot_bytes
        self._ring[start:start + frame.nbytes] = frame.data if frame.flags.c_contiguous else frame.tobytes()
        self._sent += 1
        self.send("slot", rel, width, height, slot)

    def sync(self) -> None:
        """Return once everything sent so far is on disk."""
        self.send("sync")
        if self._proc.stdout.readline() != b"ok\n":
            raise RuntimeError(f"evidence writer stopped: {self._stderr()}")

    def close(self) -> None:
        with self._lock:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        status = self._proc.wait()
        if self._ring is not None:
            self._done.release()
            self._ring.close()
            self._ring = None
        if status != 0:
            raise RuntimeError(f"evidence writer failed: {self._stderr()}")

    def _stderr(self) -> str:
        self._proc.kill()
        self._proc.wait()
        return self._proc.stderr.read().decode(errors="replace").strip() or f"exit status {self._proc.returncode}"


def frame_name(decision_id: int) -> str:
    return f"frames/{decision_id:06d}.png"


class TrialWriter:
    """Writes one trial's folder: trace, frames, responses, memory, annotations, inputs, result."""

    def __init__(self, folder: Path):
        self.folder = folder
        (folder / "frames").mkdir(parents=True)
        (folder / "responses").mkdir()
        self.trace = JsonlWriter(folder / "trace.jsonl")
        self.memory = JsonlWriter(folder / "memory.jsonl")
        self.annotations = JsonlWriter(folder / "annotations.jsonl")
        self.inputs = JsonlWriter(folder / "inputs.jsonl")
        self.frames = FrameWriter(folder)
        self.result: dict | None = None

    def handle(self, event: Event) -> None:
        if isinstance(event, AnnotationAdded):
            self.annotations.write(event.record)  # at once, from whichever thread tagged
        elif isinstance(event, TrialEnded):
            self.close()
            self.result = event.result
            self._write_json(self.folder / "result.json", event.result)
        elif isinstance(event, DecisionRecorded):
            trace = event.trace
            did = trace["decision_id"]
            _write_new(self.folder / trace["raw_response_path"], json.dumps(
                {"decision_id": did, "attempts": [a.__dict__ for a in event.attempts]}, ensure_ascii=False).encode())
            for record in event.inputs:
                self.inputs.write(record.record())
            self.frames.send_frame(frame_name(did), event.frame)
            # Last: a trace line implies its response and inputs are on disk and its frame is
            # with the frame writer, which finishes what it has even if this process dies.
            self.trace.write(trace)
        elif isinstance(event, MemoryChanged):
            self.memory.write(event.op)
        elif isinstance(event, TrialStarted):
            self.frames.send_frame(frame_name(0), event.frame)

    def close(self) -> None:
        try:
            self.frames.close()
        finally:
            for w in (self.trace, self.memory, self.annotations, self.inputs):
                w.close()

    @staticmethod
    def _write_json(path: Path, data: dict) -> None:
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
