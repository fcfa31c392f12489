"""A local OpenAI-compatible Chat Completions server: `oakwatch demo-server` and `oakwatch bench
--parallel-models` both run this one.

`ChatServer(replies, delay=..., host=..., port=...)` listens (port 0: one the OS chooses) in a
background thread and answers every `POST /v1/chat/completions` after a fixed delay with a chat
completion in OpenAI's wire shape (ids, `usage`, headers; the model id asked for echoed back), whose
message content `replies` writes. It is a Starlette app on uvicorn, in an event loop of its own
thread: the delay is an asyncio sleep and each reply is made in a worker thread, so N concurrent
requests each take about the delay, not N times it. Measured against the http.server version it
replaced (same machine, keep-alive, httpx): about 1.5 ms more per request at delay 0, and 8 concurrent
requests at a 20 ms delay ~26 ms a round against ~24 ms; the bench's server answers after 200 ms, so
the difference is under 1% of its floor and this one is kept. `GET /v1/models` lists the
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

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

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


def _send(code: int, body: dict, headers: dict | None = None) -> Response:
    # json.dumps' own spacing, as the http.server version sent (Starlette's JSONResponse packs it tighter).
    return Response(json.dumps(body).encode(), code, headers, media_type="application/json")


def _asked_path(request: Request) -> str:
    """The path as the client sent it, query included (what the 404's message names)."""
    raw = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string") or b""
    return (raw + (b"?" + query if query else b"")).decode("latin-1")


def _app(owner: ChatServer) -> Starlette:
    async def get(request: Request) -> Response:
        if request.url.path.rstrip("/") == MODELS_PATH:
            models = getattr(owner.replies, "models", ())
            return _send(200, {"object": "list", "data": [{"id": m, "object": "model", "created": 0,
                                                           "owned_by": "oakwatch"} for m in models]})
        return _send(404, _error(f"no route {_asked_path(request)}"))

    async def post(request: Request) -> Response:
        data = await request.body()
        if request.url.path != CHAT_PATH:
            return _send(404, _error(f"no route {_asked_path(request)}"))
        try:
            asked = json.loads(data)
        except ValueError:
            asked = None
        if not isinstance(asked, dict):
            return _send(400, _error("the request body is not a JSON object"))
        n = owner._next()
        if owner.delay and await owner._stopped_within(owner.delay):
            # Stopping: http.server dropped the connection here; ASGI cannot, so say so and close it.
            return _send(503, {"error": {"message": "the server is stopping", "type": "server_error",
                                         "param": None, "code": None}}, {"connection": "close"})
        model = asked.get("model")
        try:  # in a thread: a slow `replies` must not hold the other requests' replies
            content, used = await run_in_threadpool(owner.replies, asked, n)
        except Exception as exc:  # a reply that could not be made is the server's fault, as a provider's 500
            return _send(500, {"error": {"message": f"the server could not answer: {type(exc).__name__}: {exc}",
                                         "type": "server_error", "param": None, "code": None}})
        return _send(200, chat_completion(content, model if isinstance(model, str) else None, used),
                     {"x-request-id": _ident("req_"), "openai-processing-ms": str(int(owner.delay * 1000))})

    async def route(request: Request) -> Response:
        return await (get(request) if request.method == "GET" else post(request))

    return Starlette(routes=[Route("/{path:path}", route, methods=["GET", "POST"])])


def _listen(host: str, port: int) -> socket.socket:
    """Bound and listening before the server's thread starts, so a port in use is start's OSError."""
    # proto named: asyncio sets TCP_NODELAY only on IPPROTO_TCP sockets, and without it each reply's
    # body waits for the client's delayed ACK (40 ms on Linux), a latency no real provider has.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


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
        self._socket: socket.socket | None = None
        self._address: tuple | None = None  # kept after stop, as http.server's server_address was
        self._server: uvicorn.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None  # made in the server's loop
        self._thread: threading.Thread | None = None

    def _next(self) -> int:
        with self._lock:
            n = self.requests
            self.requests += 1
            return n

    async def _stopped_within(self, seconds: float) -> bool:
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            return False
        return True

    def __enter__(self) -> ChatServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._socket = _listen(self.host, self.port)
        self._address = self._socket.getsockname()
        # No access log, no Server header (http.server's named itself; a provider's reply need not).
        config = uvicorn.Config(_app(self), lifespan="off", access_log=False, log_level="critical",
                                server_header=False, timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        started = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
            started.set()
            await self._server.serve(sockets=[self._socket])

        self._thread = threading.Thread(target=asyncio.run, args=(serve(),), name="chat-server", daemon=True)
        self._thread.start()
        started.wait(10)
        while not self._server.started and self._thread.is_alive():
            time.sleep(0.005)

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stopping.set)
            except RuntimeError:
                pass  # the loop has just finished
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()

    @property
    def url(self) -> str:
        assert self._address is not None, "the server is not started"
        host, port = self._address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def base_url(self) -> str:
        """What a `provider: openai-compatible` condition is given as base_url."""
        return self.url + "/v1"
