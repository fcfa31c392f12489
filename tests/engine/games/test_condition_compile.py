"""A condition's compiled test (what the ladder runs after every action) answers as `holds` does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.games.gamedef import Condition

VALUES = st.integers(0, 2**32 - 1)
ONE_TEST = st.one_of(
    *(st.builds(lambda v, k=k: {k: v}, VALUES) for k in ("eq", "ne", "ge", "le")),
    *(st.builds(lambda b, k=k: {k: b}, st.integers(0, 31)) for k in ("bit_set", "bit_clear")))


@settings(max_examples=300, deadline=None)
@given(ONE_TEST, VALUES)
def test_a_single_test_compiles_to_what_holds_says(test, value):
    condition = Condition(field="f", **test)
    sample = {"f": value}
    assert condition.compile()(sample) is condition.holds(sample)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["eq", "ne", "ge", "le"]), VALUES, min_size=2), VALUES)
def test_several_tests_compile_to_what_holds_says(tests, value):
    condition = Condition(field="f", **tests)
    assert condition.compile()({"f": value}) is condition.holds({"f": value})
