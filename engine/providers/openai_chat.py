"""OpenAI's Chat Completions API through the official async SDK (`openai.AsyncOpenAI`).

It also serves provider "openai-compatible" (vLLM, llama.cpp's server, Ollama, ...): the same wire
format at the manifest's base URL, `max_tokens` instead of `max_completion_tokens` (older servers
know only that), and a placeholder key ("no-key", sent only in the Authorization header) when the
server needs none.

Structured output is `response_format: {type: "json_schema", json_schema: {name: "respond",
schema: strict_schema(request.schema), strict: true}}`; see `strict_schema` for the transformation.
The contract's own schema is never changed: the contract stays the judge of what comes back.

The reply text is `choices[0].message.content` (or ""); a refusal comes back as
"refusal: <the model's words>", which is not JSON, so the contract rejects it and the loop's
retry rules apply. Usage is the provider's own: prompt_tokens (cached included),
completion_tokens (reasoning included), prompt_tokens_details.cached_tokens / cache_write_tokens,
completion_tokens_details.reasoning_tokens; a field the server did not send stays None (an
OpenAI-compatible server may send no usage at all).

Failures (ProviderError kind, retryable, billed): 401 authentication/no/False; 402 and 403
permission/no/False; 404 not-found/no/False; 400, 413, 422 and any other 4xx bad-request/no/False;
408 timeout/yes/None; 409 server/yes/None; 429 rate-limit/yes/False (retry_after from
`retry-after-ms` or `retry-after`); >= 500 server/yes/None; the SDK's timeout or our whole-call
deadline timeout/yes/None; a connection fault connection/yes/None; a 200 the SDK cannot read or
without choices/message malformed-reply/no/None. Every message is redacted. A body over the cap
(engine.providers.reply_cap) is never read past it: an invalid output for a 200, else the status's
fault.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

import openai

from engine.loop.records import Usage
from engine.providers.base import (
    AdapterErrors,
    ModelReply,
    ModelRequest,
    ProviderError,
    as_int,
    as_str,
    classify_status,
    get,
    retry_after,
)
from engine.providers.reply_cap import DEFAULT_MAX_REPLY_BYTES, capped_client, oversize_in

DEFAULT_BASE_URL = "https://api.openai.com/v1"  # given explicitly: OPENAI_BASE_URL is never read
NO_KEY = "no-key"  # what an OpenAI-compatible server that needs no key is sent (it ignores it)
SCHEMA_NAME = "respond"
REFUSAL_PREFIX = "refusal: "

# -- the strict-mode schema -----------------------------------------------------------------------

# The keywords kept: structure, enumerations and annotations. Everything else (default, minLength,
# maxLength, pattern, format, minimum, maximum, exclusive bounds, multipleOf, minItems, maxItems,
# uniqueItems, patternProperties, not, if/then/else, dependent*, ...) is dropped: strict mode
# rejects some of them outright and others on some models or servers, and the contract checks
# every one of them on the reply anyway.
STRICT_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum", "const",
                             "anyOf", "$ref", "$defs", "definitions", "title", "description"})


def strict_schema(schema: dict) -> dict:
    """A strict-mode version of `schema` (a new dict; `schema` is not touched).

    - every object gets `additionalProperties: false` and lists every property in `required`;
    - a property that was optional becomes required: as is when it already admits null or has a
      non-null default (the model must then state a value the contract accepts, e.g. a memory
      write's `status`), else as a union with null (`anyOf: [..., {"type": "null"}]`);
    - keywords outside STRICT_KEYWORDS are dropped;
    - a one-member `allOf` is merged into its parent, and a `$ref` with sibling keywords is
      inlined (strict mode refuses siblings beside `$ref`).
    """
    root = copy.deepcopy(schema)
    return _strict(root, root)


def _strict(node: Any, root: dict) -> Any:
    if not isinstance(node, dict):
        return node
    node = {k: v for k, v in _merge_all_of(node).items() if k in STRICT_KEYWORDS}
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        resolved = _resolve(root, ref)
        node = {**resolved, **{k: v for k, v in node.items() if k != "$ref"}}
        return _strict(node, root)
    _strict_definitions(node, root)
    if node.get("type") == "object" or isinstance(node.get("properties"), dict):
        _strict_object(node, root)
    _strict_subschemas(node, root)
    return node


def _strict_definitions(node: dict, root: dict) -> None:
    """Each schema under `$defs` or `definitions` in strict form, in place."""
    for defs in ("$defs", "definitions"):
        if isinstance(node.get(defs), dict):
            node[defs] = {name: _strict(sub, root) for name, sub in node[defs].items()}


def _strict_subschemas(node: dict, root: dict) -> None:
    """An array's `items` and each `anyOf` member in strict form, in place."""
    if isinstance(node.get("items"), dict):
        node["items"] = _strict(node["items"], root)
    if isinstance(node.get("anyOf"), list):
        node["anyOf"] = [_strict(sub, root) for sub in node["anyOf"]]


def _merge_all_of(node: dict) -> dict:
    """A one-member `allOf` merged into its parent (the parent's own keywords win)."""
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        return {**all_of[0], **{k: v for k, v in node.items() if k != "allOf"}}
    return node


def _strict_object(node: dict, root: dict) -> None:
    """An object node in strict form, in place: every property required, an optional one without a
    default admitting null, and no additional properties."""
    properties = node.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = set(node.get("required") or ())
    strict_props = {}
    for name, sub in properties.items():
        has_default = isinstance(sub, dict) and sub.get("default") is not None
        sub = _strict(sub, root)
        if name not in required and not has_default and not _admits_null(sub, root):
            sub = {"anyOf": [sub, {"type": "null"}]}
        strict_props[name] = sub
    node["properties"] = strict_props
    node["required"] = list(strict_props)
    node["additionalProperties"] = False


def _admits_null(node: Any, root: dict, depth: int = 0) -> bool:
    if not isinstance(node, dict) or depth > 32:
        return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "const" in node and node["const"] is None:
        return True
    if isinstance(node.get("enum"), list) and None in node["enum"]:
        return True
    if isinstance(node.get("$ref"), str):
        return _admits_null(_resolve(root, node["$ref"]), root, depth + 1)
    return any(_admits_null(sub, root, depth + 1) for sub in node.get("anyOf") or ())


def _resolve(root: dict, ref: str) -> dict:
    if not ref.startswith("#/"):
        raise ValueError(f"schema: only local references are supported, not {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    if not isinstance(node, dict):
        raise ValueError(f"schema: {ref!r} is not a schema")
    return node


# -- shared by both OpenAI adapters ---------------------------------------------------------------

def image_data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


class OpenAIAdapter(AdapterErrors):
    """The client, the call and the failure mapping both OpenAI adapters share. A provider other
    than openai itself is a compatible server: its base_url is required and its key optional."""

    REQUEST_ID_LABEL = "x-request-id"
    api = ""
    path = ""
    reply_type: type = object  # the SDK's model of a 200 reply

    def __init__(self, *, provider: str, api_key: str | None, base_url: str | None,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        self.compatible = provider != "openai"
        if self.compatible:
            if not base_url:
                raise ProviderError(f"{provider}: no base_url was given (the server's /v1 address)",
                                    kind="startup", retryable=False, billed=False)
            api_key = api_key or NO_KEY
        elif not api_key:
            raise ProviderError(f"{provider}: no API key was given (the condition's api_key_env is unset or empty)",
                                kind="startup", retryable=False, billed=False)
        self.provider = provider
        self._secrets = (api_key,) if api_key != NO_KEY else ()
        self.max_reply_bytes = max_reply_bytes
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or DEFAULT_BASE_URL, max_retries=0,
                                          http_client=capped_client(openai.DefaultAsyncHttpxClient, max_reply_bytes))
        # The SDK fills these from OPENAI_ORG_ID / OPENAI_PROJECT_ID: nothing implicit may reroute a call.
        self._client.organization = None
        self._client.project = None

    async def aclose(self) -> None:
        await self._client.close()

    def _create(self) -> Any:
        """The SDK's create method of this API, raw-response flavour."""
        raise NotImplementedError

    def _reply(self, data: dict, headers: Any) -> ModelReply:
        """The neutral reply of a 200 whose body is `data`; raises ProviderError for one this API
        calls a failure."""
        raise NotImplementedError

    async def send(self, body: dict, timeout: float) -> ModelReply:
        """One call; raises ProviderError for every transport fault."""
        try:
            async with asyncio.timeout(timeout):  # a whole-call deadline (the SDK's is per read)
                raw = await self._create()(**body, timeout=timeout)
                parsed = raw.parse()
        except Exception as exc:
            if (too_large := oversize_in(exc)) is not None:
                return self._oversized(too_large, "x-request-id")
            failure = self._transport_error(exc, openai)
            if failure is None:
                raise
            raise failure from None
        headers = raw.headers
        try:
            data = raw.http_response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        model_type = self.reply_type
        if not isinstance(parsed, model_type) or not isinstance(data, dict):
            raise self._error(f"a 200 reply that is not a {model_type.__name__}: {raw.http_response.text[:200]!r}",
                              kind="malformed-reply", retryable=False, request_id=headers.get("x-request-id"))
        return self._within_cap(self._reply(data, headers), raw.http_response.content, raw.http_response.status_code)

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        status = exc.status_code
        kind, retryable, billed = classify_status(status)
        body = exc.body
        detail = as_str(get(body, "message")) or (body if isinstance(body, str) and body else None) or exc.message
        code = as_str(get(body, "code")) or as_str(get(body, "type"))
        return self._error(f"HTTP {status}" + (f" {code}" if code else "") + f": {detail}", kind=kind,
                           retryable=retryable, status=status,
                           retry_after=retry_after(exc.response.headers) if retryable else None, billed=billed,
                           request_id=exc.request_id)


class OpenAIChat(OpenAIAdapter):
    api = "chat"
    reply_type = openai.types.chat.ChatCompletion

    def body(self, request: ModelRequest) -> dict:
        sampling = request.sampling
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [
                {"role": "system", "content": request.system},
                *(m for user, reply in request.history for m in (
                    {"role": "user", "content": user}, {"role": "assistant", "content": reply})),
                {"role": "user", "content": [
                    *(part for caption, png in request.earlier_images for part in (
                        {"type": "text", "text": caption},
                        {"type": "image_url", "image_url": {"url": image_data_url(png), "detail": "high"}})),
                    {"type": "image_url", "image_url": {"url": image_data_url(request.image_png), "detail": "high"}},
                    {"type": "text", "text": request.text},
                ]},
            ],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": SCHEMA_NAME, "schema": strict_schema(request.schema), "strict": True}},
        }
        # OpenAI deprecated max_tokens for max_completion_tokens; many compatible servers know only max_tokens.
        body["max_tokens" if self.compatible else "max_completion_tokens"] = \
            sampling.max_output_tokens
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.reasoning_effort is not None:
            body["reasoning_effort"] = sampling.reasoning_effort
        return body

    def _create(self) -> Any:
        return self._client.chat.completions.with_raw_response.create

    def _reply(self, data: dict, headers: Any) -> ModelReply:
        message = get(data, "choices", 0, "message")
        if not isinstance(message, dict):
            raise self._error(f"a 200 reply without choices[0].message: {json.dumps(data)[:200]}",
                              kind="malformed-reply", retryable=False, request_id=headers.get("x-request-id"))
        text = as_str(message.get("content")) or ""
        refusal = as_str(message.get("refusal"))
        if not text and refusal:
            text = REFUSAL_PREFIX + refusal
        usage = data.get("usage")
        return ModelReply(
            text=text,
            model_id=as_str(data.get("model")),
            response_id=as_str(data.get("id")),
            usage=Usage(input_tokens=as_int(get(usage, "prompt_tokens")),
                        output_tokens=as_int(get(usage, "completion_tokens")),
                        cached_tokens=as_int(get(usage, "prompt_tokens_details", "cached_tokens"))),
            stop_reason=as_str(get(data, "choices", 0, "finish_reason")),
            identity={"system_fingerprint": as_str(data.get("system_fingerprint")),
                      "service_tier": as_str(data.get("service_tier")),
                      "request_id": headers.get("x-request-id")},
            raw=data,
            reasoning_tokens=as_int(get(usage, "completion_tokens_details", "reasoning_tokens")),
            cache_write_tokens=as_int(get(usage, "prompt_tokens_details", "cache_write_tokens")),
        )
