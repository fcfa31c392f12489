"""The seam between the model policy and one provider's wire format.

A provider adapter turns a neutral `ModelRequest` into the exact body its API receives, sends it
with the provider's official async SDK (its own retries off: oakwatch makes every retry itself,
so each attempt is logged and charged), and turns the reply into a neutral `ModelReply`. It
classifies every failure:

- a reply the agent is answerable for (text that is not JSON, a schema break, a refusal, a reply
  cut by the output-token limit) is NOT an exception: it comes back as a `ModelReply` whose
  `text` is whatever the model produced (possibly empty), and the action contract judges it;
- a reply whose body passes the manifest's cap (`agent.max_reply_bytes`, enforced while it is read:
  engine.providers.reply_cap) is NOT an exception either: it comes back as a `ModelReply` with
  empty text and `oversize` set (its size and the digest of what was received), an invalid
  output of that attempt; an error status with an oversized body is the transport fault of its
  status;
- a transport fault the provider is answerable for raises `ProviderError` with `retryable` True
  (rate limit, server error, timeout, connection) or False (authentication, permission, a model
  that does not exist, a reply that is not the API's format, a request the API refuses).

Nothing here may ever hold or print an API key: adapters receive it once, in their constructor,
and every text they put in an exception passes through `redact`.

A new provider is one module in engine/providers/ plus one line in engine/providers/__init__.py;
its SDK client gets its httpx client from engine.providers.reply_cap.capped_client, and its send
maps `oversize_in(exc)` to `_oversized` and passes its reply through `_within_cap`.
"""

from __future__ import annotations

import dataclasses
import email.utils
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.loop.records import ReplyOversize, Usage
from engine.policies.policy import ProviderFailure


@dataclass(frozen=True)
class Sampling:
    temperature: float | None = None
    max_output_tokens: int = 1024
    reasoning_effort: str | None = None  # where the API has one ("low", "medium", "high")
    seed: int | None = None  # where the API has one


@dataclass(frozen=True)
class ModelRequest:
    """What the model is asked, independent of any wire format."""

    model: str  # the exact model id asked for
    system: str  # the system prompt, byte for byte as frozen in the experiment
    text: str  # the user turn: everything the agent may see but the screen
    image_png: bytes  # the screen, lossless, upscaled by the manifest's integer factor
    schema: dict  # the response's JSON Schema (the contract stays the judge of what comes back)
    sampling: Sampling
    # Bounded context (engine.loop.context): the segment's earlier turns, (user text, reply text) each,
    # sent before this turn as text messages; empty (the default): one turn, the body as before.
    history: tuple[tuple[str, str], ...] = ()
    # A presentation's earlier screens (engine.policies.presentation): (a caption, the PNG) each, sent
    # before the current screen, oldest first; empty (the default): the current screen alone, as before.
    earlier_images: tuple[tuple[str, bytes], ...] = ()

    @property
    def images(self) -> int:
        return 1 + len(self.earlier_images)


@dataclass
class ModelReply:
    """One answered call, as the provider reported it."""

    text: str  # the agent's response text (a forced tool's arguments as JSON, or the message text)
    model_id: str | None  # the model that answered, as the provider names it (not the one asked for)
    response_id: str | None
    usage: Usage  # the provider's own numbers; a field it did not report stays None
    stop_reason: str | None  # end_turn, tool_use, max_tokens, stop, length, refusal, ...
    identity: dict[str, Any] = field(default_factory=dict)  # system_fingerprint, service_tier, request id
    raw: dict[str, Any] = field(default_factory=dict)  # the API's reply as parsed JSON, for the evidence
    reasoning_tokens: int | None = None  # part of the output tokens, where reported
    cache_write_tokens: int | None = None  # Anthropic's cache_creation_input_tokens, OpenAI's cache_write
    oversize: ReplyOversize | None = None  # the body passed the cap: text and raw are empty, nothing kept


class ProviderError(ProviderFailure):
    """A transport fault: the provider, not the agent, failed this call."""

    def __init__(self, message: str, *, kind: str, retryable: bool, status: int | None = None,
                 retry_after: float | None = None, billed: bool | None = None):
        super().__init__(message)
        self.kind = kind  # authentication, permission, not-found, bad-request, rate-limit, server, timeout,
        #                   connection, malformed-reply, startup
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after  # seconds, from retry-after / retry-after-ms
        self.billed = billed  # False: the provider charged nothing (a 4xx); None: unknown (a timeout)


class CallGate(Protocol):
    """The hook around every model call (sessions.execute.limits implements it): `before_call` may wait
    (a shared rate limiter, counted apart from the agent's time) or refuse the call by raising
    (the experiment's cost ceiling); `after_call` reports what the call cost."""

    def before_call(self) -> None: ...

    def after_call(self, cost_usd: float | None, tokens: int | None) -> None: ...


class ProviderAdapter(Protocol):
    provider: str  # "anthropic", "openai", "openai-compatible"
    api: str  # "messages", "chat", "responses"

    def body(self, request: ModelRequest) -> dict:
        """The exact JSON body the API receives (its SHA-256 is the decision's prompt hash)."""

    async def send(self, body: dict, timeout: float) -> ModelReply:
        """One call, no retries; raises ProviderError for a transport fault."""

    async def aclose(self) -> None: ...


