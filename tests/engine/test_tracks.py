"""Information tracks (seed 003): the structured track shows only the definition's allowlist and the
dialogue text decoded from the real cartridge's tilemap; the visual track's prompt is main's."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import engine.cartridge_tables as ct
from engine.contract import response_json_schema
from engine.policies.model import ModelPolicy, canonical
from engine.policy import Observation, TransportRetry
from engine.providers import make_adapter
from engine.providers.base import Sampling
from engine.tracks import decode_dialogue, structured_view
from sessions.assets import ASSETS
from sessions.gamedefs import GameDefinitionError, load_game_definition, parse_game_definition
from tests.cartridge.conftest import BATTLE, FLAGS0, ROM, TEXT, act, boot, walkthrough

GAME_PATH = ASSETS / "games" / "parcel-quest.yaml"
GAME_TEXT = GAME_PATH.read_text(encoding="utf-8")
ALLOWED = "fields: [map_id, x, y, facing, party, player_hp, enemy_hp]"


@pytest.fixture(scope="module")
def game():
    return load_game_definition(GAME_PATH)


def test_the_dialogue_read_from_the_cartridges_tilemap_is_the_games_text(game):
    """Decoded from VRAM through the font's character map, on PyBoy, along the walkthrough: each page
    equals the ROM's own text table; no box on screen reads as null."""
    texts = ct.decode(ct.rom_block(ROM.read_bytes()))
    dialogue = game.tracks.structured.dialogue
    pb = boot()
    try:
        def read(address, length):
            return [pb.memory[a] for a in range(address, address + length)]

        assert decode_dialogue(dialogue, read) is None  # the bedroom: no box
        seen = []
        for action in walkthrough():
            act(pb, action)
            if pb.memory[TEXT] == 1 and (not seen or seen[-1][0] != pb.memory[FLAGS0] & 0x10):
                seen.append((pb.memory[FLAGS0] & 0x10, decode_dialogue(dialogue, read)))
            if len(seen) == 2:
                break
            if pb.memory[TEXT] == 0 and pb.memory[BATTLE] == 0:  # (a battle's FIGHT/RUN menu is a box too)
                assert decode_dialogue(dialogue, read) is None
    finally:
        pb.stop(save=False)
    # The first box of the game is the professor stopping you; the first after reaching MAPLE CITY
    # (flags0 bit 4) is the shop clerk's.
    assert seen == [(0, texts.text("stop1")), (0x10, texts.text("clerk_give"))]


def test_the_structured_view_holds_only_the_allowlist(game):
    sample = {name: (list(range(f.length)) if f.is_bytes else 7) for name, f in game.fields.items()}
    view = structured_view(game, "structured")(sample, lambda a, n: [0] * n)
    assert set(view) == set(game.tracks.structured.fields) | {"dialogue"}
    assert not set(view) & game.ladder_fields and view["party"] == [0, 1, 2]
    assert view["dialogue"] is None  # no box corner on the screen
    assert structured_view(game, "visual") is None


@pytest.mark.parametrize(("listed", "extra", "says"), [
    ("flags0", "", "'flags0' is read by a milestone rung"),
    ("bag", "", "'bag' is read by a milestone rung"),
    # another name for the story flags' byte is as hidden as flags0
    ("story", "  story: {address: 0xD005, source: flags0 again}\n",
     "'story' reads the memory of ladder field 'flags0'"),
    ("nowhere", "", "nowhere is not a field"),
])
def test_a_track_naming_a_ladder_field_is_refused_in_one_line(listed, extra, says):
    text = GAME_TEXT.replace(ALLOWED, ALLOWED[:-1] + f", {listed}]")
    text = text.replace("ready:\n", extra + "ready:\n")
    assert text != GAME_TEXT
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(text, "game.yaml")
    message = str(info.value)
    assert says in message and "\n" not in message and message.startswith("game.yaml")


def _prompt_sha(obs: Observation) -> str:
    adapter = make_adapter("openai-compatible", "chat", api_key=None, base_url="http://127.0.0.1:9/v1")
    policy = ModelPolicy(adapter, model="m", system="Play.", schema=response_json_schema(4),
                         sampling=Sampling(), image_scale=1, transport=TransportRetry(), price=None)
    return hashlib.sha256(canonical(adapter.body(policy.request(obs)))).hexdigest()


def _observation(**changes) -> Observation:
    fields = dict(decision_id=3, frame=np.zeros((144, 160, 3), np.uint8), frame_sha256="b" * 64,
                  recent_actions=("UP",), recent_observations=(), current_objective=None, memory=(),
                  max_actions=4, allowed_actions=("UP", "A"))
    return Observation(**(fields | changes))


# prompt_sha256 of _observation() on main before tracks existed (the openai-compatible chat body)
MAIN_VISUAL_SHA = "2938b9eb3fe7082492d9cb308424529f47656ba5e99369d1380df486198ab08e"


def test_the_visual_prompt_is_mains_and_the_structured_one_is_hashed_with_its_block():
    visual = _observation(structured=None)
    assert _prompt_sha(visual) == MAIN_VISUAL_SHA
    shown = {"map_id": 2, "x": 5, "y": 9, "dialogue": "PROF. HAZEL:\nHEY!"}
    structured = _observation(structured=shown)
    assert _prompt_sha(structured) != MAIN_VISUAL_SHA  # the block's bytes are covered by the hash
    assert _prompt_sha(_observation(structured=shown | {"x": 6})) != _prompt_sha(structured)
