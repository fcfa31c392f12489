"""`oakwatch run --workers N`: trials in parallel, each in its own OS process.

Each trial runs in a fresh process (multiprocessing's "forkserver" context: a clean,
single-threaded server process, started once per run with the harness already imported, forks
one child per trial; nothing is ever forked from the driver, which holds threads) with its own
emulator, policy, memory and run control. The child writes its trial folder itself, through the
ordinary recorder, into the one experiment folder, and streams the trial's events to the driver
over its pipe (batched, at most ~0.1 s late), where the driver feeds them to the run's sinks
(headless progress, the console) with the trial's key stamped on each (`event.trial_key`).

The driver (ExperimentRunner, here `_Driver`) keeps everything else, alone: the schedule and
its order of starting (schedule order, up to N at once), blinding, the run log, SHA256SUMS,
voids and the summary, written once after every trial has ended.

Voiding (seed 000: an invalid trial voids its block), with workers:
  - when a trial's result is invalid, its block is void: positions of the block not yet started
    are never started (like the serial run), and trials of the block still running are stopped at
    their next decision boundary (a model call in flight is cancelled and recorded as aborted),
    sealed as harness-error with cause `block-voided`, and kept; once none of the block's trials is
    running, the whole block moves under void-<n>/ with the first invalid trial as its trigger;
  - `oakwatch run --resume` reruns the block's positions, as after a serial run.
Stopping: Ctrl-C, SIGTERM or SIGHUP (app.commands.signals) stop the run: every running trial gets the same
stop request (harness-error, `signal:<NAME>`), is sealed by its worker, and its block voided; an
invalid-provider trial, a full disk, or the experiment's cost ceiling stop the run too, and the
other running trials end as `run-stopped` (or `experiment-cost-ceiling`). Workers ignore those
signals themselves (a terminal's Ctrl-C reaches the whole process group): the driver stops them.
A worker that dies (kill -9, a segfault in the emulator) takes only its trial: the driver finishes
that trial from its folder exactly as `oakwatch recover` would (harness-error, `process-died`, cut
to its last whole decision) and voids its block. A worker whose emulator hangs is caught by its
own watchdog (sessions.execute.watchdog), which seals the trial as an emulator fault and ends the worker.
Human-played positions run in the driver, one at a time, when no worker trial is running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import shutil
import threading
import time
from collections import deque
from multiprocessing.connection import Connection, wait
from types import SimpleNamespace

from engine.loop.display import FLAGS as DISPLAY_FLAGS
from engine.loop.display import wanted
from engine.loop.events import StateChanged, TrialEnded
from engine.loop.outcomes import INVALID_PROVIDER, is_valid
from engine.loop.records import TrialResult
from sessions.evidence import layout
from sessions.evidence.durable import EvidenceError
from sessions.execute.limits import CEILING
from sessions.execute.worker_process import TrialJob, stamp, worker_main

# What the forkserver imports once, before forking trials (worker_process first: it pins thread pools).
PRELOAD = ["sessions.execute.worker_process", "sessions.execute.trial_factory", "sessions.evidence.recorder",
           "sessions.execute.watchdog", "engine.emulators.pyboy_backend", "engine.emulators.preload"]


def _context(extra: tuple[str, ...] = ()):
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([*PRELOAD, *extra])
    return ctx


def preload_for(prepared) -> tuple[str, ...]:
    """What a run's trials import besides the harness: a model condition's policy and its
    provider's SDK (over a second per worker, paid once in the forkserver instead)."""
    from engine.providers import PROVIDERS

    out: list[str] = []
    for c in prepared.manifest.conditions:
        if c.policy == "model":
            module = PROVIDERS[c.provider].apis[c.api_name].partition(":")[0]
            out += ["engine.policies.model", module]
    return tuple(dict.fromkeys(out))




# -- where worker processes come from ------------------------------------------------------------

