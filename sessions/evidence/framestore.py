"""The frame store: every decision-boundary frame, lossless, stored once by its pixel hash.

One append-only file per trial (`frames/frames.pack`): a sequence of records, each
    b"OWF1" | 32-byte SHA-256 of the raw RGB pixels | 4-byte big-endian length | a PNG file
The PNG is a complete, standard file (8-bit RGB, no filtering, zlib level 1), so
`oakwatch frames` can write any range out as PNG files by copying bytes. Frames repeat a lot
(a wall bumped, a menu held: in a random walk most frames are seen before), so each distinct
frame is stored once; the trace names frames by their pixel hash.

Encoding runs on a background thread, in batches: zlib and the file write release the GIL,
so it overlaps a loop that waits (for a model, an MCP client, pacing), and no such decision waits for
it. When frames come fast (a batch fills within MAX_BATCH_AGE: random, scripted or replayed play, the
loop busy on its own core) and the thread has nothing queued, the batch is encoded in the caller's
thread instead: there a second busy thread costs more CPU than it saves (a GIL hand-off around every
zlib call, two threads on a shared 2-core machine; docs/performance.md) - unless the emulator runs its
frames with the GIL released (mGBA, through cffi): then the thread encodes while the next frames are
emulated, and a writer made with `encode_aside` hands every batch over. Either way the records reach
the file in the order the frames were added, so the store's bytes are the same. The store's own
SHA-256 is computed as it is written and sealed into result.json at trial end.
"""

from __future__ import annotations

import hashlib
import io
import os
import queue
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.emulators.png import encode_png
from engine.loop.records import FrameStoreSeal
from sessions.evidence.durable import AppendLog, EvidenceError

MAGIC = b"OWF1"
HEADER = struct.Struct(">4s32sI")
BATCH = 8  # frames handed to the encoder at a time: one thread wake-up (and one write) per batch
MAX_BATCH_AGE = 0.1  # seconds a frame may wait for its batch to fill: a slow (model) trial's frames
#                      still reach the disk, and consoles attached to the folder, within a decision
QUEUE_BATCHES = 16  # batches waiting for the encoder before the loop waits (never, at these speeds)
MAX_FRAME_BYTES = 64 << 20


