"""A trial's own process: what `oakwatch run --workers N` (sessions.execute.workers) forks locally and what
a Ray task (sessions.execute.ray_pool) runs on a cluster node. It plays one trial start to seal with its
own emulator, policy, memory and run control, writes the trial's folder through the ordinary
recorder, and talks to the driver over a pipe (or the Ray hub): the trial's events in batches,
the rate limiter's questions, and the driver's stop requests and operator ops coming back.
"""

from __future__ import annotations

import os

# The forkserver imports this module first, before forking any child: keep numerical libraries from
# starting thread pools there (the server must hold no thread when it forks).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import asyncio  # noqa: E402
import dataclasses  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import deque  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from engine.loop.control import RunControl  # noqa: E402
from engine.loop.display import Display  # noqa: E402
from engine.loop.events import DecisionRecorded, MilestoneReached, StateChanged, TrialStarted  # noqa: E402
from engine.loop.records import TrialGenesis, TrialResult  # noqa: E402
from engine.loop.trial import TrialConfig  # noqa: E402
from sessions.evidence import layout  # noqa: E402
from sessions.evidence.durable import EvidenceError  # noqa: E402
from sessions.execute.limits import Ask, CallGate  # noqa: E402

_EMPTY_FRAME = None  # set lazily (numpy) where frames are not wanted by any display
FLUSH_SECONDS = 0.1
BATCH = 256


# -- the worker process ---------------------------------------------------------------------------

@dataclasses.dataclass
class TrialJob:
    prepared: object  # sessions.preflight.experiment.Prepared (pickled: ROM and state bytes travel with it)
    root: str  # the experiment folder
    genesis: TrialGenesis
    config: TrialConfig
    policy_factories: dict | None
    wants: dict  # what the driver's sinks ask for: wants_frames, wants_budgets, wants_memory_store
    hang_seconds: float
    limit_key: str | None  # the rate limiter's key; None: the run has no shared limits


class _Link:
    """The worker's end of its pipe: sends from any thread; a reader thread takes the driver's
    stop requests and the limiter's answers. close() ends the reader where the connection can stop
    reading (the Ray hub's): no thread of ours may be inside Ray when its worker shuts down."""

    def __init__(self, conn: Connection, control: RunControl, trial_key: str = ""):
        self.conn = conn
        self.control = control
        self.trial_key = trial_key
        self._operator = None  # the control socket's ops for this trial, made on first use
        self._send_lock = threading.Lock()
        self._answers: deque = deque()
        self._answered = threading.Condition()
        self.gone = False
        self.closing = False
        self._reader = threading.Thread(target=self._read, name="driver-link", daemon=True)
        self._reader.start()

    def close(self, timeout: float = 10.0) -> None:
        """Stop reading once the trial is sealed. A pipe's reader is left blocked (it dies with the
        process, holding nothing native); a Ray worker's would still be inside ray.get when Ray tears
        its core worker down at exit, which crashes the process (SIGSEGV or SIGABRT) after the trial
        was sealed: there the reader is stopped and waited for."""
        self.closing = True
        stop = getattr(self.conn, "stop_reading", None)
        if stop is not None:
            stop()
            self._reader.join(timeout)

    def send(self, message) -> None:
        with self._send_lock:
            try:
                self.conn.send(message)
            except (OSError, EOFError, BrokenPipeError):
                self._driver_gone()

    def _driver_gone(self) -> None:
        if not self.gone:
            self.gone = True
            self.control.stop_run("run-stopped", "the driver process is gone", "run-stopped")
            with self._answered:
                self._answered.notify_all()

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (OSError, EOFError):
                if not self.closing:
                    self._driver_gone()
                return
            kind = message[0]
            if kind == "stop":
                _, reason, detail, cause = message
                self.control.stop_run(reason, detail, cause)
            elif kind == "answer":
                with self._answered:
                    self._answers.append(message[1])
                    self._answered.notify_all()
            elif kind == "control":  # an operator's op from the run's control socket, for this trial
                self.send(("control-reply", message[1], self._operate(message[2])))

    def _operate(self, message: dict) -> dict:
        from sessions.execute.control_socket import runner_handler

        if self._operator is None:
            self._operator = runner_handler(self.control, lambda: self.trial_key)
        try:
            return self._operator(message)
        except Exception as exc:  # a bad op must not end the link (and with it the trial)
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    def ask(self, ask: Ask) -> tuple[float, str | None]:
        self.send(("ask", ask))
        with self._answered:
            while not self._answers:
                if self.gone:
                    return 0.0, "run-stopped"
                self._answered.wait(0.5)
            return self._answers.popleft()

    def spent(self, key: str, cost: float | None, tokens: int | None) -> None:
        self.send(("spent", key, cost, tokens))


