"""Running a prepared experiment: its schedule's slots one after another, evidence first,
summary last, whatever happens.

Every slot gets a recorder before anything can fail, and its result is sealed in a `finally`;
the run's summary and sums are written in an outer `finally`. An invalid trial voids its
block (seed 000: a harness failure invalidates the pair, rerun from the same schedule
positions): the block's attempts move under void-<n>/, and `oakwatch run --resume` reruns
the positions left without a valid trial.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from engine.loop.control import RunControl
from engine.loop.display import Display
from engine.loop.events import StateChanged, TrialEnded
from engine.loop.outcomes import INVALID_PROVIDER, is_valid
from engine.loop.records import TrialGenesis, TrialResult
from engine.loop.trial import Trial, TrialConfig, utc_now
from sessions.analysis.summary import summarise
from sessions.annotations.annotation_layer import late_tagger
from sessions.evidence.durable import EvidenceError
from sessions.evidence.experiment_folder import ExperimentFolder
from sessions.evidence.reader import read_results, read_run_log
from sessions.evidence.recorder import policy_files
from sessions.evidence.records import Summary
from sessions.execute.trial_factory import (
    MODEL_POLICIES,
    PolicyFactory,
    encodes_frames_aside,
    make_trial,
    parse_key,
    policy_seed,
    trial_config,
)
from sessions.execute.watchdog import Watchdog
from sessions.preflight.experiment import Prepared


class ExperimentRunner:
    """Runs schedule positions into an ExperimentFolder, feeding `sinks` (engine.loop.display.Display:
    the runner knows its displays only through that protocol) as it goes."""

    def __init__(self, prepared: Prepared, folder: ExperimentFolder, sinks: list[Display] | None = None,
                 control: RunControl | None = None,
                 policy_factories: dict[str, PolicyFactory] | None = None,
                 positions: list[int] | None = None, resumed: bool = False,
                 watchdog_options: dict | None = None, workers: int = 1, executor: str = "local",
                 ray_address: str | None = None):
        from sessions.execute.limits import limits_for

        self.prepared = prepared
        self.workers_auto = workers == 0 and executor == "ray"  # as many as the cluster has CPUs
        self.workers = max(1, workers)
        self.executor = executor  # "local" (this machine's processes) or "ray" (sessions.execute.ray_pool)
        self.ray_address = ray_address  # Ray: an existing cluster's address; None starts a local one
        self.pool = None  # sessions.execute.workers' executor, when made before the run (app.console.run_watch)
        self.limits = limits_for(prepared)  # the experiment's cost ceiling and rate limiters, shared
        if resumed and self.limits.ceiling_usd is not None:
            from sessions.execute.limits import spend_in_folder

            self.limits.carry_over(*spend_in_folder(folder.root))
        self.folder = folder
        self.sinks: list[Display] = sinks or []
        self.control = control or RunControl()
        self.policy_factories = policy_factories or {}
        self.positions = list(range(len(prepared.schedule))) if positions is None else positions
        # Watchdog(hang_seconds=, signal_waiting=, before_exit=): the app passes what it knows.
        self.watchdog_options = watchdog_options or {}
        self.resumed = resumed
        self.results: list[TrialResult] = []  # sealed, in the order run (voided ones included)
        self.summary: Summary | None = None
        self.stop_reason: str | None = None
        self.fatal: str | None = None  # the run could not finish its own records
        self.current_trial: Trial | None = None  # for the watchdog
        self._current_recorder = None
        self._abandoned = threading.Lock()  # the loop thread and the watchdog never both finish a trial
        self.control.on_state(lambda state: self._display(StateChanged(state)))
        self.control.set_late_tagger(late_tagger(folder.root))

    @property
    def quit_requested(self) -> bool:
        return self.control.stopping

    def _display(self, event) -> None:
        for sink in self.sinks:
            sink.handle(event)

    def run(self) -> Summary:
        return asyncio.run(self.run_async())

    def close_unstarted(self, reason: str) -> Summary | None:
        """The run is stopped before its first trial (the operator quit at once): finish the folder."""
        self.stop_reason = reason
        self.summary = self._finish()
        return self.summary

    async def run_async(self) -> Summary:
        if self.workers > 1 or self.executor == "ray":
            from sessions.execute.workers import run_parallel

            return await run_parallel(self)
        voided_blocks: set[int] = set()
        watchdog = Watchdog(self, **{"hang_seconds": self.prepared.manifest.emulator.hang_seconds,
                                     **self.watchdog_options})
        watchdog.start()
        server = self._control_server()
        try:
            await self._play_positions(voided_blocks)
        except EvidenceError as exc:  # a record of the run itself could not be written
            self.stop_reason = "disk-full" if exc.cause == "disk-full" else "evidence-failure"
            self.fatal = str(exc)
            if exc.cause == "disk-full":
                self.folder.release_reserve()  # room for the summary and sums
        except Exception as exc:  # a bug of ours between trials: stop, but still finish the folder
            self.stop_reason = "harness-error"
            self.fatal = f"{type(exc).__name__}: {exc}"
        finally:
            watchdog.stop()
            if server is not None:
                server.stop()
            self.summary = self._finish()
        return self.summary

    async def _play_positions(self, voided_blocks: set[int]) -> None:
        """Each position in turn, one trial at a time, until the run is done or a stop reason is set."""
        for position in self.positions:
            block = self.folder.block_of(position)
            if block[0] in voided_blocks:
                continue  # its block is void: the position is rerun with it, later
            reason = self._stop_before()
            if reason is not None:
                self.stop_reason = reason
                break
            result = await self._run_slot(position)
            if not is_valid(result.outcome):
                voided_blocks.add(block[0])
                self.folder.void_block(block, result)
            reason = self._stop_after(result)
            if reason is not None:
                self.stop_reason = reason
                break

    def _stop_before(self) -> str | None:
        """Why the run stops before its next trial, if it does."""
        if self.control.stopping:
            return self.control.stop_request.reason
        if self.limits.reached:  # a resumed run whose earlier runs spent the ceiling already
            return "experiment-cost-ceiling"
        return None

    def _stop_after(self, result) -> str | None:
        """Why the run stops after this trial, if it does."""
        if self.control.stopping:
            return self.control.stop_request.reason
        if result.outcome == INVALID_PROVIDER:
            return "external-provider-failure"  # seed 001
        if result.invalid_cause == "disk-full":
            return "disk-full"
        if self.limits.reached:
            return "experiment-cost-ceiling"
        return None

    def _control_server(self, handler=None):
        """The run's owner-only control socket (sessions.execute.control_socket), for `oakwatch attach` and
        `serve --operator`; refusals go into the run log. None when no socket can be made here.
        `handler`: the ops' handler (many trials at once pass theirs; default: the trial playing here)."""
        from sessions.execute.control_socket import ControlServer, runner_handler

        def current() -> str | None:
            trial = self.current_trial
            return trial.config.trial_key if trial is not None else None

        def refused(line: str) -> None:
            try:
                self.folder.event("control-refused", detail=line)
            except EvidenceError:
                pass  # the refusal was still refused; the disk is the run's problem, reported elsewhere

        try:
            return ControlServer(self.folder.root, handler or runner_handler(self.control, current),
                                 on_refused=refused).start()
        except OSError:
            return None

    def _finish(self) -> Summary | None:
        """Summary and sums, however the run ended. None only if even they cannot be written."""
        folder = self.folder
        stopped = self.stop_reason is not None
        try:
            limits = self.limits.record()
            if limits is not None or self.workers > 1 or self.executor != "local":
                folder.event("limits", workers=self.workers, executor=self.executor, limits=limits)
            results = read_results(folder.root)
            if self._void_left_behind(results):
                results = read_results(folder.root)
            voids = _read_voids(folder.root)
            recovered = any(e.event == "recovered" for e in read_run_log(folder.root)[0])
            m = self.prepared.manifest
            labels = sorted(self.prepared.labels.values())
            return folder.finish(stopped, self.stop_reason, lambda head: summarise(
                experiment_id=m.experiment_id, manifest_sha256=folder.manifest_sha256,
                schedule_sha256=folder.schedule_sha256, order=folder.schedule.order, results=results,
                voids=voids, labels=labels, stopped_early=stopped, stop_reason=self.stop_reason,
                recovered=recovered, run_log_head=head))
        except EvidenceError as exc:
            self.fatal = self.fatal or str(exc)
            return None
        finally:
            folder.close()

    def _void_left_behind(self, results: dict) -> bool:
        """An invalid attempt still in trials/ lost its void to a failed write (a full disk: the seal's
        sums could not be written): void its block now, so that `--resume` can rerun the positions."""
        voided: set[int] = set()
        for result, _ in sorted(results.values(), key=lambda r: r[0].position):
            if not is_valid(result.outcome) and result.position not in voided:
                block = self.folder.block_of(result.position)
                self.folder.void_block(block, result)
                voided.update(block)
        return bool(voided)

    # -- one slot -------------------------------------------------------------------------------
    def slot(self, position: int) -> tuple[TrialConfig, TrialGenesis]:
        """A schedule position's config and genesis (its attempt counts the voided ones before it)."""
        p = self.prepared
        key = self.folder.schedule.order[position]
        label, number = parse_key(key)
        attempt = 1 + sum(1 for _ in self.folder.root.glob(f"void-*/{key}"))
        config = trial_config(p, position, attempt)
        condition = p.condition(label)
        variant = p.variant(number)  # a suite's trial records its own variant's ROM and state
        genesis = TrialGenesis(
            experiment_id=p.manifest.experiment_id, trial_key=key, condition=label, trial=number,
            position=position, attempt=attempt, manifest_sha256=self.folder.manifest_sha256,
            schedule_sha256=self.folder.schedule_sha256,
            condition_sha256=self.folder.sums[f"conditions/{label}.yaml"],
            rom_sha256=variant.rom_sha256 if variant else p.manifest.game.rom_sha256,
            initial_state_sha256=variant.state_sha256 if variant else p.manifest.start_state().sha256,
            policy=condition.policy, policy_seed=policy_seed(condition, number), started_utc=utc_now(),
            pid=os.getpid())
        return config, genesis

    async def _run_slot(self, position: int) -> TrialResult:
        config, genesis = self.slot(position)
        recorder = self.folder.trial_recorder(genesis, self.prepared.keys.secrets(),
                                              encodes_frames_aside(self.prepared))
        gate = None
        result: TrialResult | None = None
        trial: Trial | None = None
        try:
            gate = local_gate(self.prepared, self.limits, self.control, config) if self.limits.active else None
            trial = self.build_trial(config, recorder, gate)
            self.current_trial, self._current_recorder = trial, recorder
            result = await trial.run()  # records every failure of the trial itself
            if gate is not None:
                result = result.model_copy(update={"limiter_wait_s": round(gate.waited_s, 3)})
        except Exception as exc:  # a bug of ours around the loop: the trial still gets a result
            trial = trial or self.build_trial(config, recorder)
            result = trial.interrupted(f"{type(exc).__name__}: {exc}", cause="harness-bug")
        finally:
            if result is None:  # interrupted from outside (KeyboardInterrupt, cancellation)
                trial = trial or self.build_trial(config, recorder)
                result = trial.interrupted("the run was interrupted")
            self.current_trial = None
            with self._abandoned:
                sealed = recorder.seal(result, trial.provider_failure if trial else None, files=policy_files(trial))
                self.folder.seal_trial(recorder, sealed)
            self.results.append(sealed)
            self._display(TrialEnded(sealed))
        return sealed

    def abandon_hung(self, trial: Trial, detail: str) -> Summary | None:
        """From the watchdog's thread: the loop thread is stuck inside the emulator for good. Seal
        the trial as an emulator fault, void its block and finish the run's records."""
        if not self._abandoned.acquire(timeout=5):
            raise RuntimeError("the run is sealing a trial and does not finish")
        result = trial.hung(detail)
        recorder = self._current_recorder
        sealed = recorder.seal(result)
        self.folder.seal_trial(recorder, sealed)
        self.results.append(sealed)
        self.folder.void_block(self.folder.block_of(sealed.position), sealed)
        self.stop_reason = "emulator-fault"
        self.summary = self._finish()
        return self.summary

    def build_trial(self, config: TrialConfig, recorder, gate=None) -> Trial:
        """The trial with its recorder attached; the emulator and policy start inside `run`,
        so a failure to start them is recorded like any other (the bench times this path)."""
        return make_trial(self.prepared, config, [recorder, *self.sinks], self.control, self.policy_factories, gate)


def local_gate(prepared: Prepared, limits, control: RunControl, config: TrialConfig):
    """The serial path's gate: asks the run's limits in-process."""
    from sessions.execute.limits import CallGate, limiter_key

    condition = prepared.condition(config.label)
    key = limiter_key(condition, prepared.keys.get(condition.id)) if condition.policy in MODEL_POLICIES else ""
    return CallGate(limits.ask, limits.spent, control, key, config.trial_key)


def _read_voids(root: Path):
    from sessions.evidence.reader import FormatProblem, parse
    from sessions.evidence.records import VoidRecord

    out = []
    for vdir in sorted(root.glob("void-*"), key=lambda p: int(p.name.split("-")[1])):
        try:
            out.append(parse(VoidRecord, (vdir / "void.json").read_bytes(), f"{vdir.name}/void.json"))
        except (OSError, FormatProblem):
            continue
    return out
