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

`runner_handler(control, current)` maps these onto an engine.control.RunControl for the trial the
run is playing (`current()` names it); `ControlClient(root)` is the other end.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

SOCKET_NAME = "control.sock"
POINTER = ".control"  # holds the socket's path
LOG_NAME = "control.log"
MAX_MESSAGE = 64 << 10
SUN_PATH_MAX = 107  # bytes of a Unix socket path (108 with its NUL)
OPS = ("pause", "resume", "step", "end", "tag", "status")

Handler = Callable[[dict], dict]


def socket_path_for(root: Path) -> Path:
    """Where the run's socket goes: in the folder if the path fits, else a private runtime dir."""
    root = Path(root).resolve()
    direct = root / SOCKET_NAME
    if len(os.fsencode(str(direct))) <= SUN_PATH_MAX:
        return direct
    base = os.environ.get("XDG_RUNTIME_DIR") or ""
    if not base or not os.path.isdir(base):
        base = tempfile.gettempdir()
    private = Path(base) / f"oakwatch-{os.getuid()}"
    private.mkdir(mode=0o700, exist_ok=True)
    os.chmod(private, 0o700)
    tag = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:16]
    return private / f"{tag}.sock"


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


class ControlServer:
    """Accepts owner-only connections on a thread; `handle(message) -> reply` runs on that thread."""

    def __init__(self, root: Path, handle: Handler, *, on_refused: Callable[[str], None] | None = None,
                 owner_uid: int | None = None):
        self.root = Path(root)
        self.handle = handle
        self.on_refused = on_refused
        self.owner_uid = os.getuid() if owner_uid is None else owner_uid
        self.path: Path | None = None
        self.refusals = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._log_lock = threading.Lock()

    @property
    def pointer(self) -> Path:
        return self.root / POINTER

    @property
    def log_path(self) -> Path:
        return self.root / LOG_NAME

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
            sock.listen(8)
            sock.settimeout(0.2)
        except OSError:
            sock.close()
            raise
        self._sock, self.path = sock, path
        tmp = self.pointer.with_name(POINTER + ".tmp")
        tmp.write_text(str(path) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.pointer)
        self._thread = threading.Thread(target=self._serve, name="control-socket", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
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

    # -- serving --------------------------------------------------------------------------------
    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                time.sleep(0.05)
                continue
            cred = peer_cred(conn)
            if cred is None or cred[1] != self.owner_uid:
                self._refuse(conn, cred)
                continue
            threading.Thread(target=self._session, args=(conn,), name="control-session", daemon=True).start()

    def _refuse(self, conn: socket.socket, cred) -> None:
        self.refusals += 1
        who = "an unidentified peer" if cred is None else f"pid {cred[0]} uid {cred[1]} gid {cred[2]}"
        line = (f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} refused {who}: "
                f"only uid {self.owner_uid} (the run's owner) may control this run")
        if self.on_refused is not None:  # the runner logs it in run.jsonl: no extra file in the folder
            try:
                self.on_refused(line)
            except Exception:
                pass
        else:
            with self._log_lock:
                try:
                    fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                    try:
                        os.write(fd, (line + "\n").encode())
                    finally:
                        os.close(fd)
                except OSError:
                    pass
        try:
            conn.settimeout(1.0)
            conn.sendall(json.dumps(_reply(False, error="refused: not the run's owner")).encode() + b"\n")
        except OSError:
            pass
        finally:
            conn.close()

    def _session(self, conn: socket.socket) -> None:
        buf = b""
        try:
            conn.settimeout(30.0)
            while not self._stopping.is_set():
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    return
                if not chunk:
                    return
                buf += chunk
                if len(buf) > MAX_MESSAGE and b"\n" not in buf:
                    conn.sendall(json.dumps(_reply(False, error="message too long")).encode() + b"\n")
                    return
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        conn.sendall(json.dumps(self._answer(line)).encode() + b"\n")
        except OSError:
            return
        finally:
            conn.close()

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
    """Ops onto a RunControl (engine.control). `current()` is the key of the trial being played
    (None between trials); a command for any other trial is refused, so a key pressed on one trial
    never lands on the next."""
    from engine.trial import utc_now

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
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(str(path))
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
