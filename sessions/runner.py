"""Running a prepared experiment: one trial after another, evidence first, summary last."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from engine.budgets import BudgetLimits
from engine.control import OperatorControl
from engine.emulator import Timing
from engine.events import Sink
from engine.policies.random_policy import RandomPolicy
from engine.policies.replay import ReplayPolicy
from engine.policies.scripted import ScriptedPolicy
from engine.policy import Policy
from engine.pyboy_backend import PyBoyEmulator
from engine.trial import Trial, TrialConfig
from sessions.checksums import write_sums
from sessions.evidence import TrialWriter
from sessions.experiment import Prepared
from sessions.manifest import Condition
from sessions.summary import summarise

PolicyFactory = Callable[[Condition], Policy]


def recorded_attempts(trial_dir: Path) -> list[list[str]]:
    """Per decision, the raw text of every attempt, from a trial folder's responses/."""
    out = []
    for line in (trial_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        response = json.loads((trial_dir / record["raw_response_path"]).read_text(encoding="utf-8"))
        out.append([a["raw"] for a in response["attempts"]])
    return out


def make_policy(prepared: Prepared, condition: Condition) -> Policy:
    if condition.policy == "scripted":
        return ScriptedPolicy(prepared.scripts[condition.id], condition.actions_per_decision,
                              prepared.notes.get(condition.id))
    if condition.policy == "random":
        return RandomPolicy(condition.seed, condition.actions_per_decision)
    if condition.policy == "replay":
        return ReplayPolicy(recorded_attempts(prepared.replay_dirs[condition.id]))
    raise ValueError(f"policy {condition.policy!r} is not available here")


def trial_config(prepared: Prepared, label: str, number: int) -> TrialConfig:
    m = prepared.manifest
    c = prepared.condition(label)
    b = m.budgets
    return TrialConfig(
        experiment_id=m.experiment_id, label=label, trial_number=number,
        trials_total=len(prepared.schedule),
        timing=Timing(m.emulator.press_frames, m.emulator.settle_frames),
        max_actions=m.agent.max_actions_per_decision,
        allowed_actions=tuple(m.agent.allowed_actions),
        invalid_output_retries=m.agent.invalid_output_retries,
        recent_window=m.agent.recent_action_window,
        memory_policy=c.memory_policy,
        limits=BudgetLimits(b.accepted_actions, b.model_decisions, b.wall_time_minutes,
                            b.total_cost_usd, b.tokens),
        loop_repeats=b.unrecoverable_loop_repeats,
        expected_first_frame_sha256=m.game.first_frame_sha256,
    )


class ExperimentRunner:
    """Runs every scheduled trial into `folder`, feeding `sinks` (displays) alongside the writers."""

    def __init__(self, prepared: Prepared, folder: Path, sinks: list[Sink] | None = None,
                 control: OperatorControl | None = None,
                 policy_factories: dict[str, PolicyFactory] | None = None):
        self.prepared = prepared
        self.folder = folder
        self.sinks = sinks or []
        self.control = control or OperatorControl()
        self.policy_factories = policy_factories or {}
        self.results: list[dict] = []
        self.quit_requested = False  # the operator asked to end the whole run

    def _policy(self, condition: Condition) -> Policy:
        factory = self.policy_factories.get(condition.policy)
        return factory(condition) if factory else make_policy(self.prepared, condition)

    def run(self) -> dict:
        return asyncio.run(self.run_async())

    async def run_async(self) -> dict:
        p = self.prepared
        stopped_early, stop_reason = False, None
        for label, number in p.schedule:
            if self.quit_requested:
                stopped_early, stop_reason = True, "operator-quit"
                break
            result = await self._run_trial(label, number)
            self.results.append(result)
            write_sums(self.folder)
            if result["outcome"] == "invalid-provider":
                stopped_early, stop_reason = True, "external-provider-failure"
                break
            self.control = self._fresh_control()
        summary = summarise(self.results, len(p.schedule), stopped_early, stop_reason,
                            sorted(p.labels.values()))
        summary["experiment_id"] = p.manifest.experiment_id
        summary["manifest_sha256"] = p.manifest.sha256()
        (self.folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        write_sums(self.folder)
        return summary

    def _fresh_control(self) -> OperatorControl:
        """Carry pause state and pacing to the next trial; drop a per-trial terminate."""
        old = self.control
        new = OperatorControl(old.speed)
        if old.paused:
            new.pause()
        self.on_new_control(new)
        return new

    def on_new_control(self, control: OperatorControl) -> None:
        """Hook for displays that hold the control (the console)."""

    def build_trial(self, config: TrialConfig) -> Trial:
        """The trial with its evidence writer attached, ready to run (the bench times this path)."""
        p = self.prepared
        writer = TrialWriter(self.folder / "trials" / config.trial_key)
        emulator = None
        try:
            emulator = PyBoyEmulator(p.rom_path)
            policy = self._policy(p.condition(config.label))
        except Exception:
            if emulator is not None:
                emulator.close()
            writer.close()
            raise
        return Trial(config, emulator, p.start_state, p.game, policy, [writer, *self.sinks],
                     self.control, p.provenance())

    async def _run_trial(self, label: str, number: int) -> dict:
        config = trial_config(self.prepared, label, number)
        try:
            trial = self.build_trial(config)
        except Exception as exc:  # could not even start: still leave a complete trial folder
            return self._unstartable(config, exc)
        try:
            return await trial.run()
        finally:
            trial.policy.close()
            trial.emulator.close()

    def _unstartable(self, config: TrialConfig, exc: Exception) -> dict:
        from engine.events import TrialEnded
        from engine.trial import utc_now

        p = self.prepared
        result = {"experiment_id": p.manifest.experiment_id, "condition": config.label,
                  "trial": config.trial_number, "trial_key": config.trial_key, "outcome": "harness-error",
                  "termination_reason": "harness-error", "error": f"{type(exc).__name__}: {exc}",
                  "started_utc": utc_now(), "ended_utc": utc_now(), "milestones": [],
                  "milestones_reached": [], "pre_satisfied": [], "deepest_milestone": None,
                  "progress_points": 0, "total_points": p.game.total_points,
                  "telemetry": {"decisions": 0, "accepted_actions": 0, "cost_usd": None},
                  "derived": {}, "provenance": p.provenance()}
        folder = self.folder / "trials" / config.trial_key
        if not folder.exists():
            folder.mkdir(parents=True)
        (folder / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        for sink in self.sinks:
            sink.handle(TrialEnded(result))
        return result
