"""Agents on the open GBA cartridge: your own harness over MCP (the human ruleset, the SDK's own client)
plays the bundled MCP experiment to the Pokédex through the FireRed definition; the folder verifies
and replays. (A random agent: test_firered_layout's state-new smoke test.)"""

from __future__ import annotations

from sessions.audit.replay import replay_trial
from sessions.audit.verify import verify_experiment
from tests.gba.conftest import MCP, WALKTHROUGH, needs_mgba
from tests.sessions.execute.test_mcp_server import play_stdio, result_of

pytestmark = needs_mgba


def test_an_mcp_agent_plays_the_gba_cartridge_to_the_dex_under_the_human_ruleset(tmp_path):
    seen, _ = play_stdio(tmp_path, MCP, "--script", str(WALKTHROUGH))
    assert seen["tools"] == ["get_screen", "press_keys"]
    assert all(kinds == ["image"] for c in seen["calls"] if c["tool"] == "get_screen" for kinds in [c["kinds"]])
    result, trial = result_of(tmp_path / "out")
    assert (result["outcome"], result["termination_reason"]) == ("success", "final-milestone")
    assert result["milestones_reached"][-1] == "M8"
    prov = result["provenance"]
    assert prov["tool_server"]["ruleset"] == "human"
    assert prov["rom_identity"]["conformance_build"] == "Parcel Quest Advance (FireRed layout)"
    assert verify_experiment(tmp_path / "out") == []
    assert replay_trial(trial)["milestones"][-1] == "M8"


def test_the_gba_design_experiments_pass_preflight_once_keys_are_set(monkeypatch):
    from sessions.preflight.assets import ASSETS
    from sessions.preflight.experiment import prepare

    monkeypatch.setenv("ANTHROPIC_API_KEY", "x" * 20)
    monkeypatch.setenv("OPENAI_API_KEY", "y" * 20)
    for name in ("parcel-quest-advance-design-a.yaml", "parcel-quest-advance-design-b.yaml"):
        prepared = prepare(ASSETS / "experiments" / name, None)
        assert {c.policy for c in prepared.manifest.conditions} == {"model"}
        assert prepared.game.id == "pokemon-firered-leafgreen-en" and prepared.manifest.emulator.name == "mgba"
        assert prepared.rom_identity.conformance_build == "Parcel Quest Advance (FireRed layout)"
        assert prepared.controls == {"starter": "unchecked", "text_speed": "checked", "battle_style": "checked"}
