"""The demo server's replies (app.servers.demo_replies over app.servers.chat_server), asked the way a trial asks:
the model policy's own prompt and the openai_chat adapter's request through the official SDK.
Each reply must be what a strict-mode model sends (valid against the response_format schema the
adapter sent) and what the action contract accepts for that prompt (allowed actions, at most the
prompt's count); scripted replies follow the walkthrough by decision number, random ones differ."""

from __future__ import annotations

import asyncio
import json
import socket

import jsonschema
import numpy as np
import pytest

from app.servers.chat_server import ChatServer
from app.servers.demo_replies import DemoReplies
from app.servers.demo_server import run_command
from engine.loop.contract import parse_response, response_json_schema
from engine.loop.script import parse_script
from engine.policies.model import ModelPolicy
from engine.policies.policy import Observation, TransportRetry
from engine.providers import make_adapter
from engine.providers.base import Sampling
from engine.providers.openai_chat import strict_schema
from sessions.preflight.assets import ASSETS

ALL = ("UP", "DOWN", "LEFT", "RIGHT", "A", "B", "START", "SELECT", "NOOP")


def _observation(decision: int, max_actions: int = 4, allowed: tuple[str, ...] = ALL) -> Observation:
    frame = np.zeros((144, 160, 3), dtype=np.uint8)
    return Observation(decision, frame, "0" * 64, (), (), None, (), max_actions, allowed)


def _ask(base_url: str, model: str, observations: list[Observation], max_actions: int = 4):
    """The replies of a real ModelPolicy (openai-compatible, no key) to each observation."""
    async def play():
        adapter = make_adapter("openai-compatible", "chat", api_key=None, base_url=base_url)
        policy = ModelPolicy(adapter, model=model, system="You play a game.",
                             schema=response_json_schema(max_actions), sampling=Sampling(),
                             image_scale=3, transport=TransportRetry(1, 0, 0, 10), price=None)
        try:
            return [await policy.decide(obs) for obs in observations]
        finally:
            await policy.aclose()

    return asyncio.run(play())


@pytest.fixture(scope="module")
def demo():
    with ChatServer(DemoReplies("scripted", seed=7), delay=0) as server:
        yield server


def test_scripted_replies_play_the_walkthrough_by_decision_and_fit_the_strict_schema(demo):
    walkthrough = parse_script((ASSETS / "cartridge" / "walkthrough.txt").read_text())
    strict = strict_schema(response_json_schema(4))
    decisions = [1, 2, 9, 30, 47]
    replies = _ask(demo.base_url, "demo-scripted", [_observation(d) for d in decisions])
    for decision, reply in zip(decisions, replies, strict=True):
        jsonschema.validate(json.loads(reply.text), strict)  # what a strict-mode model must send
        parsed = parse_response(reply.text, 4, frozenset(ALL))
        assert parsed.actions == walkthrough[(decision - 1) * 4:decision * 4]
        assert reply.model_id == "demo-scripted"
        assert reply.usage.input_tokens > 255 and reply.usage.output_tokens > 0  # text plus a screen's tiles
    first = json.loads(replies[0].text)
    assert first["memory_write"] and first["observed"]["location_guess"] == "bedroom upstairs"  # the notes
    assert json.loads(replies[-1].text)["actions"][-1] == "A"  # the walkthrough's end


def test_random_replies_differ_and_keep_to_the_prompt(demo):
    allowed = ("UP", "LEFT", "A")
    strict = strict_schema(response_json_schema(2))
    replies = _ask(demo.base_url, "demo-random", [_observation(1, 2, allowed) for _ in range(12)], max_actions=2)
    actions = []
    for reply in replies:
        jsonschema.validate(json.loads(reply.text), strict)
        actions.append(tuple(parse_response(reply.text, 2, frozenset(allowed)).actions))
    assert len(set(actions)) > 3  # the same prompt twelve times, not one answer
    assert all(1 <= len(a) <= 2 for a in actions)


def test_another_model_id_gets_the_servers_default():
    with ChatServer(DemoReplies("random", seed=1), delay=0) as server:
        replies = _ask(server.base_url, "my-model", [_observation(1) for _ in range(8)])
    assert len({r.text for r in replies}) > 1  # random, not the walkthrough's first presses every time
    assert {r.model_id for r in replies} == {"my-model"}


def test_a_port_in_use_is_one_line_and_exit_status_2(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert run_command("127.0.0.1", port, "scripted", 0, 0) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"127.0.0.1:{port}" in err and "--port" in err
