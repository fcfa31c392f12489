"""Anthropic's Messages API through the official async SDK (`anthropic.AsyncAnthropic`).

The response schema is offered as one tool, `respond`, and forced with `tool_choice`; the reply
text is that tool call's `input` as JSON (else the message's text blocks, else ""), and the action
contract judges it.

Extended thinking. With `sampling.reasoning_effort` set the request enables manual extended
thinking, `thinking: {type: "enabled", budget_tokens: B}`, with B from THINKING_BUDGET_TOKENS:

    low -> 1,024 (the API's documented minimum)   medium -> 4,096   high -> 16,384

Thinking tokens count toward `max_tokens` and the budget must be below it, so `max_tokens` becomes
`max_output_tokens + B`: the answer keeps the whole allowance the manifest gives it. A forced tool
is refused with thinking, so `tool_choice` is then `{type: "auto"}` (the model may answer in text;
the contract judges that too).

Temperature. The SDK (2.x) sends `anthropic-version: 2026-10-21`, under which the API answers 400
to any `temperature`, `top_p` or `top_k`, and the SDK itself no longer has the parameter. A
condition that sets `sampling.temperature` for Anthropic is therefore refused before any call
(ProviderError kind "bad-request", nothing billed) instead of being silently dropped.

Failures (ProviderError kind, retryable, billed): 401 authentication/no/False; 402 and 403
permission/no/False; 404 not-found/no/False; 400, 413, 422 and any other 4xx bad-request/no/False;
408 timeout/yes/None; 409 server/yes/None; 429 rate-limit/yes/False (retry_after from
`retry-after-ms` or `retry-after`); >= 500 including 529 (overloaded) server/yes/None; the SDK's
timeout timeout/yes/None; a connection fault connection/yes/None; a 200 that is not a Message
malformed-reply/no/None. Every message is redacted. A body over the cap (engine.providers.reply_cap)
is never read past it: an invalid output for a 200, else the status's fault.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import anthropic
import httpx2

from engine.loop.records import Usage
from engine.providers.base import (
    AdapterErrors,
    ModelReply,
    ModelRequest,
    ProviderError,
    as_int,
    as_str,
    classify_status,
    retry_after,
)
from engine.providers.reply_cap import DEFAULT_MAX_REPLY_BYTES, capped_client, oversize_in

DEFAULT_BASE_URL = "https://api.anthropic.com"  # given explicitly: ANTHROPIC_BASE_URL is never read
TOOL_NAME = "respond"
TOOL_DESCRIPTION = ("Give your answer for this decision: call this tool once, with arguments that follow its "
                    "input schema exactly.")
THINKING_BUDGET_TOKENS = {"low": 1024, "medium": 4096, "high": 16384}


class AnthropicMessages(AdapterErrors):
    api = "messages"

    def __init__(self, *, provider: str, api_key: str | None, base_url: str | None,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        if not api_key:
            raise ProviderError(f"{provider}: no API key was given (the condition's api_key_env is unset or empty)",
                                kind="startup", retryable=False, billed=False)
        self.provider = provider
        self._secrets = (api_key,)
        self.max_reply_bytes = max_reply_bytes
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url or DEFAULT_BASE_URL, max_retries=0,
            http_client=capped_client(anthropic.DefaultAsyncHttpxClient, max_reply_bytes))

    # -- the request ------------------------------------------------------------------------------

    def body(self, request: ModelRequest) -> dict:
        sampling = request.sampling
        if sampling.temperature is not None:
            raise ProviderError(
                "anthropic messages: the API version this SDK speaks (2026-10-21) refuses `temperature`; "
                "remove sampling.temperature from this condition", kind="bad-request", retryable=False, billed=False)
        body: dict[str, Any] = {
            "model": request.model,
            "system": request.system,
            "max_tokens": sampling.max_output_tokens,
            "messages": [*(m for user, reply in request.history for m in (
                {"role": "user", "content": user}, {"role": "assistant", "content": reply})),
                {"role": "user", "content": [
                *(part for caption, png in request.earlier_images for part in (
                    {"type": "text", "text": caption}, _image(png))),
                _image(request.image_png),
                {"type": "text", "text": request.text},
            ]}],
            "tools": [{"name": TOOL_NAME, "description": TOOL_DESCRIPTION, "input_schema": request.schema}],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
        }
        if sampling.reasoning_effort is not None:
            try:
                budget = THINKING_BUDGET_TOKENS[sampling.reasoning_effort]
            except KeyError:
                raise ProviderError(f"anthropic messages: reasoning_effort {sampling.reasoning_effort!r} is not one of "
                                    f"{', '.join(THINKING_BUDGET_TOKENS)}", kind="bad-request", retryable=False,
                                    billed=False) from None
            body["max_tokens"] = sampling.max_output_tokens + budget
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["tool_choice"] = {"type": "auto"}  # a forced tool is refused with thinking
        return body

    # -- the call ---------------------------------------------------------------------------------

    async def send(self, body: dict, timeout: float) -> ModelReply:
        try:
            async with asyncio.timeout(timeout):  # a whole-call deadline (the SDK's is per read)
                raw = await self._client.messages.with_raw_response.create(**body, timeout=timeout)
                parsed = await raw.parse()
        except Exception as exc:
            if (too_large := oversize_in(exc)) is not None:
                return self._oversized(too_large, "request-id")
            failure = self._transport_error(exc, anthropic)
            if failure is None:
                raise
            raise failure from None
        request_id = raw.headers.get("request-id")
        data = _json_body(raw.http_response)
        if not isinstance(parsed, anthropic.types.Message) or not isinstance(data, dict) \
                or not isinstance(data.get("content"), list):
            raise self._error(f"a 200 reply that is not a message: {_excerpt(raw.http_response)}",
                              kind="malformed-reply", retryable=False, request_id=request_id)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("output_tokens_details") if isinstance(usage.get("output_tokens_details"), dict) else {}
        return self._within_cap(ModelReply(
            text=_reply_text(data["content"]),
            model_id=as_str(data.get("model")),
            response_id=as_str(data.get("id")),
            usage=Usage(input_tokens=as_int(usage.get("input_tokens")),
                        output_tokens=as_int(usage.get("output_tokens")),
                        cached_tokens=as_int(usage.get("cache_read_input_tokens"))),
            stop_reason=as_str(data.get("stop_reason")),
            identity={"request_id": request_id, "service_tier": as_str(usage.get("service_tier"))},
            raw=data,
            reasoning_tokens=as_int(details.get("thinking_tokens")),
            cache_write_tokens=as_int(usage.get("cache_creation_input_tokens")),
        ), raw.http_response.content, raw.http_response.status_code)

    async def aclose(self) -> None:
        await self._client.close()

    # -- failures ---------------------------------------------------------------------------------

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        status = exc.status_code
        kind, retryable, billed = classify_status(status)
        detail = exc.api_message or (exc.body if isinstance(exc.body, str) else None) or exc.message
        kind_name = f" {exc.type}" if isinstance(exc.type, str) else ""
        return self._error(f"HTTP {status}{kind_name}: {detail}", kind=kind, retryable=retryable, status=status,
                           retry_after=retry_after(exc.response.headers) if retryable else None, billed=billed,
                           request_id=exc.request_id)


def _reply_text(content: list) -> str:
    blocks = [b for b in content if isinstance(b, dict)]
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == TOOL_NAME:
            return json.dumps(block.get("input"), sort_keys=False, ensure_ascii=False)
    return "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))


def _json_body(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _excerpt(response: httpx2.Response) -> str:
    return repr(response.text[:200])


def _image(png: bytes) -> dict:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                        "data": base64.b64encode(png).decode("ascii")}}
