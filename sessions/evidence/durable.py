"""Writing evidence so that a crash, a kill or a full disk never leaves a lie on disk.

- Whole files (result.json, summary.json, SHA256SUMS, ...) go to a temp file in the same
  folder, are fsynced and renamed over the target: a reader sees the old file or the new one.
- Append-only logs (trace.jsonl, ...) are written with one os.write per record batch on an
  O_APPEND descriptor. A short write or an error cuts the file back to its last whole record,
  so a torn line never survives the process that wrote it; a kill -9 mid-write can still tear
  one, which `oakwatch recover` cuts.
Errors become EvidenceError, whose `cause` says disk-full or evidence-io-error.
"""

from __future__ import annotations

import errno
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.loop.events import SinkFailure

TMP_SUFFIX = ".tmp"
SYNC_THREADS = 16  # fsyncs in flight at once when a new folder's files are synced together


class EvidenceError(SinkFailure):
    """Evidence could not be written; the trial (or the run) cannot be trusted past this point."""


def error_from(exc: OSError, what: str) -> EvidenceError:
    cause = "disk-full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "evidence-io-error"
    return EvidenceError(f"cannot write {what}: {exc.strerror or exc}", cause)


def _write_all(fd: int, data: bytes | memoryview, what: str) -> None:
    if not data:
        return
    written = os.write(fd, data)
    if written == len(data):  # the usual case: one whole write, no view to slice (three a decision)
        return
    if written <= 0:
        raise OSError(errno.EIO, "write returned nothing")
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never expected from a regular file; guard the loop anyway
            raise OSError(errno.EIO, "write returned nothing")
        view = view[written:]


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, what: str | None = None) -> None:
    """Replace `path` with `data` all at once (temp file, fsync, rename, fsync the folder)."""
    tmp = path.with_name(path.name + TMP_SUFFIX)
    label = what or path.name
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, data, label)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise error_from(exc, label) from None
    fsync_dir(path.parent)


def write_new_files(files: dict[Path, bytes], *, what: str | None = None) -> None:
    """Create each file with its data (refusing one that exists) and fsync it, with no temp file and no
    folder fsync: only for a folder built under a temporary name, whose caller fsyncs each of its
    folders once before renaming it into place (ExperimentFolder.create); a half-written file there is
    never seen. All are written first, then fsynced together, and only then does this return, so the
    caller's folder fsyncs and rename still come after every file is on disk. Together, because the
    filesystem's journal commits fsyncs that wait at the same time in one commit (ext4's jbd2), where
    one after another each waits for its own (21 header files under load: ~40-70 ms, ~6-20 ms)."""
    opened: list[tuple[int, str]] = []
    try:
        for path, data in files.items():
            label = what or path.name
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
                opened.append((fd, label))
                _write_all(fd, data, label)
            except OSError as exc:
                raise error_from(exc, label) from None
        _at_once(_fsync_labelled, opened)
    finally:
        for fd, _ in opened:
            os.close(fd)


def fsync_dirs(paths) -> None:
    """fsync_dir for each folder, all at once (see write_new_files); a folder that cannot be opened or
    synced is skipped, as fsync_dir does."""
    _at_once(fsync_dir, list(paths))


def _fsync_labelled(item: tuple[int, str]) -> None:
    try:
        os.fsync(item[0])
    except OSError as exc:
        raise error_from(exc, item[1]) from None


def _at_once(sync, items: list) -> None:
    """sync(item) for every item in threads of its own (os.fsync lets go of the GIL); every call has
    ended when this returns, and the first failure, in the items' order, is raised."""
    if len(items) < 2:
        for item in items:
            sync(item)
        return
    with ThreadPoolExecutor(min(len(items), SYNC_THREADS), thread_name_prefix="fsync") as pool:
        results = list(pool.submit(sync, item) for item in items)
    for result in results:  # the pool has waited for all of them
        result.result()


class AppendLog:
    """An append-only file that only ever holds whole records."""

    def __init__(self, path: Path, *, what: str | None = None, exclusive: bool = True):
        self.path = path
        self.what = what or path.name
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | (os.O_EXCL if exclusive else 0)
        try:
            self._fd: int | None = os.open(path, flags, 0o644)
            self.size = os.fstat(self._fd).st_size  # the end of the last whole record
        except OSError as exc:
            raise error_from(exc, self.what) from None
        self.failed: EvidenceError | None = None

    def append(self, data: bytes) -> None:
        if self.failed is not None:
            raise self.failed
        if self._fd is None:
            raise EvidenceError(f"{self.what} is closed", "evidence-io-error")
        try:
            _write_all(self._fd, data, self.what)
        except OSError as exc:
            self.failed = error_from(exc, self.what)
            self._cut()
            raise self.failed from None
        self.size += len(data)

    def truncate_to(self, size: int) -> None:
        """Drop records after `size` (an uncommitted decision's lines)."""
        if self._fd is not None and size < self.size:
            os.ftruncate(self._fd, size)
            self.size = size

    def _cut(self) -> None:
        # Cutting back frees space, so it works on a full disk too.
        try:
            os.ftruncate(self._fd, self.size)
        except OSError:
            pass

    def sync(self) -> None:
        if self._fd is None or self.failed is not None:
            return
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self.failed = error_from(exc, self.what)
            raise self.failed from None

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            finally:
                self._fd = None
