"""`oakwatch state new`: a start state from the user's ROM (here: the open cartridge), an input
prefix from a file or played in the console, and a manifest that runs as written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from app.cli import main
from app.console.state_console import StateConsole
from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing
from sessions.preflight.assets import ASSETS
from sessions.preflight.statemaker import StateMakerError, play_prefix, setup

ROM = ASSETS / "cartridge" / "parcel-quest.gb"
PREFIX = "RIGHT*6 UP*3   # to the stairs\nDOWN*9\n"
needs_mgba = pytest.mark.skipif(BACKENDS["mgba"].version() is None, reason=BACKENDS["mgba"].missing_message())


def _state_new(tmp_path: Path, out: str, *extra: str) -> int:
    (tmp_path / "prefix.txt").write_text(PREFIX, encoding="utf-8")
    return main(["state", "new", "--rom", str(ROM), "--game", "parcel-quest", "--output", str(tmp_path / out),
                 "--inputs", str(tmp_path / "prefix.txt"), "--boot-frames", "120", *extra])


def test_state_from_a_prefix_file_is_reproducible_and_its_manifest_runs(tmp_path, capsys):
    assert _state_new(tmp_path, "one") == 0
    assert _state_new(tmp_path, "two") == 0
    one, two = tmp_path / "one", tmp_path / "two"
    record = json.loads((one / "start.json").read_text())
    state = (one / record["state"]).read_bytes()
    assert hashlib.sha256(state).hexdigest() == record["state_sha256"]
    assert (two / record["state"]).read_bytes() == state  # same ROM + prefix -> same bytes
    assert record["prefix_actions"] == 18 and record["emulator"] == "pyboy"
    assert (one / "inputs.txt").read_text().split("\n")[1:19] == ["RIGHT"] * 6 + ["UP"] * 3 + ["DOWN"] * 9
    manifest = yaml.safe_load((one / "manifest.yaml").read_text())
    assert manifest["game"]["start_states"]["pyboy"]["sha256"] == record["state_sha256"]
    assert manifest["game"]["rom_sha256"] == hashlib.sha256(ROM.read_bytes()).hexdigest()
    # The prefix walked out of the house: the manifest's run starts there, so M1 is already true.
    capsys.readouterr()
    status = main(["run", str(one / "manifest.yaml"), "--headless", "--output", str(tmp_path / "run")])
    assert status in (0, 1), capsys.readouterr().err
    result = json.loads(next((tmp_path / "run" / "trials").glob("*/result.json")).read_text())
    assert "M1" in result["pre_satisfied"] and "M1" not in result["milestones_reached"]
    assert main(["verify", str(tmp_path / "run")]) == 0


def test_the_state_is_the_prefix_played_from_power_on(tmp_path):
    s = setup(ROM, "parcel-quest", tmp_path / "x")
    timing = Timing(4, 12)
    short, first_short, frame_short = play_prefix(s, 120, ["RIGHT"], timing)
    longer, first_longer, frame_longer = play_prefix(s, 120, ["RIGHT", "RIGHT"], timing)
    assert short != longer and frame_longer == frame_short + timing.frames_per_action
    assert play_prefix(s, 120, ["RIGHT"], timing) == (short, first_short, frame_short)


def test_refuses_to_write_into_the_bundled_assets(tmp_path, capsys):
    status = main(["state", "new", "--rom", str(ROM), "--game", "parcel-quest",
                   "--output", str(ASSETS / "cartridge" / "mine"), "--inputs", "/dev/null"])
    assert status == 2
    assert "inside the project's bundled assets" in capsys.readouterr().err
    assert not (ASSETS / "cartridge" / "mine").exists()


def test_unknown_game_names_the_bundled_ones(tmp_path, capsys):
    with pytest.raises(StateMakerError, match="parcel-quest"):
        setup(ROM, "no-such-game", tmp_path / "x")


def test_existing_output_is_refused_and_left_alone(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    assert _state_new(tmp_path, "taken") == 2
    assert "already exists" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]


def test_bad_prefix_names_the_line_and_writes_nothing(tmp_path, capsys):
    (tmp_path / "prefix.txt").write_text("UP\nJUMP\n")
    status = main(["state", "new", "--rom", str(ROM), "--game", "parcel-quest", "--output", str(tmp_path / "x"),
                   "--inputs", str(tmp_path / "prefix.txt")])
    assert status == 2
    assert "prefix.txt:2: unknown action 'JUMP'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def _listed_definition(tmp_path: Path, sha1: str) -> Path:
    data = yaml.safe_load((ASSETS / "games" / "parcel-quest.yaml").read_text())
    data["roms"] = [{"name": "Parcel Quest (a dump we do not have)", "title": "PARCELQUEST", "code": None,
                     "revision": 0, "header_checksum": 0, "sha1": sha1, "source": "the test"}]
    path = tmp_path / "listed.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_unknown_dump_is_refused_and_force_records_it(tmp_path, capsys):
    game = _listed_definition(tmp_path, "0" * 40)
    (tmp_path / "prefix.txt").write_text("A\n")
    args = ["state", "new", "--rom", str(ROM), "--game", str(game), "--inputs", str(tmp_path / "prefix.txt")]
    assert main([*args, "--output", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert hashlib.sha1(ROM.read_bytes()).hexdigest() in err and "--force" in err
    assert not (tmp_path / "refused").exists()
    assert main([*args, "--output", str(tmp_path / "forced"), "--force"]) == 0
    record = json.loads((tmp_path / "forced" / "start.json").read_text())
    assert record["rom_identity"]["forced"] is True
    manifest = yaml.safe_load((tmp_path / "forced" / "manifest.yaml").read_text())
    assert manifest["game"]["allow_unidentified_rom"] is True


def test_a_known_dump_is_named(tmp_path, capsys):
    game = _listed_definition(tmp_path, hashlib.sha1(ROM.read_bytes()).hexdigest())
    (tmp_path / "prefix.txt").write_text("A\n")
    assert main(["state", "new", "--rom", str(ROM), "--game", str(game), "--inputs", str(tmp_path / "prefix.txt"),
                 "--output", str(tmp_path / "ok")]) == 0
    assert "Parcel Quest (a dump we do not have)" in capsys.readouterr().out


def test_experiment_template_is_filled_in(tmp_path):
    assert _state_new(tmp_path, "a", "--experiment", "bundled:parcel-quest-design-a.yaml") == 0
    manifest = yaml.safe_load((tmp_path / "a" / "manifest.yaml").read_text())
    assert [c["id"] for c in manifest["conditions"]] == ["claude", "gpt"]
    assert list(manifest["game"]["start_states"]) == ["pyboy"]
    assert manifest["emulator"]["name"] == "pyboy"


def test_a_template_for_another_game_is_refused(tmp_path, capsys):
    other = yaml.safe_load((ASSETS / "experiments" / "parcel-quest-design-a.yaml").read_text())
    other["game"]["definition"] = "bundled:pokemon-red-blue-en.yaml"
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    assert _state_new(tmp_path, "x", "--experiment", str(tmp_path / "other.yaml")) == 2
    assert "not bundled:parcel-quest.yaml" in capsys.readouterr().err


async def test_console_records_the_presses_and_saves(tmp_path):
    s = setup(ROM, "parcel-quest", tmp_path / "x")
    app = StateConsole(s, 120, Timing(4, 12))
    async with app.run_test() as pilot:
        for key in ("right", "right", "up", "z", "n"):
            await pilot.press(key)
        await pilot.press("ctrl+s")
    assert app.return_value == ["RIGHT", "RIGHT", "UP", "A", "NOOP"]


async def test_console_quit_saves_nothing(tmp_path):
    s = setup(ROM, "parcel-quest", tmp_path / "x")
    app = StateConsole(s, 120, Timing(4, 12))
    async with app.run_test() as pilot:
        await pilot.press("right")
        await pilot.press("ctrl+q")
    assert app.return_value is None


@needs_mgba
def test_state_new_on_mgba(tmp_path):
    assert _state_new(tmp_path, "m", "--emulator", "mgba") == 0
    record = json.loads((tmp_path / "m" / "start.json").read_text())
    assert record["emulator"] == "mgba" and record["state"].endswith("-mgba.state")
    manifest = yaml.safe_load((tmp_path / "m" / "manifest.yaml").read_text())
    assert list(manifest["game"]["start_states"]) == ["mgba"] and manifest["emulator"]["name"] == "mgba"


@pytest.mark.parametrize("template", ["firered-design-a", "firered-design-b", "red-design-a", "red-design-b"])
def test_bundled_real_game_experiments_are_templates_that_state_new_fills_in(template, tmp_path):
    from sessions.preflight.gamedefs import load_game_definition
    from sessions.preflight.manifest import ManifestError, load_manifest, parse_manifest
    from sessions.preflight.romid import identify
    from sessions.preflight.statemaker import Setup, fill_experiment, load_template, smoke_experiment

    path = ASSETS / "experiments" / f"{template}.yaml"
    with pytest.raises(ManifestError, match="a template: game.rom, game.rom_sha256"):
        load_manifest(path)
    ref = yaml.safe_load(path.read_text())["game"]["definition"]
    game = load_game_definition(ASSETS / "games" / ref.removeprefix("bundled:"))
    emulator = {"gb": "pyboy", "gba": "mgba"}[game.platform]
    rom = b"not this game"  # no real ROM here: identification is forced, and says so
    s = Setup(tmp_path / "own.rom", rom, game, ref, identify(rom, game, force=True), emulator, "9.9", tmp_path / "o")
    data, timing = load_template(f"bundled:{template}.yaml", s)
    record = {"state": "mine.state", "state_sha256": "a" * 64, "first_frame_sha256": "b" * 64}
    manifest = parse_manifest(fill_experiment(s, record, data), "filled")
    assert manifest.game.start_states[emulator].sha256 == "a" * 64
    assert manifest.game.allow_unidentified_rom is True
    assert (manifest.emulator.frame_width, manifest.emulator.frame_height) == BACKENDS[emulator].frame_size(
        game.platform)
    assert len(manifest.conditions) == 2 and {c.policy for c in manifest.conditions} == {"model"}
    assert (timing.press_frames, timing.settle_frames) == ((2, 8) if game.platform == "gba" else (4, 12))
    assert smoke_experiment(s)["game"]["definition"] == ref


def test_runs_record_the_rom_identity_and_refuse_an_unlisted_dump_unless_forced(tmp_path, capsys):
    from sessions.preflight.assets import DEFAULT_MANIFEST

    game = _listed_definition(tmp_path, "0" * 40)
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    data["game"]["definition"] = str(game)
    data["budgets"]["accepted_actions"] = 20
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump(data))
    assert main(["run", str(manifest), "--headless", "--output", str(tmp_path / "refused")]) == 2
    assert "--force" in capsys.readouterr().err and not (tmp_path / "refused").exists()

    assert main(["run", str(manifest), "--headless", "--force", "--output", str(tmp_path / "forced")]) == 1
    result = json.loads(next((tmp_path / "forced" / "trials").glob("*/result.json")).read_text())
    ident = result["provenance"]["rom_identity"]
    assert ident["forced"] is True and ident["matched"] is None
    assert ident["sha1"] == hashlib.sha1(ROM.read_bytes()).hexdigest()
    assert result["provenance"]["game_definition_verified"] is True  # copied from parcel-quest.yaml
    frozen = yaml.safe_load((tmp_path / "forced" / "manifest.yaml").read_text())
    assert frozen["game"]["allow_unidentified_rom"] is True
    assert main(["verify", str(tmp_path / "forced")]) == 0
