"""Which implementation produced a result: the package version, and the git commit and whether the
checkout had uncommitted changes when oakwatch runs from a checkout (an installed wheel has none).

Git is asked only when the package's own folder is the top of a git work tree, and any failure
(no git, not a checkout, a broken repository, a slow disk) gives null, never an error: a result
must not fail to be written for want of its provenance.
"""

from __future__ import annotations

import functools
import subprocess
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding engine/, sessions/, app/
GIT_TIMEOUT_S = 10


def _git(root: Path, *args: str) -> str | None:
    return _git_output(_git_start(root, *args))


def _git_start(root: Path, *args: str) -> subprocess.Popen | None:
    try:
        return subprocess.Popen(["git", "-C", str(root), *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    except (OSError, subprocess.SubprocessError):
        return None


def _git_output(proc: subprocess.Popen | None, *, stop: bool = False) -> str | None:
    """What a started git printed, or None when it failed or ran past the timeout (or `stop`: unwanted)."""
    if proc is None:
        return None
    if stop:
        proc.kill()
    try:
        out, _ = proc.communicate(timeout=GIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return out if proc.returncode == 0 and not stop else None


def git_identity(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout whose top is `root`; (None, None) when it is not one.
    Dirty: a tracked file differs from the commit (untracked files, e.g. run output, do not count).
    Two git processes at once, not three one after another (issue 31, row 2: the process's start):
    `status --porcelain=v2 --branch` gives the commit (`# branch.oid`) and the changes together."""
    status = _git_start(root, "status", "--porcelain=v2", "--branch", "--untracked-files=no")
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != root.resolve():
        _git_output(status, stop=True)
        return None, None  # not a checkout of this code (perhaps installed inside another repository)
    lines = _git_output(status)
    if lines is None:  # status failed: the commit alone, as rev-parse gives it
        commit = _git(root, "rev-parse", "--verify", "HEAD")
        return (commit.strip(), None) if commit is not None else (None, None)
    oid = next((line.split()[2] for line in lines.splitlines() if line.startswith("# branch.oid ")), None)
    if oid is None or oid == "(initial)":
        return None, None  # no commit yet
    return oid, any(line and not line.startswith("#") for line in lines.splitlines())


@functools.cache
def implementation(root: Path = PACKAGE_ROOT) -> dict:
    """The result's `provenance.implementation` (computed once per process)."""
    try:
        version = dist_version("oakwatch")
    except PackageNotFoundError:
        version = None
    commit, dirty = git_identity(root)
    return {"package": "oakwatch", "version": version, "git_commit": commit, "git_dirty": dirty}
