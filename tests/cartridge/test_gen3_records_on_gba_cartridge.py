"""engine.battle.gen3_record and the FireRed adapter's apply_team against Parcel Quest Advance (the GBA cartridge
in FireRed's RAM layout), on real mGBA: the codec reads the record the cartridge's own C code wrote, byte
for byte, and the cartridge's code reads the record our writer wrote (its battle names our species)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.battle.battle import BattleSettings, make_judge
from engine.battle.gen3_record import decode, encode
from engine.games.probe import Probe
from engine.games.tracks import charmap
from engine.loop.script import parse_script

REPO = Path(__file__).resolve().parents[2]
CART = REPO / "assets" / "gba-cartridge"
PARTY = 0x02024284  # gPlayerParty (pret/pokefirered symbols)
DISPLAYED_BATTLE = 0x0202298C  # gDisplayedStringBattle, where the cartridge prints battle text (RAM.md)

pytest.importorskip("mgba.core", reason="mGBA's binding is not installed")
if not (CART / "parcel-quest-advance.gba").is_file():
    pytest.skip("the GBA cartridge is not built", allow_module_level=True)

from tests.cartridge.test_gba_cartridge import TIMING, emulator, firered  # noqa: E402


def _to_the_challenge():
    """The walkthrough up to KIT's challenge text: the moment before the rival battle."""
    game = firered()
    probe = Probe(game)
    emu = emulator()
    actions = parse_script((CART / "walkthrough.txt").read_text(encoding="utf-8"))
    for i, action in enumerate(actions):
        state = emu.save_state()
        r = emu.step(action, TIMING, probe)
        if r.ram_last["in_battle"]:
            emu.restore(state)  # one press short of the battle: its challenge text
            return game, probe, emu, actions[i:]
    raise AssertionError("the walkthrough never started a battle")


def test_the_codec_reads_the_cartridges_own_record_and_the_cartridge_reads_ours():
    game, probe, emu, rest = _to_the_challenge()
    raw = bytes(emu.read_range(PARTY, 100))
    got = decode(raw)
    assert got.checksum_ok and got.mon.growth.species == 1 and got.mon.level == 5  # the starter it gave
    assert got.mon.flags & 0b10 and got.mon.language == 2  # hasSpecies, LANGUAGE_ENGLISH
    sb2 = int.from_bytes(bytes(emu.read_range(0x0300500C, 4)), "little")
    assert got.mon.ot_id == int.from_bytes(bytes(emu.read_range(sb2 + 0xA, 4)), "little")  # playerTrainerId
    assert encode(got.mon) == raw  # every byte where ours puts it: an independent writer agrees

    judge = make_judge(game.battle, BattleSettings(party_limit=1, level_cap=5))
    plan = judge.plan("apply_team", {"team": [{"species": "CHARMANDER", "nature": "ADAMANT",
                                              "evs": {"attack": 252}}]}, emu.read_range)
    for address, data in plan.writes:
        emu.write(address, bytes(data))
    judge.accepted(plan)
    ours = decode(bytes(emu.read_range(PARTY, 100)))
    assert ours.checksum_ok and ours.mon.growth.species == 4 and ours.mon.ot_id == got.mon.ot_id
    # the battle starts; its "Go! ...!" line names the species the cartridge decrypted from our record
    table, texts = charmap(game.tracks.structured.dialogue), []
    for action in ["A", "A", "A", "A"]:
        emu.step(action, TIMING, probe)
        raw_text = bytes(emu.read_range(DISPLAYED_BATTLE, 160)).split(b"\xff")[0]  # EOS
        texts.append("".join(table.get(b, "?") for b in raw_text))
    assert any("Go! EMBERPUP!" in (t or "") for t in texts), texts  # the cartridge's name for species 4
    snap = judge.snapshot(emu.read_range)
    assert snap["party"][0]["species"] == "CHARMANDER" and snap["party"][0]["level"] == 5


