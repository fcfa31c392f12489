"""One rendering per figure: money, token counts, latency and the unknown, for every display.

The live console (budgets, trace, end lines, summary), attach and `run --workers` (the overview),
review (trial list, decisions, attempts) and the headless printer all format their figures here,
so one value reads the same everywhere. Plain strings only, no Textual (the headless path imports
this).

Rules:
- an unknown figure (None: not measured, or a paid call without a price) reads `unknown`, never
  0 or $0;
- a known zero (a scripted or random policy, which pays nothing) reads `$0.00`;
- a cost keeps at least two decimals and, under a dollar, three significant digits (`$0.0123`,
  `$0.000042`, `$0.50`); from a dollar up, cents (`$1,234.50`). Below `MONEY_FLOOR` a cost that
  is not zero reads `<$0.00000001` rather than rounding to a zero it is not.
"""

from __future__ import annotations

import math

UNKNOWN = "unknown"
MONEY_FLOOR = 1e-8  # the smallest cost written out in digits
SIGNIFICANT = 3  # digits kept of a cost under a dollar


def money(value: float | None) -> str:
    """A cost in US dollars (see the module's rules)."""
    if value is None or isinstance(value, bool) or not math.isfinite(value):
        return UNKNOWN
    sign = "-" if value < 0 else ""
    size = abs(float(value))
    if size == 0:
        return "$0.00"
    if size < MONEY_FLOOR:
        return f"{sign}<${MONEY_FLOOR:.8f}"
    if size >= 1:
        return f"{sign}${size:,.2f}"
    # The exponent after rounding to SIGNIFICANT digits (0.0099999 is 1.00e-02, not 9.99e-03).
    exponent = int(f"{size:.{SIGNIFICANT - 1}e}".split("e")[1])
    decimals = max(2, SIGNIFICANT - 1 - exponent)
    whole, frac = f"{size:.{decimals}f}".split(".")
    frac = frac.rstrip("0").ljust(2, "0")  # no trailing zeros past the cents
    return f"{sign}${whole}.{frac}"


def tokens(value: int | float | None) -> str:
    """A token count with thousands separators ("12,345"), or `unknown`."""
    if value is None or isinstance(value, bool) or (isinstance(value, float) and not math.isfinite(value)):
        return UNKNOWN
    return f"{int(value):,}"


def latency(ms: float | None) -> str:
    """A call's latency from milliseconds: "912ms" under ten seconds, "12.3s" from there, or `unknown`."""
    if ms is None or isinstance(ms, bool) or not math.isfinite(ms):
        return UNKNOWN
    return f"{ms:.0f}ms" if ms < 10_000 else f"{ms / 1000:.1f}s"


def decision_figure(trace: dict, key: str):
    """A usage figure of one decision (`provider_cost_usd`, `input_tokens`, ...) from its trace line
    (a dict): a decision that made no paid call records null there, meaning none, so it reads as a
    known zero; after a paid call null stays unknown."""
    value = trace.get(key)
    if value is None and not trace.get("paid_calls"):
        return 0.0 if key == "provider_cost_usd" else 0
    return value
