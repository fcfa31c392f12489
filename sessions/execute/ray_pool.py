"""`oakwatch run --executor ray`: every trial in a Ray worker process of its own, on an existing cluster or a local one.

What travels, and how:
  - the ROM and the start state go into Ray's object store once per run and are fetched by each
    task by reference; the task checks their SHA-256 against the frozen manifest before playing,
    so no worker ever opens a path of the driver's machine;
  - API keys never travel: a model trial's worker reads its key from its own environment (the
    manifest's `api_key_env`), which a local cluster inherits from the driver and a multi-node
    cluster gets from `ray start` on each node (docs/ray.md);
  - each task writes its trial folder on its own node (a scratch directory) through the ordinary
    recorder, and a mirror (sessions.evidence.mirror) streams every new byte to the driver through a hub
    actor, together with the trial's events, so the folder grows inside the one experiment folder
    as the trial plays and the console follows it live; on sealing, the worker's SHA-256 of every
    file is checked against what arrived before the driver seals the trial;
  - the driver's answers (stop requests, rate-limiter answers, an operator's pause, step, end and
    tag) go back through the same hub.
A trial is never retried (max_restarts=0, max_task_retries=0): it is not replayed behind the
evidence's back; a trial whose worker dies is finished by the driver from what arrived, as
`oakwatch recover` does.

Each trial runs in an actor of its own (RayTrial: one call, then the driver ends it with ray.kill),
not in a `max_calls=1` task: Ray 2.60's graceful exit of a worker that reached max_calls aborts the
process about one time in fourteen (SIGABRT, "Mutex corrupt: both reader and writer lock held",
in a native Ray thread during CoreWorkerShutdownExecutor's teardown), even for a task that only
sleeps; ray.kill ends the worker by Ray's force path (QuickExit), which never crashed. docs/ray.md,
"Why each trial is an actor", has the evidence.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

RAY_MISSING = ("the Ray executor needs Ray, an optional extra: `uv sync --extra ray` "
               "(or `pip install 'oakwatch[ray]'`)")
HUB_START_SECONDS = 60.0
MIRROR_SECONDS = 0.25


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached."""


def ray_module():
    # Ray's `uv run` integration (read when ray is imported) would package this checkout and rebuild
    # the environment for every worker; the workers run the interpreter that runs oakwatch instead.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
        from ray._private import ray_constants
    except ImportError:
        raise RayUnavailable(RAY_MISSING) from None
    # ... and if ray was imported before (a test session, a notebook), the flag it read then is
    # turned off here: ray.init consults it when it is called.
    ray_constants.RAY_ENABLE_UV_RUN_RUNTIME_ENV = False
    return ray


# -- the hub: one small actor per run, the post office between the driver and its tasks ----------

class Hub:
    """Messages up (task -> driver, by trial key) and down (driver -> one task). Async, so a task
    waiting for its mail and the driver waiting for any mail never hold each other up."""

    def __init__(self):
        self.up: dict[str, list] = {}
        self.down: dict[str, list] = {}
        self._up_ready = asyncio.Event()
        self._down_ready: dict[str, asyncio.Event] = {}

    def _down_event(self, key: str) -> asyncio.Event:
        return self._down_ready.setdefault(key, asyncio.Event())

    async def push(self, key: str, messages: list) -> None:
        self.up.setdefault(key, []).extend(messages)
        self._up_ready.set()

    async def pull(self, timeout: float) -> dict[str, list]:
        if not any(self.up.values()):
            try:
                await asyncio.wait_for(self._up_ready.wait(), timeout)
            except TimeoutError:
                pass
        self._up_ready.clear()
        out, self.up = self.up, {}
        return out

    async def send(self, key: str, message) -> None:
        self.down.setdefault(key, []).append(message)
        self._down_event(key).set()

    async def take(self, key: str, timeout: float) -> list:
        event = self._down_event(key)
        if not self.down.get(key):
            try:
                await asyncio.wait_for(event.wait(), timeout)
            except TimeoutError:
                pass
        event.clear()
        return self.down.pop(key, [])


# -- the task's side -----------------------------------------------------------------------------

