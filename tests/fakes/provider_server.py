"""A local stand-in for the model providers' HTTP APIs, scripted per test.

One server on 127.0.0.1 (an OS-chosen port, a background thread) speaks all three wire formats:

    POST /v1/messages           Anthropic Messages      base_url: server.url
    POST /v1/chat/completions   OpenAI Chat Completions base_url: server.url + "/v1"
    POST /v1/responses          OpenAI Responses        base_url: server.url + "/v1"

Each request takes the next scripted reply from the queue (`server.script(ok(...), status(429), ...)`)
and renders it in the wire format of the path it came to: bodies, headers (request ids), usage
objects and error JSON shaped like each API's. An empty queue answers a plain `ok` reply. Every
request is recorded (`server.requests`: method, path, headers, raw bytes, parsed JSON) so a test
can check exactly what was sent.

    with FakeProviderServer() as server:
        server.script(ok({"actions": ["A"]}, usage={...}, model="claude-x-20261001"), status(429, retry_after=7))
        ...

`oversized(size, ...)` answers a body of exactly `size` bytes (declared, chunked or gzip-compressed,
or one that stalls part-way) for the reply cap's tests.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT = object()  # "a realistic default for this wire format"

# -- the scripted replies -------------------------------------------------------------------------


@dataclass
class Reply:
    kind: str  # "ok", "status", "raw", "failed"
    content: Any = None  # ok: a tool input / JSON object (dict) or the model's text (str)
    usage: Any = DEFAULT  # ok: the wire format's usage object verbatim; None: no usage at all
    model: str | None = None  # ok: the model that answered (default: the one asked for)
    stop: str | None = None  # ok: stop_reason / finish_reason / incomplete reason
    refusal: str | None = None  # ok (OpenAI): the model refused
    thinking: str | None = None  # ok (Anthropic): a thinking block before the answer
    status: int = 200
    retry_after: str | None = None
    retry_after_ms: str | None = None
    message: str | None = None  # status: the error's message (default: the API's usual words)
    echo_key: bool = False  # status 401: echo a masked copy of the key received, as the APIs do
    body: bytes = b""  # raw: the exact body
    content_type: str = "application/json"
    delay: float = 0.0  # seconds to wait before answering (a hung provider)
    pad_to: int | None = None  # oversized: the body's exact size in bytes (a "padding" field fills it)
    framing: str = "length"  # oversized: "length" (Content-Length), "chunked" (no size declared), "gzip"
    declared: int | None = None  # oversized: the Content-Length claimed, when not the body's own
    stall_after: int | None = None  # oversized: bytes sent before the server stops sending (never ends)


def ok(content: Any = None, *, usage: Any = DEFAULT, model: str | None = None, stop: str | None = None,
       refusal: str | None = None, thinking: str | None = None, delay: float = 0.0) -> Reply:
    """A 200 answer. `content`: a dict (Anthropic: the `respond` tool's input; OpenAI: dumped to JSON
    text) or a str (the model's text as is). None: a valid minimal agent response."""
    if content is None:
        content = VALID_RESPONSE
    return Reply("ok", content=content, usage=usage, model=model, stop=stop, refusal=refusal, thinking=thinking,
                 delay=delay)


def text(words: str, **kw: Any) -> Reply:
    """A 200 answer whose text is `words` (not a tool call, not necessarily JSON)."""
    return ok(words, **kw)


def status(code: int, *, retry_after: str | int | float | None = None, retry_after_ms: str | int | None = None,
           message: str | None = None, echo_key: bool | None = None) -> Reply:
    """An HTTP error shaped like the API's own; a 401 echoes a masked key unless echo_key=False."""
    return Reply("status", status=code, retry_after=None if retry_after is None else str(retry_after),
                 retry_after_ms=None if retry_after_ms is None else str(retry_after_ms), message=message,
                 echo_key=code == 401 if echo_key is None else echo_key)


def sleep(seconds: float, then: Reply | None = None) -> Reply:
    """Wait `seconds` (interrupted when the server stops), then answer `then` (default: ok)."""
    reply = then or ok()
    reply.delay = seconds
    return reply


def raw(body: bytes | str, *, code: int = 200, content_type: str = "application/json") -> Reply:
    """Exactly these bytes (a malformed 200, an HTML error page, ...)."""
    return Reply("raw", status=code, body=body.encode() if isinstance(body, str) else body,
                 content_type=content_type)


def malformed() -> Reply:
    """A 200 that claims JSON and is not."""
    return raw(b'{"id": "truncated', content_type="application/json")


def oversized(size: int, content: Any = None, *, framing: str = "length", declared: int | None = None,
              stall_after: int | None = None, code: int = 200) -> Reply:
    """A reply of exactly `size` body bytes: an `ok` answer (`content`, as there) in the path's
    wire format, with a top-level "padding" string making up the size. `framing`: "length" (a
    Content-Length header), "chunked" (chunked transfer, no size declared) or "gzip" (the body
    gzip-compressed whatever the request accepted, its compressed length declared). `declared`
    claims another Content-Length; `stall_after` sends that many bytes, then nothing more while the
    server runs (a reply that never ends). `code` other than 200: the padded body comes with that
    status (an error page far over the cap)."""
    reply = ok(content)
    reply.pad_to, reply.framing, reply.declared, reply.stall_after, reply.status = (
        size, framing, declared, stall_after, code)
    return reply


def padded(body: dict, size: int) -> bytes:
    """`body` as JSON with a "padding" field that makes it exactly `size` bytes."""
    bare = json.dumps({**body, "padding": ""}).encode()
    if size < len(bare):
        raise AssertionError(f"a padded reply needs at least {len(bare)} bytes, not {size}")
    return json.dumps({**body, "padding": "x" * (size - len(bare))}).encode()


def failed(code: str = "server_error", message: str = "The server had an error processing your request.") -> Reply:
    """Responses API: a 200 whose response status is `failed`."""
    return Reply("failed", message=message, content=code)


VALID_RESPONSE = {
    "reasoning_summary": "A dialogue box is open; press A to advance it.",
    "observed": {"screen": "dialogue", "location_guess": "bedroom", "objective_guess": "leave the house",
                 "certainty": 0.75},
    "memory_read": [],
    "memory_write": [],
    "actions": ["A"],
}

# -- what was received ----------------------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes
    json: Any = None


@dataclass
class Sent:
    body: dict
    headers: dict[str, str]


@dataclass
class _State:
    queue: list[Reply] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)  # every 200 JSON answer, as sent
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    bytes_sent: int = 0  # body bytes of oversized replies written to the socket


