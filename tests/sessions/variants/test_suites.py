"""Variant suites: `variants:` in a manifest runs every condition on seen and held-out Parcel Quest
variants; each trial records only its variant's hashes, verify and replay check them, the report
compares the two kinds."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from sessions.analysis.report import build_report
from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from sessions.execute.runner import ExperimentRunner
from sessions.execute.start import create_folder
from sessions.preflight.experiment import PreflightError, prepare
from sessions.variants.variants import make_variant
from tests.conftest import write_manifest

SEEN, HELD_OUT = 7, 0xA11CE_0000_5EC2_E7_5EED  # the held-out one has more than 64 bits
ENV = "OAKWATCH_TEST_HELD_OUT_SEED"


def suite_manifest(tmp: Path, variants: list[dict]) -> Path:
    """One scripted condition playing the seen variant's optimal walkthrough, one random walker."""
    script = tmp / "seen-walkthrough.txt"
    script.write_text("\n".join(make_variant(SEEN).solution.actions) + "\n")
    return write_manifest(
        tmp, experiment_id="suite", variants=variants,
        conditions=[{"id": "walk", "policy": "scripted", "script": str(script)},
                    {"id": "rnd", "policy": "random", "seed": 5}],
        budgets={"accepted_actions": 260}, trials={"per_condition": 1, "blinding_seed": 2, "order": "sequential"})


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("suite")
    mp = pytest.MonkeyPatch()
    mp.setenv(ENV, hex(HELD_OUT))
    try:
        manifest = suite_manifest(tmp, [{"seed": SEEN, "label": "seen"}, {"seed_env": ENV, "label": "held-out"}])
        out = tmp / "exp"
        prepared = prepare(manifest, out)
        ExperimentRunner(prepared, create_folder(prepared, out)).run()
    finally:
        mp.undo()
    return out


def _trials(root: Path) -> dict[tuple[str, int], tuple[dict, dict]]:
    labels = {lab: cid for lab, cid in json.loads((root / "blinding.json").read_text())["labels"].items()}
    out = {}
    for t in sorted((root / "trials").iterdir()):
        g = json.loads((t / "trial.json").read_text())
        out[(labels[g["condition"]], g["trial"])] = (g, json.loads((t / "result.json").read_text()))
    return out


def test_each_condition_plays_each_variant_and_records_only_its_hashes(suite):
    seen, held = make_variant(SEEN), make_variant(HELD_OUT)
    trials = _trials(suite)
    assert sorted(trials) == [("rnd", 1), ("rnd", 2), ("walk", 1), ("walk", 2)]

    for cid in ("walk", "rnd"):
        assert trials[(cid, 1)][0]["rom_sha256"] == hashlib.sha256(seen.rom).hexdigest()
        assert trials[(cid, 2)][0]["rom_sha256"] == hashlib.sha256(held.rom).hexdigest()
        assert trials[(cid, 1)][1]["provenance"]["variant_label"] == "seen"
        assert trials[(cid, 2)][1]["provenance"]["variant_label"] == "held-out"
    # the seen variant's optimal walkthrough: success, path efficiency exactly 1
    r = trials[("walk", 1)][1]
    assert r["outcome"] == "success" and r["deepest_milestone"] == "M8"
    assert r["derived"]["path_efficiency"] == 1.0
    assert r["derived"]["path_optimal_presses"] == seen.solution.optimal["M8"]
    assert verify_experiment(suite) == []
    # the held-out seed is in no file of the evidence, in any spelling
    for f in suite.rglob("*"):
        if f.is_file():
            data = f.read_bytes().lower()
            assert str(HELD_OUT).encode() not in data and f"{HELD_OUT:x}".encode() not in data, f


def test_replay_takes_the_variant_rom(suite, tmp_path):
    folder = {g["trial_key"]: g for g, _ in _trials(suite).values()}
    key_seen = next(k for k, g in folder.items() if g["trial"] == 1)
    key_held = next(k for k, g in folder.items() if g["trial"] == 2)
    assert replay_trial(suite / "trials" / key_seen)["actions"] > 0  # a seen variant is remade from its seed
    with pytest.raises(PreflightError, match="give its ROM with --rom"):
        replay_trial(suite / "trials" / key_held)
    rom = tmp_path / "held.gb"
    rom.write_bytes(make_variant(HELD_OUT).rom)
    assert replay_trial(suite / "trials" / key_held, rom)["actions"] > 0
    with pytest.raises(PreflightError, match="the trial played"):
        replay_trial(suite / "trials" / key_held, suite.parent / "seen-walkthrough.txt")


def test_a_trial_claiming_another_variant_is_caught(suite, tmp_path):
    import shutil

    root = tmp_path / "exp"
    shutil.copytree(suite, root)
    trial = next(t for t in (root / "trials").iterdir() if json.loads((t / "trial.json").read_text())["trial"] == 2)
    seen_rom = json.loads(next(t for t in (root / "trials").iterdir() if t != trial).joinpath("trial.json")
                          .read_text())["rom_sha256"]
    text = (trial / "trial.json").read_text()
    held_rom = json.loads(text)["rom_sha256"]
    assert held_rom != seen_rom
    (trial / "trial.json").write_text(text.replace(held_rom, seen_rom))
    assert any("ROM or start state differs from the manifest's variant 1" in p for p in verify_experiment(root))


def test_the_report_compares_seen_and_held_out(suite, tmp_path):
    doc = build_report(suite, tmp_path / "report", replay=False)
    by_label = doc["variants"]
    labels = json.loads((suite / "blinding.json").read_text())["labels"]
    walk = next(lab for lab, cid in labels.items() if cid == "walk")
    assert by_label[walk]["seen"]["successful"] == 1 and by_label[walk]["seen"]["path_efficiency"]["median"] == 1.0
    assert by_label[walk]["held-out"]["n_valid"] == 1
    assert "Seen against held-out variants" in (tmp_path / "report" / "report.md").read_text()
    checks = {c["check"][:40]: c["status"] for c in doc["checklist"]}
    assert checks["The first captured frame is identical in"] == "pass"


def test_a_suite_needs_parcel_quest(tmp_path):
    from sessions.variants.variants import VariantError

    with pytest.raises(VariantError, match="has none"):
        make_variant(3, b"\0" * 0x8000)
    manifest = suite_manifest(tmp_path, [{"seed": 3, "label": "seen"}])
    text = manifest.read_text().replace("bundled:parcel-quest.yaml", str(tmp_path / "other.yaml"))
    game = yaml.safe_load((Path(__file__).resolve().parents[3] / "assets/games/parcel-quest.yaml").read_text())
    game["id"] = "other-game"
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(game))
    manifest.write_text(text)
    with pytest.raises(PreflightError, match="not of other-game"):
        prepare(manifest, tmp_path / "out")


def test_held_out_seeds_need_64_bits_and_their_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "12345")
    manifest = suite_manifest(tmp_path, [{"seed_env": ENV, "label": "held-out"}])
    with pytest.raises(PreflightError, match="at least 64 bits"):
        prepare(manifest, tmp_path / "out")
    monkeypatch.delenv(ENV)
    with pytest.raises(PreflightError, match=f"no environment variable {ENV}"):
        prepare(manifest, tmp_path / "out")
    assert not (tmp_path / "out").exists()
