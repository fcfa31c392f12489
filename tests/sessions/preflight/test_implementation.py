"""Every result names the implementation that produced it (issue 22.1): the package version, and
the git commit and dirty flag when oakwatch runs from a checkout; null, never a failure, otherwise."""

from __future__ import annotations

import subprocess
from importlib.metadata import version
from pathlib import Path

from sessions.preflight.implementation import PACKAGE_ROOT, git_identity, implementation


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_checkout_gives_its_commit_and_whether_it_is_dirty(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "module.py").write_text("x = 1\n")
    _git(root, "add", "module.py")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "first")
    head = _git(root, "rev-parse", "HEAD")
    (root / "runs").mkdir()
    (root / "runs" / "output.json").write_text("{}")  # untracked output does not make it dirty
    assert git_identity(root) == (head, False)
    (root / "module.py").write_text("x = 2\n")
    assert git_identity(root) == (head, True)
    inner = root / "installed"  # a package folder inside someone else's repository is not a checkout of it
    inner.mkdir()
    assert git_identity(inner) == (None, None)


def test_without_git_or_a_checkout_the_commit_is_null_and_nothing_fails(tmp_path, monkeypatch):
    assert git_identity(tmp_path) == (None, None)
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on the PATH at all
    assert git_identity(PACKAGE_ROOT) == (None, None)


def test_every_result_records_the_implementation(dry_run):
    _folder, _summary, results = dry_run
    here = implementation()
    assert here["version"] == version("oakwatch")
    for r in results:
        assert r.provenance["implementation"] == here
    commit, _dirty = git_identity(PACKAGE_ROOT)
    if (PACKAGE_ROOT / ".git").exists():  # the tests run from a checkout (a worktree's .git is a file)
        assert here["git_commit"] == commit == _git(PACKAGE_ROOT, "rev-parse", "HEAD")
        assert isinstance(here["git_dirty"], bool)


def test_no_commit_yet_is_null_and_a_broken_index_keeps_the_commit_with_dirty_unknown(tmp_path):
    root = tmp_path / "checkout"
    root.mkdir()
    _git(root, "init", "-q")
    assert git_identity(root) == (None, None)  # a repository with no commit names none
    (root / "module.py").write_text("x = 1\n")
    _git(root, "add", "module.py")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "first")
    head = _git(root, "rev-parse", "HEAD")
    (root / ".git" / "index").write_bytes(b"not an index")  # `git status` fails; the commit is still known
    assert git_identity(root) == (head, None)
