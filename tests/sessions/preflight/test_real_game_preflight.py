"""Every bundled game definition survives its own serialisation, and a manifest that `state new`
makes for each real-game definition gets through the whole preflight of `run` and `mcp`.

No commercial ROM is here: a stand-in carries the game's header (title, code, checksums) around
code of our own (the open GB cartridge, or a GBA idle loop), so identification is forced (`--force`)
and everything after it — the ROM probe in its child process, the start state, the hidden-state
checks — runs as it would on the user's dump.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from app.cli import main
from engine.emulators.backends import BACKENDS
from engine.games.gamedef import GameDefinition, RamField
from sessions.preflight.assets import ASSETS
from sessions.preflight.romcheck import _short

ROOT = Path(__file__).resolve().parents[3]
AGENT = ROOT / "tests" / "fakes" / "mcp_agent.py"
DEFINITIONS = sorted((ASSETS / "games").glob("*.yaml"))
needs_mgba = pytest.mark.skipif(BACKENDS["mgba"].version() is None, reason=BACKENDS["mgba"].missing_message())


@pytest.mark.parametrize("path", DEFINITIONS, ids=[p.stem for p in DEFINITIONS])
def test_every_bundled_definition_round_trips_through_its_own_dump(path):
    game = GameDefinition.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    dumped = json.loads(json.dumps(game.model_dump(mode="json")))  # what the probe's child receives
    assert GameDefinition.model_validate(dumped) == game


def test_a_derived_field_with_a_real_address_is_still_refused():
    assert RamField.model_validate(RamField(flag="flags", index=3).model_dump()).flag == "flags"
    with pytest.raises(ValidationError, match="cannot also have address"):
        RamField.model_validate({"flag": "flags", "index": 3, "address": 0xD000})
    with pytest.raises(ValidationError, match="cannot also have kind"):
        RamField.model_validate({"var": "vars", "index": 3, "kind": "u16le"})


def test_a_validation_error_is_told_in_one_line_without_the_link():
    try:
        RamField.model_validate({"flag": "flags", "index": 3, "address": 0xD000})
    except ValidationError as exc:
        line = _short(exc)
    assert "\n" not in line and "errors.pydantic.dev" not in line and "cannot also have address" in line


def _gb_standin(title: str) -> bytes:
    """The open cartridge's code under another game's DMG header (title, header and global checksums)."""
    rom = bytearray((ASSETS / "cartridge" / "parcel-quest.gb").read_bytes())
    rom[0x134:0x144] = title.encode("ascii").ljust(16, b"\0")
    rom[0x14C] = 0
    rom[0x14D] = (-sum(rom[0x134:0x14D]) - (0x14D - 0x134)) & 0xFF  # the boot ROM's header check
    rom[0x14E:0x150] = struct.pack(">H", (sum(rom) - rom[0x14E] - rom[0x14F]) & 0xFFFF)
    return bytes(rom)


def _gba_standin(title: str, code: str) -> bytes:
    """1 KiB: a branch over the header to an idle loop, under the game's GBA header (no logo copy)."""
    rom = bytearray(1024)
    rom[0:4] = struct.pack("<I", 0xEA00002E)  # ARM `b 0xC0`
    rom[0xC0:0xC4] = struct.pack("<I", 0xEAFFFFFE)  # ARM `b .`
    rom[0xA0:0xB2] = title.encode("ascii").ljust(12, b"\0") + code.encode("ascii") + b"01"
    rom[0xB2] = 0x96
    rom[0xBD] = -(0x19 + sum(rom[0xA0:0xBD])) & 0xFF
    return bytes(rom)


def _game(definition: str) -> GameDefinition:
    return GameDefinition.model_validate(yaml.safe_load((ASSETS / "games" / f"{definition}.yaml").read_text()))


def _standin(tmp_path: Path, definition: str) -> Path:
    known = _game(definition).roms[0]
    if known.code is None:
        rom, name = _gb_standin(known.title), "standin.gb"
    else:
        rom, name = _gba_standin(known.title, known.code[:4]), "standin.gba"
    path = tmp_path / name
    path.write_bytes(rom)
    return path


REAL = [pytest.param("pokemon-red-blue-en", id="red"),
        pytest.param("pokemon-firered-leafgreen-en", id="firered", marks=needs_mgba),
        pytest.param("pokemon-emerald-en", id="emerald", marks=needs_mgba)]
MCP_TEMPLATES = {"pokemon-red-blue-en": "red-mcp", "pokemon-firered-leafgreen-en": "firered-mcp"}
CHOICES = {"text_speed": "fast", "battle_style": "shift"}


