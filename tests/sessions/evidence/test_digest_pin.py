"""The content digests (sessions.evidence.digest) of the bundled dry-run and of a seeded random trial,
pinned: a restructuring of the code must reproduce the same play, frame for frame. Both values were
computed on main before issue 28's moves and again after them. A change that means to alter play
(a new rule, a new frame count) updates the pin in the same commit, and says so."""

from __future__ import annotations

import yaml

from sessions.evidence.digest import trial_digest
from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.conftest import run_experiment

DRY_RUN = {"X-01": "0406678c471ec5c1c41e9d948b25d5df3a83beec0987c30ba83d93cf19fb7c99"}
RANDOM = {"X-01": "1b96a69650976e6c2ecefa6963aa19fb643f3c1e592e528f4bc3e1b9e2dad542"}


def _digests(root) -> dict[str, str]:
    return {p.name: trial_digest(p) for p in sorted((root / "trials").iterdir())}


def test_the_bundled_dry_run_plays_exactly_as_pinned(dry_run):
    assert _digests(dry_run[0]) == DRY_RUN


def test_a_seeded_random_trial_plays_exactly_as_pinned(tmp_path):
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data.update(conditions=[{"id": "rnd", "policy": "random", "seed": 7}],
                budgets={**data["budgets"], "accepted_actions": 60},
                trials={"per_condition": 1, "blinding_seed": 1})
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(data))
    folder, _, _ = run_experiment(manifest, tmp_path / "exp")
    assert _digests(folder) == RANDOM
