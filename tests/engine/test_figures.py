"""engine.figures: the one rendering of a cost, a token count and a latency, for every display."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from engine.figures import MONEY_FLOOR, decision_figure, latency, money, tokens


def dollars(text: str) -> float:
    assert text.startswith("$"), text
    return float(text[1:].replace(",", ""))


def test_unknown_reads_unknown_never_zero():
    assert money(None) == tokens(None) == latency(None) == "unknown"
    assert money(math.nan) == money(math.inf) == "unknown"


def test_a_known_zero_reads_the_same_everywhere():
    assert money(0) == money(0.0) == money(-0.0) == "$0.00"
    assert tokens(0) == "0"


def test_small_costs_keep_their_digits_and_cents_stay_cents():
    assert money(0.0123) == "$0.0123"
    assert money(0.000042) == "$0.000042"
    assert money(0.5) == "$0.50"
    assert money(0.0099999) == "$0.01"  # rounding carries into the next digit
    assert money(1) == "$1.00"
    assert money(1234.5) == "$1,234.50"
    assert money(MONEY_FLOOR / 10) == "<$0.00000001"  # not zero, and never shown as one
    assert tokens(12_345) == "12,345"
    assert latency(912.4) == "912ms" and latency(12_345) == "12.3s"


@given(st.floats(min_value=MONEY_FLOOR, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_a_cost_reads_back_close_to_itself(value):
    text = money(value)
    shown = dollars(text)
    assert shown > 0  # a cost that is not zero never reads $0.00
    whole, frac = text[1:].split(".")
    assert len(frac) >= 2 and (len(frac) == 2 or not frac.endswith("0"))
    if value >= 1:
        assert len(frac) == 2 and abs(shown - value) <= 0.005 + 1e-9 * value
    else:  # three significant digits
        assert abs(shown - value) <= 0.005 * value * (1 + 1e-9)


def test_a_decision_without_a_paid_call_cost_nothing():
    # The trace records null usage for a decision with no paid call (none), and after a paid call
    # null is unknown.
    assert decision_figure({"paid_calls": 0, "provider_cost_usd": None}, "provider_cost_usd") == 0.0
    assert decision_figure({"paid_calls": 0, "input_tokens": None}, "input_tokens") == 0
    assert decision_figure({"paid_calls": 1, "provider_cost_usd": None}, "provider_cost_usd") is None
    assert decision_figure({"paid_calls": 1, "provider_cost_usd": 0.02}, "provider_cost_usd") == 0.02
