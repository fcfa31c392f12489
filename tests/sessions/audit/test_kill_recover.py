"""The fault campaign's missing cases: kill -9 of `oakwatch recover` itself, kill -9 during
`oakwatch run --resume`, and a disk that fills for good during a run and then gets space back.
Each ends with a folder that `oakwatch verify` passes, finished by a second `recover` (and a
`--resume` where positions are missing).

A few seeded kill points each here; `-m slow` sweeps every point of recover."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.audit.recover import recover
from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from tests.conftest import write_manifest
from tests.sessions.execute.test_faults import (
    RANDOM_TRIALS,
    _lines_in,
    all_trials,
    assert_whole,
    budget,
    finished,
    oakwatch,
    summary_of,
    wait_for,
)

# `oakwatch <args>`, killed for real (SIGKILL from inside, so the point is exact) at one decision of
# one trial: that decision's response, inputs and memory are written, its frame and trace line are
# not. (A kill sent from outside on seeing the trace grow can land after the trial's last decision.)
DIE_IN_TRIAL = r"""
import os, signal, sys
import sessions.evidence.framestore as fs
key, at = sys.argv[1], int(sys.argv[2])
add, calls = fs.FrameStoreWriter.add, [0]
def dying_add(self, *args):
    if self.path.parent.parent.name == key:
        calls[0] += 1
        if calls[0] == at:
            os.kill(os.getpid(), signal.SIGKILL)
    return add(self, *args)
fs.FrameStoreWriter.add = dying_add
from app.cli import main
sys.exit(main(sys.argv[3:]))
"""

# `oakwatch recover` killed for real at its `at`-th change to the disk (every write, rename, cut,
# removal, folder or file creation counts; 0 kills nothing and prints how many there were). A torn
# kill writes half of that write first, as a kill landing inside it would.
KILL_RECOVER = r"""
import os, signal, sys
from pathlib import Path
from sessions.audit.recover import recover
at, torn = int(sys.argv[2]), sys.argv[3] == "torn"
calls = [0]
def die_here():
    calls[0] += 1
    return calls[0] == at
def guard(name):
    real = getattr(os, name)
    def changed(*args, **kw):
        if die_here():
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kw)
    setattr(os, name, changed)
for name in ("replace", "rename", "truncate", "ftruncate", "unlink", "rmdir", "mkdir", "posix_fallocate"):
    guard(name)
real_open, real_write = os.open, os.write
def open_(path, flags, *args, **kw):
    if flags & os.O_CREAT and die_here():
        os.kill(os.getpid(), signal.SIGKILL)
    return real_open(path, flags, *args, **kw)
