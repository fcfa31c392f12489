"""A new folder's files are fsynced together, not one after another (issue 31, row 2: the whole process).

The journal commits fsyncs that wait at the same time in one commit, so ExperimentFolder.create syncs
its header files (and then its folders) at once; each file is still synced before the call returns,
and a failure still names its file.
"""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from sessions.evidence import durable


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_every_file_is_written_whole_and_synced_before_it_returns(tmp_path, monkeypatch):
    files = {tmp_path / f"f{i}.json": os.urandom(100 + i) for i in range(12)}
    lock, state = threading.Lock(), {"now": 0, "most": 0, "done": 0}
    real = os.fsync

    def slow_fsync(fd):  # long enough that waits overlap only if they run at once
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.05)
        real(fd)
        with lock:
            state["now"] -= 1
            state["done"] += 1

    monkeypatch.setattr(durable.os, "fsync", slow_fsync)
    before = _open_fds()
    durable.write_new_files(files)
    assert state["done"] == len(files) and state["now"] == 0  # all synced when it returns
    assert state["most"] > 1  # and they waited together
    assert {p: p.read_bytes() for p in files} == files
    assert _open_fds() == before


def test_an_existing_file_is_refused_and_nothing_is_left_open(tmp_path):
    (tmp_path / "b.json").write_bytes(b"old")
    before = _open_fds()
    with pytest.raises(durable.EvidenceError, match="b.json"):
        durable.write_new_files({tmp_path / "a.json": b"a", tmp_path / "b.json": b"new"})
    assert (tmp_path / "b.json").read_bytes() == b"old"
    assert _open_fds() == before


def test_a_failed_fsync_names_its_file(tmp_path, monkeypatch):
    files = {tmp_path / f"f{i}.json": b"x" for i in range(5)}
    real = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("f3.json"):
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(durable.os, "fsync", fsync)
    with pytest.raises(durable.EvidenceError, match="f3.json") as caught:
        durable.write_new_files(files)
    assert caught.value.cause == "evidence-io-error"


def test_folders_are_synced_together_and_a_missing_one_is_skipped(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(durable.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")),
                                                         real(fd)))
    folders = [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "c"]
    for folder in folders:
        folder.mkdir(exist_ok=True)
    durable.fsync_dirs([*folders, tmp_path / "gone"])
    assert sorted(synced) == sorted(str(f) for f in folders)
