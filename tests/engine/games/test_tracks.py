"""Information tracks (seed 003): the structured track shows only the definition's allowlist and the
dialogue text decoded from the real cartridge's tilemap; the visual track's prompt is main's."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import engine.games.cartridge_tables as ct
from engine.games.tracks import decode_dialogue, structured_view
from engine.loop.contract import response_json_schema
from engine.policies.model import ModelPolicy, canonical
from engine.policies.policy import Observation, TransportRetry
from engine.providers import make_adapter
from engine.providers.base import Sampling
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import GameDefinitionError, load_game_definition, parse_game_definition
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


# -- Red and FireRed (issue 18.3): synthetic memory, no commercial ROM ---------------------------------

def _real(stem):
    return load_game_definition(ASSETS / "games" / f"pokemon-{stem}-en.yaml")


class _Memory:
    def __init__(self):
        self.bytes: dict[int, int] = {}

    def put(self, address, data):
        for i, b in enumerate(data):
            self.bytes[address + i] = b

    def read(self, address, length):
        return [self.bytes.get(address + i, 0) for i in range(length)]


def _encode(table: dict[int, str], text: str) -> list[int]:
    """Text through a charmap, longest glyph first (Red's 'd is one tile)."""
    back = sorted(((ch, b) for b, ch in table.items()), key=lambda kv: -len(kv[0]))
    out, i = [], 0
    while i < len(text):
        ch, b = next((ch, b) for ch, b in back if text.startswith(ch, i))
        out.append(b)
        i += len(ch)
    return out


def test_red_reads_the_message_box_from_wtilemap_through_its_charmap():
    from engine.games.tracks import charmap

    game = _real("red-blue")
    d = game.tracks.structured.dialogue
    table = charmap(d)
    mem = _Memory()
    assert decode_dialogue(d, mem.read) is None  # no box corner at (0, 12)
    mem.put(0xC3A0 + 12 * 20, [0x79] + [0x7A] * 18 + [0x7B])  # ┌────┐ (home/text.asm TextBoxBorder)
    for row in (13, 14, 15, 16):
        mem.put(0xC3A0 + row * 20 + 1, [0x7F] * 18)  # blank tiles inside the box
    mem.put(0xC3A0 + 14 * 20 + 1, _encode(table, "OAK: Hey! Wait!"))
    mem.put(0xC3A0 + 16 * 20 + 1, _encode(table, "It's unsafe 'd 1×"))
    assert decode_dialogue(d, mem.read) == "OAK: Hey! Wait!\nIt's unsafe 'd 1×"


def test_firered_reads_the_field_message_from_gstringvar4_dropping_control_codes():
    from engine.games.tracks import charmap, decode_string

    game = _real("firered-leafgreen")
    d = game.tracks.structured.dialogue
    assert d.kind == "string" and (d.address, d.length) == (0x02021D18, 1000)
    table = charmap(d)
    mem = _Memory()
    text = (_encode(table, "OAK: Hey! Wait!") + [0xFC, 0x01, 0x02]  # a colour change (code 1: 2 bytes)
            + [0xFE] + _encode(table, "Don't go") + [0xFC, 0x04, 9, 9, 9]  # COLOR_HIGHLIGHT_SHADOW: 4 bytes
            + [0xF8, 0x00] + _encode(table, "out!") + [0xFB] + _encode(table, "Lv5 ♂") + [0xFF]
            + _encode(table, "STALE TEXT"))  # after the terminator: never read out
    mem.put(0x02021D18, text)
    assert decode_string(d, mem.read) is None  # sMessageBoxType 0: no box
    mem.put(0x0203709C, [2])  # FIELD_MESSAGE_BOX_NORMAL
    assert decode_string(d, mem.read) == "OAK: Hey! Wait!\nDon't goout!\nLv5 ♂"
    mem.put(0x02021D18, [0xFF])
    assert decode_string(d, mem.read) == ""


@pytest.mark.parametrize("stem", ["red-blue", "firered-leafgreen"])
def test_a_real_games_track_shows_only_its_allowlist_and_no_ladder_value_reaches_the_prompt(stem):
    """Every probe field set to a distinct sentinel: the structured view holds exactly the allowlist
    (and `dialogue`), and the request sent to a provider carries none of the ladder fields' names or
    values; the allowlist is what every result's provenance names."""
    import json

    from engine.games.probe import Probe

    game = _real(stem)
    track = game.tracks.structured
    sample = Probe(game)(lambda a, n: [0] * n)
    hidden = {}
    for i, name in enumerate(sorted(sample)):
        value = 100_000 + i  # no allowlisted field can hold another's sentinel by chance
        sample[name] = value
        if name in game.ladder_fields:
            hidden[name] = value
    assert hidden and not set(track.fields) & set(hidden)
    view = structured_view(game, "structured")(sample, lambda a, n: [0] * n)
    assert list(view) == track.allowlist and view["dialogue"] is None
    adapter = make_adapter("openai-compatible", "chat", api_key=None, base_url="http://127.0.0.1:9/v1")
    policy = ModelPolicy(adapter, model="m", system="Play.", schema=response_json_schema(4),
                         sampling=Sampling(), image_scale=1, transport=TransportRetry(), price=None)
    def body(structured):
        return json.dumps(adapter.body(policy.request(_observation(structured=structured))), ensure_ascii=False)

    shown, visual = body(view), body(None)
    block = json.dumps(view, sort_keys=True, ensure_ascii=False)
    assert json.dumps(block)[1:-1] in shown  # the allowlist does reach it, as one line ...
    for name, value in hidden.items():  # ... and adds nothing a rung reads (the visual body is the baseline)
        for token in (str(value), f'"{name}"', f'\\"{name}\\"'):
            assert shown.count(token) == visual.count(token), (name, token)
        assert str(value) not in block and f'"{name}"' not in block, name


@pytest.mark.parametrize(("stem", "listed", "says"), [
    ("red-blue", "party_count", "'party_count' is read by a milestone rung"),
    ("red-blue", "battle", "'battle' is read by a milestone rung"),
    ("red-blue", "got_parcel", "'got_parcel' is read by a milestone rung"),
    ("red-blue", "oak_got_parcel", "'oak_got_parcel' reads the memory of ladder field"),  # same flag array
    ("firered-leafgreen", "party_count", "'party_count' is read by a milestone rung"),
    ("firered-leafgreen", "lab_scene", "'lab_scene' reads the memory of ladder field"),  # a var beside M2's
    ("firered-leafgreen", "starter_mon", "reads the memory of ladder field"),
])
def test_a_real_games_track_naming_hidden_state_is_refused_in_one_line(stem, listed, says):
    path = ASSETS / "games" / f"pokemon-{stem}-en.yaml"
    text = path.read_text(encoding="utf-8")
    allowed = "    fields: [" + ", ".join(load_game_definition(path).tracks.structured.fields) + "]"
    assert allowed in text
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(text.replace(allowed, allowed[:-1] + f", {listed}]"), "game.yaml")
    message = str(info.value)
    assert says in message and "\n" not in message and message.startswith("game.yaml")


def test_a_string_dialogue_over_a_ladder_fields_memory_is_refused():
    path = ASSETS / "games" / "pokemon-firered-leafgreen-en.yaml"
    text = path.read_text(encoding="utf-8")
    moved = text.replace("      address: 0x02021D18\n      length: 1000", "      address: 0x02024000\n      length: 64")
    assert moved != text
    with pytest.raises(GameDefinitionError) as info:
        parse_game_definition(moved, "game.yaml")
    assert "dialogue reads the memory of ladder field 'party_count'" in str(info.value)
