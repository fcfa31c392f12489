"""Variant suites: a manifest's `variants:` list runs every condition on several Parcel Quest variants.

`variants: [{seed: N | seed_env: NAME, label: seen | held-out}]`: each condition gets
`trials.per_condition` trials per variant, trial numbers grouped by variant (trial t plays variant
(t - 1) // per_condition). In preflight each variant is made (sessions.variants.variants), solved, and its
start state made on the run's emulator the bundled way (START.md's boot frames); the frozen manifest
records each entry's ROM, state and first-frame hashes and optimal presses, and drops a held-out
entry's seed (a seed read from the environment never reaches a file). Every trial records its own
variant's ROM and state hashes in trial.json and `variant_label` in its provenance; verify checks
them against the frozen entry, and replay takes the variant ROM's path (`oakwatch replay --rom`).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from engine.games.gamedef import GameDefinition

HELD_OUT_MIN = 1 << 63  # a held-out seed has at least 64 bits: a small one could be found from the ROM hash


class SuiteError(ValueError):
    """A variant cannot be prepared; one line (never the value of a seed read from the environment)."""


@dataclass(frozen=True)
class PreparedVariant:
    index: int
    label: str  # seen | held-out
    rom: bytes
    rom_sha256: str
    state: bytes
    state_sha256: str
    first_frame_sha256: str
    game: GameDefinition  # the base definition with this variant's ROM hash and optimal presses


def seed_of(entry, index: int) -> int:
    """The entry's seed, from the manifest or the environment."""
    from sessions.variants.variants import parse_seed

    where = f"variants.{index}"
    if entry.seed is not None:
        seed = entry.seed
    elif entry.seed_env is None:  # a frozen manifest drops a held-out seed that was written in the file
        raise SuiteError(f"{where}: no seed for this held-out variant (a frozen manifest keeps none): give it "
                         "again with seed_env")
    else:
        raw = os.environ.get(entry.seed_env)
        if raw is None:
            raise SuiteError(f"{where}.seed_env: no environment variable {entry.seed_env}")
        try:
            seed = parse_seed(raw)
        except ValueError as exc:
            raise SuiteError(f"{where}.seed_env: ${entry.seed_env}: {exc}") from None
    if entry.label == "held-out" and seed < HELD_OUT_MIN:
        raise SuiteError(f"{where}: a held-out seed needs at least 64 bits (2**63 or more): a smaller one could "
                         "be found from the variant ROM's hash by trying them all")
    return seed


def prepare_variants(manifest, base_rom: bytes, base_game: GameDefinition, emulator: str) -> list[PreparedVariant]:
    """Make, solve and start every variant of the manifest (SuiteError on the first that fails)."""
    from sessions.variants.variant_files import make_start_state, start_yaml
    from sessions.variants.variants import VariantError, make_variant

    if base_game.id != "parcel-quest":
        raise SuiteError(f"variants: suites are made of Parcel Quest variants, not of {base_game.id}")
    boot = int(start_yaml()["boot_frames"])
    out: list[PreparedVariant] = []
    for i, entry in enumerate(manifest.variants or []):
        seed = seed_of(entry, i)
        try:
            v = make_variant(seed, base_rom)
        except VariantError as exc:
            # the message names the seed: say which entry instead when it came from the environment
            raise SuiteError(f"variants.{i}: " + (str(exc) if entry.seed is not None else
                                                  "no solvable variant for this seed")) from None
        state, first, _ = make_start_state(emulator, v.rom, boot)
        rom_sha = hashlib.sha256(v.rom).hexdigest()
        game = base_game.model_copy(update={"rom_sha256": rom_sha, "optimal_presses_for": rom_sha,
                                            "optimal_presses": dict(v.solution.optimal)})
        out.append(PreparedVariant(i, entry.label, v.rom, rom_sha, state, hashlib.sha256(state).hexdigest(),
                                   first, game))
    return out


def variant_index(trial_number: int, per_condition: int) -> int:
    return (trial_number - 1) // per_condition


def frozen_entries(manifest, variants: list[PreparedVariant]) -> list[dict]:
    """The entries as the frozen manifest records them: hashes and yardstick in, held-out seeds out."""
    out = []
    for entry, v in zip(manifest.variants or [], variants, strict=True):
        data = {"label": entry.label}
        if entry.label == "seen" and entry.seed is not None:
            data["seed"] = entry.seed
        if entry.seed_env is not None:
            data["seed_env"] = entry.seed_env
        data.update(rom_sha256=v.rom_sha256, state_sha256=v.state_sha256, first_frame_sha256=v.first_frame_sha256,
                    optimal_presses=dict(v.game.optimal_presses or {}))
        out.append(data)
    return out
