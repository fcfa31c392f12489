"""`oakwatch recover` refusing: every refusal leaves the folder exactly as it was found, every file's
bytes, mode and mtime and the list of names (issue 20, item 3: a refusal used to leave `.lock` and a
1 MiB `.reserve` behind, which verify then reported as two more problems)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sessions.audit.recover as recover_module
from sessions.audit.recover import RecoverRefused, recover
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from sessions.evidence.checksums import parse_sums, render_sums
from sessions.evidence.experiment_folder import FolderBusy


def snapshot(root: Path) -> dict[str, tuple]:
    """Every name under root (root itself too): kind, mode, mtime, size and a file's SHA-256."""
    out = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        out[path.relative_to(root).as_posix()] = (st.st_mode, st.st_mtime_ns, st.st_size if digest else None,
                                                  digest)
    return out


def oakwatch_recover(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", "recover", str(root)], capture_output=True, text=True,
                          timeout=120)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def whole(dry_run, tmp_path) -> Path:
    """A copy of the bundled dry-run, finished and verified."""
    root = tmp_path / "whole"
    shutil.copytree(dry_run[0], root)
    return root


@pytest.fixture
def killed(dry_run, tmp_path) -> Path:
    """The bundled dry-run as a kill -9 inside its trial leaves it: no result, no seal, no summary,
    SHA256SUMS as the run's start wrote it, and the dead run's `.lock`."""
    root = tmp_path / "killed"
    shutil.copytree(dry_run[0], root)
    (root / "trials" / "X-01" / layout.RESULT).unlink()
    (root / layout.SUMMARY).unlink()
    log = (root / layout.RUN_LOG).read_bytes().splitlines(keepends=True)
    (root / layout.RUN_LOG).write_bytes(b"".join(line for line in log if b'"run-started"' in line))
    sums = {rel: d for rel, d in parse_sums((root / layout.SUMS).read_text()).items()
            if not rel.startswith("trials/") and rel not in (layout.SUMMARY, layout.RUN_LOG)}
    sums[layout.RUN_LOG] = hashlib.sha256((root / layout.RUN_LOG).read_bytes()).hexdigest()
    (root / layout.SUMS).write_text(render_sums(sums))
    (root / layout.LOCK).write_text(json.dumps({"pid": dead_pid(), "host": "gone", "since_utc": "x"}) + "\n")
    return root


def test_the_killed_folder_is_one_recover_finishes(killed):
    """The fixture the refusals start from is recoverable as it stands (so each refusal below is
    caused by its one change)."""
    assert recover(killed).finished == ["X-01"]
    assert verify_experiment(killed) == []


def _sealed_result_deleted(whole, killed):
    (whole / "trials" / "X-01" / layout.RESULT).unlink()  # the case: no .lock, a sealed trial
    return whole, "X-01/result.json is missing but run.jsonl sealed"


def _tampered_sealed_evidence(whole, killed):
    (whole / layout.SUMMARY).unlink()  # so it needs recovering
    path = whole / "trials" / "X-01" / layout.TRACE
    path.write_bytes(path.read_bytes().replace(b'"decision_id":3', b'"decision_id":4', 1))
    return whole, "sealed evidence no longer matches SHA256SUMS"


def _tampered_header_under_a_dead_lock(whole, killed):
    path = killed / "conditions" / "X.yaml"
    path.write_bytes(path.read_bytes() + b"# changed\n")
    return killed, "sealed evidence no longer matches SHA256SUMS (conditions/X.yaml)"


def _unreadable_manifest(whole, killed):
    (killed / layout.MANIFEST).write_text("experiment_id: [\n")
    return killed, "manifest.yaml"


def _malformed_schedule(whole, killed):
    (killed / layout.SCHEDULE).write_text('{"order": 3}\n')
    return killed, "schedule.json"


def _malformed_sums(whole, killed):
    with (killed / layout.SUMS).open("a") as f:
        f.write("not a line of sums\n")
    return killed, "SHA256SUMS"


def _malformed_genesis(whole, killed):
    (killed / "trials" / "X-01" / layout.TRIAL).write_text('{"trial_key": 1}\n')
    return killed, "trials/X-01/trial.json"


def _malformed_void_record(whole, killed):
    (killed / "void-1").mkdir()
    (killed / "void-1" / "void.json").write_text("{}\n")
    return killed, "void-1/void.json"


def _not_an_experiment(whole, killed):
    other = killed.parent / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello\n")
    (other / "trials").mkdir()
    return other, "not an oakwatch experiment folder"


REFUSALS = [_sealed_result_deleted, _tampered_sealed_evidence, _tampered_header_under_a_dead_lock,
            _unreadable_manifest, _malformed_schedule, _malformed_sums, _malformed_genesis, _malformed_void_record,
            _not_an_experiment]


@pytest.mark.parametrize("make", REFUSALS, ids=lambda f: f.__name__.strip("_"))
def test_a_refusal_leaves_the_folder_as_it_was(make, whole, killed):
    root, why = make(whole, killed)
    before = snapshot(root)
    with pytest.raises(RecoverRefused, match=re.escape(why)):
        recover(root)
    assert snapshot(root) == before


@pytest.mark.parametrize("make", [_sealed_result_deleted, _malformed_genesis], ids=lambda f: f.__name__.strip("_"))
def test_the_command_refuses_in_one_line_with_status_1_and_verify_sees_only_the_change(make, whole, killed):
    root, why = make(whole, killed)
    before = snapshot(root)
    problems_before = verify_experiment(root)
    done = oakwatch_recover(root)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and why in done.stderr and "Traceback" not in done.stderr
    assert snapshot(root) == before
    assert verify_experiment(root) == problems_before  # no `.lock` or `.reserve` problem added


def test_a_live_holder_is_refused_without_touching_the_folder(killed):
    fd = os.open(killed / layout.LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a live run holds it
        before = snapshot(killed)
        with pytest.raises(FolderBusy, match="held by a live oakwatch process"):
            recover(killed)
        assert snapshot(killed) == before
    finally:
        os.close(fd)


def test_a_folder_written_while_recover_checked_it_is_refused_and_left_as_that_writer_left_it(
        whole, monkeypatch):
    """Checked read-only first, then under the lock: if another process wrote the folder in between,
    recover gives the folder back (its own new `.lock` removed, the folder's mtime put back)."""
    root = whole
    (root / "trials" / "X-01" / layout.RESULT).unlink()
    log = (root / layout.RUN_LOG).read_bytes().splitlines(keepends=True)
    (root / layout.RUN_LOG).write_bytes(b"".join(line for line in log if b'"run-started"' in line))
    (root / layout.SUMMARY).unlink()
    assert not (root / layout.LOCK).exists()
    real = recover_module._refusals
    seen: dict = {}

    def refusals_then_another_writer(r: Path):
        manifest = real(r)
        with (r / layout.RUN_LOG).open("ab") as f:  # as a resume or a second recover would append
            f.write(log[-1])
        seen.update(snapshot(r))
        return manifest

    monkeypatch.setattr(recover_module, "_refusals", refusals_then_another_writer)
    with pytest.raises(RecoverRefused, match="changed while recover was checking it"):
        recover(root)
    assert snapshot(root) == seen and not (root / layout.LOCK).exists()
