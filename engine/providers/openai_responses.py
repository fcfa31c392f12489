"""OpenAI's Responses API through the official async SDK (`openai.AsyncOpenAI`).

Structured output is `text: {format: {type: "json_schema", name: "respond", schema:
strict_schema(request.schema), strict: true}}` (see engine.providers.openai_chat.strict_schema).
The reply text is the response's output text (every `output_text` part of its message items, as
the SDK's `output_text` joins them); a refusal comes back as "refusal: <the model's words>".
`stop_reason` is the incomplete reason (`max_output_tokens`, `content_filter`) when the status is
`incomplete`, else the status (`completed`). Usage: input_tokens (cached included), output_tokens
(reasoning included), input_tokens_details.cached_tokens / cache_write_tokens,
output_tokens_details.reasoning_tokens; absent fields stay None.

Failures are those of the Chat adapter (engine.providers.openai_chat), plus: a 200 whose status
is `failed` carries the API's own error, mapped by its code (rate_limit_exceeded: rate-limit,
retryable, not billed; invalid_*: bad-request, not retryable; anything else: server, retryable,
billed unknown); a 200 without an `output` list is malformed-reply.
"""

from __future__ import annotations

import json
from typing import Any

import openai

from engine.loop.records import Usage
from engine.providers.base import ModelReply, ModelRequest, as_int, as_str, get
from engine.providers.openai_chat import REFUSAL_PREFIX, SCHEMA_NAME, OpenAIAdapter, image_data_url, strict_schema


class OpenAIResponses(OpenAIAdapter):
    api = "responses"
    reply_type = openai.types.responses.Response

    def body(self, request: ModelRequest) -> dict:
        sampling = request.sampling
        body: dict[str, Any] = {
            "model": request.model,
            "instructions": request.system,
            "input": [*(m for user, reply in request.history for m in (
                {"role": "user", "content": [{"type": "input_text", "text": user}]},
                {"role": "assistant", "content": [{"type": "output_text", "text": reply}]})),
                {"role": "user", "content": [
                *(part for caption, png in request.earlier_images for part in (
                    {"type": "input_text", "text": caption},
                    {"type": "input_image", "image_url": image_data_url(png), "detail": "high"})),
                {"type": "input_image", "image_url": image_data_url(request.image_png), "detail": "high"},
                {"type": "input_text", "text": request.text},
            ]}],
            "text": {"format": {"type": "json_schema", "name": SCHEMA_NAME, "schema": strict_schema(request.schema),
                                "strict": True}},
            "max_output_tokens": sampling.max_output_tokens,
            "store": False,  # each decision stands alone; nothing of a trial is kept at the provider
        }
        if sampling.temperature is not None:
            body["temperature"] = sampling.temperature
        if sampling.reasoning_effort is not None:
            body["reasoning"] = {"effort": sampling.reasoning_effort}
        return body

    def _create(self) -> Any:
        return self._client.responses.with_raw_response.create

    def _reply(self, data: dict, headers: Any) -> ModelReply:
        request_id = headers.get("x-request-id")
        output = data.get("output")
        status = as_str(data.get("status"))
        if status == "failed":
            code = as_str(get(data, "error", "code")) or "unknown"
            message = as_str(get(data, "error", "message")) or "no message"
            if code == "rate_limit_exceeded":
                kind, retryable, billed = "rate-limit", True, False
            elif code.startswith("invalid"):
                kind, retryable, billed = "bad-request", False, False
            else:
                kind, retryable, billed = "server", True, None
            raise self._error(f"the response failed: {code}: {message}", kind=kind, retryable=retryable,
                              billed=billed, request_id=request_id)
        if not isinstance(output, list):
            raise self._error(f"a 200 reply without an output list: {json.dumps(data)[:200]}",
                              kind="malformed-reply", retryable=False, request_id=request_id)
        text, refusal = _output_text(output)
        if not text and refusal:
            text = REFUSAL_PREFIX + refusal
        usage = data.get("usage")
        reason = as_str(get(data, "incomplete_details", "reason"))
        return ModelReply(
            text=text,
            model_id=as_str(data.get("model")),
            response_id=as_str(data.get("id")),
            usage=Usage(input_tokens=as_int(get(usage, "input_tokens")),
                        output_tokens=as_int(get(usage, "output_tokens")),
                        cached_tokens=as_int(get(usage, "input_tokens_details", "cached_tokens"))),
            stop_reason=reason if status == "incomplete" and reason else status,
            identity={"service_tier": as_str(data.get("service_tier")), "request_id": request_id},
            raw=data,
            reasoning_tokens=as_int(get(usage, "output_tokens_details", "reasoning_tokens")),
            cache_write_tokens=as_int(get(usage, "input_tokens_details", "cache_write_tokens")),
        )


def _output_text(output: list) -> tuple[str, str]:
    """(the joined output_text parts, the joined refusal parts) of the message items."""
    texts: list[str] = []
    refusals: list[str] = []
    for item in output:
        if get(item, "type") != "message" or not isinstance(get(item, "content"), list):
            continue
        for part in item["content"]:
            if get(part, "type") == "output_text" and isinstance(get(part, "text"), str):
                texts.append(part["text"])
            elif get(part, "type") == "refusal" and isinstance(get(part, "refusal"), str):
                refusals.append(part["refusal"])
    return "".join(texts), "".join(refusals)
