"""The experiment manifest: every field of seed 000's manifest, strictly validated.

Unknown keys and bad values are rejected with the file and the field named. A manifest is
hashed in a canonical form and frozen, with that hash, into the experiment folder.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.actions import ACTIONS, Action
from sessions.yamlfile import load_yaml_model, parse_yaml_model

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Positive = Annotated[int, Field(ge=1)]


class ManifestError(ValueError):
    """A manifest that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GameSection(_Strict):
    title: str
    definition: str  # game definition YAML: bundled:NAME.yaml or a path
    rom: str  # path relative to the manifest, or bundled:NAME
    rom_sha256: Sha256
    initial_state: str
    initial_state_sha256: Sha256
    first_frame_sha256: Sha256 | None = None
    language: str = "English"
    starter: str | None = None
    text_speed: str | None = None
    battle_style: str | None = None


class EmulatorSection(_Strict):
    name: Literal["pyboy"]
    version: str
    config_sha256: Sha256 | None = None  # computed when absent; checked when given
    frame_width: Positive
    frame_height: Positive
    press_frames: Positive = 4
    settle_frames: Annotated[int, Field(ge=2)] = 12
    speed_multiplier: Annotated[float, Field(ge=0)] = 0  # 0: as fast as possible; display pacing only
    frame_skip: Annotated[int, Field(ge=0, le=0)] = 0  # every frame is emulated; skipping is not supported

    def config_hash(self) -> str:
        """Hash of the settings that change frames (not the display pacing)."""
        core = self.model_dump(include={"name", "version", "frame_width", "frame_height",
                                        "press_frames", "settle_frames", "frame_skip"})
        return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()


class AgentSection(_Strict):
    allowed_actions: Annotated[list[Action], Field(min_length=1)] = list(ACTIONS)
    max_actions_per_decision: Annotated[int, Field(ge=1, le=64)] = 4
    screenshot_every_decision: Literal[True] = True
    recent_action_window: Annotated[int, Field(ge=0, le=1000)] = 12
    invalid_output_retries: Annotated[int, Field(ge=0, le=10)] = 1

    @field_validator("allowed_actions")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("actions listed twice")
        return v


class BudgetSection(_Strict):
    accepted_actions: Positive | None = 2500
    model_decisions: Positive | None = 1200
    wall_time_minutes: Annotated[float, Field(gt=0)] | None = 180
    total_cost_usd: Annotated[float, Field(ge=0)] | None = None
    tokens: Positive | None = None
    unrecoverable_loop_repeats: Annotated[int, Field(ge=2)] | None = 3


class TrialsSection(_Strict):
    per_condition: Annotated[int, Field(ge=1, le=1000)] = 1
    order: Literal["counterbalanced", "sequential"] | list[str] = "counterbalanced"
    restore_initial_state_before_each_trial: Literal[True] = True
    blinding_seed: int | None = None


class Condition(_Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    policy: Literal["scripted", "random", "replay", "human"]
    model: str | None = None
    memory_policy: Literal["recent-window", "persistent"] = "persistent"
    script: str | None = None  # scripted: input script path or bundled:NAME
    script_notes: str | None = None  # scripted: observations and memory operations by decision
    seed: int | None = None  # random: generator seed
    replay_trace: str | None = None  # replay: a recorded trial folder
    actions_per_decision: Annotated[int, Field(ge=1)] = 1

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
    protocol_version: Literal[1] = 1
    created_utc: str | None = None
    game: GameSection
    emulator: EmulatorSection
    agent: AgentSection = AgentSection()
    budgets: BudgetSection = BudgetSection()
    trials: TrialsSection = TrialsSection()
    conditions: Annotated[list[Condition], Field(min_length=1, max_length=26)]

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        ids = [c.id for c in self.conditions]
        if len(set(ids)) != len(ids):
            raise ValueError("conditions: ids must be unique")
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
