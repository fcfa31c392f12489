"""Path efficiency: optimal presses to the deepest rung reached over the actions used to reach it."""

from __future__ import annotations

from engine.loop.trial import PATH_KEYS, path_figures
from sessions.preflight.assets import ASSETS
from sessions.preflight.gamedefs import load_game_definition

GAME = load_game_definition(ASSETS / "games" / "parcel-quest.yaml")


def test_ratio_of_the_optimum_to_the_actions_used():
    opt = GAME.optimal_presses["M3"]
    f = path_figures(GAME, "M3", 2 * opt, GAME.optimal_presses_for)
    assert f == {"path_efficiency": 0.5, "path_optimal_presses": opt, "path_actions": 2 * opt}


def test_a_yardstick_solved_on_another_rom_is_not_used():
    other = "0" * 64
    assert path_figures(GAME, "M3", 40, other) == {"path_efficiency": None, "path_optimal_presses": None,
                                                   "path_actions": 40}
    assert path_figures(GAME.model_copy(update={"optimal_presses_for": None}), "M3", 40, other)["path_efficiency"]


def test_unknown_is_null_never_zero():
    nulls = dict.fromkeys(PATH_KEYS)
    assert path_figures(GAME, None, None) == nulls  # no rung reached
    assert path_figures(None, "M3", 40)["path_efficiency"] is None  # no game definition
    no_yardstick = GAME.model_copy(update={"optimal_presses": None})
    assert path_figures(no_yardstick, "M3", 40, GAME.optimal_presses_for) == {
        "path_efficiency": None, "path_optimal_presses": None, "path_actions": 40}
    assert path_figures(GAME, "M3", 0, GAME.optimal_presses_for)["path_efficiency"] is None  # no action


def test_the_definition_refuses_a_yardstick_for_an_unknown_rung():
    import pytest

    data = GAME.model_dump()
    data["optimal_presses"] = {"M9": 3}
    with pytest.raises(ValueError, match="not a milestone id"):
        type(GAME).model_validate(data)
