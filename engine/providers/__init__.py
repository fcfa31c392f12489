"""Model providers: one module per wire format, one line each below.

Adapters import their SDK only when made (importing both SDKs costs seconds), so a run that
plays no model never loads one.
"""

from __future__ import annotations

from importlib import import_module

from engine.providers.base import ProviderAdapter

# (provider, api) -> "module:Class"
ADAPTERS: dict[tuple[str, str], str] = {
    ("anthropic", "messages"): "engine.providers.anthropic_messages:AnthropicMessages",
    ("openai", "chat"): "engine.providers.openai_chat:OpenAIChat",
    ("openai", "responses"): "engine.providers.openai_responses:OpenAIResponses",
    ("openai-compatible", "chat"): "engine.providers.openai_chat:OpenAIChat",
}


def make_adapter(provider: str, api: str, *, api_key: str | None, base_url: str | None) -> ProviderAdapter:
    try:
        where = ADAPTERS[(provider, api)]
    except KeyError:
        raise ValueError(f"provider {provider!r} has no {api!r} API here "
                         f"(known: {', '.join(f'{p}/{a}' for p, a in ADAPTERS)})") from None
    module, _, name = where.partition(":")
    return getattr(import_module(module), name)(provider=provider, api_key=api_key, base_url=base_url)
