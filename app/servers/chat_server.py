"""A local OpenAI-compatible Chat Completions server: `oakwatch demo-server` and `oakwatch bench
--parallel-models` both run this one.

`ChatServer(replies, delay=..., host=..., port=...)` listens (port 0: one the OS chooses) in a
background thread and answers every `POST /v1/chat/completions` after a fixed delay with a chat
completion in OpenAI's wire shape (ids, `usage`, headers; the model id asked for echoed back), whose
message content `replies` writes. Requests are served each in its own thread (ThreadingHTTPServer),
so N concurrent requests each take about the delay, not N times it. `GET /v1/models` lists the
replies' model ids; any other path answers 404, and a body that is not a JSON object 400, in
OpenAI's error shape. The Authorization header is ignored: no key is needed.

`replies(body, n)` gets the request's JSON object and the request's number (0, 1, ... in order of
arrival) and returns (the message content, the usage object). The default, `CycleReplies`, is the
bench's: one action per reply, chosen from UP, DOWN, LEFT, RIGHT, A by request count (a fixed
scrambled order, so a trial wanders and keeps meeting new screens instead of pacing one loop), with a
fixed usage. `app.servers.demo_replies` has the demo's scripted and random players.

    with ChatServer(delay=0.2) as server:
        base_url = server.base_url   # the condition's base_url (provider: openai-compatible)
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CYCLE = ("UP", "DOWN", "LEFT", "RIGHT", "A")
CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"

Replies = Callable[[dict, int], tuple[str, dict]]


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


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    """A usage object as OpenAI sends it (no cached or reasoning tokens)."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


class CycleReplies:
    """The bench's replies: one action by request count, a fixed usage."""

    models = ("bench-model",)

    def __call__(self, body: dict, n: int) -> tuple[str, dict]:
        return json.dumps(agent_response(n)), usage(1912, 88)


def _ident(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def chat_completion(content: str, model: str | None, used: dict) -> dict:
    message = {"role": "assistant", "content": content, "refusal": None, "annotations": []}
    return {"id": _ident("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
            "model": model or "bench-model",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
            "usage": used, "service_tier": "default", "system_fingerprint": "fp_" + uuid.uuid4().hex[:10]}


def _error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle on, the body waits for the client's
    # delayed ACK (40 ms on Linux), which would add a latency no real provider has to every call.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.split("?", 1)[0].rstrip("/") == MODELS_PATH:
            models = getattr(self.server.owner.replies, "models", ())
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                         "owned_by": "oakwatch"} for m in models]})
            return
        self._send(404, _error(f"no route {self.path}"))

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        data = self.rfile.read(length) if length else b""
        if self.path.split("?", 1)[0] != CHAT_PATH:
            self._send(404, _error(f"no route {self.path}"))
            return
        try:
            asked = json.loads(data)
        except ValueError:
            asked = None
        if not isinstance(asked, dict):
            self._send(400, _error("the request body is not a JSON object"))
            return
        owner = self.server.owner
        n = owner._next()
        if owner.delay and owner._stopping.wait(owner.delay):
            return  # stopping: drop the connection
        model = asked.get("model")
        try:
            content, used = owner.replies(asked, n)
        except Exception as exc:  # a reply that could not be made is the server's fault, as a provider's 500
            self._send(500, {"error": {"message": f"the server could not answer: {type(exc).__name__}: {exc}",
                                       "type": "server_error", "param": None, "code": None}})
            return
        self._send(200, chat_completion(content, model if isinstance(model, str) else None, used),
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
    owner: ChatServer


class _Server6(_Server):
    address_family = socket.AF_INET6


class ChatServer:
    """The server as a context manager: started on enter, stopped on exit. `start` raises OSError
    when the address cannot be bound (a port in use)."""

    def __init__(self, replies: Replies | None = None, *, delay: float = 0.2, host: str = "127.0.0.1",
                 port: int = 0):
        self.replies = replies or CycleReplies()
        self.delay = delay
        self.host, self.port = host, port
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

    def __enter__(self) -> ChatServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._server = (_Server6 if ":" in self.host else _Server)((self.host.strip("[]"), self.port), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="chat-server", daemon=True)
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
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def base_url(self) -> str:
        """What a `provider: openai-compatible` condition is given as base_url."""
        return self.url + "/v1"