def decode_png(data: bytes) -> np.ndarray:
    """Pixels of any PNG as (H, W, 3) uint8 (PIL decodes; raises ValueError for a bad file)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG":
                raise ValueError("not a PNG")
            return np.asarray(image.convert("RGB"))
    except (OSError, UnidentifiedImageError, SyntaxError) as exc:
        raise ValueError(f"undecodable PNG ({exc})") from None


def pixel_sha256(rgb: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(rgb).data).hexdigest()


class FrameStoreWriter:
    """Appends distinct frames to the store from a background thread."""

    def __init__(self, path: Path, encode_aside: bool = False):
        self.path = path
        self._encode_aside = encode_aside
        self._log = AppendLog(path, what="the frame store")
        self._digest = hashlib.sha256()
        self._seen: set[str] = set()
        self.frames = 0
        self.error: EvidenceError | None = None
        self._batch: list[tuple[str, np.ndarray]] = []
        self._batch_started = 0.0
        self._queue: queue.Queue = queue.Queue(QUEUE_BATCHES)
        self._handed = 0  # items put on the queue (the caller's count) ...
        self._served = 0  # ... and items the thread has finished (its own): equal when it is idle
        self._thread = threading.Thread(target=self._serve, name="frame-store", daemon=True)
        self._thread.start()
        self._sealed: FrameStoreSeal | None = None

    def add(self, sha256_hex: str, frame: np.ndarray) -> None:
        """Queue a frame unless one with the same pixels is stored already. `frame` must not change."""
        if self.error is not None:
            raise self.error
        if sha256_hex in self._seen:
            return
        self._seen.add(sha256_hex)
        now = time.monotonic()
        if not self._batch:
            self._batch_started = now
        self._batch.append((sha256_hex, frame))
        if now - self._batch_started >= MAX_BATCH_AGE:
            self._hand_over()
        elif len(self._batch) >= BATCH:
            if self._handed == self._served and not self._encode_aside:  # filled fast, none queued: encode here
                batch, self._batch = self._batch, []
                self._write(batch)
                if self.error is not None:
                    raise self.error
            else:
                self._hand_over()

    def _hand_over(self) -> None:
        if self._batch:
            self._handed += 1
            self._queue.put(self._batch)
            self._batch = []

    def run_later(self, job) -> None:
        """Run `job()` on this thread after the frames queued so far (an fsync the loop need not
        wait for); if it raises EvidenceError, the store fails like a failed frame write."""
        self._hand_over()
        self._handed += 1
        self._queue.put(job)

    def _serve(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            try:
                if self.error is not None:
                    continue  # drain: the loop learns of the error at its next add or at seal
                if callable(batch):
                    try:
                        batch()
                    except EvidenceError as exc:
                        self.error = exc
                    continue
                self._write(batch)
            finally:
                self._served += 1  # after the write: the caller may write next

    def _write(self, batch: list[tuple[str, np.ndarray]]) -> None:
        """Encode and append one batch (on whichever thread holds the store: see the module docstring)."""
        try:
            records = []
            for sha, frame in batch:
                png = encode_png(frame)
                records.append(HEADER.pack(MAGIC, bytes.fromhex(sha), len(png)) + png)
            data = b"".join(records)
            self._log.append(data)
            self._digest.update(data)
            self.frames += len(records)
        except EvidenceError as exc:
            self.error = exc
        except Exception as exc:  # an encoder fault: the store is no longer complete
            self.error = EvidenceError(f"frame store: {type(exc).__name__}: {exc}", "frame-store-failed")

    def seal(self) -> FrameStoreSeal:
        """Wait for every queued frame, fsync, and return the store's digest. Raises on failure."""
        if self._sealed is not None:
            return self._sealed
        self._hand_over()
        self._queue.put(None)
        self._thread.join()
        try:
            if self.error is not None:
                raise self.error
            self._log.sync()
            self._sealed = FrameStoreSeal(file=f"frames/{self.path.name}", sha256=self._digest.hexdigest(),
                                          frames=self.frames, bytes=self._log.size)
            return self._sealed
        finally:
            self._log.close()

    def abandon(self) -> None:
        """Stop without sealing (the trial is being finished after a failure)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._log.close()


@dataclass(frozen=True)
class StoredFrame:
    sha256: str
    offset: int  # of the PNG bytes in the store file
    length: int


def scan_store(path: Path) -> tuple[list[StoredFrame], int, str | None]:
    """Every whole record of a store, the byte length they span, and a problem (a torn or foreign
    tail) if the file does not end on a whole record."""
    frames: list[StoredFrame] = []
    good = 0
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        while True:
            head = f.read(HEADER.size)
            if not head:
                return frames, good, None
            if len(head) < HEADER.size:
                return frames, good, f"torn record header at byte {good}"
            magic, sha, length = HEADER.unpack(head)
            if magic != MAGIC:
                return frames, good, f"no record at byte {good} (bad magic)"
            if length > MAX_FRAME_BYTES:
                return frames, good, f"record at byte {good} claims {length} bytes"
            start = good + HEADER.size
            if size < start + length:
                return frames, good, f"torn record at byte {good}"
            f.seek(length, io.SEEK_CUR)
            frames.append(StoredFrame(sha.hex(), start, length))
            good = start + length


def iter_pngs(path: Path, frames: list[StoredFrame]) -> Iterator[tuple[StoredFrame, bytes]]:
    with path.open("rb") as f:
        for frame in frames:
            f.seek(frame.offset)
            yield frame, f.read(frame.length)
