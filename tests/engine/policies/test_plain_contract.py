"""contract_json's shortcut for the responses that differ only in their actions (random play, a key
press, a press_keys call) writes exactly what encoding the whole response writes, for any actions a
client may send."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.policies.base import _PLAIN, UNKNOWN_OBSERVATION, contract_json

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(_PLAIN)), JSON)
def test_the_plain_shortcut_is_the_whole_encoding(summary, actions):
    whole = json.dumps({"reasoning_summary": summary, "observed": UNKNOWN_OBSERVATION, "memory_read": [],
                        "memory_write": [], "actions": actions})
    assert contract_json(actions, summary=summary) == whole


def test_a_press_keys_call_takes_the_shortcut():
    assert "press_keys tool call" in _PLAIN
