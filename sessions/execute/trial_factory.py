"""How one trial is built from a prepared experiment: its config, its policy, its seeds and
provenance. The serial runner (sessions.execute.runner) and a worker process (sessions.execute.workers, local or on
Ray) build their trials here, the same way."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from engine.battle.episodes import EpisodeRules
from engine.emulators.backends import BACKENDS
from engine.emulators.emulator import Timing
from engine.loop.budgets import BudgetLimits
from engine.loop.control import RunControl
from engine.loop.trial import Trial, TrialConfig
from engine.policies.policy import Policy
from engine.policies.random_policy import RandomPolicy
from engine.policies.replay import ReplayPolicy
from engine.policies.scripted import ScriptedPolicy
from engine.providers import PROVIDERS
from sessions.preflight.experiment import Prepared
from sessions.preflight.manifest import Condition

PolicyFactory = Callable[[Condition, int], Policy]

MODEL_POLICIES = ("model",)  # the policies that make calls the run's shared limits govern


def derive_seed(condition_seed: int, trial_number: int) -> int:
    """Each trial of a random condition plays its own stream, reproducible from the manifest."""
    digest = hashlib.sha256(f"oakwatch-trial-seed:{condition_seed}:{trial_number}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def policy_seed(condition: Condition, trial_number: int) -> int | None:
    return derive_seed(condition.seed, trial_number) if condition.policy == "random" else None


def make_policy(prepared: Prepared, condition: Condition, trial_number: int) -> Policy:
    if condition.policy == "model":
        return make_model_policy(prepared, condition)
    if condition.policy == "scripted":
        return ScriptedPolicy(prepared.scripts[condition.id], condition.actions_per_decision,
                              prepared.notes.get(condition.id))
    if condition.policy == "random":
        return RandomPolicy(policy_seed(condition, trial_number), condition.actions_per_decision)
    if condition.policy == "replay":
        return ReplayPolicy(prepared.recordings[condition.id])
    if condition.policy == "cli":  # a coding-agent CLI, launched against oakwatch's own tool server
        from sessions.execute.cli_client import CliPolicy

        return CliPolicy(condition, prepared.manifest, prepared.keys.secrets())
    raise ValueError(f"policy {condition.policy!r} is not available here")


def make_model_policy(prepared: Prepared, condition: Condition) -> Policy:
    """A model condition's policy; its provider's SDK is imported here, only when one plays."""
    from engine.loop.contract import response_json_schema
    from engine.policies.model import ModelPolicy
    from engine.policies.policy import TransportRetry
    from engine.providers import make_adapter
    from engine.providers.base import Sampling
    from sessions.preflight.manifest import RequestSettings
    from sessions.preflight.manifest import Sampling as SamplingSection

    m = prepared.manifest
    sampling = condition.sampling or SamplingSection()
    request = condition.request or RequestSettings()
    adapter = make_adapter(condition.provider, condition.api_name, api_key=prepared.keys.get(condition.id),
                           base_url=condition.base_url, max_reply_bytes=m.agent.max_reply_bytes)
    policy = ModelPolicy(
        adapter, model=condition.model, system=prepared.system_prompt,
        schema=response_json_schema(m.agent.max_actions_per_decision,
                                    m.agent.context.notebook_chars if m.agent.context else None,
                                    tuple(m.agent.shortcuts) or None),
        sampling=Sampling(sampling.temperature, sampling.max_output_tokens, sampling.reasoning_effort, sampling.seed),
        image_scale=m.agent.image_scale,
        transport=TransportRetry(request.max_attempts, request.backoff_seconds, request.backoff_cap_seconds,
                                 request.timeout_seconds),
        price=prepared.prices.get(condition.id))
    policy.track = m.agent.information_track
    if m.agent.shortcuts:  # the prompt says which shortcuts the agent may call (engine.loop.shortcuts)
        from engine.loop.shortcuts import describe

        policy.shortcuts_note = describe(tuple(m.agent.shortcuts))
    rules = condition.presentation_rules()
    if not rules.plain:  # earlier screens in each request (engine.policies.presentation)
        from engine.policies.model import screen_png
        from engine.policies.presentation import ScreenHistory

        policy.screens = ScreenHistory(rules, lambda frame: screen_png(frame, m.agent.image_scale))
    if m.agent.context is not None:  # bounded context: a fresh conversation for each trial's policy
        from engine.loop.context import ContextRules, Conversation

        policy.context = Conversation(ContextRules(m.agent.context.segment_turns, m.agent.context.notebook_chars))
    return policy


def model_provenance(condition: Condition) -> dict:
    """For a model condition, what the result must say about what could not be pinned (seed 000:
    record a seed the provider does not support, and a floating alias, as such)."""
    if condition.policy != "model":
        return {}
    api = condition.api_name
    sampling = condition.sampling
    seed = sampling.seed if sampling is not None else None
    if api not in PROVIDERS[condition.provider].seeded_apis:
        seed_note = "not supported by the API: repeated trials are the only check of determinism"
    else:
        seed_note = seed if seed is not None else "not set"
    floating = "latest" in condition.model.lower()
    return {"model": {
        "provider": condition.provider, "api": api, "model_asked": condition.model,
        "model_id_pinned": not floating,
        "model_id_note": "a floating alias: the model behind it can change; each reply's model id is in "
                         "responses.jsonl" if floating else "as named; each reply's model id is in responses.jsonl",
        "seed": seed_note, "base_url": condition.base_url,
        "pricing": condition.pricing.model_dump() if condition.pricing else None}}


def encodes_frames_aside(prepared: Prepared) -> bool:
    """Whether the trial's frame store encodes on its own thread: its emulator runs without the GIL."""
    return BACKENDS[prepared.manifest.emulator.name].emulates_without_gil


