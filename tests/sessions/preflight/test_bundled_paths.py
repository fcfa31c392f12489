"""`bundled:` names stay inside assets/: an absolute name, a `..` part or a name that resolves
(symlinks followed) outside assets/ is refused with one line naming the manifest field, before the
file it points at is opened, by every command that takes a manifest.

"Before it is opened" is watched by the kernel: an inotify watch on the file outside assets/ records
any process's open of it, so the real command line runs in a subprocess and the test reads the
events afterwards (no timing involved).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sessions.preflight.assets as assets
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.manifest import ManifestError, parse_manifest

ROOT = Path(__file__).resolve().parents[3]
DRY = DEFAULT_MANIFEST.read_text(encoding="utf-8")
IN_ACCESS, IN_OPEN = 0x001, 0x020


class OpenWatch:
    """Every open (or read) of one file by any process, from an inotify watch."""

    def __init__(self, path: Path):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            pytest.skip(f"no inotify here ({os.strerror(ctypes.get_errno())})")
        if libc.inotify_add_watch(self.fd, os.fsencode(path), IN_OPEN | IN_ACCESS) < 0:
            os.close(self.fd)
            pytest.skip(f"cannot watch {path} ({os.strerror(ctypes.get_errno())})")

    def opened(self) -> bool:
        seen = 0
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return seen > 0
            offset = 0
            while offset < len(data):
                _wd, mask, _cookie, size = struct.unpack_from("iIII", data, offset)
                seen += bool(mask & (IN_OPEN | IN_ACCESS))
                offset += 16 + size

    def close(self) -> None:
        os.close(self.fd)


def oakwatch(*args: object, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def escape_to(target: Path, folder: str = "cartridge") -> str:
    """`bundled:` + a `..` path from assets/<folder>/ to `target` (where today's lookup lands first)."""
    return "bundled:" + os.path.relpath(target, ASSETS / folder)


@pytest.fixture
def outside(tmp_path):
    """A readable file outside assets/, watched for opens."""
    secret = tmp_path / "outside" / "secret.yaml"
    secret.parent.mkdir()
    secret.write_text("id: not-yours\nsecret: 1\n")
    watch = OpenWatch(secret)
    yield secret, watch
    watch.close()


def one_line(proc: subprocess.CompletedProcess, status: int) -> str:
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_run_refuses_a_bundled_name_leaving_assets_without_opening_it(tmp_path, outside):
    secret, watch = outside
    ref = escape_to(secret)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(DRY.replace("definition: bundled:parcel-quest.yaml", f"definition: {ref}"))
    out = tmp_path / "o"
    line = one_line(oakwatch("run", manifest, "--headless", "--output", out), 2)
    assert re.match(rf"oakwatch: error: {re.escape(str(manifest))}:\d+: game\.definition: ", line), line
    assert "assets/" in line and ".." in line
    assert not out.exists()
    assert not watch.opened(), "the file outside assets/ was opened before the refusal"


def _template_naming(secret: Path, tmp_path: Path, where: str) -> Path | str:
    """A `state new --experiment` value that leaves assets/: the template itself, or a field inside it."""
    if where == "--experiment":
        return escape_to(secret)
    template = tmp_path / "template.yaml"
    template.write_text(DRY.replace("script: bundled:walkthrough.txt", f"script: {escape_to(secret)}"))
    return template


@pytest.mark.parametrize("where", ["--experiment", "conditions.0.script"])
def test_state_new_refuses_a_template_leaving_assets_without_opening_it(tmp_path, outside, where):
    secret, watch = outside
    proc = oakwatch("state", "new", "--rom", ASSETS / "cartridge" / "parcel-quest.gb", "--game", "parcel-quest",
                    "--experiment", _template_naming(secret, tmp_path, where),
                    "--inputs", ASSETS / "cartridge" / "walkthrough.txt", "--output", tmp_path / "o")
    line = one_line(proc, 2)
    assert where in line and "assets/" in line, line
    assert not (tmp_path / "o").exists()
    assert not watch.opened()


def test_every_command_reading_a_frozen_manifest_refuses_it_unopened(dry_run_copy, outside):
    """An evidence folder whose manifest names a file outside assets/: verify reports it as a
    problem (exit 1), replay refuses it (exit 2), report names it among its integrity problems (exit 1),
    recover refuses it, and none opens it."""
    secret, watch = outside
    root = dry_run_copy
    frozen = root / "manifest.yaml"
    text = frozen.read_text()
    assert text.count("definition: bundled:parcel-quest.yaml") == 1
    frozen.write_text(text.replace("definition: bundled:parcel-quest.yaml", f"definition: {escape_to(secret)}"))
    trial = next((root / "trials").iterdir())

    verify = oakwatch("verify", root)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert any("manifest.yaml" in x and "game.definition" in x and "assets/" in x
               for x in verify.stderr.splitlines()), verify.stderr
    replay = one_line(oakwatch("replay", trial), 2)
    assert "game.definition" in replay and "assets/" in replay, replay
    report = oakwatch("report", root, "--output", root.parent / "report")
    assert report.returncode == 1 and "Traceback" not in report.stdout + report.stderr, report.stdout + report.stderr
    problems = json.loads((root.parent / "report" / "report.json").read_text())["integrity"]["problems"]
    assert any("game.definition" in p and "assets/" in p for p in problems), problems
    (root / "summary.json").unlink()  # an unfinished folder: recover reads the manifest
    recover = oakwatch("recover", root)
    assert recover.returncode in (1, 2) and "Traceback" not in recover.stdout + recover.stderr, recover.stderr
    assert not watch.opened(), "a command opened the file outside assets/"


# -- the check itself, over arbitrary names -----------------------------------------------------------

@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A stand-in assets/ with a link out of it, a link within it, and a FIFO outside it."""
    base = tmp_path_factory.mktemp("assets-tree")
    root, away = base / "assets", base / "away"
    for folder in assets.BUNDLED_DIRS:
        (root / folder).mkdir(parents=True)
    away.mkdir()
    (away / "secret.yaml").write_text("secret: 1\n")
    os.mkfifo(away / "pipe")
    (root / "games" / "real.yaml").write_text("ok: 1\n")
    (root / "games" / "out.yaml").symlink_to(away / "secret.yaml")
    (root / "cartridge" / "pipe").symlink_to(away / "pipe")
    (root / "cartridge" / "up").symlink_to(away)
    (root / "prompts" / "same.yaml").symlink_to(root / "games" / "real.yaml")
    return root


PARTS = st.sampled_from(["..", ".", "", "games", "cartridge", "real.yaml", "out.yaml", "pipe", "up", "same.yaml",
                         "secret.yaml", "away", "x", "~", "assets", "\\..", "..."])
NAMES = st.builds(lambda lead, parts: lead + "/".join(parts), st.sampled_from(["", "/", "//"]),
                  st.lists(PARTS, max_size=6))


def _no_opens(*_a, **_k):
    raise AssertionError("a file was opened while checking a bundled name")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_a_bundled_name_is_inside_assets_or_refused_unopened(tree, name, monkeypatch):
    monkeypatch.setattr(assets, "ASSETS", tree)
    real_root = Path(os.path.realpath(tree))
    with monkeypatch.context() as m:
        m.setattr(os, "open", _no_opens)
        m.setattr("builtins.open", _no_opens)
        m.setattr("io.open", _no_opens)
        problem = assets.bundled_problem(name)
        try:
            path = assets.resolve(f"bundled:{name}", Path("/nowhere"))
        except ValueError as exc:
            refused = str(exc)
        else:
            refused = None
    assert (problem is None) == (refused is None), (name, problem, refused)
    if name.startswith("/") or ".." in name.split("/"):
        assert refused is not None, name
    if refused is None:
        real = Path(os.path.realpath(path))
        assert real == real_root or real.is_relative_to(real_root), (name, real)
    else:
        assert "\n" not in refused and refused.startswith(f"bundled:{name} ")


@pytest.mark.parametrize("name, accepted", [
    ("real.yaml", True), ("same.yaml", True), ("games/real.yaml", True),
    ("out.yaml", False), ("pipe", False), ("up/secret.yaml", False), ("../away/secret.yaml", False),
    ("/etc/passwd", False), ("", False), ("games/../games/real.yaml", False),
])
def test_a_manifest_field_refuses_what_resolve_refuses(tree, monkeypatch, name, accepted):
    monkeypatch.setattr(assets, "ASSETS", tree)
    text = DRY.replace("definition: bundled:parcel-quest.yaml", f"definition: 'bundled:{name}'")
    if accepted:
        assert parse_manifest(text, "m.yaml").game.definition == f"bundled:{name}"
        return
    with pytest.raises(ManifestError) as err:
        parse_manifest(text, "m.yaml")
    message = str(err.value)
    assert re.match(r"m\.yaml:\d+: game\.definition: ", message) and "\n" not in message, message


def test_every_bundled_name_the_project_uses_is_accepted():
    for path in sorted((ASSETS / "experiments").glob("*.yaml")):
        refs = list(assets.bundled_refs(yaml.safe_load(path.read_text())))
        assert refs or path.name.startswith(("red-", "firered-")), path.name
        for field, ref in refs:
            assert assets.bundled_problem(ref[len("bundled:"):]) is None, (path.name, field, ref)