# -- the wire formats -----------------------------------------------------------------------------

def _ident(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _masked(key: str) -> str:
    return key[:8] + "*" * max(4, len(key) - 12) + key[-4:] if len(key) > 12 else "****"


def _key_of(headers: dict[str, str]) -> str:
    auth = headers.get("authorization", "")
    return headers.get("x-api-key") or (auth[7:] if auth.lower().startswith("bearer ") else auth)


ANTHROPIC_ERRORS = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                    403: "permission_error", 404: "not_found_error", 408: "timeout_error",
                    413: "request_too_large", 422: "invalid_request_error", 429: "rate_limit_error",
                    500: "api_error", 503: "api_error", 529: "overloaded_error"}
ANTHROPIC_WORDS = {400: "messages.0.content.0: unknown block type", 402: "Your credit balance is too low.",
                   403: "Your API key does not have permission to use the specified resource.",
                   404: "model: not found", 413: "Request exceeds the maximum allowed number of bytes.",
                   422: "Unprocessable request.", 429: "Number of request tokens has exceeded your per-minute rate "
                   "limit; please retry later.", 500: "Internal server error", 529: "Overloaded"}
OPENAI_ERRORS = {400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
                 403: ("invalid_request_error", "unsupported_country_region_territory"),
                 404: ("invalid_request_error", "model_not_found"), 422: ("invalid_request_error", None),
                 429: ("requests", "rate_limit_exceeded"), 500: ("server_error", None), 503: ("server_error", None)}
OPENAI_WORDS = {400: "Invalid schema for response_format 'respond'.",
                403: "Country, region, or territory not supported", 404: "The model does not exist or you do not "
                "have access to it.", 422: "Unprocessable request.", 429: "Rate limit reached for requests.",
                500: "The server had an error while processing your request. Sorry about that!",
                503: "The engine is currently overloaded, please try again later"}


