"""The emulator backend registry: what each backend runs, its frame size, the manifest's per-backend
start states, the refusals (no state for the backend, another version's state, a wrong frame size,
mGBA missing), --emulator, and the frame pane at the GBA size."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import yaml

from app.cli import main
from engine.emulators.backends import BACKENDS, BackendUnavailable
from engine.emulators.romheader import platform_of
from sessions.preflight.assets import ASSETS, DEFAULT_MANIFEST
from sessions.preflight.experiment import PreflightError, prepare
from sessions.preflight.manifest import ManifestError, parse_manifest
from tests.conftest import write_manifest

DRY = yaml.safe_load(DEFAULT_MANIFEST.read_text())


def test_registry():
    assert set(BACKENDS) == {"pyboy", "mgba"}
    assert BACKENDS["pyboy"].platforms == ("gb", "gbc") and BACKENDS["mgba"].platforms == ("gb", "gbc", "gba")
    assert BACKENDS["pyboy"].version() == "2.8.1"
    assert BACKENDS["pyboy"].frame_size("gb") == BACKENDS["mgba"].frame_size("gbc") == (160, 144)
    assert BACKENDS["mgba"].frame_size("gba") == (240, 160)
    with pytest.raises(Exception, match="pyboy runs gb, gbc games, not gba"):
        BACKENDS["pyboy"].frame_size("gba")
    assert platform_of((ASSETS / "cartridge" / "parcel-quest.gb").read_bytes()) == "gb"
    assert platform_of(b"\0" * 0x200) is None


def test_missing_mgba_is_one_clear_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mgba", None)  # `import mgba` now fails, as without the package
    assert BACKENDS["mgba"].version() is None
    with pytest.raises(BackendUnavailable) as err:
        BACKENDS["mgba"].require()
    message = str(err.value)
    assert message.startswith("mGBA backend needs") and "uv sync --extra mgba" in message
    assert "libmgba0.10" in message and "\n" not in message
    with pytest.raises(BackendUnavailable):
        BACKENDS["mgba"].open(b"", "x", "gb")
    assert main(["run", "--headless", "--emulator", "mgba", "--output", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == f"oakwatch: error: {message}"
    manifest = write_manifest(tmp_path, emulator={**DRY["emulator"], "name": "mgba"})
    with pytest.raises(PreflightError, match="uv sync --extra mgba"):
        prepare(manifest, tmp_path / "o")
    assert main(["make-state", str(ASSETS / "cartridge" / "parcel-quest.gb"), "--frames", "1", "--emulator", "mgba",
                 "--output", str(tmp_path / "s.state")]) == 2
    assert not (tmp_path / "o").exists() and not (tmp_path / "s.state").exists()


def test_a_backend_without_a_start_state_exits_2(tmp_path, capsys):
    game = {**DRY["game"], "start_states": {"pyboy": DRY["game"]["start_states"]["pyboy"]}}
    manifest = write_manifest(tmp_path, game=game)
    assert main(["run", str(manifest), "--headless", "--emulator", "mgba", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no start state for mgba in game.start_states (it lists one for: pyboy)" in err
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_a_state_from_another_version_is_refused(tmp_path):
    game = yaml.safe_load(DEFAULT_MANIFEST.read_text())["game"]
    game["start_states"]["pyboy"]["emulator_version"] = "2.7.0"
    with pytest.raises(PreflightError, match=r"start_states\.pyboy\.emulator_version: the pyboy start state was "
                                             r"made by pyboy 2\.7\.0, but 2\.8\.1 is installed"):
        prepare(write_manifest(tmp_path, game=game), tmp_path / "o")


def test_a_pinned_emulator_version_must_be_installed(tmp_path):
    with pytest.raises(PreflightError, match=r"emulator\.version: pins pyboy 2\.9\.0, but 2\.8\.1 is installed"):
        prepare(write_manifest(tmp_path, emulator={**DRY["emulator"], "version": "2.9.0"}), tmp_path / "o")


def test_the_frozen_manifest_records_the_installed_version(tmp_path):
    assert "version" not in DRY["emulator"]
    prepared = prepare(DEFAULT_MANIFEST, tmp_path / "o")
    assert prepared.manifest.emulator.version == "2.8.1"
    assert prepared.first_frame_sha256 == DRY["game"]["start_states"]["pyboy"]["first_frame_sha256"]
    assert prepared.start_state == (ASSETS / "cartridge" / "parcel-quest.state").read_bytes()


@pytest.mark.parametrize("name", ["pyboy", "mgba"])
def test_frame_size_mismatch_is_refused(tmp_path, name):
    if BACKENDS[name].version() is None:
        pytest.skip(BACKENDS[name].missing_message())
    emulator = {**DRY["emulator"], "name": name, "frame_width": 240, "frame_height": 160}
    with pytest.raises(PreflightError, match=rf"emulator\.frame_width: frame width and height must be 160x144 "
                                             rf"for gb on {name} \(the manifest says 240x160\)"):
        prepare(write_manifest(tmp_path, emulator=emulator), tmp_path / "o")


def test_old_start_state_keys_are_refused_with_a_pointer():
    game = dict(DRY["game"])
    pyboy = game.pop("start_states")["pyboy"]
    game.update(initial_state=pyboy["state"], initial_state_sha256=pyboy["sha256"])
    with pytest.raises(ManifestError, match="moved into start_states.<emulator>"):
        parse_manifest(yaml.safe_dump({**DRY, "game": game}), "old.yaml")
    with pytest.raises(ManifestError, match="no emulator backend 'bochs'"):
        parse_manifest(yaml.safe_dump({**DRY, "emulator": {**DRY["emulator"], "name": "bochs"}}), "m.yaml")


def test_resume_refuses_emulator(tmp_path, capsys):
    assert main(["run", "--resume", str(tmp_path), "--emulator", "pyboy"]) == 2
    assert "--emulator" in capsys.readouterr().err


def test_emulator_override_is_written_into_the_frozen_manifest(tmp_path, monkeypatch):
    from app.commands.model_run import overridden_manifest

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # checked in preflight, never used here
    if BACKENDS["mgba"].version() is None:
        pytest.skip(BACKENDS["mgba"].missing_message())
    with overridden_manifest(None, emulator="mgba", model={"provider": "openai", "model": "gpt-x"}) as path:
        prepared = prepare(path, tmp_path / "o")
    m = prepared.manifest
    assert (m.emulator.name, m.emulator.version) == ("mgba", BACKENDS["mgba"].version())
    assert [c.policy for c in m.conditions] == ["model"]
    assert prepared.start_state == (ASSETS / "cartridge" / "parcel-quest.mgba.state").read_bytes()
    assert m.start_state().state == "bundled:parcel-quest.mgba.state"


async def test_the_frame_pane_renders_a_gba_frame():
    from textual.app import App, ComposeResult

    from panes.trial.frame import FrameView

    class One(App):
        def compose(self) -> ComposeResult:
            yield FrameView()

    frame = np.zeros((160, 240, 3), np.uint8)
    frame[:, :120] = (255, 0, 0)  # left half red, right half blue: a 3:2 picture
    frame[:, 120:] = (0, 0, 255)
    async with One().run_test(size=(120, 40)) as pilot:
        view = pilot.app.query_one(FrameView)
        view.show(frame)
        await pilot.pause()
        assert view.frames_shown == 1
        strip = view.render_line(20)
        assert strip.cell_length == 120
        colours = [seg.style.color.triplet for seg in strip if seg.text.strip() and seg.style and seg.style.color]
        assert {tuple(c) for c in colours} == {(255, 0, 0), (0, 0, 255)}
        cells = sum(len(seg.text) for seg in strip if seg.text.strip())
        assert cells == 120  # the full width: 240 pixels scaled to 120 cells, 160 rows to 80 half-rows