def test_an_agent_applies_encrypted_teams_over_mcp_and_the_folder_verifies_and_replays(tmp_path):
    """The whole path on mGBA: an SDK client calls apply_team (Gen-3 records), lead and FIGHT through
    `oakwatch mcp` on a manifest over the cartridge at KIT's challenge with the FireRed definition; the
    trace holds every encrypted byte written, the folder verifies and replays (the writes re-applied)."""
    import hashlib
    import json
    import subprocess
    import sys

    import yaml

    from engine.emulators.backends import BACKENDS
    from engine.emulators.emulator import frame_sha256
    from sessions.audit.replay import replay_trial
    from sessions.audit.verify import verify_experiment
    from tests.sessions.execute.test_mcp_battle import BATTLE_AGENT
    from tests.sessions.execute.test_mcp_server import OAKWATCH, result_of

    _, _, emu, _ = _to_the_challenge()
    state = emu.save_state()
    (tmp_path / "challenge.state").write_bytes(state)
    check = emulator()
    check.restore(state)
    rom = CART / "parcel-quest-advance.gba"
    data = yaml.safe_load((REPO / "assets" / "experiments" / "firered-mcp.yaml").read_text())
    data["game"].update(rom=str(rom), rom_sha256=hashlib.sha256(rom.read_bytes()).hexdigest(),
                        allow_unidentified_rom=True, text_speed="mid", battle_style="shift",  # the cartridge's
                        start_states={"mgba": {"state": "challenge.state", "sha256": hashlib.sha256(state).hexdigest(),
                                               "first_frame_sha256": frame_sha256(check.frame()),
                                               "emulator_version": BACKENDS["mgba"].version()}})
    data["emulator"].update(press_frames=TIMING.press_frames, settle_frames=TIMING.settle_frames)
    data["agent"]["ruleset"] = "battle"
    data["episodes"] = {"budget": 2, "actions": 20}  # each FIGHT's presses end its episode
    data["battle"] = {"party_limit": 2, "level_cap": 5, "pool": {"species": ["CHARMANDER", "SQUIRTLE"]}}
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    team = [{"species": "CHARMANDER", "nature": "ADAMANT", "evs": {"attack": 252}}, {"species": "SQUIRTLE"}]
    plan = [{"tool": "apply_team", "args": {"team": team}}, {"tool": "lead", "args": {"slot": 1}},
            {"tool": "observe"}, {"fight": "TACKLE"},
            {"tool": "apply_team", "args": {"team": team[:1]}}, {"fight": "EMBER"}]
    report, plan_file = tmp_path / "report.json", tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, str(BATTLE_AGENT), "--plan", str(plan_file), "--report", str(report),
                           "--stdio", "--", "env", f"XDG_CACHE_HOME={tmp_path / 'cache'}", *OAKWATCH, "mcp",
                           str(manifest), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    calls = json.loads(report.read_text())["calls"]
    assert not [c for c in calls if c["error"]], calls
    seen = calls[2]["result"]  # observe after the lead: SQUIRTLE's record swapped into slot 0
    assert seen["phase"] == "before-battle" and [p["species"] for p in seen["party"]] == ["SQUIRTLE", "CHARMANDER"]
    result, trial = result_of(tmp_path / "out")
    assert (result["outcome"], result["termination_reason"]) == ("game-failure", "episode-budget")
    assert [[m["species"] for m in e["team"]] for e in result["episodes"]] == [["CHARMANDER", "SQUIRTLE"],
                                                                               ["CHARMANDER"]]
    assert result["episodes"][0]["team"][0]["nature"] == "ADAMANT"
    trace = [json.loads(line) for line in (trial / "trace.jsonl").read_text().splitlines()]
    writes = next(t["battle"]["writes"] for t in trace if t.get("battle", {}).get("tool") == "apply_team")
    assert writes[0] == {"address": 0x02024029, "bytes": [2]} and len(writes) == 7
    first = decode(bytes(writes[1]["bytes"]))
    assert first.checksum_ok and first.mon.growth.species == 4 and first.mon.nature == 3  # ADAMANT
    assert verify_experiment(tmp_path / "out") == []
    assert replay_trial(trial)["actions"] == result["telemetry"]["accepted_actions"]
    # the same trace with its encrypted writes dropped no longer replays: the battle screen draws another
    # species from the start state's record
    import shutil

    from sessions.audit.replay import Divergence
    stripped = tmp_path / "stripped"
    shutil.copytree(tmp_path / "out", stripped)
    lines = []
    for t in trace:
        if t.get("battle"):
            t["battle"]["writes"] = []
        lines.append(json.dumps(t))
    bare = stripped / trial.relative_to(tmp_path / "out")
    (bare / "trace.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(Divergence, match="differs from the recorded"):
        replay_trial(bare)
