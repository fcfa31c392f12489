"""A shortcut step's `times` and `order` (engine.games.gamedef.ShortcutStep, engine.loop.shortcuts): pressed
the argument's row, read from the game's own order when it keeps one; misuse refused by the loader."""

from __future__ import annotations

import pytest

from engine.games.gamedef import ShortcutStep
from engine.loop.shortcuts import _times


@pytest.mark.parametrize("step", [{"repeat": "A", "while_any": [[{"field": "f", "eq": 1}]], "times": 2},
                                  {"press": "DOWN", "times": 2, "order": ["o"]},
                                  {"press": "DOWN", "order": ["o"]}])
def test_times_goes_with_a_press_and_order_with_times_argument(step):
    with pytest.raises(ValueError):
        ShortcutStep.model_validate(step)


def test_the_argument_s_row_is_its_place_in_the_game_s_order():
    step = ShortcutStep.model_validate({"press": "DOWN", "times": "argument", "order": ["o0", "o1", "o2"]})
    # FireRed's gBattlePartyCurrentOrder after a shift to slot 2: 1, 0, 2, 3, 4, 5 (nibbles, high first)
    sample = {"o0": 0x10, "o1": 0x23, "o2": 0x45}
    assert [_times(step, i, lambda: sample) for i in range(6)] == [1, 0, 2, 3, 4, 5]
    plain = ShortcutStep.model_validate({"press": "DOWN", "times": "argument"})
    assert _times(plain, 3, lambda: {}) == 3 and _times(plain, None, lambda: {}) == 0
    assert _times(ShortcutStep.model_validate({"press": "A", "times": 2}), 5, lambda: {}) == 2
    assert _times(ShortcutStep.model_validate({"press": "A"}), 5, lambda: {}) == 1


def test_a_grid_cursor_moves_the_row_then_the_column_and_needs_a_cursor_step():
    from engine.loop.shortcuts import _cursor_presses

    step = ShortcutStep.model_validate({"cursor": "c", "to": "argument", "columns": 2})
    state = {"c": 3}
    moves = {"UP": -2, "DOWN": 2, "LEFT": -1, "RIGHT": 1}

    def now():
        return state

    pressed = []
    for button in _cursor_presses(step, 0, now):
        pressed.append(button)
        state["c"] += moves[button]
    assert pressed == ["UP", "LEFT"] and state["c"] == 0
    assert set(step.buttons()) == {"UP", "DOWN", "LEFT", "RIGHT"}
    with pytest.raises(ValueError):
        ShortcutStep.model_validate({"press": "A", "columns": 2})
