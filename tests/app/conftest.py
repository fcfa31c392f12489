"""Console tests: a private config dir, no cursor blink, and helpers to drive a live run."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import yaml

from sessions.preflight.assets import BUNDLED_PREFIX, DEFAULT_MANIFEST


@pytest.fixture(autouse=True)
def private_config(tmp_path, monkeypatch):
    """Never read or write the developer's ~/.config/oakwatch."""
    config = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config / "oakwatch" / "config.json"


@pytest.fixture(autouse=True)
def no_blink(monkeypatch):
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


def dry_run_manifest() -> Path:
    if DEFAULT_MANIFEST.is_file():
        return DEFAULT_MANIFEST
    override = os.environ.get("OAKWATCH_CONSOLE_MANIFEST")  # only while the bundled one is being built
    if override and Path(override).is_file():
        return Path(override)
    pytest.skip("the bundled dry-run manifest is not there yet")


@pytest.fixture
def manifest() -> Path:
    return dry_run_manifest()


def human_manifest(tmp_path: Path) -> Path:
    """The dry-run manifest with one human-policy condition, written into tmp_path."""
    source = dry_run_manifest()
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    game = data["game"]
    refs = [(game, "rom"), (game, "definition"), *[(s, "state") for s in game["start_states"].values()]]
    for section, key in refs:
        ref = section[key]
        if not ref.startswith(BUNDLED_PREFIX) and not Path(ref).is_absolute():
            section[key] = str((source.parent / ref).resolve())
    data["experiment_id"] = "human-play"
    data["conditions"] = [{"id": "operator", "policy": "human"}]
    data["trials"] = {"per_condition": 1, "order": "sequential"}
    path = tmp_path / "human.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def prepare_run(manifest: Path, tmp_path: Path):
    """(prepared, the ExperimentFolder holding tmp_path/exp); `.root` is its path."""
    from sessions.execute.start import create_folder
    from sessions.preflight.experiment import prepare

    out = tmp_path / "exp"
    prepared = prepare(manifest, out, allow_human=True)
    return prepared, create_folder(prepared, out)


async def wait_for(pilot, condition, timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


async def settle(pilot, seconds: float) -> None:
    await pilot.pause(seconds)
    await asyncio.sleep(0)


async def quit_and_wait(pilot, app, timeout: float = 20.0) -> None:
    await pilot.press("q")
    await wait_for(pilot, lambda: app.run_done and app.return_code is not None, timeout,
                   "the run to end and the app to exit after quit")
