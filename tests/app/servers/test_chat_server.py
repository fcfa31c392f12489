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


def test_replies_are_json_dumps_bytes_and_the_404_names_the_path_sent():
    """The wire bytes the http.server version sent: json.dumps' spacing, the query in the 404."""
    from app.servers.chat_server import _error

    with ChatServer(delay=0) as server:
        with urllib.request.urlopen(server.base_url + "/models", timeout=10) as reply:
            assert reply.headers["content-type"] == "application/json"
            assert reply.read() == json.dumps({"object": "list", "data": [
                {"id": "bench-model", "object": "model", "created": 0, "owned_by": "oakwatch"}]}).encode()
        try:
            urllib.request.urlopen(server.url + "/nope?a=%20b", timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 404 and exc.read() == json.dumps(_error("no route /nope?a=%20b")).encode()
        else:
            raise AssertionError("an unknown path should be a 404")


def test_a_port_in_use_is_an_oserror_at_start_and_the_address_outlives_stop():
    with ChatServer(delay=0) as first:
        port = int(first.url.rsplit(":", 1)[1])
        second = ChatServer(delay=0, port=port)
        try:
            second.start()
        except OSError:
            pass
        else:
            second.stop()
            raise AssertionError("a second server on a port in use should not start")
    assert first.base_url == f"http://127.0.0.1:{port}/v1"


def test_stop_does_not_wait_out_a_long_delay():
    """A request still in its delay when the server stops is answered 503 at once, not after 60 s."""
    import time

    server = ChatServer(delay=60)
    server.start()
    outcome: list = []

    def ask():
        request = urllib.request.Request(server.base_url + "/chat/completions", data=b'{"model": "m"}',
                                         method="POST")
        try:
            urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            outcome.append(exc.code)

    asking = threading.Thread(target=ask)
    asking.start()
    while server.requests == 0:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    asking.join(timeout=30)
    assert outcome == [503] and time.monotonic() - started < 10
