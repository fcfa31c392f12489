"""The trial's evidence writer: a sink that puts every event on disk, append-only.

Lines are written whole and flushed, so a killed run leaves readable files. PNG encoding
runs on its own thread (Pillow releases the GIL while compressing), so the emulator thread
only hashes frames; the queue is bounded, so a slow disk slows the run instead of eating memory.
"""

from __future__ import annotations

import json
import os
import queue
import threading
from pathlib import Path

import numpy as np
from PIL import Image

from engine.events import (
    AnnotationAdded,
    DecisionRecorded,
    Event,
    MemoryChanged,
    TrialEnded,
    TrialStarted,
)

PNG_COMPRESS_LEVEL = 1  # lossless either way; level 1 is several times faster than 6 on GB frames


def encode_png(frame: np.ndarray, path: Path) -> None:
    tmp = path.with_suffix(".png.tmp")
    Image.fromarray(frame, "RGB").save(tmp, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    os.replace(tmp, path)


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


class FrameEncoder:
    """Encodes frames to PNG on a background thread, in order, with a bounded queue."""

    def __init__(self, maxsize: int = 64):
        self._q: queue.Queue = queue.Queue(maxsize=maxsize)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="png-encoder", daemon=True)
        self._thread.start()

    def submit(self, frame: np.ndarray, path: Path) -> None:
        if self._error is not None:
            raise RuntimeError(f"frame encoder failed: {self._error}")
        self._q.put((frame, path))

    def _work(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                encode_png(*item)
            except BaseException as exc:  # surfaced to the run on the next submit/close
                self._error = exc

    def close(self) -> None:
        self._q.put(None)
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"frame encoder failed: {self._error}")


def frame_name(decision_id: int) -> str:
    return f"frames/{decision_id:06d}.png"


class TrialWriter:
    """Writes one trial's folder: trace, frames, responses, memory, annotations, inputs, result."""

    def __init__(self, folder: Path, encoder: FrameEncoder | None = None):
        self.folder = folder
        (folder / "frames").mkdir(parents=True)
        (folder / "responses").mkdir()
        self.trace = JsonlWriter(folder / "trace.jsonl")
        self.memory = JsonlWriter(folder / "memory.jsonl")
        self.annotations = JsonlWriter(folder / "annotations.jsonl")
        self.inputs = JsonlWriter(folder / "inputs.jsonl")
        self._own_encoder = encoder is None
        self.encoder = encoder or FrameEncoder()
        self.result: dict | None = None

    def handle(self, event: Event) -> None:
        if isinstance(event, DecisionRecorded):
            did = event.trace["decision_id"]
            self._write_json(self.folder / event.trace["raw_response_path"], {
                "decision_id": did,
                "attempts": [a.__dict__ for a in event.attempts],
            })
            for record in event.inputs:
                self.inputs.write(record.record())
            self.encoder.submit(event.frame, self.folder / frame_name(did))
            self.trace.write(event.trace)
        elif isinstance(event, MemoryChanged):
            self.memory.write(event.op)
        elif isinstance(event, AnnotationAdded):
            self.annotations.write(event.record)
        elif isinstance(event, TrialStarted):
            self.encoder.submit(event.frame, self.folder / frame_name(0))
        elif isinstance(event, TrialEnded):
            self.close()
            self.result = event.result
            self._write_json(self.folder / "result.json", event.result)

    def close(self) -> None:
        if self._own_encoder:
            self.encoder.close()
        for w in (self.trace, self.memory, self.annotations, self.inputs):
            w.close()

    @staticmethod
    def _write_json(path: Path, data: dict) -> None:
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
