"""A local OpenAI-compatible Chat Completions server for `oakwatch bench --parallel-models`.

`BenchServer(delay=0.2)` listens on 127.0.0.1 (an OS-chosen port) in a background thread and
answers every `POST /v1/chat/completions` after a fixed delay with a valid chat completion whose
message content is an agent response the contract (engine.contract) accepts: one action per
reply, chosen from UP, DOWN, LEFT, RIGHT, A by request count (a fixed scrambled order, so a trial
wanders and keeps meeting new screens instead of pacing one loop). Requests are
served each in its own thread (ThreadingHTTPServer), so N concurrent requests each take about the
delay, not N times it. Any other path answers 404 in the OpenAI error shape.

    with BenchServer(delay=0.2) as server:
        base_url = server.url + "/v1"   # the condition's base_url (provider: openai-compatible)

The wire shape (ids, usage, headers) follows OpenAI's; a server that needs no key ignores the
Authorization header.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CYCLE = ("UP", "DOWN", "LEFT", "RIGHT", "A")
CHAT_PATH = "/v1/chat/completions"


def action_for(n: int) -> str:
    """The n-th request's action: deterministic, scrambled (Knuth's multiplicative hash)."""
    return CYCLE[(((n * 2654435761) & 0xFFFFFFFF) >> 16) % len(CYCLE)]


def agent_response(n: int) -> dict:
    """The n-th reply's agent response (contract-valid; one action)."""
    return {
        "reasoning_summary": "Bench server: walking in a small cycle to keep the trial moving.",
        "observed": {"screen": "overworld", "location_guess": "unknown", "objective_guess": "keep moving",
                     "certainty": 0.5},
        "memory_read": [],
        "memory_write": [],
        "actions": [action_for(n)],
    }


def _ident(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _usage() -> dict:
    return {"prompt_tokens": 1912, "completion_tokens": 88, "total_tokens": 2000,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def chat_completion(content: str, model: str | None) -> dict:
    message = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    return {"id": _ident("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
            "model": model or "bench-model",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
            "usage": _usage(), "service_tier": "default", "system_fingerprint": "fp_" + uuid.uuid4().hex[:10]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle on, the body waits for the client's
    # delayed ACK (40 ms on Linux), which would add a latency no real provider has to every call.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._send(404, {"error": {"message": "not found", "type": "invalid_request_error", "param": None,
                                   "code": None}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        data = self.rfile.read(length) if length else b""
        if self.path.split("?", 1)[0] != CHAT_PATH:
            self._send(404, {"error": {"message": f"bench server: no route {self.path}",
                                       "type": "invalid_request_error", "param": None, "code": None}})
            return
        try:
            asked = json.loads(data) if data else {}
        except ValueError:
            asked = {}
        owner = self.server.owner
        n = owner._next()
        if owner.delay and owner._stopping.wait(owner.delay):
            return  # stopping: drop the connection
        model = asked.get("model") if isinstance(asked, dict) else None
        self._send(200, chat_completion(json.dumps(agent_response(n)), model if isinstance(model, str) else None),
                   {"x-request-id": _ident("req_"), "openai-processing-ms": str(int(owner.delay * 1000))})

    def _send(self, code: int, body: dict, headers: dict | None = None) -> None:
        payload = json.dumps(body).encode()
        try:
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:
            pass  # the client went away


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    owner: BenchServer


class BenchServer:
    """The server as a context manager: started on enter, stopped on exit."""

    def __init__(self, delay: float = 0.2):
        self.delay = delay
        self.requests = 0  # chat requests received
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _next(self) -> int:
        with self._lock:
            n = self.requests
            self.requests += 1
            return n

    def __enter__(self) -> BenchServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="bench-provider", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What a `provider: openai-compatible` condition is given as base_url."""
        return self.url + "/v1"
