"""Bad input: one line naming the problem, exit status 2, nothing written."""

import subprocess
import sys

import yaml

from sessions.assets import DEFAULT_MANIFEST
from tests.conftest import write_manifest


def oakwatch(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def assert_refused(proc, *fragments, out=None):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("oakwatch: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    if out is not None:
        assert not out.exists()


def test_missing_rom(tmp_path):
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    m = write_manifest(tmp_path, game={**game, "rom": "no-such.gb"})
    assert_refused(oakwatch("run", m, "--headless", "--output", tmp_path / "o"), "ROM not found", "no-such.gb",
                   out=tmp_path / "o")


def test_unreadable_rom(tmp_path):
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    (tmp_path / "dir.gb").mkdir()
    m = write_manifest(tmp_path, game={**game, "rom": "dir.gb"})
    assert_refused(oakwatch("run", m, "--headless", "--output", tmp_path / "o"), "ROM unreadable",
                   out=tmp_path / "o")


def test_wrong_rom_hash(tmp_path):
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    m = write_manifest(tmp_path, game={**game, "rom_sha256": "0" * 64})
    assert_refused(oakwatch("run", m, "--headless", "--output", tmp_path / "o"), "refusing a different ROM",
                   out=tmp_path / "o")


def test_wrong_state_hash(tmp_path):
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    game["start_states"]["pyboy"]["sha256"] = "1" * 64
    m = write_manifest(tmp_path, game=game)
    assert_refused(oakwatch("run", m, "--headless", "--output", tmp_path / "o"), "start_states.pyboy.sha256",
                   out=tmp_path / "o")


def test_malformed_manifest(tmp_path):
    m = tmp_path / "bad.yaml"
    m.write_text("experiment_id: [unclosed\n")
    assert_refused(oakwatch("run", m, "--headless", "--output", tmp_path / "o"), "bad.yaml", "not valid YAML",
                   out=tmp_path / "o")
    m2 = write_manifest(tmp_path, budgets={"accepted_actions": -1})
    assert_refused(oakwatch("run", m2, "--headless", "--output", tmp_path / "o"), "manifest.yaml",
                   "budgets.accepted_actions", out=tmp_path / "o")


def test_unknown_policy(tmp_path):
    m = write_manifest(tmp_path, conditions=[{"id": "c", "policy": "telepathy"}])
    assert_refused(oakwatch("run", m, "--headless", "--output", tmp_path / "o"), "conditions.0.policy",
                   out=tmp_path / "o")


def test_existing_output_folder(tmp_path):
    (tmp_path / "o").mkdir()
    assert_refused(oakwatch("run", "--headless", "--output", tmp_path / "o"), "already exists")
    assert list((tmp_path / "o").iterdir()) == []


def test_verify_and_replay_bad_paths(tmp_path):
    assert_refused(oakwatch("verify", tmp_path / "nothing"), "not a folder")
    assert_refused(oakwatch("recover", tmp_path / "nothing"), "not a folder")
    assert_refused(oakwatch("replay", tmp_path / "nothing"), "no trace.jsonl here")


def test_version_names_the_pinned_emulator():
    proc = oakwatch("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("oakwatch ") and "pyboy 2.8.1" in proc.stdout
