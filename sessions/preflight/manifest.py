"""The experiment manifest: every field of seed 000's manifest, strictly validated.

Unknown keys and bad values are rejected with the file and the field named. A manifest is
hashed in a canonical form and frozen, with that hash, into the experiment folder.
"""

import hashlib
import json
import unicodedata
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_serializer, model_validator

from engine.battle.battle import BattleSettings
from engine.emulators.backends import BACKENDS
from engine.games.gamedef import Condition as GameTest
from engine.games.gamedef import Instruction
from engine.loop import memory as engine_memory
from engine.loop.contract import ACTIONS, Action
from engine.providers import DEFAULT_MAX_REPLY_BYTES, PROVIDERS
from sessions.preflight.assets import BUNDLED_PREFIX, bundled_problem
from sessions.preflight.yamlfile import load_yaml_model, parse_yaml_model

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


def _inside_assets(value: str) -> str:
    # Checked as the manifest is parsed, from the name alone: no command opens a file a bundled
    # name points at outside assets/ (sessions.preflight.assets.bundled_problem).
    if value.startswith(BUNDLED_PREFIX):
        problem = bundled_problem(value[len(BUNDLED_PREFIX):])
        if problem is not None:
            raise ValueError(f"{value} {problem}")
    return value


# A file reference: `bundled:NAME` or a path relative to the manifest.
PathRef = Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_no_control),
                    AfterValidator(_inside_assets)]


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
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


def _backend_name(value: str) -> str:
    if value not in BACKENDS:
        raise ValueError(f"no emulator backend {value!r} (there are: {', '.join(BACKENDS)})")
    return value


BackendName = Annotated[str, Field(max_length=32), AfterValidator(_backend_name)]
Version = Annotated[str, Field(min_length=1, max_length=64)]


class StartState(_Strict):
    """One backend's start state: a state file is the emulator's own (a PyBoy state does not load
    in mGBA) and its first frame differs by palette, so each backend lists its own."""

    state: PathRef  # bundled:NAME or a path relative to the manifest
    sha256: Sha256
    first_frame_sha256: Sha256 | None = None  # checked when given (the preflight's is used otherwise)
    emulator_version: Version  # the version that made the state: another version is refused


_MOVED = ("initial_state", "initial_state_sha256", "first_frame_sha256")


class GameSection(_Strict):
    title: Text
    definition: PathRef  # game definition YAML: bundled:NAME.yaml or a path
    rom: PathRef  # path relative to the manifest, or bundled:NAME
    rom_sha256: Sha256
    # Start states by emulator backend (a key of engine.emulators.backends.BACKENDS).
    start_states: Annotated[dict[BackendName, StartState], Field(min_length=1)]
    # Run a ROM the game definition does not list (`oakwatch run --force`); every trial records it.
    allow_unidentified_rom: bool = False
    language: Text = "English"
    starter: Text | None = None
    text_speed: Text | None = None
    battle_style: Text | None = None
    # A goal of the game definition (its `goals`, engine.games.goals; e.g. catch): a trial ends as a success
    # when it is met, instead of at the ladder's final rung. None: the ladder decides (as always).
    goal: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")] | None = None

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data):
        if isinstance(data, dict) and any(k in data for k in _MOVED):
            raise ValueError("initial_state, initial_state_sha256 and first_frame_sha256 moved into "
                             "start_states.<emulator> (state, sha256, first_frame_sha256, emulator_version)")
        return data


class EmulatorSection(_Strict):
    name: BackendName  # a key of engine.emulators.backends.BACKENDS
    # Optional: when given it must be the installed version; the frozen manifest records the installed one.
    version: Version | None = None
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


DECISION_REPLY_BYTES = 16 << 20  # the most one decision's answered replies may hold together (16 MiB)

Predicate = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,79}$")]  # as compared (lower case, underscores)