# A key-like token, or a masked one ("sk-proj-****cdef", "abc*****xyz", a bare "********cdef": a mask
# starts a token even after a space, where `\b` would not match).
_KEYISH = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{3,}|(?<![A-Za-z0-9_\-*])[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-*]*")


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Text with every key, and every masked or partial key a provider echoes, removed."""
    for secret in secrets:
        if secret and len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
            for part in (secret[:8], secret[-8:], secret[-4:]):  # providers echo a key's ends
                if len(part) >= 4:
                    text = text.replace(part, "[redacted]")
    return _KEYISH.sub("[redacted]", text)


def classify_status(status: int) -> tuple[str, bool, bool | None]:
    """(kind, retryable, billed) of an HTTP error status."""
    if status == 401:
        return "authentication", False, False
    if status in (402, 403):
        return "permission", False, False
    if status == 404:
        return "not-found", False, False
    if status == 408:
        return "timeout", True, None
    if status == 409:
        return "server", True, None
    if status == 429:
        return "rate-limit", True, False
    if status >= 500:
        return "server", True, None
    return "bad-request", False, False


def retry_after(headers: Any) -> float | None:
    """Seconds to wait, from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            seconds = float(value) / 1000
        except ValueError:
            seconds = math.nan
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
        return max(0.0, seconds) if math.isfinite(seconds) else None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def get(data: Any, *path: str | int) -> Any:
    """data[path[0]][path[1]]..., or None where any step is missing or of the wrong kind."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(data, list) or not -len(data) <= step < len(data):
                return None
        elif not isinstance(data, dict):
            return None
        data = data[step] if isinstance(step, int) else data.get(step)
    return data


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class AdapterErrors:
    """How an adapter words a failure: its name first, the provider's request id last, keys cut out."""

    provider: str
    api: str
    _secrets: tuple[str, ...] = ()
    REQUEST_ID_LABEL = "request-id"
    max_reply_bytes: int  # the manifest's agent.max_reply_bytes

    def _error(self, message: str, *, kind: str, retryable: bool, status: int | None = None,
               retry_after: float | None = None, billed: bool | None = None,
               request_id: str | None = None) -> ProviderError:
        text = f"{self.provider} {self.api}: {message}"
        if request_id:
            text += f" ({self.REQUEST_ID_LABEL} {request_id})"
        return ProviderError(redact(text, self._secrets)[:2000], kind=kind, retryable=retryable, status=status,
                             retry_after=retry_after, billed=billed)

    def _status_error(self, exc: Any) -> ProviderError:
        raise NotImplementedError

    def _oversized(self, too_large: Any, request_id_header: str) -> ModelReply:
        """The reply of an attempt whose body passed the cap (a reply_cap.ReplyTooLarge): nothing of
        it was parsed, so the model, its usage and its cost are unknown (None, never 0). An error
        status is that status's transport fault, its body unread."""
        over: ReplyOversize = too_large.oversize
        headers = too_large.headers
        request_id = headers.get(request_id_header)
        if over.status is not None and over.status >= 400:
            kind, retryable, billed = classify_status(over.status)
            raise self._error(f"HTTP {over.status}, its body unread: {over.describe()}", kind=kind,
                              retryable=retryable, status=over.status,
                              retry_after=retry_after(headers) if retryable else None, billed=billed,
                              request_id=request_id)
        return ModelReply(text="", model_id=None, response_id=None, usage=Usage(), stop_reason=None,
                          identity={"request_id": request_id}, oversize=over)

    def _within_cap(self, reply: ModelReply, body: bytes, status: int | None) -> ModelReply:
        """`reply` as it stands when it and its stored copy fit the cap; else an invalid output. One
        whose body fit but whose copy would not keeps what is known of the call (the model that
        answered, its usage), not its words; one whose body did not fit keeps what an unread one
        does, so the record reads the same however the cap was passed."""
        from engine.providers.reply_cap import check_stored

        over = check_stored(body, reply.raw, reply.text, self.max_reply_bytes, status)
        if over is None:
            return reply
        if over.size_source != "stored":  # a body past the cap (one httpx decoded): judged as if unread
            return ModelReply(text="", model_id=None, response_id=None, usage=Usage(), stop_reason=None,
                              identity={"request_id": (reply.identity or {}).get("request_id")}, oversize=over)
        return dataclasses.replace(reply, text="", raw={}, oversize=over)

    def _transport_error(self, exc: BaseException, sdk: Any) -> ProviderError | None:
        """The failure an exception from a call through `sdk` (anthropic or openai: the same
        exception family) stands for, or None for one that is not the transport's."""
        import json

        import httpx2 as httpx  # what both SDKs speak through

        if isinstance(exc, TimeoutError):
            return self._error("no reply within the timeout", kind="timeout", retryable=True)
        if isinstance(exc, sdk.APIStatusError):
            return self._status_error(exc)
        if isinstance(exc, sdk.APITimeoutError):
            return self._error("the request timed out", kind="timeout", retryable=True)
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            return self._error(f"connection failed: {exc}" + (f" ({cause!r})" if cause is not None else ""),
                               kind="connection", retryable=True)
        if isinstance(exc, sdk.APIResponseValidationError):
            return self._error(f"a reply the SDK could not read: {exc.message}", kind="malformed-reply",
                               retryable=False)
        if isinstance(exc, httpx.TimeoutException):
            return self._error("the reply timed out while being read", kind="timeout", retryable=True)
        if isinstance(exc, httpx.TransportError):
            return self._error(f"the connection broke while reading the reply: {exc!r}", kind="connection",
                               retryable=True)
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError):  # the body said JSON and was not
            return self._error(f"a 200 reply that is not JSON: {exc}", kind="malformed-reply", retryable=False)
        return None