class HubConn:
    """What sessions.execute.worker_process.worker_main uses as its pipe, over the hub. Sends are synchronous
    (each waits for the hub), so the driver gets them in the order sent. Before the trial's
    "sealed" message, the mirror sends the folder's last bytes and the worker's sums."""

    def __init__(self, ray, hub, key: str, mirror):
        self.ray = ray
        self.hub = hub
        self.key = key
        self.mirror = mirror
        self._inbox: list = []
        self._stopping = threading.Event()

    def stop_reading(self) -> None:
        """recv ends (EOFError) within one take: the trial is sealed, nothing more is read."""
        self._stopping.set()

    def send(self, message) -> None:
        try:
            if message[0] == "sealed":
                self.mirror.sync()
                message = (*message, self.mirror.sums())
            self.ray.get(self.hub.push.remote(self.key, [message]))
        except self.ray.exceptions.RayError as exc:
            raise EOFError(f"the driver's hub is gone: {exc}") from None

    def recv(self):
        while not self._inbox:
            if self._stopping.is_set():
                raise EOFError("the link was closed")
            try:
                self._inbox = self.ray.get(self.hub.take.remote(self.key, 0.5))
            except self.ray.exceptions.RayError as exc:
                raise EOFError(f"the driver's hub is gone: {exc}") from None
        return self._inbox.pop(0)

    def push_raw(self, message) -> None:
        """For the mirror: a file's bytes (waits for the hub, like every send)."""
        try:
            self.ray.get(self.hub.push.remote(self.key, [message]))
        except self.ray.exceptions.RayError as exc:
            raise EOFError(f"the driver's hub is gone: {exc}") from None


def run_ray_trial(job, hub, blobs: list, sums: dict[str, str]) -> str:
    """A trial's Ray call (RayTrial.run): fetch the ROM and state by reference, check them, play the trial in a scratch
    folder, mirror it to the driver as it grows. Returns the trial key."""
    import ray

    from sessions.evidence import layout
    from sessions.evidence.mirror import FolderMirror
    from sessions.execute.worker_process import worker_main

    fetched = ray.get(blobs)
    for (name, digest), data in zip(sums.items(), fetched, strict=True):
        if hashlib.sha256(data).hexdigest() != digest:
            raise RuntimeError(f"the {name} fetched from the object store is not the one the manifest pins")
    rom, state = fetched
    prepared = dataclasses.replace(job.prepared, rom=rom, start_state=state, keys=_own_keys(job.prepared))
    scratch = Path(tempfile.mkdtemp(prefix="oakwatch-trial-"))
    key = job.genesis.trial_key
    conn = HubConn(ray, hub, key, None)
    conn.mirror = mirror = FolderMirror(scratch / layout.trial_dir(key), conn.push_raw)
    stop = threading.Event()

    def mirror_loop() -> None:
        while not stop.wait(MIRROR_SECONDS):
            try:
                mirror.sync()
            except EOFError:
                return
            except Exception:  # a pass that failed is retried; the final pass is what is checked
                import traceback

                traceback.print_exc()  # into the Ray worker's log (its .err file under the session's logs)
                continue

    thread = threading.Thread(target=mirror_loop, name="folder-mirror", daemon=True)
    thread.start()
    try:
        worker_main(dataclasses.replace(job, prepared=prepared, root=str(scratch)), conn)
    finally:
        stop.set()
        thread.join(30)  # a pass in progress ends with its push: no thread of ours may outlive the task
        shutil.rmtree(scratch, ignore_errors=True)
    return key


class RayTrial:
    """One trial's own Ray worker process: an actor called once (run), then ended by the driver with
    ray.kill as soon as the call's result is in (see the module's docstring for why not a task)."""

    def run(self, job, hub, blobs: list, sums: dict[str, str]) -> str:
        return run_ray_trial(job, hub, blobs, sums)


def _own_keys(prepared):
    """The API keys from this worker's own environment (they never travel with the job)."""
    from sessions.preflight.experiment import Keys

    keys = {}
    for c in prepared.manifest.conditions:
        if c.policy == "model" and c.key_env is not None:
            keys[c.id] = os.environ.get(c.key_env) or None
    return Keys(keys)


