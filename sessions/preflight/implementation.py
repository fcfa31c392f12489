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
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_identity(root: Path) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout whose top is `root`; (None, None) when it is not one.
    Dirty: a tracked file differs from the commit (untracked files, e.g. run output, do not count)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top.strip()).resolve() != root.resolve():
        return None, None  # not a checkout of this code (perhaps installed inside another repository)
    commit = _git(root, "rev-parse", "--verify", "HEAD")
    if commit is None:
        return None, None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return commit.strip(), (bool(status.strip()) if status is not None else None)


@functools.cache
def implementation(root: Path = PACKAGE_ROOT) -> dict:
    """The result's `provenance.implementation` (computed once per process)."""
    try:
        version = dist_version("oakwatch")
    except PackageNotFoundError:
        version = None
    commit, dirty = git_identity(root)
    return {"package": "oakwatch", "version": version, "git_commit": commit, "git_dirty": dirty}