class MemoryRules(_Strict):
    """The episodic memory's rules (engine.loop.memory.MemoryRules), the same for every condition.

    Defaults are the seed's: a fact is confirmed with visible evidence and confidence >= 0.7, a
    guess is capped at 0.5, retrieval gives at most 24 facts and 4,000 characters, the store holds
    at most 256 facts. An exclusive predicate is single-valued per subject; a possession predicate
    is single-valued per (subject, item); any other predicate is multi-valued."""

    confirm_threshold: Annotated[float, Field(gt=0, le=1)] = engine_memory.CONFIRM_THRESHOLD
    guess_cap: Annotated[float, Field(ge=0, lt=1)] = engine_memory.GUESS_CAP
    retrieve_records: Annotated[int, Field(ge=1, le=1000)] = engine_memory.RETRIEVE_RECORDS
    retrieve_chars: Annotated[int, Field(ge=256, le=200_000)] = engine_memory.RETRIEVE_CHARS  # one fact: ~200
    max_facts: Annotated[int, Field(ge=1, le=100_000)] = engine_memory.MAX_FACTS
    exclusive_predicates: Annotated[list[Predicate], Field(max_length=64)] = list(engine_memory.EXCLUSIVE_PREDICATES)
    possession_predicates: Annotated[list[Predicate], Field(max_length=64)] = list(
        engine_memory.POSSESSION_PREDICATES)

    @field_validator("exclusive_predicates", "possession_predicates")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        twice = sorted({p for p in v if v.count(p) > 1})
        if twice:
            raise ValueError(f"predicates listed twice: {', '.join(twice)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "MemoryRules":
        if self.guess_cap >= self.confirm_threshold:
            raise ValueError("guess_cap must be below confirm_threshold (a guess carries lower confidence)")
        both = sorted(set(self.exclusive_predicates) & set(self.possession_predicates))
        if both:
            raise ValueError(f"predicates both exclusive and possession: {', '.join(both)}")
        return self

    def engine_rules(self) -> engine_memory.MemoryRules:
        return engine_memory.MemoryRules(**self.model_dump())


class ContextSection(_Strict):
    """Bounded context (seed 003; engine.loop.context, docs/context.md): conversation segments of
    `segment_turns` answered calls and a notebook of at most `notebook_chars` characters."""

    segment_turns: Annotated[int, Field(ge=1, le=10_000)]
    notebook_chars: Annotated[int, Field(ge=0, le=100_000)]


class AgentSection(_Strict):
    allowed_actions: Annotated[list[Action], Field(min_length=1, max_length=64)] = list(ACTIONS)
    max_actions_per_decision: Annotated[int, Field(ge=1, le=64)] = 4
    screenshot_every_decision: MustBeTrue = True
    recent_action_window: Annotated[int, Field(ge=0, le=1000)] = 12
    invalid_output_retries: Annotated[int, Field(ge=0, le=10)] = 1
    # A model sees the screen as a lossless PNG enlarged by this whole factor (nearest neighbour):
    # the same viewport in every condition, frozen with the manifest.
    image_scale: Annotated[int, Field(ge=1, le=8)] = 3
    # The most bytes one provider reply may have (its body, decoded). The read stops there: a larger
    # reply is an invalid output recorded by its size and digest, its body not kept
    # (engine.providers.reply_cap). At least 1 KiB (an API's reply envelope); see _replies_fit.
    max_reply_bytes: Annotated[int, Field(ge=1024, le=DECISION_REPLY_BYTES)] = DEFAULT_MAX_REPLY_BYTES
    # The episodic memory's rules, frozen (and hashed) with the manifest.
    memory: MemoryRules = MemoryRules()
    # What the agent is shown besides its own memory (seed 003; engine.games.tracks): `visual`, the screen
    # only, or `structured`, also the game definition's allowlisted fields and the dialogue text.
    information_track: Literal["visual", "structured", "gameplay"] = "visual"
    # The tools an agent playing through the tool server may call (engine.policies.rulesets; policy mcp, cli).
    ruleset: Annotated[str, Field(max_length=32)] = "human"

    @field_validator("ruleset")
    @classmethod
    def _known_ruleset(cls, v: str) -> str:
        from engine.policies.rulesets import tools_for

        tools_for(v)  # raises with the reason: unknown, or not yet implemented
        return v
    # Bounded context (docs/context.md); absent: one turn a request, no notebook, as before.
    context: ContextSection | None = None
    # Mechanical shortcuts the agent may call (seed 003; engine.loop.shortcuts, docs/tasks.md): each one the
    # game definition defines, run as the real presses it stands for; none (the default) for
    # menu-operation tasks, where every press is the agent's.
    shortcuts: Annotated[list[Literal["advance_dialogue", "choose_move", "use_item", "switch_to"]],
                         Field(max_length=4)] = []
    # What every agent is told to do, the same bytes in every condition (the system prompt's objective,
    # the MCP server's instructions). Absent: the chosen goal's, else the game definition's; the frozen
    # manifest always records the one the run used (sessions.experiment.instruction_for).
    instruction: Instruction | None = None

    @field_validator("allowed_actions", "shortcuts")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("listed twice")
        return v

    @model_validator(mode="after")
    def _replies_fit(self) -> "AgentSection":
        # A decision's attempts are one line of responses.jsonl, each keeping at most two copies of
        # a reply of the cap's size (its body and the response taken from it): bounded so the line
        # stays one a reader accepts (sessions.evidence.reader.MAX_LINE, 64 MiB).
        attempts = self.invalid_output_retries + 1
        if self.max_reply_bytes * attempts > DECISION_REPLY_BYTES:
            raise ValueError(f"max_reply_bytes {self.max_reply_bytes:,} times the {attempts} answers a decision may "
                             f"take (invalid_output_retries + 1) passes {DECISION_REPLY_BYTES:,} bytes")
        return self


class BudgetSection(_Strict):
    accepted_actions: Count | None = 2500
    model_decisions: Count | None = 1200
    wall_time_minutes: Annotated[float, Field(gt=0, le=10_080)] | None = 180  # a week
    # Above zero: a $0 limit would end even a free policy after its first decision (spent >= limit).
    total_cost_usd: Annotated[float, Field(gt=0, le=1_000_000)] | None = None
    tokens: Annotated[int, Field(ge=1, le=10**12)] | None = None
    unrecoverable_loop_repeats: Annotated[int, Field(ge=2, le=1000)] | None = 3
    # Across every trial of a run (all workers): no model call is made once spend reaches it.
    experiment_cost_usd: Annotated[float, Field(gt=0, le=1_000_000)] | None = None


class TrialsSection(_Strict):
    per_condition: Annotated[int, Field(ge=1, le=1000)] = 1
    order: Literal["counterbalanced", "sequential"] | Annotated[
        list[Annotated[str, Field(max_length=8)]], Field(max_length=26 * 1000)] = "counterbalanced"
    restore_initial_state_before_each_trial: MustBeTrue = True
    blinding_seed: Seed | None = None


EnvName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class VariantEntry(_Strict):
    """One Parcel Quest variant of a suite (sessions.variants.suites): its seed, here or in the environment (so a
    held-out seed need never be in a file), and whether models could have seen it."""

    seed: Annotated[int, Field(ge=0, lt=2**256)] | None = None
    seed_env: EnvName | None = None
    label: Literal["seen", "held-out"]
    # Written by the run into the frozen manifest: what the variant is (a held-out seed is dropped).
    rom_sha256: Sha256 | None = None
    state_sha256: Sha256 | None = None
    first_frame_sha256: Sha256 | None = None
    optimal_presses: Annotated[dict[Annotated[str, Field(max_length=64)], Annotated[int, Field(ge=1)]],
                               Field(max_length=256)] | None = None

    @model_validator(mode="after")
    def _one_source(self) -> "VariantEntry":
        if self.seed is not None and self.seed_env is not None:
            raise ValueError("give seed or seed_env, not both")
        if self.seed is None and self.seed_env is None and self.rom_sha256 is None:
            raise ValueError("give seed (a number) or seed_env (an environment variable that holds it)")
        return self


class Sampling(_Strict):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_output_tokens: Annotated[int, Field(ge=16, le=200_000)] = 1024
    reasoning_effort: Literal["low", "medium", "high"] | None = None  # where the API has one
    seed: Seed | None = None  # where the API has one; recorded as not pinned where it has none


class PricingRef(_Strict):
    file: PathRef  # a dated price schedule (bundled:NAME or a path)
    sha256: Sha256


class RequestSettings(_Strict):
    """How calls are made and how a provider's transport faults are retried (content faults follow
    the agent contract's invalid_output_retries)."""

    timeout_seconds: Annotated[float, Field(gt=0, le=600)] = 60
    max_attempts: Annotated[int, Field(ge=1, le=10)] = 3  # per decision, for transport faults
    backoff_seconds: Annotated[float, Field(ge=0, le=60)] = 1  # doubled each time, unless retry-after says
    backoff_cap_seconds: Annotated[float, Field(ge=0, le=600)] = 30
    # One limiter per provider and key, shared by every trial (and worker) of a run.
    requests_per_minute: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    tokens_per_minute: Annotated[int, Field(ge=1, le=10**10)] | None = None


class Condition(_Strict):
    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
    policy: Literal["scripted", "random", "replay", "human", "model", "mcp", "cli"]
    model: Text | None = None  # model: the exact model id asked for
    memory_policy: Literal["recent-window", "persistent"] = "persistent"
    script: PathRef | None = None  # scripted: input script path or bundled:NAME
    script_notes: PathRef | None = None  # scripted: observations and memory operations by decision
    seed: Seed | None = None  # random: generator seed
    replay_trace: PathRef | None = None  # replay: a recorded trial folder
    actions_per_decision: Annotated[int, Field(ge=1, le=64)] = 1
    # policy: model
    provider: Annotated[str, Field(max_length=64)] | None = None  # a key of engine.providers.PROVIDERS
    api: Annotated[str, Field(max_length=64)] | None = None  # default: the provider's first
    sampling: Sampling | None = None
    base_url: Annotated[str, Field(max_length=2048, pattern=r"^https?://")] | None = None
    api_key_env: EnvName | None = None  # default: ANTHROPIC_API_KEY / OPENAI_API_KEY; none for a local server
    pricing: PricingRef | None = None
    request: RequestSettings | None = None
    # policy: cli — the client's command line, one argument per item, `{mcp_config}` where the MCP
    # config file oakwatch writes goes, `{mcp_url}` where the server's address goes (sessions.execute.cli_client);
    # the client's `--version` output, checked
    # when given and frozen with the run.
    command: Annotated[list[Annotated[str, Field(max_length=4096)]],  # an empty argument is one: --tools ""
                       Field(min_length=1, max_length=256)] | None = None
    client_version: Text | None = None
    # policy: model — the presentation (engine.policies.presentation, docs/models.md): the current screen
    # (the default), with `screenshot_recall` earlier ones, or `before-after`; and the most images the
    # provider's server takes in one request, where it says (a one-image local model: 1).
    presentation: Literal["current", "before-after"] | None = None
    screenshot_recall: Annotated[int, Field(ge=1, le=64)] | None = None
    max_images: Annotated[int, Field(ge=1, le=1000)] | None = None
    # policy: cli — what the client may reach (sessions.execute.cli_sandbox): the environment variables it is
    # given (besides PATH, and HOME set to its empty working folder), the paths of its own
    # installation it reads (read-only), and, in so many words, whether its own file and shell tools
    # may be open to it (sessions.preflight.tool_conditions.client_tools; refused otherwise).
    env: Annotated[list[EnvName], Field(max_length=64)] | None = None
    client_reads: Annotated[list[Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_no_control)]],
                            Field(max_length=64)] | None = None
    allow_file_and_shell_tools: bool | None = None

    @model_validator(mode="after")
    def _policy_needs(self) -> "Condition":
        self._check_policy_fields()
        self._check_command()
        model_only = ("provider", "api", "sampling", "base_url", "api_key_env", "pricing", "request",
                      "presentation", "screenshot_recall", "max_images")
        if self.policy != "model":
            given = [k for k in model_only if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} apply only to policy 'model'")
            return self
        self._check_model()
        return self

    def _check_policy_fields(self) -> None:
        """The field the policy needs is given; script notes and client fields only with their policy."""
        needs = {"scripted": "script", "random": "seed", "replay": "replay_trace", "model": "model",
                 "cli": "command"}
        key = needs.get(self.policy)
        if key and getattr(self, key) is None:
            raise ValueError(f"policy {self.policy!r} needs '{key}'")
        if self.script_notes is not None and self.policy != "scripted":
            raise ValueError("script_notes applies only to policy 'scripted'")
        cli_only = ("command", "client_version", "env", "client_reads", "allow_file_and_shell_tools")
        if self.policy != "cli" and any(getattr(self, k) is not None for k in cli_only):
            raise ValueError(f"{', '.join(k for k in cli_only if getattr(self, k) is not None)} apply only to "
                             "policy 'cli'")

    def _check_command(self) -> None:
        """A client's command names its program and says where the MCP config (or address) goes."""
        if self.command is None:
            return
        if not self.command[0]:
            raise ValueError("command: its first item is the client's program (empty here)")
        if not any("{mcp_config}" in a or "{mcp_url}" in a for a in self.command):
            raise ValueError("command: put {mcp_config} where the client takes its MCP config file (or {mcp_url} "
                             "where it takes the server's address)")

    def _check_model(self) -> None:
        """A model condition against its provider: a known provider, its API, temperature, address, images."""
        if self.provider not in PROVIDERS:
            raise ValueError(f"policy 'model' needs 'provider', one of: {', '.join(PROVIDERS)}"
                             + (f" (not {self.provider!r})" if self.provider is not None else ""))
        entry = PROVIDERS[self.provider]
        if self.api is not None and self.api not in entry.apis:
            raise ValueError(f"provider {self.provider!r} has no {self.api!r} API (it has: {', '.join(entry.apis)})")
        if not entry.takes_temperature and self.sampling is not None and self.sampling.temperature is not None:
            raise ValueError(f"sampling.temperature: {self.provider}'s current API takes no temperature "
                             "(leave it out; the result records that sampling was not pinned)")
        if entry.needs_base_url and self.base_url is None:
            raise ValueError(f"provider {self.provider!r} needs 'base_url' (the server's /v1 address)")
        self._check_presentation(entry.max_images)

    def _check_presentation(self, provider_max_images: int | None) -> None:
        """The screens a request sends fit the presentation and the provider's image limit."""
        if self.screenshot_recall is not None and self.presentation == "before-after":
            raise ValueError("screenshot_recall goes with presentation current, not before-after (which sends "
                             "the screen before and after the last actions)")
        images, cap = self.presentation_rules().images, self.max_images or provider_max_images
        if cap is not None and images > cap:
            raise ValueError(f"presentation {self.presentation or 'current'} sends {images} images a request; "
                             f"{self.provider} here takes {cap} (max_images)")

    def presentation_rules(self):
        from engine.policies.presentation import PresentationRules

        return PresentationRules(self.presentation or "current", self.screenshot_recall)

    @model_serializer(mode="wrap")
    def _without_unused_cli_fields(self, handler):
        # cli's fields appear only where set: a condition dumps (conditions/<label>.yaml, the manifest's
        # hash) exactly as it did before policy cli existed, so earlier folders still verify.
        data = handler(self)
        for key in ("command", "client_version", "env", "client_reads", "allow_file_and_shell_tools",
                    "presentation", "screenshot_recall", "max_images"):
            if isinstance(data, dict) and data.get(key) is None:
                data.pop(key, None)
        return data

    @property
    def api_name(self) -> str:
        return self.api or next(iter(PROVIDERS[self.provider].apis))

    @property
    def key_env(self) -> str | None:
        """The environment variable holding this condition's API key (None: the server needs none)."""
        entry = PROVIDERS.get(self.provider or "")
        return self.api_key_env or (entry.key_env if entry else None)


