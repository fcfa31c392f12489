"""The frozen game controls (seed 000: starter, text speed, battle style) against the start state.

The manifest fixes each control by name (game.starter, game.text_speed, game.battle_style); a game
definition may say where the start state holds it (engine.games.gamedef ControlDef). Each control ends
in one status, recorded in every trial's provenance:

  checked    the definition maps it and the probed start state holds the manifest's value;
  unchecked  the manifest fixes it but the definition does not map it (never a silent pass);
  not-set    the manifest does not fix it.

A mapped control whose probed value differs from the manifest's, or a manifest value the mapping
does not know, is a ControlMismatch: the preflight refuses the experiment.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.games.gamedef import CONTROL_NAMES, GameDefinition, Sample


@dataclass(frozen=True)
class ControlMismatch:
    control: str  # starter, text_speed or battle_style
    message: str  # what differs, without the manifest field's location


def check_controls(game: GameDefinition, wanted: dict[str, str | None], sample: Sample
                   ) -> tuple[dict[str, str], list[ControlMismatch]]:
    """(status by control, mismatches) for the manifest's values `wanted` and the start `sample`."""
    statuses: dict[str, str] = {}
    problems: list[ControlMismatch] = []
    for name in CONTROL_NAMES:
        value = wanted.get(name)
        mapping = game.controls.get(name)
        if value is None:
            statuses[name] = "not-set"
            continue
        if mapping is None:
            statuses[name] = "unchecked"
            continue
        expected = mapping.value_for(value)
        if expected is None:
            problems.append(ControlMismatch(name, f"{value!r} is not a value game definition {game.id} knows "
                                                  f"for {name} ({', '.join(mapping.values)})"))
            continue
        raw = sample[mapping.field]
        probed = mapping.decode(raw) if isinstance(raw, int) else raw
        if probed != expected:
            named = mapping.name_of(probed) if isinstance(probed, int) else None
            shown = repr(named) if named is not None else "a value the definition does not name"
            problems.append(ControlMismatch(name, f"the manifest fixes {value!r} ({mapping.field} = {expected}), "
                                                  f"but the start state holds {shown} ({mapping.field} = {probed})"))
            continue
        statuses[name] = "checked"
    return statuses, problems


def start_differences(expected: dict[str, object], sample: Sample) -> list[str]:
    """`field: probed (preflight value)` for each field of `expected` the restored sample differs in."""
    return [f"{name} {sample.get(name)!r} (preflight {value!r})" for name, value in expected.items()
            if sample.get(name) != value]
