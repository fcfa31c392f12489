"""The publishable package as a reader gets it: `sha256sum --check`, `oakwatch verify PKG` (package
mode: what the package holds) and `oakwatch replay PKG/trials/<key>` as shipped, with the reader's
own ROM and start state where the manifest's paths were redacted. Real runs of the bundled cartridge."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from app.cli import main
from sessions.evidence.checksums import render_sums
from sessions.preflight.assets import resolve
from tests.conftest import DEFAULT_MANIFEST, run_experiment, write_manifest


def export(folder: Path, out: Path) -> Path:
    assert main(["export", str(folder), "--output", str(out)]) == 0
    return out


def resum(pkg: Path) -> None:
    """What a forger does after changing a file: SHA256SUMS written again over what is there."""
    files = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file() and p.name != "SHA256SUMS")
    (pkg / "SHA256SUMS").write_text(render_sums({f: hashlib.sha256((pkg / f).read_bytes()).hexdigest()
                                                 for f in files}))


@pytest.fixture(scope="module")
def package(dry_run, tmp_path_factory):
    return export(dry_run[0], tmp_path_factory.mktemp("pkg") / "package")


def test_a_package_checks_out_with_sha256sum_and_verify_in_package_mode(package, dry_run, capsys):
    if shutil.which("sha256sum") is not None:  # GNU coreutils: what a reader without oakwatch runs
        done = subprocess.run(["sha256sum", "--check", "--quiet", "SHA256SUMS"], cwd=package, capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stdout + done.stderr
    capsys.readouterr()
    assert main(["verify", str(package)]) == 0
    out = capsys.readouterr().out
    key = dry_run[2][0].trial_key
    trace_lines = len((dry_run[0] / "trials" / key / "trace.jsonl").read_bytes().splitlines())
    assert f"package {package} OK" in out and f"1 trial(s), {trace_lines} decisions" in out
    info = json.loads((package / "package.json").read_text())
    assert info["rewritten"] == {} and info["include_raw"] is False
    readme = (package / "README.md").read_text()
    assert "oakwatch verify ." in readme and f"oakwatch replay trials/{key}" in readme
    # the evidence audit's flags are the evidence's, refused on a package in one line
    assert main(["verify", str(package), "--deep"]) == 2


def test_package_mode_catches_a_changed_record_even_when_the_sums_are_written_again(package, tmp_path, dry_run,
                                                                                   capsys):
    pkg = tmp_path / "pkg"
    shutil.copytree(package, pkg)
    key = dry_run[2][0].trial_key
    trace = pkg / "trials" / key / "trace.jsonl"
    lines = trace.read_bytes().splitlines(keepends=True)
    line = json.loads(lines[4])
    line["reasoning_summary"] = "something the agent never said"
    lines[4] = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    trace.write_bytes(b"".join(lines))
    capsys.readouterr()
    assert main(["verify", str(pkg)]) == 1  # first without new sums: the package's own sums catch it
    assert f"trials/{key}/trace.jsonl: content differs from its SHA256SUMS entry" in capsys.readouterr().err
    resum(pkg)
    assert main(["verify", str(pkg)]) == 1
    err = capsys.readouterr().err
    assert f"trials/{key}/trace.jsonl:6: hash chain broken" in err  # the next line names the changed one
    assert f"trials/{key}/trace.jsonl: not the evidence's file of that name" in err
    (pkg / "extra.txt").write_text("added later")
    assert main(["verify", str(pkg)]) == 1
    assert "extra.txt: not listed in SHA256SUMS" in capsys.readouterr().err


def test_replay_runs_on_the_package_as_shipped(package, dry_run, capsys):
    key = dry_run[2][0].trial_key
    assert main(["replay", str(package / "trials" / key)]) == 0
    assert "matches" in capsys.readouterr().out


def test_a_package_of_local_files_replays_with_the_readers_rom_and_state(tmp_path, capsys):
    """An experiment whose ROM, start state and game definition are local files: the package redacts
    their paths and ships the definition; the reader gives the ROM and state."""
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    game = data["game"]
    local = tmp_path / "mine"
    local.mkdir()
    for field, name in (("rom", "cart.gb"), ("definition", "game.yaml")):
        shutil.copyfile(resolve(game[field], DEFAULT_MANIFEST.parent), local / name)
        game[field] = str(local / name)
    entry = game["start_states"]["pyboy"]
    shutil.copyfile(resolve(entry["state"], DEFAULT_MANIFEST.parent), local / "start.state")
    entry["state"] = str(local / "start.state")
    manifest = write_manifest(tmp_path, game=game, budgets={**data["budgets"], "accepted_actions": 40})
    folder, _, (result,) = run_experiment(manifest, tmp_path / "exp")
    pkg = export(folder, tmp_path / "pkg")
    shipped = yaml.safe_load((pkg / "manifest.redacted.yaml").read_text())["game"]
    assert shipped["rom"] == shipped["definition"] == "<local path redacted>"
    assert (pkg / "game" / "definition.yaml").read_bytes() == (local / "game.yaml").read_bytes()
    assert "cart.gb" not in "".join(p.name for p in pkg.rglob("*"))  # no ROM, no state
    assert not [p for p in pkg.rglob("*") if p.suffix in (".gb", ".state")]
    capsys.readouterr()
    assert main(["verify", str(pkg)]) == 0
    trial = pkg / "trials" / result.trial_key
    assert main(["replay", str(trial)]) == 2
    assert "give it with --rom" in capsys.readouterr().err
    assert main(["replay", str(trial), "--rom", str(local / "cart.gb")]) == 2
    assert "give it with --state" in capsys.readouterr().err
    assert main(["replay", str(trial), "--rom", str(local / "cart.gb"), "--state", str(local / "start.state")]) == 0
    assert "matches" in capsys.readouterr().out
    assert f"oakwatch replay trials/{result.trial_key} --rom YOUR.gb" in (pkg / "README.md").read_text()