class ProcessHandle:
    """A trial's worker as the driver sees it: a local forkserver process and its pipe. The Ray
    executor (sessions.execute.ray_pool) hands the driver objects with the same methods."""

    def __init__(self, process: multiprocessing.process.BaseProcess, conn: Connection):
        self.process = process
        self.conn = conn
        self._send_lock = threading.Lock()  # the driver's loop and the control socket's thread both send

    def send(self, message) -> bool:
        with self._send_lock:
            try:
                self.conn.send(message)
                return True
            except (OSError, EOFError, BrokenPipeError, ValueError):
                return False

    def receive(self) -> list:
        out = []
        try:
            while self.conn.poll():
                out.append(self.conn.recv())
        except (OSError, EOFError):
            pass
        return out

    def alive(self) -> bool:
        return self.process.is_alive()

    def join(self, timeout: float) -> None:
        self.process.join(timeout)

    def kill(self) -> None:
        self.process.kill()

    def death(self) -> str:
        code = self.process.exitcode
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return f"the worker process (pid {self.process.pid}) died ({how})"

    def close(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass


class LocalPool:
    """Worker processes on this machine (multiprocessing's forkserver)."""

    name = "local"

    def __init__(self, preload: tuple[str, ...] = ()):
        self.ctx = _context(preload)

    def prestart(self) -> None:
        """Start the forkserver (and multiprocessing's resource tracker) now, while this process's
        stdout and stderr are the real ones: both hand stderr's descriptor to their child, which
        fails once a full-screen app has replaced sys.stderr with an object without one."""
        from multiprocessing import forkserver

        forkserver.ensure_running()

    def launch(self, job: TrialJob) -> ProcessHandle:
        parent, child = self.ctx.Pipe(duplex=True)
        process = self.ctx.Process(target=worker_main, args=(job, child), name=f"oakwatch-{job.genesis.trial_key}",
                                   daemon=True)
        process.start()
        child.close()
        return ProcessHandle(process, parent)

    def wait(self, handles: list[ProcessHandle], timeout: float) -> set[int]:
        """Block until a handle has a message or its process ended (or `timeout`); their ids."""
        objects = [h.conn for h in handles] + [h.process.sentinel for h in handles]
        ready = set(map(id, wait(objects, timeout)))
        return {id(h) for h in handles if id(h.conn) in ready or id(h.process.sentinel) in ready}

    def close(self) -> None:
        pass


# -- the driver -----------------------------------------------------------------------------------

@dataclasses.dataclass
class _Running:
    position: int
    key: str
    handle: ProcessHandle
    started: float
    result: TrialResult | None = None
    result_sha256: str | None = None
    stop_sent: bool = False
    evidence_error: tuple[str, str] | None = None
    arrival_problem: str | None = None  # a Ray trial's folder did not arrive whole
    state: str = "running"  # its run control's state, as its StateChanged events say (paused, stepping)


CONTROL_REPLY_SECONDS = 5.0


class _Driver:
    def __init__(self, runner, pool=None):
        self.r = runner
        self.folder = runner.folder
        self.pool = pool or LocalPool()
        self.running: dict[int, _Running] = {}
        self.by_key: dict[str, _Running] = {}  # read by the control socket's thread
        self.voided: set[int] = set()  # first positions of void blocks
        self.void_waiting: dict[int, TrialResult] = {}  # block start -> trigger, until its trials end
        self.stop_request: tuple[str, str | None, str] | None = None  # (reason, detail, cause) for running trials
        self._replies: dict[int, list] = {}  # control op id -> [Event, reply]
        self._reply_ids = iter(range(1, 1 << 62))
        self._replies_lock = threading.Lock()
        # What the driver's displays ask for (engine.loop.display): a display takes every decision unless
        # it says otherwise; with no display (a headless bench, a script's runner) a worker ships none:
        # pickling each decision's records to a driver that hands them to nobody cost the driver a tenth
        # of a core and each worker a few per cent.
        self.wants = {flag: wanted(runner.sinks, flag) for flag in DISPLAY_FLAGS}

    # -- starting -------------------------------------------------------------------------------
    def _limit_key(self, position: int) -> str | None:
        from sessions.execute.limits import limiter_key
        from sessions.execute.trial_factory import MODEL_POLICIES, parse_key

        if not self.r.limits.active:
            return None
        p = self.r.prepared
        c = p.condition(parse_key(self.folder.schedule.order[position])[0])
        return limiter_key(c, p.keys.get(c.id)) if c.policy in MODEL_POLICIES else ""

    def start(self, position: int) -> None:
        r = self.r
        config, genesis = r.slot(position)
        job = TrialJob(r.prepared, str(self.folder.root), genesis, config, r.policy_factories or None, self.wants,
                       r.watchdog_options.get("hang_seconds", r.prepared.manifest.emulator.hang_seconds),
                       self._limit_key(position))
        w = _Running(position, genesis.trial_key, self.pool.launch(job), time.monotonic())
        self.running[position] = w
        self.by_key[w.key] = w

    # -- the operator's control socket ------------------------------------------------------------
    def control_handler(self):
        """The run's control socket, over many trials: an op names its trial, and goes to the
        worker playing it (its reply comes back); a human trial in the driver is run's own."""
        from sessions.execute.control_socket import runner_handler

        human = runner_handler(self.r.control, lambda: self.r.current_trial.config.trial_key
                               if self.r.current_trial is not None else None)

        def handle(message: dict) -> dict:
            op = message.get("op")
            if op == "status":
                running = dict(self.by_key)
                return {"ok": True, "running": sorted(running), "state": self.r.control.state,
                        "paused_trials": sorted(k for k, w in running.items() if w.state in ("paused", "stepping")),
                        "trial_states": {k: w.state for k, w in sorted(running.items())},  # paused, stepping, ...
                        "stopping": self.stop_request is not None}
            key = message.get("trial")
            if not isinstance(key, str) or not key:
                return {"ok": False, "error": "name the trial (\"trial\": KEY)"}
            w = self.by_key.get(key)
            if w is None:
                if self.r.current_trial is not None:
                    return human(message)
                return {"ok": False, "error": f"trial {key} is not running"}
            with self._replies_lock:
                ident = next(self._reply_ids)
                waiter = self._replies[ident] = [threading.Event(), None]
            try:
                if not w.handle.send(("control", ident, message)):
                    return {"ok": False, "error": f"trial {key} has ended"}
                if not waiter[0].wait(CONTROL_REPLY_SECONDS):
                    return {"ok": False, "error": f"trial {key} did not answer within {CONTROL_REPLY_SECONDS:.0f} s"}
                return waiter[1]
            finally:
                with self._replies_lock:
                    self._replies.pop(ident, None)

        return handle

    def _control_reply(self, ident: int, reply: dict) -> None:
        with self._replies_lock:
            waiter = self._replies.get(ident)
        if waiter is not None:
            waiter[1] = reply
            waiter[0].set()

    # -- the loop -------------------------------------------------------------------------------
    async def run(self) -> None:
        r = self.r
        pending = deque(r.positions)
        while True:
            self._check_stops()
            await self._fill(pending)
            if not self.running:
                if self.stop_request is not None or r.stop_reason is not None or not pending:
                    break
                continue
            await self._reap()
            self._void_ready()

    async def _fill(self, pending: deque) -> None:
        """Start pending positions while workers are free and nothing stops the run; skip voided blocks;
        play a human's position here, alone, once no worker runs."""
        r = self.r
        while self.stop_request is None and r.stop_reason is None and pending and len(self.running) < r.workers:
            position = pending[0]
            if self.folder.block_of(position)[0] in self.voided:
                pending.popleft()
                continue
            if self._human(position):
                if self.running:
                    return  # a human plays alone, in the driver
                pending.popleft()
                result = await r._run_slot(position)
                self._after(result)
                self._void_ready()
                self._check_stops()
                continue
            pending.popleft()
            self.start(position)

    async def _reap(self) -> None:
        """Wait briefly for the workers; drain what they sent, and end each one that finished or died."""
        handles = [w.handle for w in self.running.values()]
        ready = await asyncio.to_thread(self.pool.wait, handles, 0.2)
        for w in list(self.running.values()):
            if id(w.handle) in ready:
                self._drain(w)
            if w.result is not None or not w.handle.alive():
                self._drain(w)
                w.handle.join(5 if w.result is not None else 0.5)
                self._drain(w)
                if w.handle.alive() and w.result is None:
                    continue
                self._ended(w)

    def _human(self, position: int) -> bool:
        from sessions.execute.trial_factory import parse_key

        return self.r.prepared.condition(parse_key(self.folder.schedule.order[position])[0]).policy == "human"

    def _check_stops(self) -> None:
        r = self.r
        if self.stop_request is None:
            if r.control.stopping:
                stop = r.control.stop_request
                r.stop_reason = stop.reason
                self._stop_all(stop.reason, stop.detail, stop.cause or stop.reason)
            elif r.limits.reached:
                r.stop_reason = CEILING
                self._stop_all(CEILING, "the experiment's cost ceiling (budgets.experiment_cost_usd) was reached",
                               CEILING)
            elif r.stop_reason is not None:
                self._stop_all("run-stopped", f"the run stopped: {r.stop_reason}", "run-stopped")

    def _stop_all(self, reason: str, detail: str | None, cause: str) -> None:
        self.stop_request = (reason, detail, cause)
        for w in self.running.values():
            self._send_stop(w, reason, detail, cause)

    def _send_stop(self, w: _Running, reason: str, detail: str | None, cause: str) -> None:
        if w.stop_sent:
            return
        w.stop_sent = True
        w.handle.send(("stop", reason, detail, cause))

    def _drain(self, w: _Running) -> None:
        r = self.r
        for message in w.handle.receive():
            kind = message[0]
            if kind == "events":
                for event in message[1]:
                    if isinstance(event, StateChanged):
                        w.state = event.state
                    r._display(event)
            elif kind == "ask":
                w.handle.send(("answer", r.limits.ask(message[1])))
            elif kind == "spent":
                r.limits.spent(*message[1:])
            elif kind == "sealed":
                w.result, w.result_sha256 = message[1], message[2]
            elif kind == "control-reply":
                self._control_reply(message[1], message[2])
            elif kind == "evidence-error":
                w.evidence_error = (message[1], message[2])
            elif kind == "arrival-problem":  # the Ray pool found the trial's folder did not arrive whole
                w.arrival_problem = message[1]
                w.result = None

    # -- a trial's end --------------------------------------------------------------------------
    def _ended(self, w: _Running) -> None:
        del self.running[w.position]
        self.by_key.pop(w.key, None)
        w.handle.close()
        if w.result is None and w.evidence_error is not None and not (self.folder.trial_path(w.key)
                                                                      / layout.TRIAL).is_file():
            raise EvidenceError(w.evidence_error[0], w.evidence_error[1])  # as in the serial run
        result = w.result if w.arrival_problem is None else None
        if result is None:
            result = self._finish_dead(w)
            if result is None:
                return
        self.folder.seal_trial(SimpleNamespace(result_sha256=w.result_sha256 or _sha(self.folder, w.key)), result)
        self.r.results.append(result)
        self.r._display(stamped(TrialEnded(result), result.trial_key))
        self._after(result)

    def _after(self, result: TrialResult) -> None:
        """What a sealed result means for its block and for the run (the serial rules)."""
        r = self.r
        block = self.folder.block_of(result.position)
        if not is_valid(result.outcome) and block[0] not in self.voided:
            self.voided.add(block[0])
            self.void_waiting[block[0]] = result
            for w in self.running.values():
                if w.position in block:
                    self._send_stop(w, "block-voided", f"{result.trial_key} of the same block turned invalid "
                                                       f"({result.invalid_cause})", "block-voided")
        if r.stop_reason is None:
            if result.outcome == INVALID_PROVIDER:
                r.stop_reason = "external-provider-failure"  # seed 001
            elif result.invalid_cause == "disk-full":
                r.stop_reason = "disk-full"
                self.folder.release_reserve()

    def _void_ready(self) -> None:
        for start, trigger in list(self.void_waiting.items()):
            block = self.folder.block_of(start)
            if not any(p in block for p in self.running):
                del self.void_waiting[start]
                self.folder.void_block(block, trigger)

    def _finish_dead(self, w: _Running) -> TrialResult | None:
        """The worker died before sending its result: finish its trial from the folder, as recover does."""
        from sessions.audit.recover import Recovered, _finish_trial
        from sessions.evidence.reader import TrialReader
        from sessions.preflight.manifest import load_manifest

        trial = self.folder.trial_path(w.key)
        if not (trial / layout.TRIAL).is_file():  # died before its genesis: nothing happened
            shutil.rmtree(trial, ignore_errors=True)
            return None
        reader = TrialReader(trial, layout.trial_dir(w.key))
        if reader.exists(layout.RESULT) and w.arrival_problem is None:  # sealed, then died before saying so
            return reader.result()[0]
        if w.arrival_problem is not None:
            (trial / layout.RESULT).unlink(missing_ok=True)
        for tmp in trial.rglob("*.tmp"):
            tmp.unlink()
        manifest = load_manifest(self.folder.root / layout.MANIFEST)
        result = _finish_trial(reader, manifest, Recovered())
        copy_problem = getattr(getattr(w.handle, "writer", None), "problem", None)  # Ray: what arrived
        why = (f"its folder did not arrive whole ({w.arrival_problem})" if w.arrival_problem is not None
               else f"{w.handle.death()} before the trial ended"
               + (f"; its copy here stopped growing: {copy_problem}" if copy_problem else ""))
        result = result.model_copy(update={
            "error": f"{why}; finished by the driver from its folder at decision {result.last_decision}, "
                     f"as `oakwatch recover` does"})
        from sessions.evidence.durable import write_atomic

        write_atomic(trial / layout.RESULT, (result.model_dump_json(indent=2) + "\n").encode())
        return result

    # -- the end --------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """However the driver leaves (a bug, an interrupt): no worker outlives it unsealed."""
        for w in self.running.values():
            self._send_stop(w, "run-stopped", "the driver is ending", "run-stopped")
        deadline = time.monotonic() + 30
        for w in list(self.running.values()):
            while w.handle.alive() and time.monotonic() < deadline:
                self._drain(w)
                w.handle.join(0.1)
            self._drain(w)
            if w.handle.alive():
                w.handle.kill()
                w.handle.join(5)
            try:
                self._ended(w)
            except Exception:
                pass


def stamped(event, trial_key: str):
    stamp(event, trial_key)
    return event


def _sha(folder, key: str) -> str:
    from sessions.evidence.checksums import file_sha256

    return file_sha256(folder.trial_path(key) / layout.RESULT)


def make_pool(runner):
    """The executor the run asked for, started: local processes, or tasks on a Ray cluster.
    Raises RuntimeError (sessions.execute.ray_pool.RayUnavailable) when the cluster cannot be used."""
    if runner.executor == "ray":
        from sessions.execute.ray_pool import RayPool

        pool = RayPool(runner.folder.root, address=runner.ray_address, workers=runner.workers)
        if getattr(runner, "workers_auto", False):
            runner.workers = pool.capacity
        return pool
    pool = LocalPool(preload_for(runner.prepared))
    pool.prestart()
    return pool


async def run_parallel(runner):
    """ExperimentRunner.run_async with runner.workers > 1 or on Ray."""
    from sessions.execute.watchdog import Watchdog

    try:
        pool = runner.pool or make_pool(runner)  # a console makes it first (app.console.run_watch)
    except RuntimeError as exc:  # sessions.execute.ray_pool.RayUnavailable: no trial ran; the folder says why
        runner.stop_reason, runner.fatal = "executor-unavailable", str(exc)
        runner.summary = runner._finish()
        return runner.summary
    driver = _Driver(runner, pool)
    watchdog = Watchdog(runner, **{"hang_seconds": runner.prepared.manifest.emulator.hang_seconds,
                                   **runner.watchdog_options})  # for human trials, which run in the driver
    watchdog.start()
    server = runner._control_server(driver.control_handler())
    try:
        await driver.run()
    except EvidenceError as exc:
        runner.stop_reason = "disk-full" if exc.cause == "disk-full" else "evidence-failure"
        runner.fatal = str(exc)
        if exc.cause == "disk-full":
            runner.folder.release_reserve()
    except BaseException as exc:  # a bug of ours, or an interrupt: still finish every trial and the folder
        runner.stop_reason = runner.stop_reason or "harness-error"
        if not isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
            runner.fatal = f"{type(exc).__name__}: {exc}"
    finally:
        watchdog.stop()
        if server is not None:
            server.stop()
        try:
            driver.shutdown()
            driver._void_ready()
        finally:
            pool.close()
            runner.summary = runner._finish()
    return runner.summary
