"""A trial folder copied as it grows, from a worker that may sit on another machine to the driver.

A trial on a Ray cluster writes its folder on its own node, through the ordinary recorder, into a
scratch directory; `FolderMirror` (worker side) watches that folder and turns every change into
messages: bytes appended to a file (the hash-chained streams, frames.pack) or a file replaced
whole (the recorder's atomic writes: trial.json, result.json). `MirrorWriter` (driver side)
applies them to the same trial folder inside the one experiment folder, so it grows there as the
trial plays (attach and the console follow it like a local run's), and when the trial seals, the
worker's own SHA-256 of every file is compared with what arrived: a folder that did not arrive
whole is never sealed as if it had.

Message: ("file", rel, offset, data, whole). `whole`: the file is replaced by `data` (offset 0);
else `data` is appended at `offset`, which must be the file's current size on the driver.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

CHUNK = 4 << 20  # bytes per message: large files (frames.pack) travel in pieces
TAIL = 4096  # bytes of a file's sent end kept to tell an append from a replacement
COMMIT_FILES = ("trace.jsonl",)  # sessions.evidence.layout.TRACE: a decision is whole once its trace line is


def _skipped(path: Path) -> bool:
    return path.name.endswith(".tmp")  # an atomic write in progress: its rename is what counts


class FolderMirror:
    """Worker side: `sync()` sends what changed in `folder` since the last call."""

    def __init__(self, folder: Path, send: Callable[[tuple], None]):
        self.folder = Path(folder)
        self.send = send
        self._known: dict[str, tuple[int, int, bytes]] = {}  # rel -> (inode, bytes sent, the last of them)
        self._lock = threading.Lock()

    def sync(self) -> int:
        """Send every change; the number of bytes sent.

        Sizes are taken commit file first (the trace: the recorder appends a decision's trace
        line after its response, inputs and memory lines), then the rest, and only bytes up to
        those sizes are sent: whatever decision the trace copy holds, the other copies hold its
        lines too, as a folder on a local disk would after a kill. The commit file is sent last,
        so the driver's copy keeps the same promise while it grows: a trace line there names
        lines (and a trial.json) that arrived before it."""
        with self._lock:
            if not self.folder.is_dir():
                return 0
            paths = sorted((p for p in self.folder.rglob("*") if p.is_file() and not _skipped(p)),
                           key=lambda p: (p.name not in COMMIT_FILES, p.as_posix()))
            opened: list[tuple[str, int, int, int]] = []  # rel, fd, inode, size
            try:
                for path in paths:
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except FileNotFoundError:
                        continue  # replaced between the listing and here: the next sync sees it
                    st = os.fstat(fd)  # inode and size of the very file opened
                    opened.append((path.relative_to(self.folder).as_posix(), fd, st.st_ino, st.st_size))
                last = sorted(opened, key=lambda entry: entry[0].rsplit("/", 1)[-1] in COMMIT_FILES)
                return sum(self._send_file(*entry) for entry in last)
            finally:
                for _, fd, _, _ in opened:
                    os.close(fd)

    def _send_file(self, rel: str, fd: int, inode: int, size: int) -> int:
        old_inode, done, tail = self._known.get(rel, (None, 0, b""))
        # A file replaced since (an atomic write) is sent whole. A new inode says so, but inode
        # numbers are reused once freed, so the last bytes sent are read back and compared too.
        replaced = (old_inode is None or old_inode != inode or size < done
                    or (tail and os.pread(fd, len(tail), done - len(tail)) != tail))
        if replaced:
            offset, whole = 0, True
        elif size == done:
            return 0
        else:
            offset, whole = done, False
        sent = 0
        while True:
            data = os.pread(fd, min(CHUNK, size - offset), offset)
            self.send(("file", rel, offset, data, whole))
            whole = False
            offset += len(data)
            sent += len(data)
            if offset >= size or not data:
                break
        self._known[rel] = (inode, offset, os.pread(fd, min(TAIL, offset), offset - min(TAIL, offset)))
        return sent

    def sums(self) -> dict[str, str]:
        """Every file's SHA-256, as the worker holds it (after the last sync)."""
        out = {}
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file() and not _skipped(p)):
            out[path.relative_to(self.folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
        return out


class MirrorProblem(Exception):
    """What arrived does not fit what the worker says it wrote."""


class MirrorWriter:
    """Driver side: applies a worker's messages to `folder` (the trial's folder in the experiment)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.problem: str | None = None  # the first inconsistency; later messages are then ignored

    def apply(self, message: tuple) -> None:
        _, rel, offset, data, whole = message
        if self.problem is not None:
            return
        path = self._path(rel)
        if path is None:
            self.problem = f"a file outside the trial folder was sent ({rel!r})"
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if whole:
            from sessions.evidence.durable import write_atomic

            write_atomic(path, bytes(data))
            return
        have = path.stat().st_size if path.exists() else 0
        if offset != have:
            self.problem = f"{rel}: bytes from offset {offset} arrived, but {have} bytes are here"
            return
        with open(path, "ab") as fh:
            fh.write(data)

    def _path(self, rel: str) -> Path | None:
        if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
            return None
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts):
            return None
        return self.folder.joinpath(*parts)

    def check(self, sums: dict[str, str]) -> str | None:
        """None when the folder here is exactly the worker's (same files, same bytes); else why not.
        Files are made durable (fsync) before they are hashed."""
        if self.problem is not None:
            return self.problem
        here = {p.relative_to(self.folder).as_posix(): p for p in self.folder.rglob("*") if p.is_file()}
        missing = sorted(set(sums) - set(here))
        extra = sorted(set(here) - set(sums))
        if missing:
            return f"{len(missing)} file(s) never arrived ({', '.join(missing[:3])})"
        if extra:
            return f"{len(extra)} file(s) here that the worker does not have ({', '.join(extra[:3])})"
        for rel, path in sorted(here.items()):
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
            if digest != sums[rel]:
                return f"{rel}: its SHA-256 here differs from the worker's"
        return None
