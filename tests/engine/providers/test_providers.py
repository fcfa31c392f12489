"""The provider adapters, each through its real SDK client, against a local fake of the APIs."""

from __future__ import annotations

import asyncio
import base64
import copy
import email.utils
import hashlib
import io
import json
import socket
import time
from dataclasses import dataclass

import numpy as np
import pytest
from PIL import Image

from engine.loop.contract import ContractError, parse_response, response_json_schema
from engine.providers import make_adapter
from engine.providers.base import ModelReply, ModelRequest, ProviderError, Sampling, redact
from engine.providers.openai_chat import STRICT_KEYWORDS, strict_schema
from tests.fakes.provider_server import (
    FORMATS,
    VALID_RESPONSE,
    FakeProviderServer,
    _masked,
    failed,
    malformed,
    ok,
    oversized,
    raw,
    sleep,
    status,
    text,
)

ANSWERED_MODEL = "model-that-answered-2026-10-01"
ANTHROPIC_KEY = "sk-ant-api03-PLANTEDkey-0123456789-abcdefWXYZ"
OPENAI_KEY = "sk-proj-PLANTEDkey-9876543210-fedcbaQRST"


def _frame_png() -> tuple[np.ndarray, bytes]:
    frame = np.random.default_rng(7).integers(0, 256, size=(144, 160, 3), dtype=np.uint8)
    frame = frame.repeat(2, axis=0).repeat(2, axis=1)  # the manifest's whole upscale factor
    out = io.BytesIO()
    Image.fromarray(frame, "RGB").save(out, format="PNG")
    return frame, out.getvalue()


FRAME, PNG = _frame_png()
SCHEMA = response_json_schema(3)


def request(sampling: Sampling | None = None) -> ModelRequest:
    return ModelRequest(model="asked-model", system="You play a Game Boy game. Answer with JSON only.",
                        text="Decision 4. Press at most 3 button(s) this turn.", image_png=PNG,
                        schema=SCHEMA, sampling=sampling or Sampling(max_output_tokens=512))


@dataclass(frozen=True)
class Api:
    provider: str
    api: str
    key: str | None
    path: str
    usage: dict  # the wire format's usage object, as the server reports it
    expected: tuple  # (input, output, cached, reasoning, cache_write) the adapter must report
    ok_stop: str  # the stop reason of an answered tool call / JSON reply
    cut_stop: str  # what the API says when the output-token limit cut the reply
    id_prefix: str

    def __str__(self) -> str:
        return f"{self.provider}-{self.api}"