def parse_key(key: str) -> tuple[str, int]:
    label, _, number = key.partition("-")
    return label, int(number)


def trial_config(prepared: Prepared, position: int, attempt: int = 1) -> TrialConfig:
    m = prepared.manifest
    label, number = prepared.schedule[position]
    c = prepared.condition(label)
    b = m.budgets
    return TrialConfig(
        experiment_id=m.experiment_id, label=label, trial_number=number, position=position,
        schedule_length=len(prepared.schedule),
        timing=Timing(m.emulator.press_frames, m.emulator.settle_frames),
        max_actions=m.agent.max_actions_per_decision,
        allowed_actions=tuple(m.agent.allowed_actions),
        invalid_output_retries=m.agent.invalid_output_retries,
        recent_window=m.agent.recent_action_window,
        memory_policy=c.memory_policy,
        limits=BudgetLimits(b.accepted_actions, b.model_decisions, b.wall_time_minutes,
                            b.total_cost_usd, b.tokens),
        loop_repeats=b.unrecoverable_loop_repeats,
        # Every trial must start on the frame the manifest pins, or else the one the preflight saw.
        expected_first_frame_sha256=variant.first_frame_sha256 if (variant := prepared.variant(number)) else
        m.start_state().first_frame_sha256 or prepared.first_frame_sha256,
        # ...and the hidden state the preflight probed (a variant's state is its own: not checked here)
        expected_start=None if prepared.variant(number) else prepared.start_fields() or None,
        attempt=attempt,
        memory_rules=m.agent.memory.engine_rules(),
        information_track=m.agent.information_track,
        shortcuts=tuple(m.agent.shortcuts),
        goal=m.game.goal,
        episodes=EpisodeRules(m.episodes.budget, tuple(m.episodes.failure or ()), m.episodes.actions)
        if m.episodes is not None else None,
        battle=battle_settings(prepared),
    )


def battle_settings(prepared: Prepared):
    """What the battle ruleset's tools judge by (engine.battle.battle): the task's rules, or where the manifest has
    none, the defaults (the game's party size, no cap, the whole pool). None under any other ruleset."""
    from engine.battle.battle import BattleSettings

    m = prepared.manifest
    if m.agent.ruleset != "battle" or prepared.game.battle is None:
        return None
    return m.battle or BattleSettings(party_limit=prepared.game.battle.slots)


def make_trial(prepared: Prepared, config: TrialConfig, sinks: list, control: RunControl,
               policy_factories: dict[str, PolicyFactory] | None = None, gate=None) -> Trial:
    """One trial, as the serial runner and a worker process (sessions.execute.workers) both build it."""
    p = prepared
    condition = p.condition(config.label)
    factory = (policy_factories or {}).get(condition.policy)

    def policy() -> Policy:
        made = factory(condition, config.trial_number) if factory else make_policy(p, condition, config.trial_number)
        if gate is not None and hasattr(made, "gate"):
            made.gate = gate  # the run's shared limits, asked before every model call
        desk = getattr(made, "desk", None)
        if desk is not None and desk not in sinks:  # a tool-server policy answers calls from what is recorded
            desk.control = desk.control or control
            sinks.append(desk)
        return made

    variant = p.variant(config.trial_number)
    provenance = {**p.provenance(), "policy_seed": policy_seed(condition, config.trial_number),
                  **model_provenance(condition), "memory_rules": config.memory_rules.as_dict(),
                  # a battle task's rules, verbatim (seed 004): in every result of the task
                  **({"battle": p.manifest.battle.model_dump(mode="json")} if p.manifest.battle is not None else {})}
    if variant is None:
        return Trial(config, p.open_emulator, policy, p.start_state, p.game, sinks, control, provenance)

    def emulator():
        return BACKENDS[p.manifest.emulator.name].open(variant.rom, f"variant {variant.index}", variant.game.platform)

    # only the variant's hashes and label: never its seed (a held-out seed stays out of the evidence)
    provenance |= {"rom_sha256": variant.rom_sha256, "initial_state_sha256": variant.state_sha256,
                   "variant_label": variant.label, "variant_index": variant.index}
    return Trial(config, emulator, policy, variant.state, variant.game, sinks, control, provenance)
