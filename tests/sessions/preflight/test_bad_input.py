"""Bad input: one line naming the problem, exit status 2, nothing written."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.conftest import write_manifest

ROOT = Path(__file__).resolve().parents[3]


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


# -- errors name what the user gave (issue 21.7) --------------------------------------------------------

def _oakwatch_at_once(cases: dict[str, tuple], env: dict | None = None) -> dict[str, subprocess.CompletedProcess]:
    """Several command lines started together (each is an interpreter start and a preflight)."""
    procs = {name: subprocess.Popen([sys.executable, "-m", "app.cli", *map(str, args)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=env)
             for name, args in cases.items()}
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def test_model_run_errors_name_the_options_and_the_users_file_never_a_temp_copy(tmp_path):
    import os

    from engine.emulators.backends import BACKENDS

    dry = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    for name in ("priced", "bad", "pyboy-only"):
        (tmp_path / name).mkdir()
    priced = write_manifest(tmp_path / "priced", budgets={**dry["budgets"], "total_cost_usd": 5})
    bad = write_manifest(tmp_path / "bad", budgets={**dry["budgets"], "accepted_actions": -1})
    game = {**dry["game"], "start_states": {"pyboy": dry["game"]["start_states"]["pyboy"]}}
    pyboy_only = write_manifest(tmp_path / "pyboy-only", game=game)
    out = tmp_path / "o"
    run = ("run", "--headless", "--output", out)
    cases = {
        "no-base-url": (*run, "--provider", "openai-compatible", "--model", "m"),
        "bad-base-url": (*run, "--provider", "openai-compatible", "--model", "m", "--base-url", "ftp://x"),
        "no-such-api": (*run, "--provider", "anthropic", "--api", "chat", "--model", "m"),
        "long-model": (*run, "--provider", "openai", "--model", "m" * 201),
        "no-key": (*run, "--provider", "anthropic", "--model", "m"),
        "no-price": (*run, priced, "--provider", "openai", "--model", "no-such-model"),
        "bad-own-field": (*run, bad, "--provider", "openai", "--model", "m"),
    }
    if BACKENDS["mgba"].version() is not None:
        cases["no-state-for-emulator"] = (*run, pyboy_only, "--emulator", "mgba")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["OPENAI_API_KEY"] = "sk-test-never-sent"  # no-price is refused in preflight, before any call
    done = _oakwatch_at_once(cases, env)
    expect = {
        "no-base-url": ["--provider openai-compatible needs --base-url"],
        "bad-base-url": ["--base-url ftp://x"],
        "no-such-api": ["--api chat", "messages"],
        "long-model": ["--model mmm", "200 characters"],
        "no-key": ["--provider anthropic", "ANTHROPIC_API_KEY"],
        "no-price": ["--model no-such-model", "cost budget"],
        "bad-own-field": [f"{bad}:", "budgets.accepted_actions"],
        "no-state-for-emulator": ["--emulator mgba", "no start state"],
    }
    for name, proc in done.items():
        assert_refused(proc, *expect[name], out=out)
        assert "oakwatch-run-" not in proc.stderr, (name, proc.stderr)  # the temporary copy's folder


def test_verify_of_a_folder_that_is_not_evidence_is_bad_input(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "x").mkdir(parents=True)
    for i in range(50):
        (home / f"note-{i}.txt").write_text("hello\n")
    (home / "manifest.yaml").write_text(DEFAULT_MANIFEST.read_text())  # an experiment to run, not a run
    for folder in (home, ROOT):  # a home directory; the source tree itself (tens of thousands of files)
        proc = oakwatch("verify", folder)
        assert_refused(proc, "not an oakwatch evidence folder")
        assert "recover" not in proc.stderr and "FAIL" not in proc.stderr


def test_verify_of_damaged_evidence_still_reports_its_problems(dry_run_copy):
    (dry_run_copy / "schedule.json").unlink()  # still an experiment's folder: its manifest and run log remain
    trace = next((dry_run_copy / "trials").iterdir()) / "trace.jsonl"
    trace.write_bytes(trace.read_bytes().replace(b'"decision_id":1,', b'"decision_id":7,', 1))
    proc = oakwatch("verify", dry_run_copy)
    assert proc.returncode == 1, proc.stderr
    assert "schedule.json" in proc.stderr and "trace.jsonl" in proc.stderr


def test_a_malformed_expect_root_is_bad_input(dry_run_copy):
    from sessions.evidence.experiment_folder import root_hash

    root = root_hash(dry_run_copy)
    given = {"short": "0" * 63, "not-hex": "g" * 64, "word": "zz", "upper": root.upper(), "other": "0" * 64}
    done = _oakwatch_at_once({k: ("verify", dry_run_copy, "--expect-root", v) for k, v in given.items()})
    for name in ("short", "not-hex", "word"):
        assert_refused(done[name], "--expect-root", "64 hex")
    assert done["upper"].returncode == 0, done["upper"].stderr  # case is not part of a hash
    assert done["other"].returncode == 1, done["other"].stderr  # a well-formed, different root: a problem


def test_every_folder_command_refuses_a_folder_that_is_not_evidence(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("hello\n")
    loose = tmp_path / "a" / "b" / "copied-trial"  # a trial folder outside any experiment
    loose.mkdir(parents=True)
    (loose / "trace.jsonl").write_text("{}\n")
    cases = {
        "recover": ("recover", home),
        "report": ("report", home, "--output", tmp_path / "report"),
        "replay": ("replay", loose),
        "export": ("export", home, "--output", tmp_path / "package"),
        "unblind": ("unblind", home),
        "annotate-list": ("annotate", "list", home),
    }
    done = _oakwatch_at_once(cases)
    for name, proc in done.items():
        assert proc.returncode == 2, (name, proc.stdout + proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "not an oakwatch evidence folder" in lines[0] or \
            name == "replay" and "not a trial of an oakwatch evidence folder" in lines[0], (name, proc.stderr)
        assert "recover" not in lines[0] or name == "recover"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "home"]  # nothing written
    assert [p.name for p in home.iterdir()] == ["notes.txt"]


def test_speed_paces_a_headless_run_and_is_refused_with_workers(tmp_path):
    dry = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    m = write_manifest(tmp_path, budgets={**dry["budgets"], "accepted_actions": 8})
    out = tmp_path / "o"
    proc = oakwatch("run", m, "--headless", "--speed", "1", "--output", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a budget ending is a valid game-failure
    assert "paced at 1× real time" in proc.stdout
    (result,) = out.glob("trials/*/result.json")
    telemetry = json.loads(result.read_text())["telemetry"]
    assert telemetry["frames"] > 0 and telemetry["held_seconds"] > 0  # waited for real time, counted apart
    assert_refused(oakwatch("run", m, "--headless", "--speed", "2", "--workers", "2", "--output", out / "x"),
                   "--speed", "--workers", out=out / "x")


@pytest.mark.parametrize("option", [["--base-url", "http://127.0.0.1:9/v1"], ["--model", "m"], ["--api", "chat"]])
def test_resume_refuses_the_options_it_would_ignore(dry_run_copy, option):
    before = sorted(p.relative_to(dry_run_copy).as_posix() for p in dry_run_copy.rglob("*"))
    proc = oakwatch("run", "--resume", dry_run_copy, *option)
    assert_refused(proc, "--resume uses the folder's frozen manifest", option[0])
    assert sorted(p.relative_to(dry_run_copy).as_posix() for p in dry_run_copy.rglob("*")) == before