def _anthropic_ok(reply: Reply, asked: dict) -> tuple[dict, dict]:
    content: list[dict] = []
    if reply.thinking is not None:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": "EqQBCkYIBRgCKkB" + "x" * 40})
    if isinstance(reply.content, dict):
        content.append({"type": "tool_use", "id": _ident("toolu_01"), "name": "respond", "input": reply.content})
        stop = reply.stop or "tool_use"
    else:
        content.append({"type": "text", "text": reply.content})
        stop = reply.stop or "end_turn"
    usage = {"input_tokens": 1874, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
             "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
             "output_tokens": 96, "service_tier": "standard"} if reply.usage is DEFAULT else reply.usage
    body = {"id": _ident("msg_01"), "type": "message", "role": "assistant", "model": reply.model or asked.get("model"),
            "content": content, "stop_reason": stop, "stop_sequence": None}
    if usage is not None:
        body["usage"] = usage
    return body, {"request-id": _ident("req_011C"), "anthropic-organization-id": str(uuid.uuid4())}


def _anthropic_error(reply: Reply, key: str) -> tuple[dict, dict]:
    words = reply.message or ANTHROPIC_WORDS.get(reply.status, "Internal server error")
    if reply.echo_key:
        words = f"invalid x-api-key (key {_masked(key)} was not recognised)"
    request_id = _ident("req_011C")
    body = {"type": "error", "error": {"type": ANTHROPIC_ERRORS.get(reply.status, "api_error"), "message": words},
            "request_id": request_id}
    return body, {"request-id": request_id}


def _openai_usage_chat() -> dict:
    return {"prompt_tokens": 1912, "completion_tokens": 88, "total_tokens": 2000,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0,
                                          "rejected_prediction_tokens": 0}}


def _openai_text(reply: Reply) -> str:
    return json.dumps(reply.content) if isinstance(reply.content, dict) else reply.content