APIS = [
    Api("anthropic", "messages", ANTHROPIC_KEY, "/v1/messages",
        {"input_tokens": 1523, "cache_creation_input_tokens": 12, "cache_read_input_tokens": 1024,
         "output_tokens": 87, "output_tokens_details": {"thinking_tokens": 30}, "service_tier": "standard"},
        (1523, 87, 1024, 30, 12), "tool_use", "max_tokens", "msg_"),
    Api("openai", "chat", OPENAI_KEY, "/v1/chat/completions",
        {"prompt_tokens": 2000, "completion_tokens": 120, "total_tokens": 2120,
         "prompt_tokens_details": {"cached_tokens": 1536, "cache_write_tokens": 64, "audio_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 64, "audio_tokens": 0}},
        (2000, 120, 1536, 64, 64), "stop", "length", "chatcmpl-"),
    Api("openai", "responses", OPENAI_KEY, "/v1/responses",
        {"input_tokens": 2100, "input_tokens_details": {"cached_tokens": 2048, "cache_write_tokens": 0},
         "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 256}, "total_tokens": 2400},
        (2100, 300, 2048, 256, 0), "completed", "max_output_tokens", "resp_"),
    Api("openai-compatible", "chat", OPENAI_KEY, "/v1/chat/completions",
        {"prompt_tokens": 900, "completion_tokens": 70, "total_tokens": 970},  # no details objects
        (900, 70, None, None, None), "stop", "length", "chatcmpl-"),
]


@pytest.fixture
def server():
    with FakeProviderServer() as fake:
        yield fake


@pytest.fixture(params=APIS, ids=str)
def api(request) -> Api:
    return request.param


@pytest.fixture
async def adapter(api, server):
    made = make_adapter(api.provider, api.api, api_key=api.key, base_url=server.base_url(api.api))
    yield made
    await made.aclose()


def usage_of(reply: ModelReply) -> tuple:
    u = reply.usage
    return u.input_tokens, u.output_tokens, u.cached_tokens, reply.reasoning_tokens, reply.cache_write_tokens


async def failure(adapter, timeout: float = 5.0, sampling: Sampling | None = None) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await adapter.send(adapter.body(request(sampling)), timeout)
    return caught.value


# -- answered calls -------------------------------------------------------------------------------

async def test_success(api, adapter, server):
    server.script(ok(VALID_RESPONSE, usage=api.usage, model=ANSWERED_MODEL))
    reply = await adapter.send(adapter.body(request()), 5)
    sent = server.sent[-1]
    assert json.loads(reply.text) == VALID_RESPONSE
    parse_response(reply.text, 3)  # the contract accepts it
    assert reply.model_id == ANSWERED_MODEL  # the model that answered, not the one asked for
    assert reply.response_id == sent.body["id"] and reply.response_id.startswith(api.id_prefix)
    assert usage_of(reply) == api.expected
    assert reply.usage.cost_usd is None and reply.usage.cost_source is None
    assert reply.stop_reason == api.ok_stop
    request_id = sent.headers["request-id" if api.api == "messages" else "x-request-id"]
    if api.api == "messages":
        assert reply.identity == {"request_id": request_id, "service_tier": "standard"}
    elif api.api == "chat":
        assert reply.identity == {"request_id": request_id, "service_tier": "default",
                                  "system_fingerprint": sent.body["system_fingerprint"]}
    else:
        assert reply.identity == {"request_id": request_id, "service_tier": "default"}
    assert reply.raw == sent.body  # the API's reply, exactly as it came
    assert len(server.requests) == 1


async def test_not_json_and_schema_break_come_back_as_replies(api, adapter, server):
    broken = {**VALID_RESPONSE, "actions": ["JUMP"]}
    server.script(text("I think I should press A to talk to Mom."), ok(broken))
    words = await adapter.send(adapter.body(request()), 5)
    assert words.text == "I think I should press A to talk to Mom."
    with pytest.raises(ContractError, match="not a JSON object"):
        parse_response(words.text, 3)
    schema_break = await adapter.send(adapter.body(request()), 5)
    assert json.loads(schema_break.text) == broken
    with pytest.raises(ContractError, match="actions"):
        parse_response(schema_break.text, 3)


async def test_reply_cut_by_the_token_limit(api, adapter, server):
    cut = {"reasoning_summary": "The door is"} if api.api == "messages" else '{"reasoning_summary": "The door is'
    server.script(ok(cut, stop=api.cut_stop))
    reply = await adapter.send(adapter.body(request()), 5)
    assert reply.stop_reason == api.cut_stop
    with pytest.raises(ContractError):
        parse_response(reply.text, 3)


async def test_no_usage_is_unknown_not_zero(api, adapter, server):
    server.script(ok(usage=None))
    reply = await adapter.send(adapter.body(request()), 5)
    assert usage_of(reply) == (None, None, None, None, None)
    assert reply.usage.total_tokens is None
    parse_response(reply.text, 3)


async def test_refusal_comes_back_as_a_rejected_reply(api, adapter, server):
    if api.api == "messages":
        server.script(text("I can't help with that.", stop="refusal"))
    else:
        server.script(ok(refusal="I'm sorry, I can't help with that."))
    reply = await adapter.send(adapter.body(request()), 5)
    if api.api == "messages":
        assert reply.stop_reason == "refusal"
    else:
        assert reply.text == "refusal: I'm sorry, I can't help with that."
    with pytest.raises(ContractError):
        parse_response(reply.text, 3)


# -- what is sent ---------------------------------------------------------------------------------

def _image_and_schema(api: Api, sent: dict) -> tuple[str, dict]:
    if api.api == "messages":
        image = sent["messages"][0]["content"][0]
        assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
        assert sent["messages"][0]["content"][1] == {"type": "text", "text": request().text}
        assert sent["tool_choice"] == {"type": "tool", "name": "respond"}
        return image["source"]["data"], sent["tools"][0]["input_schema"]
    if api.api == "chat":
        assert sent["messages"][0] == {"role": "system", "content": request().system}
        image = sent["messages"][1]["content"][0]
        assert image["type"] == "image_url" and image["image_url"]["detail"] == "high"
        url = image["image_url"]["url"]
        fmt = sent["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "respond"
        assert fmt["json_schema"]["strict"] is True
        schema = fmt["json_schema"]["schema"]
    else:
        assert sent["instructions"] == request().system
        image = sent["input"][0]["content"][0]
        assert image["type"] == "input_image"
        url = image["image_url"]
        fmt = sent["text"]["format"]
        assert fmt["type"] == "json_schema" and fmt["name"] == "respond" and fmt["strict"] is True
        schema = fmt["schema"]
    assert url.startswith("data:image/png;base64,")
    return url.removeprefix("data:image/png;base64,"), schema


async def test_the_body_sent(api, adapter, server):
    body = adapter.body(request())
    await adapter.send(body, 5)
    (received,) = server.requests
    assert received.method == "POST" and received.path == api.path
    assert received.json == body  # exactly what the adapter built (its hash is the prompt hash)
    assert received.json["model"] == "asked-model"
    data, schema = _image_and_schema(api, received.json)
    assert base64.b64decode(data, validate=True) == PNG  # the very PNG bytes
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")), FRAME)
    # Anthropic gets the contract's schema as is; OpenAI its strict version (checked in test_strict_schema).
    assert schema == (SCHEMA if api.api == "messages" else strict_schema(SCHEMA))
    limit = {"messages": "max_tokens", "chat": "max_completion_tokens", "responses": "max_output_tokens"}[api.api]
    if api.provider == "openai-compatible":
        limit = "max_tokens"
        assert "max_completion_tokens" not in received.json
    assert received.json[limit] == 512
    # The key travels in the authorization header only: not in the body, the path or any other header.
    assert api.key not in received.body.decode() and api.key not in received.path
    carriers = {name for name, value in received.headers.items() if api.key in value}
    assert carriers and carriers <= {"authorization", "x-api-key"}
    if api.api == "messages":
        assert received.headers["anthropic-version"]
    assert received.headers.get("x-stainless-retry-count") == "0"


async def test_openai_sampling_in_the_body(server):
    sampling = Sampling(temperature=0.2, max_output_tokens=300, reasoning_effort="low", seed=7)
    for provider, api_name in (("openai", "chat"), ("openai-compatible", "chat"), ("openai", "responses")):
        made = make_adapter(provider, api_name, api_key=OPENAI_KEY, base_url=server.base_url(api_name))
        try:
            await made.send(made.body(request(sampling)), 5)
        finally:
            await made.aclose()
        sent = server.requests[-1].json
        assert sent["temperature"] == 0.2
        if api_name == "chat":
            assert sent["seed"] == 7 and sent["reasoning_effort"] == "low"
            assert sent["max_tokens" if provider == "openai-compatible" else "max_completion_tokens"] == 300
        else:
            assert "seed" not in sent and sent["reasoning"] == {"effort": "low"} and sent["max_output_tokens"] == 300
    plain = make_adapter("openai", "chat", api_key=OPENAI_KEY, base_url=server.base_url("chat"))
    body = plain.body(request())
    await plain.aclose()
    assert not {"temperature", "seed", "reasoning_effort"} & set(body)


@pytest.mark.parametrize(("effort", "budget"), [("low", 1024), ("medium", 4096), ("high", 16384)])
async def test_anthropic_extended_thinking(server, effort, budget):
    made = make_adapter("anthropic", "messages", api_key=ANTHROPIC_KEY, base_url=server.base_url("messages"))
    usage = {"input_tokens": 1500, "output_tokens": 900, "output_tokens_details": {"thinking_tokens": 800}}
    server.script(text(json.dumps(VALID_RESPONSE), thinking="The box is open, so A advances it.", usage=usage))
    try:
        body = made.body(request(Sampling(max_output_tokens=512, reasoning_effort=effort)))
        reply = await made.send(body, 5)
    finally:
        await made.aclose()
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == 512 + budget  # the answer keeps its whole allowance
    assert body["tool_choice"] == {"type": "auto"}  # a forced tool is refused with thinking
    assert server.requests[-1].json == body
    assert json.loads(reply.text) == VALID_RESPONSE  # the text block, not the thinking
    assert reply.reasoning_tokens == 800 and reply.stop_reason == "end_turn"


async def test_anthropic_refuses_temperature_before_any_call(server):
    made = make_adapter("anthropic", "messages", api_key=ANTHROPIC_KEY, base_url=server.base_url("messages"))
    try:
        with pytest.raises(ProviderError) as caught:
            made.body(request(Sampling(temperature=0.0)))
    finally:
        await made.aclose()
    assert caught.value.kind == "bad-request" and not caught.value.retryable and caught.value.billed is False
    assert "temperature" in str(caught.value)
    assert server.requests == []


async def test_openai_compatible_without_a_key(server):
    made = make_adapter("openai-compatible", "chat", api_key=None, base_url=server.base_url("chat"))
    server.script(ok(usage=None, model="qwen2.5-vl-7b-instruct"))
    try:
        reply = await made.send(made.body(request()), 5)
    finally:
        await made.aclose()
    assert server.requests[-1].headers["authorization"] == "Bearer no-key"
    assert "no-key" not in server.requests[-1].body.decode()
    assert usage_of(reply) == (None, None, None, None, None)
    assert reply.model_id == "qwen2.5-vl-7b-instruct"


async def test_the_environment_is_not_read(server, monkeypatch):
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.setenv(name, "http://127.0.0.1:9/elsewhere")
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.setenv(name, "sk-env-WRONGkey-000000000000")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-the-environment")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj_from_the_environment")
    for api in APIS[:3]:
        made = make_adapter(api.provider, api.api, api_key=api.key, base_url=server.base_url(api.api))
        try:
            await made.send(made.body(request()), 5)
        finally:
            await made.aclose()
        received = server.requests[-1]
        assert any(api.key in value for value in received.headers.values())
        assert not any("WRONG" in value or "environment" in value for value in received.headers.values())
    for provider, api_name in (("anthropic", "messages"), ("openai", "chat"), ("openai", "responses")):
        with pytest.raises(ProviderError) as caught:
            make_adapter(provider, api_name, api_key=None, base_url=None)
        assert caught.value.kind == "startup" and "WRONG" not in str(caught.value)


# -- transport faults -----------------------------------------------------------------------------

async def test_rate_limit_with_retry_after(api, adapter, server):
    server.script(status(429, retry_after=7), status(429, retry_after="2", retry_after_ms=1500), status(429))
    first = await failure(adapter)
    assert (first.kind, first.retryable, first.status, first.retry_after, first.billed) == (
        "rate-limit", True, 429, 7.0, False)
    second = await failure(adapter)
    assert second.retry_after == 1.5  # retry-after-ms is the more precise
    third = await failure(adapter)
    assert third.retry_after is None
    assert len(server.requests) == 3  # the SDK retried nothing
    assert "429" in str(first)


async def test_server_errors(api, adapter, server):
    codes = [500, 503] + ([529] if api.api == "messages" else [])
    server.script(status(500), status(503, retry_after=1), *[status(c) for c in codes[2:]])
    for code in codes:
        error = await failure(adapter)
        assert (error.kind, error.retryable, error.status, error.billed) == ("server", True, code, None)
        if code == 503:
            assert error.retry_after == 1.0
    assert len(server.requests) == len(codes)


@pytest.mark.parametrize(("code", "kind", "retryable"), [
    (400, "bad-request", False), (402, "permission", False), (403, "permission", False), (404, "not-found", False),
    (408, "timeout", True), (409, "server", True), (413, "bad-request", False), (422, "bad-request", False)])
async def test_other_statuses(api, adapter, server, code, kind, retryable):
    server.script(status(code))
    error = await failure(adapter)
    assert (error.kind, error.retryable, error.status) == (kind, retryable, code)
    assert error.billed is (False if not retryable else None)
    assert len(server.requests) == 1


async def test_timeout(api, adapter, server):
    server.script(sleep(5))
    started = time.monotonic()
    error = await failure(adapter, timeout=0.3)
    assert time.monotonic() - started < 4  # the reply would take 5 s
    assert (error.kind, error.retryable, error.billed, error.status) == ("timeout", True, None, None)


async def test_authentication_failure_is_redacted(api, adapter, server):
    server.script(status(401))  # the body echoes a masked copy of the key, as the APIs do
    error = await failure(adapter)
    assert (error.kind, error.retryable, error.status, error.billed) == ("authentication", False, 401, False)
    message = str(error)
    assert "401" in message and "[redacted]" in message
    for fragment in (api.key, api.key[:8], api.key[-8:], api.key[-4:], _masked(api.key), "PLANTED", "***"):
        assert fragment not in message


async def test_malformed_200(api, adapter, server):
    server.script(malformed(), raw("<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
                  raw('{"id": "x"}'), raw("[1, 2, 3]"))
    for _ in range(4):
        error = await failure(adapter)
        assert (error.kind, error.retryable) == ("malformed-reply", False)


async def test_connection_refused(api):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}" + ("" if api.api == "messages" else "/v1")
    made = make_adapter(api.provider, api.api, api_key=api.key, base_url=base)
    try:
        error = await failure(made)
    finally:
        await made.aclose()
    assert (error.kind, error.retryable, error.status) == ("connection", True, None)
    assert api.key not in str(error)


async def test_cancelled_call_is_not_a_provider_error(api, adapter, server):
    server.script(sleep(5))
    task = asyncio.create_task(adapter.send(adapter.body(request()), 10))
    for _ in range(200):
        if server.requests:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize(("code", "kind", "retryable"), [
    ("server_error", "server", True), ("rate_limit_exceeded", "rate-limit", True),
    ("invalid_prompt", "bad-request", False)])
async def test_responses_failed_status(server, code, kind, retryable):
    made = make_adapter("openai", "responses", api_key=OPENAI_KEY, base_url=server.base_url("responses"))
    server.script(failed(code, "Something went wrong."))
    try:
        error = await failure(made)
    finally:
        await made.aclose()
    assert (error.kind, error.retryable) == (kind, retryable)
    assert code in str(error)


# -- the reply cap (agent.max_reply_bytes) --------------------------------------------------------

CAP = 64 * 1024
NETWORK_READ = 64 * 1024  # the most one socket read hands the SDK (httpcore reads 64 KiB at a time)


@pytest.fixture
async def capped(api, server):
    made = make_adapter(api.provider, api.api, api_key=api.key, base_url=server.base_url(api.api),
                        max_reply_bytes=CAP)
    yield made
    await made.aclose()


async def test_a_reply_that_never_ends_is_cut_at_the_cap(api, capped, server):
    """The body is bounded while it is read: a reply that claims 60 MB and stalls after a little
    over the cap comes back at once as an oversized reply (were the SDK to wait for the whole
    body, this call would time out)."""
    server.script(oversized(4 * CAP, declared=60_000_000, stall_after=CAP + 3 * NETWORK_READ))
    reply = await capped.send(capped.body(request()), 30)
    over = reply.oversize
    assert over is not None and (over.size_bytes, over.size_source, over.cap_bytes) == (60_000_000, "content-length",
                                                                                      CAP)
    assert CAP < over.received_bytes <= CAP + NETWORK_READ
    assert reply.text == "" and reply.raw == {} and reply.model_id is None
    assert usage_of(reply) == (None, None, None, None, None)
    received = server.requests[-1]  # the request asked for an uncompressed reply: bytes counted are bytes kept
    assert received.headers["accept-encoding"] == "identity"
    assert reply.identity["request_id"]  # the reply's own id, from its headers


async def test_a_compressed_reply_is_counted_as_it_decodes(api, capped, server):
    """A server that gzips anyway: 8 MB that compress to a few KB are counted decoded, and the
    decoding stops one byte past the cap."""
    server.script(oversized(8_000_000, framing="gzip"))
    reply = await capped.send(capped.body(request()), 30)
    over = reply.oversize
    assert over is not None and over.received_bytes == CAP + 1
    assert (over.size_bytes, over.size_source) == (None, None)  # its declared length is the compressed one's
    server.script(oversized(CAP // 2, framing="gzip"))  # under the cap: decoded here, read as usual
    fine = await capped.send(capped.body(request()), 30)
    assert fine.oversize is None and json.loads(fine.text) == VALID_RESPONSE and len(fine.raw["padding"]) > CAP // 3


async def test_an_error_status_with_a_huge_body_is_its_statuss_fault(api, capped, server):
    server.script(oversized(16_000_000, code=503))
    error = await failure(capped, timeout=30)
    assert (error.kind, error.retryable, error.status, error.billed) == ("server", True, 503, None)
    assert "its body unread" in str(error) and "16,000,000 bytes declared" in str(error)


async def test_a_reply_whose_stored_copy_would_pass_the_cap(api, capped, server):
    """The body fits, but written back (as the recorder would) it does not: 1e5 becomes 100000.0.
    The attempt is oversized; the model and the usage, which were read, are kept."""
    render = FORMATS[api.path][0]
    body, _ = render(ok(usage=api.usage), {"model": ANSWERED_MODEL})
    numbers = ", ".join(["1e5"] * (CAP * 6 // 10 // 5))
    wire = json.dumps(body)[:-1] + f', "n": [{numbers}]}}'
    assert len(wire) <= CAP
    server.script(raw(wire))
    reply = await capped.send(capped.body(request()), 30)
    over = reply.oversize
    assert over is not None and over.size_source == "stored"
    assert over.received_bytes == len(wire) < CAP < over.size_bytes
    assert over.received_sha256 == hashlib.sha256(wire.encode()).hexdigest()
    assert reply.text == "" and reply.raw == {}
    assert reply.model_id == ANSWERED_MODEL and usage_of(reply) == api.expected


async def test_a_reply_just_under_the_cap_is_untouched(api, capped, server):
    server.script(oversized(CAP - 1, VALID_RESPONSE))
    reply = await capped.send(capped.body(request()), 30)
    assert reply.oversize is None and json.loads(reply.text) == VALID_RESPONSE
    assert reply.raw == server.sent[-1].body | {"padding": reply.raw["padding"]}


# -- the strict schema, retry-after, redaction, the registry ------------------------------------------

def _schemas(node):
    """Every schema node of a JSON Schema (not the maps that hold them)."""
    yield node
    for holder in ("properties", "$defs"):
        for sub in (node.get(holder) or {}).values():
            yield from _schemas(sub)
    if isinstance(node.get("items"), dict):
        yield from _schemas(node["items"])
    for sub in node.get("anyOf") or ():
        yield from _schemas(sub)


def test_strict_schema():
    original = copy.deepcopy(SCHEMA)
    strict = strict_schema(SCHEMA)
    assert SCHEMA == original  # the contract's own schema is untouched

    objects = 0
    for node in _schemas(strict):
        assert set(node) <= STRICT_KEYWORDS
        if node.get("type") == "object":
            objects += 1
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
    assert objects == 3  # the response, Observed, MemoryWrite
    assert "maxItems" not in json.dumps(strict) and "default" not in json.dumps(strict)
    write = strict["$defs"]["MemoryWrite"]["properties"]
    assert {"type": "null"} in write["subject"]["anyOf"]  # optional and nullable: required, still nullable
    assert write["status"] == {"enum": ["active", "completed"], "title": "Status", "type": "string"}
    assert strict["properties"]["actions"]["items"]["enum"][0] == "UP"

    odd = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 0},  # optional, no default: becomes a union with null
        "who": {"$ref": "#/$defs/Who", "description": "a ref with a sibling"},
        "tag": {"allOf": [{"type": "string", "pattern": "^[a-z]+$"}]}},
        "required": ["who", "tag"], "$defs": {"Who": {"type": "object", "properties": {"name": {"type": "string"}}}}}
    out = strict_schema(odd)
    assert out["properties"]["n"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert out["properties"]["who"] == {"type": "object", "description": "a ref with a sibling",
                                        "properties": {"name": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
                                        "required": ["name"],
                                        "additionalProperties": False}
    assert out["properties"]["tag"] == {"type": "string"}
    assert out["required"] == ["n", "who", "tag"]


def _retry_after_functions():
    from engine.providers import anthropic_messages, openai_chat
    return [anthropic_messages.retry_after, openai_chat.retry_after]


@pytest.mark.parametrize("retry_after", _retry_after_functions(), ids=["anthropic", "openai"])
def test_retry_after_parsing(retry_after):
    assert retry_after({"retry-after": "12"}) == 12.0
    assert retry_after({"retry-after": "0.5"}) == 0.5
    assert retry_after({"retry-after-ms": "250", "retry-after": "1"}) == 0.25
    assert retry_after({"retry-after-ms": "soon", "retry-after": "3"}) == 3.0
    in_30s = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= retry_after({"retry-after": in_30s}) <= 31
    assert retry_after({"retry-after": email.utils.formatdate(time.time() - 60, usegmt=True)}) == 0.0
    for bad in ({}, {"retry-after": "soon"}, {"retry-after": "-3"}, {"retry-after": "nan"}, {"retry-after": "inf"}):
        assert retry_after(bad) is None


@pytest.mark.parametrize(("echoed", "secret"), [
    ("Incorrect API key provided: sk-proj-********************QRST.", OPENAI_KEY),
    ("invalid x-api-key: sk-ant-api03-PLANTEDkey-0123456789-abcdefWXYZ", ANTHROPIC_KEY),
    ("key ending ****************WXYZ was refused", ANTHROPIC_KEY),
    ("key ending ****************wxyz was refused", ""),  # a bare mask, the key unknown
    ("the key sk-ant-a...WXYZ is revoked", ANTHROPIC_KEY),
    ("begins sk-proj- and ends fedcbaQRST", OPENAI_KEY),
    ("Authorization: Bearer sk-someone-elses-key-123", ""),
])
def test_redact(echoed, secret):
    out = redact(echoed, (secret,))
    assert "[redacted]" in out
    for fragment in ([secret, secret[:8], secret[-8:], secret[-4:]] if secret else []) + ["***", "sk-"]:
        assert fragment not in out


def test_redact_leaves_ordinary_text():
    words = "HTTP 429 rate_limit_error: Number of request tokens exceeded (request-id req_011CaNyc6Kpm) disk-full"
    assert redact(words, (ANTHROPIC_KEY,)) == words
    assert redact("short", ("abc",)) == "short"  # a secret under 8 characters is not searched for


async def test_registry():
    from engine.providers.anthropic_messages import AnthropicMessages
    from engine.providers.openai_chat import OpenAIChat
    from engine.providers.openai_responses import OpenAIResponses
    for (provider, api_name), cls in {("anthropic", "messages"): AnthropicMessages, ("openai", "chat"): OpenAIChat,
                                      ("openai", "responses"): OpenAIResponses,
                                      ("openai-compatible", "chat"): OpenAIChat}.items():
        made = make_adapter(provider, api_name, api_key=OPENAI_KEY, base_url="http://127.0.0.1:9/v1")
        assert isinstance(made, cls) and (made.provider, made.api) == (provider, api_name)
        await made.aclose()
    with pytest.raises(ValueError, match="no 'responses' API"):
        make_adapter("anthropic", "responses", api_key=OPENAI_KEY, base_url=None)
    with pytest.raises(ProviderError, match="base_url"):
        make_adapter("openai-compatible", "chat", api_key=None, base_url=None)
