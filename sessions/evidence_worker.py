"""The frame-writer process: encodes decision frames as PNG, off the run's interpreter.

Run as `python -m sessions.evidence_worker FOLDER [RING_FD SLOTS SLOT_BYTES]`. It reads
length-prefixed pickled messages on stdin, written only by oakwatch's own TrialWriter, and
applies each in order:

    ("png", relpath, width, height, rgb)   encode raw RGB bytes as a lossless PNG
    ("slot", relpath, width, height, n)    the same, the bytes in slot n of the shared ring
    ("sync",)                              answer b"ok\\n" once everything before is on disk

The ring is an inherited memfd: an 8-byte count of frames encoded, then SLOTS slots. The
parent copies a frame into a slot (a memcpy, where a pipe write costs a syscall per page) and
reuses the slot only once the count shows the frame is encoded.

PNG encoding is the one heavy piece of evidence (~0.3 ms a frame); in a separate process it
has its own GIL and runs on the second core while the emulator runs on the first. At end of
input (the run closed the pipe, or died) it finishes what it received and exits 0; on any
error it prints the error on stderr and exits 1.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import sys
from pathlib import Path

HEADER = struct.Struct("<I")
PNG_COMPRESS_LEVEL = 1  # lossless either way; level 1 is several times faster than 6 on GB frames


def encode_png(rgb: bytes, width: int, height: int, target) -> None:
    """The one PNG encoder of the evidence (the bench's naive floor uses it too)."""
    from PIL import Image

    Image.frombytes("RGB", (width, height), rgb).save(target, format="PNG", compress_level=PNG_COMPRESS_LEVEL)


def _read_exact(stream, n: int) -> bytes | None:
    data = stream.read(n)
    if not data:
        return None
    while len(data) < n:
        more = stream.read(n - len(data))
        if not more:
            raise EOFError("truncated message")
        data += more
    return data


def _write_new(path: Path, data) -> None:
    """One open and one write: PIL's save-to-path costs several times its in-memory encode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


RING_HEADER = 8


def serve(folder: Path, inp, out, ring=None, slot_bytes: int = 0) -> None:
    encode_png(b"\0\0\0", 1, 1, io.BytesIO())  # PIL compiles its PNG plugin on first use: do it now
    done = memoryview(ring)[:RING_HEADER].cast("Q") if ring is not None else None
    while True:
        header = _read_exact(inp, HEADER.size)
        if header is None:
            return
        message = pickle.loads(_read_exact(inp, HEADER.unpack(header)[0]))
        if message[0] == "png":
            _, rel, width, height, rgb = message
            png = io.BytesIO()
            encode_png(rgb, width, height, png)
            _write_new(folder / rel, png.getbuffer())
        elif message[0] == "slot":
            _, rel, width, height, slot = message
            start = RING_HEADER + slot * slot_bytes
            png = io.BytesIO()
            encode_png(ring[start:start + width * height * 3], width, height, png)
            done[0] += 1  # the slot may be reused from here on
            _write_new(folder / rel, png.getbuffer())
        elif message[0] == "sync":
            out.write(b"ok\n")
            out.flush()
        else:
            raise ValueError(f"unknown message {message[0]!r}")


def main() -> int:
    if len(sys.argv) not in (2, 5):
        print("usage: python -m sessions.evidence_worker FOLDER [RING_FD SLOTS SLOT_BYTES]", file=sys.stderr)
        return 2
    ring, slot_bytes = None, 0
    if len(sys.argv) == 5:
        import mmap

        fd, slots, slot_bytes = (int(a) for a in sys.argv[2:])
        ring = mmap.mmap(fd, RING_HEADER + slots * slot_bytes)
    try:
        serve(Path(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer, ring, slot_bytes)
    except Exception as exc:
        print(f"evidence writer: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
