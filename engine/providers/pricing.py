"""What a model call cost, derived from a dated price schedule when the provider does not say.

Providers count tokens differently (../shared/reference/provider-facts.md): Anthropic's
`input_tokens` excludes cache reads and cache writes, which it reports apart; OpenAI's input
includes its cached tokens and its output includes reasoning tokens. Each provider's own numbers
are recorded as reported; the cost is computed here with that rule, and is null whenever a number
it needs was not reported (unknown, never zero).
"""

from __future__ import annotations

from dataclasses import dataclass

PER_TOKENS = 1_000_000


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens of each kind."""

    input: float
    cached_input: float
    cache_write: float
    output: float
    reasoning: float


def derived_cost(price: Price, provider: str, *, input_tokens: int | None, output_tokens: int | None,
                 cached_tokens: int | None, cache_write_tokens: int | None = None,
                 reasoning_tokens: int | None = None) -> float | None:
    if input_tokens is None or output_tokens is None:
        return None
    cached = cached_tokens or 0
    if provider == "anthropic":  # every input kind reported apart; thinking is part of output
        dollars = (input_tokens * price.input + cached * price.cached_input
                   + (cache_write_tokens or 0) * price.cache_write + output_tokens * price.output)
    else:  # OpenAI and compatible servers: cached within input, reasoning within output
        reasoning = reasoning_tokens or 0
        dollars = ((input_tokens - cached) * price.input + cached * price.cached_input
                   + (output_tokens - reasoning) * price.output + reasoning * price.reasoning)
    return round(dollars / PER_TOKENS, 10)