# -- the driver's side ---------------------------------------------------------------------------

class RayHandle:
    """One trial's task, as sessions.execute.workers' driver sees it (the ProcessHandle methods)."""

    def __init__(self, pool: RayPool, key: str, actor, ref, writer):
        self.pool = pool
        self.key = key
        self.actor = actor  # the trial's RayTrial: its worker process, ended once the call returns
        self.ref = ref
        self.writer = writer  # sessions.evidence.mirror.MirrorWriter into the experiment's trial folder
        self.inbox: list = []
        self.failure: str | None = None
        self._done = False

    def send(self, message) -> bool:
        if self._done:
            return False
        try:
            self.pool.ray.get(self.pool.hub.send.remote(self.key, message), timeout=10)
            return True
        except Exception:
            return False

    def receive(self) -> list:
        out, self.inbox = self.inbox, []
        return out

    def alive(self) -> bool:
        if self._done:
            return False
        ready, _ = self.pool.ray.wait([self.ref], timeout=0)
        if ready:
            self._done = True
            try:
                self.pool.ray.get(self.ref)
            except Exception as exc:
                self.failure = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            self._end_worker()  # the call returned (its last message and sums went before): the worker is done
        return not self._done

    def _end_worker(self) -> None:
        """End the trial's worker process by Ray's force path (never its graceful exit, which aborts)."""
        if self.actor is None:
            return
        actor, self.actor = self.actor, None
        try:
            self.pool.ray.kill(actor, no_restart=True)
        except Exception:  # already gone (killed, its node lost): nothing left to end
            pass

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            self.pool.ray.wait([self.ref], timeout=min(0.1, max(0.0, deadline - time.monotonic())))
        self.pool.pump(0)

    def kill(self) -> None:
        self._end_worker()

    def death(self) -> str:
        return f"its Ray task ended without a result ({self.failure or 'the worker was lost'})"

    def close(self) -> None:
        self._end_worker()


