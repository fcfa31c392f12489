"""The run's control channel: a Unix socket only the run's owner can use.

`ControlServer(root, handle)` listens on `<root>/control.sock` (or, when that path is too long for
a Unix socket, in a private directory under $XDG_RUNTIME_DIR, else the temp dir) and writes the
socket's path into `<root>/.control` so any console attached to the folder can find it. The socket
is mode 0600, and every connection's peer uid is checked with SO_PEERCRED: a peer that is not the
run's owner is refused, and the refusal is logged: through the `on_refused` callback (the runner
writes a `control-refused` event into run.jsonl), else as a line in `control.log` beside `.control`.

Protocol: JSON lines in, one JSON line back for each.
    {"op": "pause"|"resume"|"step"|"end", "trial": KEY, "reason": ...}
    {"op": "tag", "trial": KEY, "decision": N, "type": ..., "severity": ..., "refers_to": ..., "note": ...}
    {"op": "status"}
replies {"ok": true, ...} or {"ok": false, "error": "..."}.

Bounded, so idle peers cannot lock the operator out: one thread serves every connection with a
selector; a connection that sends no complete message within IDLE_SECONDS of connecting (or of its
last reply) is closed, however slowly it trickles bytes; at most MAX_CONNECTIONS are open, and one
more evicts the longest idle; the backlog is BACKLOG deep and every pending connection is accepted
at once. Ops run on a few handler threads, so a slow reply (a worker's) never stalls the others.

`runner_handler(control, current)` maps these onto an engine.loop.control.RunControl for the trial the
run is playing (`current()` names it); `ControlClient(root)` is the other end.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import queue
import selectors
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SOCKET_NAME = "control.sock"
POINTER = ".control"  # holds the socket's path
LOG_NAME = "control.log"
MAX_MESSAGE = 64 << 10
MAX_OWED = 1 << 20  # reply bytes a peer may leave unread before it is dropped
IDLE_SECONDS = 5.0  # no complete message for this long since connecting (or the last reply): closed
MAX_CONNECTIONS = 64  # open at once; one more evicts the longest idle
BACKLOG = 1024  # pending connections the kernel holds for the accept loop
HANDLER_THREADS = 4  # ops answered at once (a worker's reply can take seconds)
SUN_PATH_MAX = 107  # bytes of a Unix socket path (108 with its NUL)
OPS = ("pause", "resume", "step", "end", "tag", "status")

Handler = Callable[[dict], dict]


def socket_path_for(root: Path) -> Path:
    """Where the run's socket goes: in the folder if the path fits, else a private runtime dir."""
    root = Path(root).resolve()
    direct = root / SOCKET_NAME
    if len(os.fsencode(str(direct))) <= SUN_PATH_MAX:
        return direct
    tag = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:16]
    runtime = os.environ.get("XDG_RUNTIME_DIR") or ""
    # The runtime dir first; the temp dir when there is none or its own path is too long for a socket.
    for base in ([runtime] if runtime and os.path.isdir(runtime) else []) + [tempfile.gettempdir(), "/tmp"]:
        private = Path(base) / f"oakwatch-{os.getuid()}"
        path = private / f"{tag}.sock"
        if len(os.fsencode(str(path))) > SUN_PATH_MAX:
            continue
        private.mkdir(mode=0o700, exist_ok=True)
        os.chmod(private, 0o700)
        return path
    raise OSError(f"no directory short enough for the control socket of {root}")


def peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid (SO_PEERCRED), or None where the platform cannot tell."""
    try:
        data = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    _pid, uid, _gid = struct.unpack("3i", data)
    return uid


def peer_cred(conn: socket.socket) -> tuple[int, int, int] | None:
    try:
        data = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (AttributeError, OSError):
        return None
    return struct.unpack("3i", data)


def _reply(ok: bool, **fields) -> dict:
    return {"ok": ok, **fields}


class _Conn:
    """One accepted connection: what it sent so far, what it is owed, and when it last did anything."""

    __slots__ = ("sock", "inbuf", "outbuf", "busy", "since", "closing", "events")

    def __init__(self, sock: socket.socket, now: float):
        self.sock = sock
        self.inbuf = b""
        self.outbuf = b""
        self.busy = False  # a message is with the handler; the next waits for its reply
        self.since = now  # connected, or last reply sent: idle from here
        self.closing = False  # close once what it is owed is sent
        self.events = 0  # what the selector watches it for (0: not registered)


class ControlServer:
    """Serves owner-only connections from one thread with a selector; `handle(message) -> reply`
    runs on a small pool of threads (a worker's reply can take seconds), never on the I/O thread.

    Bounded: a connection that has sent no complete message for `idle_seconds` since it connected
    (or since its last reply) is closed, however slowly it trickles bytes; at most
    `max_connections` are open, and a new one beyond that evicts the longest idle (else the
    oldest), so the operator's next command always gets in; the listen backlog is large and the
    accept loop takes every pending connection at once, so idle peers never hold it up."""

    def __init__(self, root: Path, handle: Handler, *, on_refused: Callable[[str], None] | None = None,
                 owner_uid: int | None = None, idle_seconds: float = IDLE_SECONDS,
                 max_connections: int = MAX_CONNECTIONS):
        self.root = Path(root)
        self.handle = handle
        self.on_refused = on_refused
        self.owner_uid = os.getuid() if owner_uid is None else owner_uid
        self.idle_seconds = idle_seconds
        self.max_connections = max(1, max_connections)
        self.path: Path | None = None
        self.refusals = 0
        self.evictions = 0  # connections closed to make room for a new one
        self.timeouts = 0  # connections closed for sending no complete message in time
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._log_lock = threading.Lock()
        self._conns: dict[int, _Conn] = {}  # by file descriptor, oldest first
        self._done: queue.SimpleQueue = queue.SimpleQueue()  # (fd, conn, reply) from the handler threads
        self._pool: ThreadPoolExecutor | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None

    @property
    def pointer(self) -> Path:
        return self.root / POINTER

    @property
    def log_path(self) -> Path:
        return self.root / LOG_NAME

    @property
    def connections(self) -> int:
        """Connections open right now (read from any thread; for tests and the bench)."""
        return len(self._conns)

    def start(self) -> ControlServer:
        path = socket_path_for(self.root)
        try:
            if path.is_socket():
                path.unlink()  # a dead run's socket (the folder's lock already says no run holds it)
        except OSError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)  # created 0600: no moment where another user could connect
            try:
                sock.bind(str(path))
            finally:
                os.umask(old)
            os.chmod(path, 0o600)
            sock.listen(BACKLOG)  # the kernel caps it at net.core.somaxconn
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock, self.path = sock, path
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ, "listen")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._pool = ThreadPoolExecutor(max_workers=HANDLER_THREADS, thread_name_prefix="control-op")
        tmp = self.pointer.with_name(POINTER + ".tmp")
        tmp.write_text(str(path) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.pointer)
        self._thread = threading.Thread(target=self._serve, name="control-socket", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        for p in (self.path, self.pointer):
            if p is None:
                continue
            try:
                p.unlink()
            except OSError:
                pass

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- serving (the I/O thread) ---------------------------------------------------------------
    def _wake(self) -> None:
        try:
            if self._wake_w is not None:
                self._wake_w.send(b"x")
        except OSError:
            pass  # full (a wake-up is pending anyway) or closed (stopping)

    def _serve(self) -> None:
        try:
            while not self._stopping.is_set():
                for key, events in self._selector.select(self._next_timeout()):
                    self._ready(key, events)
                self._replies()
                self._expire()
        finally:
            self._close_all()

    def _ready(self, key, events: int) -> None:
        """One selector key that is ready: the listening socket, the wake-up pipe or a connection."""
        if key.data == "listen":
            self._accept_all()
        elif key.data == "wake":
            try:
                while self._wake_r.recv(4096):
                    pass
            except OSError:
                pass
        else:
            conn = self._conns.get(key.fd)
            if conn is None or conn.sock is not key.fileobj:
                return
            if events & selectors.EVENT_READ:
                self._read(key.fd, conn)
            if events & selectors.EVENT_WRITE and self._conns.get(key.fd) is conn:
                self._flush(key.fd, conn)

    def _close_all(self) -> None:
        sel = self._selector
        for fd in list(self._conns):
            self._close(fd)
        for s in (self._sock, self._wake_r, self._wake_w):
            if s is not None:
                try:
                    sel.unregister(s)
                except (KeyError, ValueError):
                    pass
                s.close()
        sel.close()

    def _next_timeout(self) -> float:
        now = time.monotonic()
        idle = [c.since + self.idle_seconds - now for c in self._conns.values() if not c.busy]
        return max(0.0, min([*idle, 1.0]))

    def _accept_all(self) -> None:
        while True:
            try:
                sock, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors, say: free one for the pending connection
                if not self._conns:
                    time.sleep(0.05)  # nothing of ours to free; the next round tries again
                    return
                self._evict()
                continue
            cred = peer_cred(sock)
            if cred is None or cred[1] != self.owner_uid:
                self._refuse(sock, cred)
                continue
            while len(self._conns) >= self.max_connections:
                self._evict()
            sock.setblocking(False)
            conn = self._conns[sock.fileno()] = _Conn(sock, time.monotonic())
            self._watch(conn)

    def _evict(self) -> None:
        """Room for a new connection: the one idle longest goes (one mid-request only if all are)."""
        idle = [(c.since, fd) for fd, c in self._conns.items() if not c.busy]
        victim = min(idle)[1] if idle else next(iter(self._conns))
        self.evictions += 1
        self._close(victim)

    def _refuse(self, sock: socket.socket, cred) -> None:
        self.refusals += 1
        who = "an unidentified peer" if cred is None else f"pid {cred[0]} uid {cred[1]} gid {cred[2]}"
        line = (f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} refused {who}: "
                f"only uid {self.owner_uid} (the run's owner) may control this run")
        try:  # one small reply into an empty socket buffer: never waits on the peer
            sock.setblocking(False)
            sock.send(json.dumps(_reply(False, error="refused: not the run's owner")).encode() + b"\n")
        except OSError:
            pass
        finally:
            sock.close()
        self._pool.submit(self._log_refusal, line)  # the run log's write is not the I/O thread's

    def _log_refusal(self, line: str) -> None:
        if self.on_refused is not None:  # the runner logs it in run.jsonl: no extra file in the folder
            try:
                self.on_refused(line)
            except Exception:
                pass
            return
        with self._log_lock:
            try:
                fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, (line + "\n").encode())
                finally:
                    os.close(fd)
            except OSError:
                pass

    def _read(self, fd: int, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(fd)
            return
        if not chunk:  # the peer is done sending: answer what it asked, then close
            conn.closing = True
            self._next(fd, conn)
            return
        conn.inbuf += chunk
        if len(conn.inbuf) > MAX_MESSAGE and b"\n" not in conn.inbuf:
            conn.inbuf = b""
            conn.closing = True
            self._send(fd, conn, _reply(False, error="message too long"))
            return
        self._next(fd, conn)

    def _next(self, fd: int, conn: _Conn) -> None:
        """Hand the connection's next complete message to the handler (one at a time, in order),
        close it once a closing one is owed nothing, and watch for what it can do next."""
        while not conn.busy and b"\n" in conn.inbuf:
            line, conn.inbuf = conn.inbuf.split(b"\n", 1)
            if not line.strip():
                continue
            conn.busy = True
            self._pool.submit(self._answer_for, fd, conn, line)
        if not conn.busy and conn.closing and not conn.outbuf:
            self._close(fd)
            return
        self._watch(conn)

    def _watch(self, conn: _Conn) -> None:
        """Select on what the connection can do: read (until the peer is done), write (while owed)."""
        events = (0 if conn.closing else selectors.EVENT_READ) | (selectors.EVENT_WRITE if conn.outbuf else 0)
        if events == conn.events:
            return
        if conn.events and events:
            self._selector.modify(conn.sock, events, "conn")
        elif events:
            self._selector.register(conn.sock, events, "conn")
        else:  # waiting on the handler with nothing to read or write
            self._selector.unregister(conn.sock)
        conn.events = events

    def _answer_for(self, fd: int, conn: _Conn, line: bytes) -> None:
        try:
            reply = self._answer(line)
        except BaseException as exc:  # never leave the connection waiting for a reply
            reply = _reply(False, error=f"{type(exc).__name__}: {exc}")
        self._done.put((fd, conn, reply))
        self._wake()

    def _replies(self) -> None:
        while True:
            try:
                fd, conn, reply = self._done.get_nowait()
            except queue.Empty:
                return
            if self._conns.get(fd) is not conn:
                continue  # closed (evicted, or the peer left) while the handler worked
            conn.busy = False
            self._send(fd, conn, reply)

    def _send(self, fd: int, conn: _Conn, reply: dict) -> None:
        conn.outbuf += json.dumps(reply).encode() + b"\n"
        self._flush(fd, conn)

    def _flush(self, fd: int, conn: _Conn) -> None:
        try:
            while conn.outbuf:
                sent = conn.sock.send(conn.outbuf)
                conn.outbuf = conn.outbuf[sent:]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            self._close(fd)
            return
        if conn.outbuf and len(conn.outbuf) > MAX_OWED:  # a peer that never reads its replies
            self._close(fd)
            return
        if not conn.outbuf:
            conn.since = time.monotonic()  # answered: idle from now
        self._next(fd, conn)

    def _expire(self) -> None:
        now = time.monotonic()
        for fd, conn in list(self._conns.items()):
            if not conn.busy and now - conn.since >= self.idle_seconds:
                self.timeouts += 1
                self._close(fd)

    def _close(self, fd: int) -> None:
        conn = self._conns.pop(fd, None)
        if conn is None:
            return
        if conn.events:
            try:
                self._selector.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()

    def _answer(self, line: bytes) -> dict:
        try:
            message = json.loads(line)
        except ValueError:
            return _reply(False, error="not a JSON line")
        if not isinstance(message, dict):
            return _reply(False, error="a message is a JSON object")
        if message.get("op") not in OPS:
            return _reply(False, error=f"unknown op {message.get('op')!r} (one of {', '.join(OPS)})")
        try:
            reply = self.handle(message)
        except Exception as exc:  # the handler's fault must not end the channel
            return _reply(False, error=f"{type(exc).__name__}: {exc}")
        return reply if isinstance(reply, dict) and "ok" in reply else _reply(False, error="no reply")


def runner_handler(control, current: Callable[[], str | None] | None = None) -> Handler:
    """Ops onto a RunControl (engine.loop.control). `current()` is the key of the trial being played
    (None between trials); a command for any other trial is refused, so a key pressed on one trial
    never lands on the next."""
    from engine.loop.trial import utc_now

    def running() -> str | None:
        return current() if current is not None else None

    def handle(message: dict) -> dict:
        op = message.get("op")
        now = running()
        if op == "status":
            return _reply(True, state=control.state, paused=control.paused, trial=now,
                          stopping=control.stopping)
        trial = message.get("trial")
        if current is not None:
            if not isinstance(trial, str) or not trial:
                return _reply(False, error="name the trial (\"trial\": KEY)")
            if now is None:
                return _reply(False, error=f"no trial is running (asked for {trial})")
            if trial != now:
                return _reply(False, error=f"trial {trial} is not the one running ({now} is)")
        if op == "pause":
            control.pause()
        elif op == "resume":
            control.resume()
        elif op == "step":
            if not control.paused:
                return _reply(False, error="step works while paused (pause first)")
            control.step()
        elif op == "end":
            reason = str(message.get("reason") or "").strip()
            if not reason:
                return _reply(False, error="ending a trial needs a reason")
            request = control.end_trial(reason)
            return _reply(True, state=control.state, termination_reason=request.reason)
        elif op == "tag":
            decision = message.get("decision")
            if not isinstance(decision, int) or isinstance(decision, bool):
                return _reply(False, error="a tag names its decision (\"decision\": N)")
            tag = {"kind": "memory-error", "source": "operator", "role": "primary",
                   "type": message.get("type"), "severity": message.get("severity"),
                   "refers_to": message.get("refers_to"), "note": message.get("note") or "",
                   "trial_key": trial if isinstance(trial, str) else None, "decision_id": decision,
                   "frame_sha256": message.get("frame_sha256"), "frame_index": message.get("frame_index"),
                   "opened_utc": message.get("opened_utc") or utc_now()}
            if tag["trial_key"] is None:
                tag.pop("trial_key")
            try:
                record = control.tag(tag, commit=not message.get("check", False))
            except (ValueError, LookupError, RuntimeError) as exc:
                return _reply(False, error=str(exc))
            if message.get("check"):
                return _reply(True)
            return _reply(True, type=record.type, severity=record.severity, decision=record.decision_id)
        return _reply(True, state=control.state, paused=control.paused)

    return handle


class ControlClient:
    """Talks to the run's ControlServer. `available` is False when the run has no channel (or is over)."""

    def __init__(self, root: Path, timeout: float = 5.0):
        self.root = Path(root)
        self.timeout = timeout

    def socket_path(self) -> Path | None:
        try:
            text = (self.root / POINTER).read_text(encoding="utf-8").strip()
        except OSError:
            text = ""
        candidates = [Path(text)] if text else []
        candidates.append(self.root / SOCKET_NAME)
        for path in candidates:
            try:
                if path.is_socket():
                    return path
            except OSError:
                continue
        return None

    @property
    def available(self) -> bool:
        return self.socket_path() is not None

    def send(self, message: dict) -> dict:
        path = self.socket_path()
        if path is None:
            return _reply(False, error="read-only: no control channel")
        deadline = time.monotonic() + self.timeout
        try:
            with self._connect(path, deadline) as s:
                s.sendall(json.dumps(message).encode() + b"\n")
                buf = b""
                while b"\n" not in buf:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
        except OSError as exc:
            return _reply(False, error=f"control channel: {exc.strerror or exc}")
        try:
            reply = json.loads(buf.split(b"\n", 1)[0])
        except ValueError:
            return _reply(False, error="control channel: no reply")
        return reply if isinstance(reply, dict) else _reply(False, error="control channel: bad reply")

    def _connect(self, path: Path, deadline: float) -> socket.socket:
        """A connected socket; a backlog that is full for a moment is waited out, up to the timeout."""
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(str(path))
                return s
            except BlockingIOError:  # EAGAIN: the run's backlog is full right now
                s.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
            except BaseException:
                s.close()
                raise

    async def asend(self, message: dict) -> dict:
        """`send` without blocking the event loop."""
        return await asyncio.to_thread(self.send, message)

    # -- conveniences -------------------------------------------------------------------------
    def pause(self, trial: str) -> dict:
        return self.send({"op": "pause", "trial": trial})

    def resume(self, trial: str) -> dict:
        return self.send({"op": "resume", "trial": trial})

    def step(self, trial: str) -> dict:
        return self.send({"op": "step", "trial": trial})

    def end(self, trial: str, reason: str) -> dict:
        return self.send({"op": "end", "trial": trial, "reason": reason})

    def tag(self, trial: str, decision: int, type: str, severity: str, refers_to: str | None = None,
            note: str = "", **extra) -> dict:
        return self.send({"op": "tag", "trial": trial, "decision": decision, "type": type, "severity": severity,
                          "refers_to": refers_to, "note": note, **extra})

    def status(self) -> dict:
        return self.send({"op": "status"})
