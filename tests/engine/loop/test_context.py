"""Bounded context (seed 003, issue 18.4): conversation segments of N turns and a capped notebook,
against the local fake provider servers in every wire format: the history each request carries
resets every N turns, the notebook the model writes is cut to its limit and comes back in the next
request, one call is made a decision (no summarisation call), and the trace's record says which
turn of which segment each request was."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.loop.context import ContextRules, Conversation
from engine.loop.contract import parse_response, response_json_schema
from engine.policies.model import ModelPolicy
from engine.policies.policy import Observation, TransportRetry
from engine.providers import make_adapter
from engine.providers.base import Sampling
from tests.engine.providers.test_providers import APIS, server  # noqa: F401 - the fixture
from tests.fakes.provider_server import VALID_RESPONSE, ok

N, LIMIT = 3, 40


def _observation(decision_id: int) -> Observation:
    return Observation(decision_id=decision_id, frame=np.zeros((144, 160, 3), np.uint8), frame_sha256="b" * 64,
                       recent_actions=("UP",), recent_observations=(), current_objective=None, memory=(),
                       max_actions=4, allowed_actions=("UP", "A"))


def _turns(api, sent: dict) -> list[dict]:
    return sent["input"] if api.api == "responses" else sent["messages"]


@pytest.mark.parametrize("api", APIS, ids=str)
async def test_segments_reset_every_n_turns_and_the_notebook_is_capped(api, server):  # noqa: F811
    notes = [f"note {i} " + "x" * (10 * i) for i in range(7)]  # from note 3 on, longer than the limit
    server.script(*[ok(VALID_RESPONSE | {"notebook": note}) for note in notes])
    adapter = make_adapter(api.provider, api.api, api_key=api.key, base_url=server.base_url(api.api))
    policy = ModelPolicy(adapter, model="m", system="Play.", schema=response_json_schema(4, LIMIT),
                         sampling=Sampling(), image_scale=1, transport=TransportRetry(), price=None)
    policy.context = Conversation(ContextRules(segment_turns=N, notebook_chars=LIMIT))
    records = []
    try:
        for d in range(1, 8):
            reply = await policy.decide(_observation(d))
            parse_response(reply.text, 4)  # the notebook key is part of the contract
            records.append(reply.context)
    finally:
        await adapter.aclose()
    assert len(server.requests) == 7  # one call a decision: nothing paid for summaries
    history = []
    for i, request in enumerate(server.requests):
        turns = _turns(api, request.json)
        roles = [t["role"] for t in turns if t.get("role") in ("user", "assistant")]
        history.append(roles.count("assistant"))
        user_texts = json.dumps(turns[-1])  # this turn (earlier replies, in full, are the segment's history)
        want = "(empty)" if i == 0 else notes[i - 1][:LIMIT]
        assert json.dumps(want)[1:-1] in user_texts  # the notebook the last reply wrote, cut to the limit
        if i and len(notes[i - 1]) > LIMIT:
            assert json.dumps(notes[i - 1])[1:-1] not in user_texts
    assert history == [0, 1, 2, 0, 1, 2, 0]  # the segment's earlier turns, then a fresh start
    assert [r["segment"] for r in records] == [0, 0, 0, 1, 1, 1, 2]
    assert [r["turn_in_segment"] for r in records] == [1, 2, 3, 1, 2, 3, 1]
    assert [r["notebook_chars"] for r in records] == [0] + [min(len(n), LIMIT) for n in notes[:6]]
    assert [r["notebook_truncated"] for r in records] == [False] + [len(n) > LIMIT for n in notes[:6]]


def test_without_context_the_schema_and_body_are_as_before():
    assert "notebook" not in response_json_schema(4)["properties"]
    assert response_json_schema(4, 100)["properties"]["notebook"]["maxLength"] == 100
    with pytest.raises(ValueError):
        ContextRules(segment_turns=0, notebook_chars=10)


def test_a_reply_without_a_notebook_keeps_the_old_one():
    c = Conversation(ContextRules(2, 5))
    c.after("u1", json.dumps({"notebook": "abcdefgh"}))
    assert (c.notebook, c.truncated, c.segment, len(c.history)) == ("abcde", True, 0, 1)
    c.after("u2", "not json")
    assert (c.notebook, c.segment, c.history) == ("abcde", 1, [])