class RayPool:
    """Trials as Ray tasks; sessions.execute.workers' driver schedules them like local processes."""

    name = "ray"

    def __init__(self, root: Path, *, address: str | None = None, workers: int = 1):
        self.ray = ray_module()
        self.root = Path(root)
        self.started_here = False
        if not self.ray.is_initialized():
            quiet = {"log_to_driver": False, "include_dashboard": False, "logging_level": logging.WARNING}
            if address:
                _reachable(address)  # Ray itself retries an unreachable head for minutes
                _token_auth_if_found()
            try:
                if address:
                    self.ray.init(address=address, **quiet)
                else:
                    self.ray.init(num_cpus=max(1, workers), **quiet)
                    self.started_here = True
            except Exception as exc:
                where = f"the Ray cluster at {address}" if address else "a local Ray instance"
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise RayUnavailable(f"cannot start or reach {where}: {why}"
                                     + (f"; {_auth_hint()}" if address else "")) from None
        self.hub = self.ray.remote(Hub).options(num_cpus=0, max_concurrency=1000).remote()
        try:  # a cluster that cannot start a worker process (a broken environment) says so now
            self.ray.get(self.hub.pull.remote(0), timeout=HUB_START_SECONDS)
        except Exception as exc:
            self.close()
            raise RayUnavailable(f"Ray could not start a worker process within {HUB_START_SECONDS:.0f} s "
                                 f"({type(exc).__name__}); see the worker logs under /tmp/ray/session_latest/logs"
                                 ) from None
        # One process per trial, as locally (an actor per trial, ended after its one call: no state
        # crosses trials), never retried.
        self.trial = self.ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(RayTrial)
        self.capacity = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        self.handles: dict[str, RayHandle] = {}
        self._blobs: dict[str, object] = {}  # sha256 -> ObjectRef: each blob is put once per run
        self._lock = threading.Lock()

    def _blob(self, data: bytes) -> tuple[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self._blobs:
            self._blobs[digest] = self.ray.put(data)
        return digest, self._blobs[digest]

    def launch(self, job) -> RayHandle:
        from sessions.evidence import layout
        from sessions.evidence.mirror import MirrorWriter

        p = job.prepared
        rom = p.rom or p.rom_path.read_bytes()
        rom_sha, rom_ref = self._blob(rom)
        state_sha, state_ref = self._blob(p.start_state)
        shipped = dataclasses.replace(p, rom=b"", start_state=b"", keys=_no_keys(),
                                      game_sha256=p.game_sha256 or hashlib.sha256(p.game_path.read_bytes()).hexdigest())
        key = job.genesis.trial_key
        sent = dataclasses.replace(job, prepared=shipped)
        actor = self.trial.remote()
        ref = actor.run.remote(sent, self.hub, [rom_ref, state_ref], {"ROM": rom_sha, "start state": state_sha})
        handle = RayHandle(self, key, actor, ref, MirrorWriter(self.root / layout.trial_dir(key)))
        with self._lock:
            self.handles[key] = handle
        return handle

    def pump(self, timeout: float) -> set[str]:
        """Take the hub's mail: file bytes are written into the experiment folder at once; the
        rest waits in each handle's inbox. The keys that got mail."""
        try:
            mail = self.ray.get(self.hub.pull.remote(timeout), timeout=timeout + 30)
        except Exception:
            return set()
        got = set()
        for key, messages in mail.items():
            handle = self.handles.get(key)
            if handle is None:
                continue
            for message in messages:
                if message[0] == "file":
                    handle.writer.apply(message)
                    continue
                if message[0] == "sealed":
                    *head, sums = message
                    problem = handle.writer.check(sums)
                    if problem is not None:
                        handle.inbox.append(("arrival-problem", problem))
                        continue
                    message = tuple(head)
                handle.inbox.append(message)
            got.add(key)
        return got

    def wait(self, handles: list[RayHandle], timeout: float) -> set[int]:
        got = self.pump(timeout)
        return {id(h) for h in handles if h.key in got or h.inbox or not h.alive()}

    def close(self) -> None:
        for handle in list(getattr(self, "handles", {}).values()):
            handle.close()
        try:
            self.ray.kill(self.hub)
        except Exception:
            pass
        if self.started_here:
            self.ray.shutdown()


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse at once a head address nothing answers on ("auto" and Ray's own lookups are Ray's)."""
    import socket

    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if address == "auto" or not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


AUTH_MODE = "RAY_AUTH_MODE"
AUTH_DOCS = "docs/ray.md, \"Token authentication\""


def _token_auth_if_found() -> None:
    """Ray's own rule for `--address auto`, kept for an explicit address too: with RAY_AUTH_MODE unset
    and a token at hand (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), the driver uses
    token authentication. Ray 2.60's `ray start --head` turns token authentication on whenever such a
    token exists, while `ray.init(address=HOST:PORT)` leaves it off, so a driver on the head itself
    was refused ("Failed to connect"). A token sent to a cluster without authentication is ignored."""
    if os.environ.get(AUTH_MODE) is not None:
        return  # set by the operator: Ray's to honour
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _auth_hint() -> str:
    """What to check when a cluster refuses the driver: token authentication, in this driver's terms."""
    mode = os.environ.get(AUTH_MODE)
    try:
        from ray._raylet import AuthenticationTokenLoader

        has_token = AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True)
    except (ImportError, AttributeError):
        has_token = None
    if mode == "token":
        return ("this driver used token authentication (RAY_AUTH_MODE=token); if the cluster's token is not the one "
                "this machine has (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token), the cluster refuses "
                f"it this way: copy the head's ~/.ray/auth_token here ({AUTH_DOCS})")
    if has_token is False:
        return ("if the cluster uses token authentication (Ray's `ray start --head` turns it on when a token exists, "
                "such as ~/.ray/auth_token on the head), this machine has no token: copy the head's "
                "~/.ray/auth_token here, or set RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN, and run again "
                f"({AUTH_DOCS})")
    return (f"{AUTH_MODE} is {mode!r}: if the cluster uses token authentication, set RAY_AUTH_MODE=token with its "
            f"token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token ({AUTH_DOCS})")


def _no_keys():
    from sessions.preflight.experiment import Keys

    return Keys({})
