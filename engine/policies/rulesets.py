"""Rulesets for agents that play through oakwatch's tool server (`oakwatch mcp`, policy mcp and cli).

A ruleset is the exact set of tools the server exposes, frozen with the manifest (agent.ruleset) and
recorded in every trial's result; `oakwatch verify` checks the recorded list is exactly this one
(sessions.audit.verify_tools). Seed 002's human ruleset: the screen and the keys, nothing else.
"""

from __future__ import annotations

from typing import Literal

Ruleset = Literal["human", "standard", "battle"]

RULESETS: dict[str, tuple[str, ...]] = {
    # the screen as an image and the controller: no game state, no helpers
    "human": ("get_screen", "press_keys"),
    # plus the observation the loop builds for any agent (its recent actions, objective, and on the
    # structured information track the game definition's allowlisted fields: engine.games.tracks)
    "standard": ("get_screen", "press_keys", "get_observation"),
    # seed 004's battle tasks: the screen, `observe` (the battle screen's facts, from the game's battle
    # adapter: engine.battle.battle), `apply_team`, `lead`, `action` (FIGHT/SWITCH/SEND, pressed for the agent) and
    # `reset`, which ends the episode and starts the next from the task's start state (an episodic
    # manifest on a game with a battle adapter only: sessions.preflight.tool_conditions)
    "battle": ("get_screen", "observe", "apply_team", "lead", "action", "reset"),
}
NOT_YET: dict[str, str] = {}
# Mechanical shortcuts (engine.loop.shortcuts): one more tool, in any ruleset, where the frozen manifest
# permits at least one (agent.shortcuts); never otherwise.
SHORTCUT_TOOL = "shortcut"


def tools_for(ruleset: str) -> tuple[str, ...]:
    if ruleset in NOT_YET:
        raise ValueError(NOT_YET[ruleset])
    try:
        return RULESETS[ruleset]
    except KeyError:
        raise ValueError(f"no ruleset {ruleset!r} (there are: {', '.join(RULESETS)})") from None


def served_tools(ruleset: str, shortcuts=()) -> tuple[str, ...]:
    """The tools a server of this ruleset lists: the ruleset's, plus `shortcut` where the manifest permits
    shortcuts (agent.shortcuts). What the trial records and verify checks."""
    return tools_for(ruleset) + ((SHORTCUT_TOOL,) if shortcuts else ())
