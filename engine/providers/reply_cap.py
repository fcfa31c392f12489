"""The cap on a provider's reply, enforced while the reply is read from the network.

Each adapter hands its official SDK an httpx client of the SDK's own default kind (its timeouts,
connection limits, proxies and keep-alive untouched) with two event hooks:

- on each request, `Accept-Encoding: identity`: the bytes on the wire are then the bytes counted
  and stored, and a declared Content-Length is the reply's true size;
- on each response, before the SDK reads a byte of the body, its stream is wrapped in a
  `CappedStream`, which counts and hashes the body as it arrives and raises `ReplyTooLarge` the
  moment the count passes the cap. The SDK then never holds more than the cap plus one network
  read; the connection is dropped, the rest of the body never read.

A server that compresses anyway (gzip or deflate) is decoded here, in bounded steps, and the
decoded bytes are counted (a small compressed body can decode to gigabytes); the response then
reaches the SDK uncompressed. Another encoding (which oakwatch never asks for) is left to httpx:
its bytes are counted as they come, and its decoded body by `check_stored` once read.

`check_stored` is the last net: the copy of the reply that would be stored (the body as parsed,
re-serialised) must fit the cap too.

The SDKs turn an exception raised inside their read into their own (or pass it through):
`oversize_in` finds ours in the chain.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx2
import pydantic_core

from engine.loop.records import ReplyOversize
from engine.providers import DEFAULT_MAX_REPLY_BYTES

__all__ = ["DEFAULT_MAX_REPLY_BYTES", "ReplyTooLarge", "capped_client", "check_stored", "oversize_in"]
_ZLIB_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": 32 + zlib.MAX_WBITS}


class ReplyTooLarge(Exception):
    """Raised inside the body's read once it passes the cap; carries what was learned."""

    def __init__(self, oversize: ReplyOversize, headers: httpx2.Headers):
        super().__init__(oversize.describe())
        self.oversize = oversize
        self.headers = headers  # the reply's own (request id, retry-after)


class CappedStream(httpx2.AsyncByteStream):
    """A response body that may not pass `cap` bytes (decoded, where this stream decodes)."""

    def __init__(self, inner: httpx2.AsyncByteStream, response: httpx2.Response, cap: int):
        self._inner = inner
        self._cap = cap
        self._status = response.status_code
        self._headers = response.headers.copy()
        self._count = 0
        self._sha = hashlib.sha256()
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        self._zlib = None
        self._declared: int | None = None
        if encoding in _ZLIB_WBITS:
            self._zlib = zlib.decompressobj(_ZLIB_WBITS[encoding])
            del response.headers["content-encoding"]  # decoded here: httpx must not decode again
        elif encoding == "identity":
            length = response.headers.get("content-length", "")
            self._declared = int(length) if length.isdigit() else None

    @property
    def elapsed(self) -> Any:
        """The wrapped body's `elapsed` (httpx reads a response's from its stream)."""
        return getattr(self._inner, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._inner.__aiter__()
        try:
            async for chunk in chunks:
                if self._zlib is None:
                    yield self._take(chunk)
                    continue
                data = chunk
                while data:  # at most what the cap still allows (plus one byte to see it passed), per step
                    piece = self._inflate(data, self._cap - self._count + 1)
                    if piece:
                        yield self._take(piece)
                    data = self._zlib.unconsumed_tail
            if self._zlib is not None and (rest := self._inflate(b"", None)):
                yield self._take(rest)
        finally:  # a body read in part: its generator is closed here, in the task that read it
            if isinstance(chunks, AsyncGenerator):
                await chunks.aclose()

    def _inflate(self, data: bytes, most: int | None) -> bytes:
        try:
            return self._zlib.decompress(data, most) if most is not None else self._zlib.flush()
        except zlib.error as exc:  # what httpx itself raises for a body that does not decode
            raise httpx2.DecodingError(f"the reply's compressed body does not decode: {exc}") from None

    def _take(self, piece: bytes) -> bytes:
        self._count += len(piece)
        self._sha.update(piece)
        if self._count > self._cap:
            whole = self._declared is not None and self._count >= self._declared
            size, source = ((self._count, "received") if whole else
                            (self._declared, "content-length") if self._declared is not None else (None, None))
            raise ReplyTooLarge(ReplyOversize(
                cap_bytes=self._cap, received_bytes=self._count, received_sha256=self._sha.hexdigest(),
                size_bytes=size, size_source=source, status=self._status), self._headers)
        return piece

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(client_class: type[httpx2.AsyncClient], cap: int) -> httpx2.AsyncClient:
    """An SDK's default async httpx client (`anthropic.DefaultAsyncHttpxClient`, ...) whose every
    reply body is bounded by `cap` bytes."""
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        raise ValueError(f"the reply cap must be a positive whole number of bytes, not {cap!r}")

    async def identity(request: httpx2.Request) -> None:
        request.headers["accept-encoding"] = "identity"

    async def bound(response: httpx2.Response) -> None:
        response.stream = CappedStream(response.stream, response, cap)

    return client_class(event_hooks={"request": [identity], "response": [bound]})


def oversize_in(exc: BaseException) -> ReplyTooLarge | None:
    """The ReplyTooLarge behind an exception an SDK raised (it may wrap it), or None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ReplyTooLarge):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def check_stored(body: bytes, data: Any, text: str, cap: int, status: int | None) -> ReplyOversize | None:
    """None when what an attempt stores of this reply fits the cap: `data` (the parsed body) and
    `text` (the agent's response taken from it), each as the recorder writes it. Else what the
    attempt records instead. (The body fitting, its copies almost always do: re-serialised, JSON
    loses its whitespace; only a number Python spells longer, or text re-encoded as JSON, grows.)"""
    stored = max(len(pydantic_core.to_json(data)), len(pydantic_core.to_json(text)))
    if len(body) <= cap and stored <= cap:
        return None
    whole = len(body) > cap  # a body httpx decoded itself (an encoding not decoded above)
    return ReplyOversize(cap_bytes=cap, received_bytes=len(body), received_sha256=hashlib.sha256(body).hexdigest(),
                         size_bytes=len(body) if whole else stored, size_source="received" if whole else "stored",
                         status=status)
