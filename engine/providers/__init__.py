"""Model providers: one module per wire format, one entry each below (the manifest's choices
come from here too).

Adapters import their SDK only when made (importing both SDKs costs seconds), so a run that
plays no model never loads one.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the catalog stays light: the command line reads it to offer its choices
    from engine.providers.base import ProviderAdapter


# The manifest's default agent.max_reply_bytes: a decision's reply is a few KB, and the longest
# answer the default output-token allowance permits fits many times over.
DEFAULT_MAX_REPLY_BYTES = 1 << 20  # 1 MiB


@dataclass(frozen=True)
class Provider:
    apis: dict[str, str]  # api name -> "module:Class"; the first is the default
    key_env: str | None  # the default environment variable holding the key; None: the server may need none
    needs_base_url: bool = False
    takes_temperature: bool = True
    seeded_apis: frozenset[str] = frozenset()  # the APIs that take a sampling seed
    # The most images one request may carry (a presentation's earlier screens and the current one);
    # None: no limit known. A condition's `max_images` states a server's own (a local one-image model).
    max_images: int | None = None


PROVIDERS: dict[str, Provider] = {
    # Anthropic's current Messages API refuses temperature on its newest models: not offered.
    "anthropic": Provider({"messages": "engine.providers.anthropic_messages:AnthropicMessages"},
                          "ANTHROPIC_API_KEY", takes_temperature=False),
    "openai": Provider({"chat": "engine.providers.openai_chat:OpenAIChat",
                        "responses": "engine.providers.openai_responses:OpenAIResponses"}, "OPENAI_API_KEY",
                       seeded_apis=frozenset({"chat"})),
    "openai-compatible": Provider({"chat": "engine.providers.openai_chat:OpenAIChat"}, None, needs_base_url=True,
                                  seeded_apis=frozenset({"chat"})),
}


def make_adapter(provider: str, api: str, *, api_key: str | None, base_url: str | None,
                 max_reply_bytes: int | None = None) -> ProviderAdapter:
    """`max_reply_bytes`: the manifest's agent.max_reply_bytes (None: reply_cap's default)."""
    try:
        where = PROVIDERS[provider].apis[api]
    except KeyError:
        known = ", ".join(f"{p}/{a}" for p, entry in PROVIDERS.items() for a in entry.apis)
        raise ValueError(f"provider {provider!r} has no {api!r} API here (known: {known})") from None
    module, _, name = where.partition(":")
    cap = {} if max_reply_bytes is None else {"max_reply_bytes": max_reply_bytes}
    return getattr(import_module(module), name)(provider=provider, api_key=api_key, base_url=base_url, **cap)