def write(fd, data):
    if die_here():
        if torn:
            real_write(fd, bytes(data)[:len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return real_write(fd, data)
os.open, os.write = open_, write
recover(Path(sys.argv[1]))
print(calls[0])
"""

ORDER = ["X-01", "Y-01", "Y-02", "X-02"]  # RANDOM_TRIALS' schedule


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def killed_in_the_last_trial(tmp_path_factory) -> Path:
    """Schedule X-01, Y-01, Y-02, X-02, killed at decision 15 of X-02: recover must cut it, finish it,
    and void its block (moving the sealed Y-02 with it)."""
    tmp = tmp_path_factory.mktemp("killed")
    manifest = write_manifest(tmp, budgets=budget(60), **RANDOM_TRIALS)
    out = tmp / "exp"
    done = _run(DIE_IN_TRIAL, "X-02", "15", "run", str(manifest), "--headless", "--output", str(out))
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert sorted(p.name for p in (out / "trials").iterdir()) == sorted(ORDER)
    assert not (out / "trials" / "X-02" / layout.RESULT).exists()
    return out


def _copy(src: Path, dst: Path) -> None:
    """A copy of a killed run's folder, its control socket too (a socket file cannot be copied: bind one)."""
    import socket
    import stat

    sockets = [p.relative_to(src) for p in src.rglob("*") if stat.S_ISSOCK(p.lstat().st_mode)]
    shutil.copytree(src, dst, ignore=lambda d, names: [n for n in names if (Path(d) / n).is_socket()])
    for rel in sockets:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(dst / rel))


def _kill_recover(root: Path, at: int, torn: bool) -> subprocess.CompletedProcess:
    return _run(KILL_RECOVER, str(root), str(at), "torn" if torn else "whole")


def _changes_recover_makes(killed: Path, tmp: Path) -> int:
    root = tmp / "count"
    _copy(killed, root)
    done = _kill_recover(root, 0, False)
    assert done.returncode == 0, done.stderr
    assert_whole(root)
    return int(done.stdout.split()[-1])


def _killed_then_recovered(killed: Path, tmp: Path, at: int, torn: bool) -> None:
    root = tmp / f"kill-{at}-{'torn' if torn else 'whole'}"
    _copy(killed, root)
    done = _kill_recover(root, at, torn)
    assert done.returncode == -signal.SIGKILL, (at, done.stderr)  # it died there, mid-recover
    report = recover(root)  # a second recover finishes what the first began
    assert_whole(root)
    assert report.nothing_to_do or report.finished in ([], ["X-02"])
    summary = summary_of(root)
    assert (summary.recovered, summary.missing_positions) == (True, [2, 3])
    (void,) = root.glob("void-*")
    assert sorted(p.name for p in void.iterdir() if p.is_dir()) == ["X-02", "Y-02"]


def test_kill_9_of_recover_at_seeded_points_then_a_second_recover_finishes(killed_in_the_last_trial, tmp_path):
    total = _changes_recover_makes(killed_in_the_last_trial, tmp_path)
    assert total > 20  # the cuts, the result, the seals, the void's moves, the summary, the sums, the lock
    rng = random.Random(20)
    points = sorted(rng.sample(range(1, total + 1), 5))
    for at in points:
        _killed_then_recovered(killed_in_the_last_trial, tmp_path, at, torn=rng.random() < 0.5)


@pytest.mark.slow
def test_kill_9_of_recover_at_every_point_then_a_second_recover_finishes(killed_in_the_last_trial, tmp_path):
    total = _changes_recover_makes(killed_in_the_last_trial, tmp_path)
    for at in range(1, total + 1):
        for torn in (False, True):
            _killed_then_recovered(killed_in_the_last_trial, tmp_path, at, torn)


def test_kill_9_during_resume_then_recover_and_resume_finish(killed_in_the_last_trial, tmp_path):
    """The resumed run reruns positions 2 and 3 (Y-02, X-02); it is killed at a seeded decision of
    each in turn, recovered, and resumed again until every position holds a valid trial."""
    root = tmp_path / "exp"
    _copy(killed_in_the_last_trial, root)
    recover(root)
    assert summary_of(root).missing_positions == [2, 3]
    rng = random.Random(5)
    for key in ("Y-02", "X-02"):
        when = rng.randint(2, 40)
        died = _run(DIE_IN_TRIAL, key, str(when), "run", "--resume", str(root))
        assert died.returncode == -signal.SIGKILL, (key, when, died.stderr)
        assert _lines_in(root / "trials" / key / layout.TRACE) == when - 2  # the 1st add is the start frame
        problems = verify_experiment(root)
        assert problems and all("recover" in p or "interrupted" in p or "torn" in p for p in problems), problems
        report = recover(root)
        assert key in report.finished
        assert_whole(root)
    code, _, err = finished(oakwatch("run", "--resume", root))
    assert code == 1, err  # random play runs out its budget: valid game-failures only
    assert_whole(root)
    assert summary_of(root).missing_positions == []
    attempts = sorted((p.parent.name, p.name) for p in all_trials(root) if p.parent.name.startswith("void-"))
    # void-1 (the first kill): Y-02, X-02; void-2 (killed in Y-02): Y-02; void-3 (killed in X-02): Y-02, X-02
    assert len(attempts) == 5, attempts


# -- a disk that fills for good, then gets space back --------------------------------------------

def _mount_tmpfs(where: Path, size_kib: int, inodes: int) -> None:
    where.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,nr_inodes={inodes}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {proc.stderr.strip()}")


def _remount(where: Path, size_kib: int, inodes: int) -> bool:
    return subprocess.run(["mount", "-o", f"remount,size={size_kib}k,nr_inodes={inodes}", str(where)],
                          capture_output=True, text=True).returncode == 0


def _fill_up(disk: Path) -> None:
    """Shrink the filesystem to what it holds: no file more, and 256 KiB more data, which the trial
    fills in a moment (tmpfs refuses a size below what is in use, so it is measured again if it grew)."""
    for _ in range(100):
        st = os.statvfs(disk)
        if _remount(disk, (st.f_blocks - st.f_bfree) * st.f_frsize // 1024 + 256, st.f_files - st.f_ffree):
            return
    raise AssertionError("could not shrink the filesystem under the running trial")


@pytest.mark.parametrize("name", ["exp", "e" * 100], ids=["socket-inside", "socket-elsewhere"])
def test_a_disk_full_even_for_the_final_records_is_finished_once_space_returns(tmp_path, name):
    """Mid-trial the filesystem is shrunk to exactly what it holds: not one more file. The trial's next
    write fails, the reserve is released (its 1 MiB and its file), the result fits, the seal's sums do
    not; the run's own leftovers (control socket, its pointer) free a file or two more, not enough for
    the void and the sums. The run says so in one line (exit 2) and the folder is interrupted, not
    tampered. Space returns: `oakwatch recover` finishes it, verify passes, and `--resume` reruns the
    position. (A long folder name puts the control socket outside the folder: one file fewer to free.)

    It once ended with the summary and sums written but the invalid trial never voided, which verify
    passed and `--resume` could not rerun ("File exists")."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, 64 * 1024, 10_000)
    try:
        manifest = write_manifest(tmp_path, budgets=budget(3000),
                                  conditions=[{"id": "rnd", "policy": "random", "seed": 9}])
        out = disk / name
        proc = oakwatch("run", manifest, "--headless", "--output", out)
        wait_for(lambda: _lines_in(out / "trials" / "X-01" / layout.TRACE) >= 30 or proc.poll() is not None,
                 timeout=120, what="a running trial")
        assert proc.poll() is None
        _fill_up(disk)
        code, _, err = finished(proc)
        assert code == 2 and "Traceback" not in err, err
        assert "could not write its final records" in err and f"oakwatch recover {out}" in err, err
        problems = verify_experiment(out)
        assert problems and all("oakwatch recover" in p for p in problems), problems
        assert _remount(disk, 64 * 1024, 10_000)  # space returns
        done = subprocess.run([sys.executable, "-m", "app.cli", "recover", str(out)], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert_whole(out)
        (trial,) = all_trials(out)
        assert '"invalid_cause": "disk-full"' in (trial / layout.RESULT).read_text()  # its own end, kept
        assert summary_of(out).missing_positions == [0]
        code, _, err = finished(oakwatch("run", "--resume", out))
        assert code == 1, err  # the rerun plays out its budget: a valid game-failure
        assert_whole(out)
        assert summary_of(out).missing_positions == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_resume_on_a_full_disk_is_refused_in_one_line_and_leaves_the_folder_as_it_was(dry_run, tmp_path):
    """No room for the lock's holder or the reserve: `--resume` says so in one line (exit 2) and leaves
    no `.lock` for verify to report (it used to end in a traceback with the lock left behind)."""
    from tests.sessions.audit.test_recover_refusals import snapshot

    disk = tmp_path / "disk"
    _mount_tmpfs(disk, 2048, 1000)
    try:
        root = disk / "exp"
        shutil.copytree(dry_run[0], root)
        with (disk / "filler").open("wb") as f:  # the rest of the disk
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        before = snapshot(root)
        code, _, err = finished(oakwatch("run", "--resume", root))
        assert code == 2 and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1 and "No space left on device" in err, err
        assert snapshot(root) == before
        assert verify_experiment(root) == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_recover_keeps_the_awards_the_trace_proves_and_the_trial_replays(tmp_path):
    """Issue 34 item 8: recover wrote `milestones: []` for a trial that had earned rungs, so replaying it
    said DIVERGED ("the replay awards [...], which the result does not list"). The kept inputs, replayed,
    prove each award again: its decision, frame and probe."""
    import json

    from sessions.audit.replay import replay_trial

    manifest = write_manifest(tmp_path, budgets=budget(400), conditions=[
        {"id": "walk", "policy": "scripted", "script": "bundled:walkthrough.txt"}])
    out = tmp_path / "exp"
    done = _run(DIE_IN_TRIAL, "X-01", "40", "run", str(manifest), "--headless", "--output", str(out))
    assert done.returncode == -signal.SIGKILL, done.stderr
    recover(out)
    trial = out / "void-1" / "X-01"
    result = json.loads((trial / layout.RESULT).read_text())
    assert result["recovered"] and result["milestones_reached"] == ["M1", "M2", "M3"]
    assert [m["id"] for m in result["milestones"]] == result["milestones_reached"]
    assert all(m["probe"] and m["decision_id"] <= result["last_decision"] for m in result["milestones"])
    assert result["provenance"]["recovered_awards"] == "replayed"
    assert result["progress_points"] == 4 and result["deepest_milestone"] == "M3"
    assert replay_trial(trial)["milestones"] == ["M1", "M2", "M3"]  # no DIVERGED
    assert verify_experiment(out) == []
