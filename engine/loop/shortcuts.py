"""Mechanical shortcuts (seed 003) as the real controller presses they stand for.

A task permits some of the game definition's shortcuts (engine.games.gamedef.ShortcutDef; the manifest's
agent.shortcuts, frozen and recorded in every result). An agent calls one instead of listing buttons
(its reply's `shortcut`: {name, argument}); the loop checks it can be taken now (`plan`: the definition's
`when` tests, the argument against the gameplay track's party or inventory), then presses its steps one
by one through the same path as any action (`presses`: each press is chosen from the state the last one
left, counted against the budgets and written to the input log), and the trace keeps the shortcut's
name, argument and expansion. Replaying the input log gives the same frames, as for any trial.

- advance_dialogue: continue-only dialogue, advanced until an actual decision is needed.
- choose_move (a move name), use_item (an item name), switch_to (a party slot, from 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from engine.games.gamedef import GameDefinition, Sample, ShortcutStep
from engine.games.gameplay import read_inventory, read_party
from engine.games.tracks import ReadRange


class ShortcutRefused(ValueError):
    """A shortcut that cannot be taken as called; the message says why (the agent's invalid output)."""


@dataclass
class ShortcutCall:
    name: str
    argument: str | int | None
    index: int | None  # the argument's place in its list (a cursor step's `to: argument`)
    expansion: list[str] = field(default_factory=list)  # the presses made, in order

    def record(self) -> dict:
        return {"name": self.name, "argument": self.argument, "expansion": list(self.expansion)}


# Each shortcut and its argument, as a prompt (describe) and the tool server's shortcut tool name them.
SHORTCUT_WORDS = {"advance_dialogue": "advance_dialogue (no argument: presses on through text until a choice is "
                                      "needed)",
                  "choose_move": "choose_move (argument: a move name of your active party member)",
                  "use_item": "use_item (argument: an item name in your inventory)",
                  "switch_to": "switch_to (argument: a party slot number, from 1)"}


def describe(permitted: tuple[str, ...]) -> str:
    """The prompt's line on the shortcuts an agent may call."""
    words = SHORTCUT_WORDS
    return ("Shortcuts you may give instead of actions, as \"shortcut\": {\"name\": ..., \"argument\": ...} with "
            "\"actions\": [] (each runs as the real button presses it stands for): "
            + "; ".join(words[n] for n in permitted) + ".")


class Shortcuts:
    def __init__(self, game: GameDefinition, permitted: tuple[str, ...], allowed: frozenset[str]):
        missing = [n for n in permitted if n not in game.shortcuts]
        if missing:
            raise ValueError(f"game definition {game.id!r} defines no shortcut {', '.join(missing)}")
        self.game, self.permitted, self.allowed = game, permitted, allowed

    def plan(self, call: dict, sample: Sample, read_range: ReadRange) -> ShortcutCall:
        name, argument = call.get("name"), call.get("argument")
        if name not in self.permitted:
            raise ShortcutRefused(f"shortcut: {name!r} is not permitted here (permitted: "
                                  f"{', '.join(self.permitted) or 'none'})")
        sc = self.game.shortcuts[name]
        if not all(c.holds(sample) for c in sc.when):
            raise ShortcutRefused(f"{name}: not available on this screen (it needs "
                                  f"{'no choice pending' if name == 'advance_dialogue' else 'its menu open'})")
        stray = sorted({b for step in sc.steps for b in step.buttons()} - self.allowed)
        if stray:
            raise ShortcutRefused(f"{name}: its presses include {', '.join(stray)}, which the manifest's "
                                  f"agent.allowed_actions lacks")
        return ShortcutCall(name, argument, self._index(name, argument, read_range, sample))

    def _index(self, name: str, argument, read_range: ReadRange, sample: Sample) -> int | None:
        gameplay = self.game.tracks.gameplay
        if name == "advance_dialogue":
            if argument is not None:
                raise ShortcutRefused("advance_dialogue: takes no argument")
            return None
        if name == "switch_to":
            party = read_party(gameplay.party, read_range)
            if not isinstance(argument, int) or not 1 <= argument <= len(party):
                raise ShortcutRefused(f"switch_to: argument is a party slot from 1 to {len(party)}")
            return argument - 1
        moves = self._choices(name, read_range, sample)
        if not isinstance(argument, str) or argument.casefold() not in [m.casefold() for m in moves]:
            what = "a move of your active party member" if name == "choose_move" else "an item in your inventory"
            raise ShortcutRefused(f"{name}: argument must be {what} ({', '.join(moves) or 'none'})")
        return [m.casefold() for m in moves].index(argument.casefold())

    def _choices(self, name: str, read_range: ReadRange, sample: Sample) -> list[str]:
        """What a choose_move (the active member's moves) or use_item (the inventory) call may name."""
        gameplay = self.game.tracks.gameplay
        if name == "choose_move":
            party = read_party(gameplay.party, read_range)
            return [m["name"] for m in party[0].get("moves", [])] if party else []
        return [i["item"] for i in read_inventory(self.game, gameplay, read_range, sample)]

    def presses(self, call: ShortcutCall, now: Callable[[], Sample]) -> Iterator[str]:
        """The call's presses, each chosen from the state the previous one left (`now` reads it)."""
        for step in self.game.shortcuts[call.name].steps:
            if step.press is not None:
                yield from [step.press] * _times(step, call.index, now)
            elif step.cursor is not None:
                yield from _cursor_presses(step, call.index if step.to == "argument" else step.to, now)
            else:
                yield from _repeat_presses(step, now)


def _times(step: ShortcutStep, index: int | None, now: Callable[[], Sample]) -> int:
    """How many times a press step presses: once, its number, or the argument's row (its index, or its place
    in the `order` the game lists the items in, when the list is ordered otherwise)."""
    if step.times is None:
        return 1
    if step.times != "argument":
        return step.times
    if not step.order:
        return index or 0
    sample = now()
    rows = [n for f in step.order for n in (int(sample[f]) >> 4, int(sample[f]) & 0xF)]
    return rows.index(index) if index in rows else index or 0


def _cursor_presses(step: ShortcutStep, target: int | None, now: Callable[[], Sample]) -> Iterator[str]:
    """Up or down until the cursor field reads `target`, at most `most` presses (on a grid of `columns`, the
    row first, then left or right to the column)."""
    for _ in range(step.most):
        value = now()[step.cursor]
        if value == target:
            return
        if step.columns and value // step.columns == target // step.columns:
            yield step.left if value > target else step.right
        elif step.columns:
            yield step.up if value // step.columns > target // step.columns else step.down
        else:
            yield step.up if value > target else step.down


def _repeat_presses(step: ShortcutStep, now: Callable[[], Sample]) -> Iterator[str]:
    """The repeated press while any of `while_any`'s condition lists holds, at most `most` presses."""
    for _ in range(step.most):
        sample = now()
        if not any(all(c.holds(sample) for c in group) for group in step.while_any):
            return
        yield step.repeat
