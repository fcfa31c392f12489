"""The model policy's own pieces: the prompt built from the observation alone, the screen as a
lossless enlarged PNG, and cost derived from a dated price schedule with each provider's rule."""

import io

import numpy as np
import pytest
from PIL import Image

from engine.policies.model import prompt_text, screen_png
from engine.policies.policy import OBSERVATION_FIELDS, Observation
from engine.providers.pricing import Price, derived_cost

PRICE = Price(input=3.0, cached_input=0.3, cache_write=3.75, output=15.0, reasoning=15.0)


def observation(**changes) -> Observation:
    fields = dict(decision_id=7, frame=np.zeros((144, 160, 3), np.uint8), frame_sha256="a" * 64,
                  recent_actions=("UP", "A"), recent_observations=({"screen": "overworld", "decision_id": 6},),
                  current_objective="find the lab", memory=({"fact_id": "fact-0001", "object": "PARCEL"},),
                  max_actions=4, allowed_actions=("UP", "DOWN", "A"), retry_feedback=None)
    fields.update(changes)
    return Observation(**fields)


def test_the_prompt_says_what_the_observation_holds_and_nothing_else():
    text = prompt_text(observation(retry_feedback="Your previous response was rejected: actions: too many"))
    for expected in ("Decision 7", "at most 4", "UP, DOWN, A", "UP, A", "find the lab", '"fact_id": "fact-0001"',
                     "rejected: actions: too many", '"screen": "overworld"'):
        assert expected in text
    assert set(Observation.__dataclass_fields__) == OBSERVATION_FIELDS  # the information contract is closed
    assert "a" * 64 not in text  # not even the frame's hash


def test_the_same_observation_gives_the_same_prompt():
    assert prompt_text(observation()) == prompt_text(observation())
    assert prompt_text(observation(memory=())) != prompt_text(observation())


@pytest.mark.parametrize("scale", [1, 3])
def test_the_screen_is_a_lossless_png_enlarged_by_a_whole_factor(scale):
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 256, (144, 160, 3), dtype=np.uint8)
    decoded = np.asarray(Image.open(io.BytesIO(screen_png(frame, scale))).convert("RGB"))
    assert decoded.shape == (144 * scale, 160 * scale, 3)
    assert np.array_equal(decoded[::scale, ::scale], frame)  # every pixel kept exactly
    if scale > 1:
        assert np.array_equal(decoded[1::scale, 1::scale], frame)  # as whole blocks, no new colours


def test_anthropic_cost_adds_its_separately_reported_cache_tokens():
    cost = derived_cost(PRICE, "anthropic", input_tokens=1000, output_tokens=200, cached_tokens=4000,
                        cache_write_tokens=500)
    assert cost == pytest.approx((1000 * 3.0 + 4000 * 0.3 + 500 * 3.75 + 200 * 15.0) / 1e6)


def test_openai_cost_takes_cached_out_of_input_and_reasoning_out_of_output():
    price = Price(input=2.5, cached_input=0.25, cache_write=2.5, output=15.0, reasoning=10.0)
    cost = derived_cost(price, "openai", input_tokens=5000, output_tokens=300, cached_tokens=4000,
                        reasoning_tokens=100)
    assert cost == pytest.approx((1000 * 2.5 + 4000 * 0.25 + 200 * 15.0 + 100 * 10.0) / 1e6)


def test_a_missing_count_makes_the_cost_unknown_not_zero():
    assert derived_cost(PRICE, "openai", input_tokens=None, output_tokens=10, cached_tokens=None) is None
    assert derived_cost(PRICE, "anthropic", input_tokens=10, output_tokens=None, cached_tokens=0) is None


def test_refused_writes_are_told_and_absent_when_there_are_none():
    refused = ("'PARCEL': would mark a new fact completed with an unconfirmed write",)
    assert "refused" in prompt_text(observation(refused_writes=refused))
    assert refused[0] in prompt_text(observation(refused_writes=refused))
    assert "refused" not in prompt_text(observation())
