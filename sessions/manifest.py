"""The experiment manifest: every field of seed 000's manifest, strictly validated.

Unknown keys and bad values are rejected with the file and the field named. A manifest is
hashed in a canonical form and frozen, with that hash, into the experiment folder.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.actions import ACTIONS, Action
from sessions.yamlfile import load_yaml_model, parse_yaml_model

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Seed = Annotated[int, Field(ge=0, lt=2**63)]  # fits every generator and a signed 64-bit field
Count = Annotated[int, Field(ge=1, le=10_000_000)]  # accepted actions, model decisions
Text = Annotated[str, Field(max_length=200)]


def _no_control(value: str) -> str:
    if "\0" in value:
        raise ValueError("path contains a NUL byte")
    if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
        raise ValueError("path contains a control character (a newline or tab?)")
    return value


# A file reference: `bundled:NAME` or a path relative to the manifest.
PathRef = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_no_control)]


def _is_true(value: bool) -> bool:
    if value is not True:
        raise ValueError("must be true (the only supported setting)")
    return value


def _is_protocol_1(value: int) -> int:
    if value != 1:
        raise ValueError("only protocol_version 1 is supported")
    return value


MustBeTrue = Annotated[bool, AfterValidator(_is_true)]


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    # strict: `true` is not a number and "12" is not 12; finite floats only
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class GameSection(_Strict):
    title: Text
    definition: PathRef  # game definition YAML: bundled:NAME.yaml or a path
    rom: PathRef  # path relative to the manifest, or bundled:NAME
    rom_sha256: Sha256
    initial_state: PathRef
    initial_state_sha256: Sha256
    first_frame_sha256: Sha256 | None = None
    language: Text = "English"
    starter: Text | None = None
    text_speed: Text | None = None
    battle_style: Text | None = None


class EmulatorSection(_Strict):
    name: Literal["pyboy"]
    version: Annotated[str, Field(max_length=64)]
    config_sha256: Sha256 | None = None  # computed when absent; checked when given
    frame_width: Annotated[int, Field(ge=1, le=4096)]
    frame_height: Annotated[int, Field(ge=1, le=4096)]
    press_frames: Annotated[int, Field(ge=1, le=60)] = 4  # a second at most: the emulator runs these
    settle_frames: Annotated[int, Field(ge=2, le=600)] = 12
    speed_multiplier: Annotated[float, Field(ge=0, le=64)] = 0  # 0: as fast as possible; display pacing only
    frame_skip: Annotated[int, Field(ge=0, le=0)] = 0  # every frame is emulated; skipping is not supported
    # An emulator call that has not returned after this long has hung (a game can spin the core for
    # good): the watchdog ends the trial as an emulator fault. Not part of the config hash.
    hang_seconds: Annotated[float, Field(ge=1, le=3600)] = 20

    @field_validator("speed_multiplier")
    @classmethod
    def _pacing(cls, v: float) -> float:
        if 0 < v < 0.1:  # slower would stall a run for hours between decisions
            raise ValueError("must be 0 (as fast as possible) or between 0.1 and 64")
        return v

    def config_hash(self) -> str:
        """Hash of the settings that change frames (not the display pacing)."""
        core = self.model_dump(include={"name", "version", "frame_width", "frame_height",
                                        "press_frames", "settle_frames", "frame_skip"})
        return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()


class AgentSection(_Strict):
    allowed_actions: Annotated[list[Action], Field(min_length=1, max_length=64)] = list(ACTIONS)
    max_actions_per_decision: Annotated[int, Field(ge=1, le=64)] = 4
    screenshot_every_decision: MustBeTrue = True
    recent_action_window: Annotated[int, Field(ge=0, le=1000)] = 12
    invalid_output_retries: Annotated[int, Field(ge=0, le=10)] = 1

    @field_validator("allowed_actions")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("actions listed twice")
        return v


class BudgetSection(_Strict):
    accepted_actions: Count | None = 2500
    model_decisions: Count | None = 1200
    wall_time_minutes: Annotated[float, Field(gt=0, le=10_080)] | None = 180  # a week
    # Above zero: a $0 limit would end even a free policy after its first decision (spent >= limit).
    total_cost_usd: Annotated[float, Field(gt=0, le=1_000_000)] | None = None
    tokens: Annotated[int, Field(ge=1, le=10**12)] | None = None
    unrecoverable_loop_repeats: Annotated[int, Field(ge=2, le=1000)] | None = 3


class TrialsSection(_Strict):
    per_condition: Annotated[int, Field(ge=1, le=1000)] = 1
    order: Literal["counterbalanced", "sequential"] | Annotated[
        list[Annotated[str, Field(max_length=8)]], Field(max_length=26 * 1000)] = "counterbalanced"
    restore_initial_state_before_each_trial: MustBeTrue = True
    blinding_seed: Seed | None = None


class Condition(_Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    policy: Literal["scripted", "random", "replay", "human"]
    model: Text | None = None
    memory_policy: Literal["recent-window", "persistent"] = "persistent"
    script: PathRef | None = None  # scripted: input script path or bundled:NAME
    script_notes: PathRef | None = None  # scripted: observations and memory operations by decision
    seed: Seed | None = None  # random: generator seed
    replay_trace: PathRef | None = None  # replay: a recorded trial folder
    actions_per_decision: Annotated[int, Field(ge=1, le=64)] = 1

    @model_validator(mode="after")
    def _policy_needs(self) -> Condition:
        needs = {"scripted": "script", "random": "seed", "replay": "replay_trace"}
        key = needs.get(self.policy)
        if key and getattr(self, key) is None:
            raise ValueError(f"policy {self.policy!r} needs '{key}'")
        if self.script_notes is not None and self.policy != "scripted":
            raise ValueError("script_notes applies only to policy 'scripted'")
        return self


class Manifest(_Strict):
    experiment_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
    protocol_version: Annotated[int, AfterValidator(_is_protocol_1)] = 1
    created_utc: Annotated[str, Field(max_length=64)] | None = None
    game: GameSection
    emulator: EmulatorSection
    agent: AgentSection = AgentSection()
    budgets: BudgetSection = BudgetSection()
    trials: TrialsSection = TrialsSection()
    conditions: Annotated[list[Condition], Field(min_length=1, max_length=26)]

    @field_validator("conditions")
    @classmethod
    def _unique_ids(cls, v: list[Condition]) -> list[Condition]:
        ids = [c.id for c in v]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"ids must be unique ({', '.join(twice)} given twice)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if self.agent.max_actions_per_decision < max(c.actions_per_decision for c in self.conditions):
            raise ValueError("conditions: actions_per_decision exceeds agent.max_actions_per_decision")
        return self

    def canonical_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


def parse_manifest(text: str, source: str) -> Manifest:
    return parse_yaml_model(text, source, Manifest, ManifestError, "a manifest")


def load_manifest(path: str | Path) -> Manifest:
    return load_yaml_model(path, Manifest, ManifestError, "manifest")
