"""The local OpenAI-compatible server (app.servers.chat_server): replies the official SDK reads and
the contract accepts, served concurrently (4 requests in flight at once, proved by a barrier all
four must reach, not by a wall-clock margin)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai

from app.servers.chat_server import ChatServer, CycleReplies, action_for
from engine.loop.contract import parse_response

DELAY = 0.3


class BarrierReplies(CycleReplies):
    """The bench's replies, each held until all four requests are being served at once."""

    def __init__(self, parties: int):
        self.barrier = threading.Barrier(parties)

    def __call__(self, body: dict, n: int):
        self.barrier.wait(timeout=60)  # served one at a time, the first would wait here alone and fail
        return super().__call__(body, n)


def test_concurrent_replies_parse_through_the_contract():
    replies = BarrierReplies(4)
    with ChatServer(replies, delay=DELAY) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=90)

        def ask(i: int):
            return client.chat.completions.create(model="bench-model",
                                                  messages=[{"role": "user", "content": f"decision {i}"}])

        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(ask, range(4)))
        assert server.requests == 4
    actions = []
    for reply in replies:
        assert reply.model == "bench-model" and reply.choices[0].finish_reason == "stop"
        assert reply.usage is not None and reply.usage.prompt_tokens > 0
        parsed = parse_response(reply.choices[0].message.content, max_actions=4)
        assert len(parsed.actions) == 1
        actions.append(parsed.actions[0])
    assert sorted(actions) == sorted(action_for(n) for n in range(4))  # by request count, whatever the order


def test_other_paths_answer_404():
    with ChatServer(delay=0) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=10)
        try:
            client.responses.create(model="bench-model", input="hi")
        except openai.NotFoundError:
            pass
        else:
            raise AssertionError("the Responses path should not be served")
        assert server.requests == 0


def test_a_reply_that_cannot_be_made_is_a_500_and_a_bad_body_a_400():
    def broken(body: dict, n: int) -> tuple[str, dict]:
        raise RuntimeError("no reply")

    with ChatServer(broken, delay=0) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)
        try:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        except openai.InternalServerError as exc:
            assert "no reply" in str(exc)
        else:
            raise AssertionError("a reply that raised should be a 500")
        request = urllib.request.Request(server.base_url + "/chat/completions", data=b"[1, 2]", method="POST")
        try:
            urllib.request.urlopen(request, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 400 and json.loads(exc.read())["error"]["type"] == "invalid_request_error"
        else:
            raise AssertionError("a body that is not a JSON object should be a 400")