class _Forward(Display):
    """The trial's second sink: its events, in batches, to the driver."""

    def __init__(self, link: _Link, trial_key: str, wants: dict):
        self.link = link
        self.trial_key = trial_key
        self.wants_frames = wants.get("wants_frames", False)
        self.wants_budgets = wants.get("wants_budgets", False)
        self.wants_memory_store = wants.get("wants_memory_store", False)
        self.wants_decisions = wants.get("wants_decisions", True)
        self._batch: list = []
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="event-flush", daemon=True)
        self._ticker.start()

    def handle(self, event) -> None:
        if isinstance(event, DecisionRecorded) and not self.wants_decisions:
            return  # no display of the driver's takes decisions (the recorder has written it here)
        if isinstance(event, DecisionRecorded) and not self.wants_frames:
            event = dataclasses.replace(event, frame=_empty_frame())  # no display draws it: do not ship it
        stamp(event, self.trial_key)
        with self._lock:
            self._batch.append(event)
            urgent = isinstance(event, (TrialStarted, MilestoneReached, StateChanged))
            if urgent or len(self._batch) >= BATCH or time.monotonic() - self._last >= FLUSH_SECONDS:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._batch:
            batch, self._batch = self._batch, []
            self.link.send(("events", batch))
        self._last = time.monotonic()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _tick(self) -> None:
        while not self._stop.wait(FLUSH_SECONDS):
            self.flush()

    def close(self) -> None:
        self._stop.set()
        self._ticker.join(10)  # its last flush may be a send in progress (over Ray, a ray.get)
        self.flush()


def _empty_frame():
    global _EMPTY_FRAME
    if _EMPTY_FRAME is None:
        import numpy as np

        _EMPTY_FRAME = np.zeros((0, 0, 3), np.uint8)
    return _EMPTY_FRAME


def stamp(event, trial_key: str) -> None:
    """Give an event the key of the trial it belongs to (`event.trial_key`), so a display of many
    trials can tell them apart (engine.loop.events declares the field on every event)."""
    if getattr(event, "trial_key", None) is None:
        object.__setattr__(event, "trial_key", trial_key)


class _WorkerRun:
    """What the watchdog needs of a run (sessions.execute.watchdog.Watchdog)."""

    def __init__(self, root: Path, link: _Link):
        self.folder = SimpleNamespace(root=root)
        self.link = link
        self.current_trial = None
        self.recorder = None
        self.sealing = threading.Lock()

    def abandon_hung(self, trial, detail: str):
        if not self.sealing.acquire(timeout=5):
            raise RuntimeError("the worker is sealing its trial")
        sealed = self.recorder.seal(trial.hung(detail))
        self.link.send(("sealed", sealed, self.recorder.result_sha256))


def worker_main(job: TrialJob, conn: Connection) -> None:
    """One trial, start to seal, in this process."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the driver stops us; a terminal's Ctrl-C reaches us too
    from sessions.evidence.recorder import TrialRecorder, policy_files
    from sessions.execute.trial_factory import encodes_frames_aside, make_trial
    from sessions.execute.watchdog import Watchdog

    control = RunControl()
    root = Path(job.root)
    genesis = job.genesis.model_copy(update={"pid": os.getpid()})
    key = genesis.trial_key
    link = _Link(conn, control, key)

    def release_reserve() -> None:
        try:
            (root / layout.RESERVE).unlink()
        except FileNotFoundError:
            pass

    try:
        recorder = TrialRecorder(root / layout.trial_dir(key), genesis, on_disk_full=release_reserve,
                                 secrets=job.prepared.keys.secrets(), encode_aside=encodes_frames_aside(job.prepared))
    except EvidenceError as exc:
        link.send(("evidence-error", str(exc), exc.cause))
        link.close()
        return
    forward = _Forward(link, key, job.wants)
    control.on_state(lambda state: forward.handle(StateChanged(state)))  # paused/stepping, for every display
    gate = None
    if job.limit_key is not None:
        gate = CallGate(link.ask, link.spent, control, job.limit_key, key)
    run = _WorkerRun(root, link)
    trial = make_trial(job.prepared, job.config, [recorder, forward], control, job.policy_factories, gate)
    run.current_trial, run.recorder = trial, recorder
    watchdog = Watchdog(run, hang_seconds=job.hang_seconds)
    watchdog.start()
    result: TrialResult | None = None
    try:
        result = asyncio.run(trial.run())
        if gate is not None:
            result = result.model_copy(update={"limiter_wait_s": round(gate.waited_s, 3)})
    except BaseException as exc:  # a bug of ours around the loop: the trial still gets a result
        result = trial.interrupted(f"{type(exc).__name__}: {exc}", cause="harness-bug")
    finally:
        watchdog.stop()  # (it never calls into Ray: no need to wait for it)
        run.current_trial = None
        forward.close()
        with run.sealing:
            try:
                sealed = recorder.seal(result, trial.provider_failure, files=policy_files(trial))
            except EvidenceError as exc:
                link.send(("evidence-error", str(exc), exc.cause))
                link.close()
                return
            link.send(("sealed", sealed, recorder.result_sha256))
        link.close()  # nothing more to read: the trial is sealed