def _chat_ok(reply: Reply, asked: dict) -> tuple[dict, dict]:
    message = {"role": "assistant", "content": None if reply.refusal else _openai_text(reply),
               "refusal": reply.refusal, "annotations": []}
    body = {"id": _ident("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
            "model": reply.model or asked.get("model"),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": reply.stop or "stop"}],
            "service_tier": "default", "system_fingerprint": "fp_" + uuid.uuid4().hex[:10]}
    usage = _openai_usage_chat() if reply.usage is DEFAULT else reply.usage
    if usage is not None:
        body["usage"] = usage
    return body, _openai_headers()


def _responses_body(reply: Reply, asked: dict) -> dict:
    return {"id": _ident("resp_"), "object": "response", "created_at": time.time(), "status": "completed",
            "background": False, "error": None, "incomplete_details": None,
            "instructions": asked.get("instructions"), "max_output_tokens": asked.get("max_output_tokens"),
            "model": reply.model or asked.get("model"), "output": [], "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
            "service_tier": "default", "store": True, "temperature": 1.0, "text": asked.get("text"),
            "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled", "metadata": {}}


def _responses_ok(reply: Reply, asked: dict) -> tuple[dict, dict]:
    body = _responses_body(reply, asked)
    part = ({"type": "refusal", "refusal": reply.refusal} if reply.refusal
            else {"type": "output_text", "text": _openai_text(reply), "annotations": [], "logprobs": []})
    body["output"] = [{"type": "message", "id": _ident("msg_"), "status": "completed", "role": "assistant",
                       "content": [part]}]
    if reply.stop:
        body["status"] = "incomplete"
        body["incomplete_details"] = {"reason": reply.stop}
        body["output"][0]["status"] = "incomplete"
    usage = {"input_tokens": 1912, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 88,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2000} \
        if reply.usage is DEFAULT else reply.usage
    if usage is not None:
        body["usage"] = usage
    return body, _openai_headers()


def _responses_failed(reply: Reply, asked: dict) -> tuple[dict, dict]:
    body = _responses_body(reply, asked)
    body["status"] = "failed"
    body["error"] = {"code": reply.content, "message": reply.message}
    body["usage"] = None
    return body, _openai_headers()


def _openai_headers() -> dict:
    return {"x-request-id": _ident("req_"), "openai-processing-ms": "812", "openai-version": "2020-10-01",
            "x-ratelimit-limit-requests": "10000", "x-ratelimit-remaining-requests": "9999"}


def _openai_error(reply: Reply, key: str) -> tuple[dict, dict]:
    kind, code = OPENAI_ERRORS.get(reply.status, ("server_error", None))
    words = reply.message or OPENAI_WORDS.get(reply.status, "The server had an error processing your request.")
    if reply.echo_key:
        words = (f"Incorrect API key provided: {_masked(key)}. You can find your API key at "
                 "https://platform.openai.com/account/api-keys.")
    return {"error": {"message": words, "type": kind, "param": None, "code": code}}, _openai_headers()


FORMATS = {
    "/v1/messages": (_anthropic_ok, _anthropic_error, None),
    "/v1/chat/completions": (_chat_ok, _openai_error, None),
    "/v1/responses": (_responses_ok, _openai_error, _responses_failed),
}

# -- the server -----------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall per call
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self) -> None:  # noqa: N802
        self._send(404, {"error": {"message": "not found"}}, {})

    def do_POST(self) -> None:  # noqa: N802
        state = self.server.state
        length = int(self.headers.get("content-length") or 0)
        data = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            parsed = json.loads(data) if data else None
        except ValueError:
            parsed = None
        path = self.path.split("?", 1)[0]
        with state.lock:
            state.requests.append(Received("POST", self.path, headers, data, parsed))
            reply = state.queue.pop(0) if state.queue else ok()
        if reply.delay and state.stopping.wait(reply.delay):
            return  # the server is stopping: drop the connection
        if path not in FORMATS:
            self._send(404, {"error": {"message": f"fake server: no route {path}"}}, {})
            return
        render_ok, render_error, render_failed = FORMATS[path]
        asked = parsed if isinstance(parsed, dict) else {}
        if reply.kind == "raw":
            self._send_bytes(reply.status, reply.body, reply.content_type, {})
            return
        if reply.kind == "status":
            body, extra = render_error(reply, _key_of(headers))
            if reply.retry_after is not None:
                extra["retry-after"] = reply.retry_after
            if reply.retry_after_ms is not None:
                extra["retry-after-ms"] = reply.retry_after_ms
            extra["x-should-retry"] = "true" if reply.status in (408, 409, 429) or reply.status >= 500 else "false"
            self._send(reply.status, body, extra)
            return
        if reply.kind == "failed":
            if render_failed is None:
                raise AssertionError(f"failed() is a Responses API reply, not one for {path}")
            body, extra = render_failed(reply, asked)
        else:
            body, extra = render_ok(reply, asked)
        with state.lock:
            state.sent.append(Sent(body, dict(extra)))
        if reply.pad_to is not None:
            self._send_big(reply, padded(body, reply.pad_to), extra)
            return
        self._send(200, body, extra)

    def _send_big(self, reply: Reply, data: bytes, headers: dict) -> None:
        """A large body in 64 KiB writes, framed as the reply says; stopping after `stall_after`."""
        state = self.server.state
        self.close_connection = True  # the client may stop reading part-way: this connection is done
        if reply.framing == "gzip":
            data = gzip.compress(data, compresslevel=6)
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            if reply.framing == "chunked":
                self.send_header("transfer-encoding", "chunked")
            else:
                self.send_header("content-length", str(reply.declared if reply.declared is not None else len(data)))
            if reply.framing == "gzip":
                self.send_header("content-encoding", "gzip")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            limit = len(data) if reply.stall_after is None else min(len(data), reply.stall_after)
            step = 1 << 16
            for start in range(0, limit, step):
                piece = data[start:min(start + step, limit)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if reply.framing == "chunked" else piece)
                with state.lock:
                    state.bytes_sent += len(piece)
            self.wfile.flush()
            if reply.stall_after is not None:
                state.stopping.wait()  # the rest never comes
                return
            if reply.framing == "chunked":
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client stopped reading: what a cap does

    def _send(self, code: int, body: Any, headers: dict) -> None:
        self._send_bytes(code, json.dumps(body).encode(), "application/json", headers)

    def _send_bytes(self, code: int, data: bytes, content_type: str, headers: dict) -> None:
        try:
            self.send_response(code)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up (a timeout test)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    state: _State


class FakeProviderServer:
    """The server as a context manager: started on enter, stopped on exit."""

    def __init__(self) -> None:
        self.state = _State()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeProviderServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="fake-provider", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.state.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def base_url(self, api: str) -> str:
        """What an adapter for `api` ("messages", "chat", "responses") is given as base_url."""
        return self.url if api == "messages" else self.url + "/v1"

    def script(self, *replies: Reply) -> None:
        with self.state.lock:
            self.state.queue.extend(replies)

    @property
    def requests(self) -> list[Received]:
        with self.state.lock:
            return list(self.state.requests)

    @property
    def sent(self) -> list[Sent]:
        """Every scripted 200 answer the server sent: its JSON body and its extra headers."""
        with self.state.lock:
            return list(self.state.sent)