def _state_new(tmp_path: Path, definition: str, capsys, monkeypatch, *extra: str) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the probe runs, not a remembered answer
    (tmp_path / "prefix.txt").write_text("A\n")
    out = tmp_path / "own"
    status = main(["state", "new", "--rom", str(_standin(tmp_path, definition)), "--game", definition,
                   "--output", str(out), "--inputs", str(tmp_path / "prefix.txt"), "--force", *extra])
    assert status == 0, capsys.readouterr().err
    return out / "manifest.yaml"


def _hold_the_choices(manifest: Path, definition: str) -> dict:
    """Write the manifest's text speed and battle style where the definition reads them into the
    stand-in's start state (its own code never sets them), and pin the new state's hashes: the
    preflight's start-state check then has real values to accept."""
    from engine.emulators.emulator import frame_sha256

    game, data = _game(definition), yaml.safe_load(manifest.read_text())
    data["game"].update(CHOICES)
    (emulator, pinned), = data["game"]["start_states"].items()
    state_path = manifest.parent / pinned["state"]
    chosen = BACKENDS[emulator]
    machine = chosen.open(Path(data["game"]["rom"]).read_bytes(), "stand-in", game.platform)
    machine.restore(state_path.read_bytes())
    for name, pointer in game.pointers.items():  # each block where the definition's ready check wants it
        low = next(c.ge for c in game.ready if c.field == name and c.ge is not None)
        machine.write(pointer.address, low.to_bytes(4, "little"))
    controls = [game.controls[k] for k in CHOICES]
    (field_name,) = {c.field for c in controls}
    field = game.fields[field_name]
    address = field.address
    if field.base:  # an offset into a block: follow the pointer just written
        address += int.from_bytes(bytes(machine.read_range(game.pointers[field.base].address, 4)), "little")
    value = 0
    for control, choice in zip(controls, CHOICES.values(), strict=True):
        value |= control.values[choice] << ((control.mask & -control.mask).bit_length() - 1)
    machine.write(address, value.to_bytes(field.width, "little"))
    state = machine.save_state()
    machine.close()
    check = chosen.open(Path(data["game"]["rom"]).read_bytes(), "stand-in", game.platform)
    check.restore(state)
    pinned["first_frame_sha256"] = frame_sha256(check.frame())
    check.close()
    state_path.write_bytes(state)
    pinned["sha256"] = hashlib.sha256(state).hexdigest()
    return data


@pytest.mark.parametrize("definition", REAL)
def test_run_gets_through_the_preflight_on_a_state_new_manifest(definition, tmp_path, capsys, monkeypatch):
    manifest = _state_new(tmp_path, definition, capsys, monkeypatch)
    data = _hold_the_choices(manifest, definition)
    data["budgets"]["accepted_actions"] = 5
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    capsys.readouterr()
    status = main(["run", str(manifest), "--headless", "--output", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert status == 1, err  # a valid game-failure: the budget ended the trial, no preflight refusal
    result = json.loads(next((tmp_path / "run" / "trials").glob("*/result.json")).read_text())
    assert result["outcome"] == "game-failure" and result["provenance"]["rom_identity"]["forced"] is True
    assert main(["verify", str(tmp_path / "run")]) == 0


@pytest.mark.parametrize("definition", REAL)
def test_mcp_gets_through_the_preflight_on_a_state_new_manifest(definition, tmp_path, capsys, monkeypatch):
    template = MCP_TEMPLATES.get(definition)
    extra = ("--experiment", f"bundled:{template}.yaml") if template else ()
    manifest = _state_new(tmp_path, definition, capsys, monkeypatch, *extra)
    data = _hold_the_choices(manifest, definition)
    if not template:  # Emerald has no MCP template: the same condition by hand
        data["conditions"] = [{"id": "agent", "policy": "mcp"}]
        data.setdefault("agent", {})["ruleset"] = "human"
    data["budgets"]["accepted_actions"] = 4
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    report = tmp_path / "report.json"
    # The SDK's stdio client gives the server a minimal environment: name the isolated cache itself.
    server = ["env", f"XDG_CACHE_HOME={tmp_path / 'cache'}", sys.executable, "-m", "app.cli", "mcp", str(manifest),
              "--output", str(tmp_path / "out")]
    done = subprocess.run([sys.executable, str(AGENT), "--report", str(report), "--presses", "2", "--stdio", "--",
                           *server], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(report.read_text())
    assert "press_keys" in seen["tools"] and not seen["errors"], seen
    result = json.loads(next((tmp_path / "out" / "trials").glob("*/result.json")).read_text())
    assert result["outcome"] == "game-failure"  # the budget ended it: the preflight let it start