PLACEHOLDER = "REPLACE_WITH_"  # the bundled real-game experiments are templates until filled in


def _placeholders(data: object, path: str = "") -> list[str]:
    if isinstance(data, str):
        return [path] if data.startswith(PLACEHOLDER) else []
    if isinstance(data, dict):
        return [p for k, v in data.items() for p in _placeholders(v, f"{path}.{k}" if path else str(k))]
    if isinstance(data, list):
        return [p for i, v in enumerate(data) for p in _placeholders(v, f"{path}.{i}")]
    return []


class EpisodeSection(_Strict):
    """Episodic trials (seed 004; engine.battle.episodes): up to `budget` episodes per trial, each from the start
    state. An episode ends when every `failure` test holds (on two frames running, like a rung), after
    `actions` accepted actions, or on a reset; the trial ends at the goal or after the last episode."""

    budget: Annotated[int, Field(ge=1, le=1000)]
    failure: Annotated[list[GameTest], Field(min_length=1, max_length=64)] | None = None
    actions: Annotated[int, Field(ge=1, le=10_000_000)] | None = None


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
    # A suite of Parcel Quest variants: trials.per_condition trials per variant and condition.
    variants: Annotated[list[VariantEntry], Field(min_length=1, max_length=256)] | None = None
    episodes: EpisodeSection | None = None  # episodic trials (seed 004; docs/tasks.md)
    battle: BattleSettings | None = None  # a battle task's rules (seed 004; engine.battle.battle, docs/tasks.md)

    @model_validator(mode="before")
    @classmethod
    def _filled_in(cls, data):
        found = _placeholders(data)
        if found:
            raise ValueError(f"a template: {', '.join(found[:4])} still say {PLACEHOLDER}...; `oakwatch state new "
                             "--rom YOUR_ROM --game ID --experiment THIS_FILE --output DIR` fills them in")
        return data

    @field_validator("conditions")
    @classmethod
    def _unique_ids(cls, v: list[Condition]) -> list[Condition]:
        ids = [c.id for c in v]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"ids must be unique ({', '.join(twice)} given twice)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Manifest":
        if self.agent.max_actions_per_decision < max(c.actions_per_decision for c in self.conditions):
            raise ValueError("conditions: actions_per_decision exceeds agent.max_actions_per_decision")
        decisions = self.budgets.model_decisions
        for i, c in enumerate(self.conditions):
            if c.screenshot_recall is not None and decisions is not None and c.screenshot_recall >= decisions:
                raise ValueError(f"conditions.{i}.screenshot_recall: {c.screenshot_recall} earlier screenshots, but a "
                                 f"trial of at most {decisions} decisions (budgets.model_decisions) has at most "
                                 f"{decisions - 1}")
        return self

    def trials_per_label(self) -> int:
        """Trials of each condition: per_condition, times the number of variants in a suite."""
        return self.trials.per_condition * (len(self.variants) if self.variants else 1)

    def start_state(self) -> StartState | None:
        """The start state listed for this manifest's emulator (None: none is)."""
        return self.game.start_states.get(self.emulator.name)

    def _plain(self) -> dict:
        data = self.model_dump(mode="json")
        if data.get("variants") is None:  # outside a suite: the same hash as before suites existed
            data.pop("variants", None)
        if data.get("episodes") is None:  # not episodic: the hash it always had
            data.pop("episodes", None)
        if data.get("battle") is None:  # no battle rules: likewise
            data.pop("battle", None)
        if data["agent"].get("information_track") == "visual":  # the default: the hash it always had
            data["agent"].pop("information_track")
        if data["agent"].get("ruleset") == "human":  # likewise: manifests from before rulesets keep their hash
            data["agent"].pop("ruleset")
        if data["game"].get("goal", "") is None:  # no goal: the hash it had before goals existed
            data["game"].pop("goal")
        if data["agent"].get("context", 0) is None:  # no bounded context: the hash it always had
            data["agent"].pop("context")
        if data["agent"].get("shortcuts") == []:  # no shortcuts: likewise
            data["agent"].pop("shortcuts")
        if data["agent"].get("instruction", 0) is None:  # folders frozen before instructions keep their hash
            data["agent"].pop("instruction")
        return data

    def canonical_json(self) -> str:
        return json.dumps(self._plain(), sort_keys=True, separators=(",", ":"))

    def sha256(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def to_yaml(self) -> str:
        return yaml.safe_dump(self._plain(), sort_keys=False, allow_unicode=True)


def parse_manifest(text: str, source: str) -> Manifest:
    return parse_yaml_model(text, source, Manifest, ManifestError, "a manifest")


def load_manifest(path: str | Path) -> Manifest:
    return load_yaml_model(path, Manifest, ManifestError, "manifest")
