"""The run's control channel (sessions.execute.control_socket): owner-only Unix socket, JSON lines, ops mapped
onto RunControl; end to end against a real run in a subprocess (pause, step, tag, end, then the
evidence), and a connection from another uid refused and logged."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from engine.loop.control import RunControl
from sessions.evidence import layout
from sessions.execute.control_socket import LOG_NAME, POINTER, ControlClient, ControlServer, runner_handler
from tests.conftest import write_manifest

REPO = Path(__file__).resolve().parents[3]
NOBODY = 65534


def wait_for(predicate, timeout: float = 60, what: str = "it") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def echo(message: dict) -> dict:
    return {"ok": True, "got": message}


def test_round_trip_owner_only_socket_and_pointer(tmp_path):
    with ControlServer(tmp_path, echo) as server:
        assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600
        assert (tmp_path / POINTER).read_text().strip() == str(server.path)
        client = ControlClient(tmp_path)
        reply = client.pause("X-01")
        assert reply == {"ok": True, "got": {"op": "pause", "trial": "X-01"}}
        assert client.send({"op": "fly"})["ok"] is False
        assert "unknown op" in client.send({"op": "fly"})["error"]
        # A bad line gets an error reply and the connection goes on.
        import socket

        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(server.path))
            s.sendall(b"not json\n" + json.dumps({"op": "status"}).encode() + b"\n")
            data = b""
            while data.count(b"\n") < 2:
                data += s.recv(4096)
        first, second = (json.loads(x) for x in data.splitlines())
        assert first["ok"] is False and second["ok"] is True
    assert not (tmp_path / POINTER).exists() and not server.path.exists()
    assert ControlClient(tmp_path).send({"op": "status"}) == {"ok": False, "error": "read-only: no control channel"}


def test_a_path_too_long_for_a_socket_goes_under_xdg_runtime_dir(tmp_path, monkeypatch):
    runtime = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))  # short, as a real runtime dir is
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with ControlServer(deep, echo) as server:
        assert server.path.is_relative_to(runtime)
        assert ControlClient(deep).status()["ok"] is True


def test_a_runtime_dir_too_long_for_a_socket_falls_back_to_the_temp_dir(tmp_path, monkeypatch):
    runtime = tmp_path / ("r" * 90)
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    with ControlServer(deep, echo) as server:
        assert not server.path.is_relative_to(runtime) and len(str(server.path)) <= 107
        assert ControlClient(deep).status()["ok"] is True


def test_runner_handler_maps_ops_onto_run_control():
    control = RunControl()
    current = {"key": "X-01"}
    handle = runner_handler(control, lambda: current["key"])
    assert handle({"op": "pause", "trial": "X-01"})["ok"] and control.paused
    assert handle({"op": "step", "trial": "X-01"})["ok"] and control.state == "stepping"
    assert handle({"op": "resume", "trial": "X-01"})["ok"] and not control.paused
    assert not handle({"op": "step", "trial": "X-01"})["ok"]  # only while paused
    wrong = handle({"op": "end", "trial": "Y-01", "reason": "x"})
    assert not wrong["ok"] and "X-01" in wrong["error"] and control.request is None
    assert not handle({"op": "end", "trial": "X-01"})["ok"]  # a reason is required
    assert not handle({"op": "tag", "trial": "X-01", "decision": 1, "type": "other", "severity": "minor"})["ok"]
    assert handle({"op": "end", "trial": "X-01", "reason": "stuck"})["termination_reason"] == "operator-abort"
    assert control.request.reason == "operator-abort" and control.request.detail == "stuck"
    current["key"] = None
    assert "no trial is running" in handle({"op": "pause", "trial": "X-01"})["error"]
    assert handle({"op": "status"})["trial"] is None


WRAPPER = """
import sys
from pathlib import Path

from sessions.execute.control_socket import ControlServer, runner_handler
from sessions.preflight.experiment import prepare
from sessions.execute.start import create_folder
from sessions.execute.runner import ExperimentRunner

manifest, out = Path(sys.argv[1]), Path(sys.argv[2])
prepared = prepare(manifest, out)
folder = create_folder(prepared, out)
runner = ExperimentRunner(prepared, folder)
current = lambda: runner.current_trial.config.trial_key if runner.current_trial is not None else None
server = ControlServer(folder.root, runner_handler(runner.control, current))
server.start()
try:
    runner.run()
finally:
    server.stop()
"""


def lines_in(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def steady(path: Path, seconds: float = 0.6) -> int:
    """The line count once it has not changed for `seconds`."""
    last, since = lines_in(path), time.monotonic()
    while time.monotonic() - since < seconds:
        time.sleep(0.05)
        now = lines_in(path)
        if now != last:
            last, since = now, time.monotonic()
    return last


def test_end_to_end_pause_step_tag_end_against_a_real_run(tmp_path):
    manifest = write_manifest(
        tmp_path, budgets={"accepted_actions": 500_000, "model_decisions": None, "wall_time_minutes": None,
                           "unrecoverable_loop_repeats": None},
        conditions=[{"id": "rnd", "policy": "random", "seed": 9}], trials={"per_condition": 1})
    script = tmp_path / "wrapper.py"
    script.write_text(WRAPPER)
    out = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, str(script), str(manifest), str(out)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        client = ControlClient(out)
        wait_for(lambda: client.available or proc.poll() is not None, what="the control socket")
        wait_for(lambda: client.status().get("trial") or proc.poll() is not None, what="a trial")
        key = client.status()["trial"]
        trace = out / "trials" / key / layout.TRACE
        wait_for(lambda: lines_in(trace) >= 5, what="decisions")

        assert client.pause(key)["ok"]
        held = steady(trace)
        assert client.status()["paused"] is True
        assert steady(trace) == held  # paused: nothing more is decided

        assert client.step(key)["ok"]
        wait_for(lambda: lines_in(trace) >= held + 1, what="the stepped decision")
        assert steady(trace) == held + 1  # exactly one

        refused = client.pause("Z-99")
        assert refused["ok"] is False and key in refused["error"]
        tag = client.tag(key, held + 1, "other", "minor", refers_to=str(held), note="tagged through the socket")
        assert tag["ok"] is True, tag
        bad = client.tag(key, held + 1, "other", "minor", refers_to="fact-9999", note="no such fact")
        assert bad["ok"] is False and "never held" in bad["error"]

        assert client.end(key, "ended through the socket")["ok"]
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (out / POINTER).exists() and not (out / "control.sock").exists()
    results = list(out.glob(f"*/{key}/result.json"))
    assert results, list(out.iterdir())
    result = json.loads(results[-1].read_text())
    assert (result["termination_reason"], result["termination_detail"]) == \
        ("operator-abort", "ended through the socket")
    assert result["last_decision"] == held + 1
    tags = [json.loads(x) for x in (results[-1].parent / layout.TRIAL_ANNOTATIONS).read_text().splitlines()]
    assert [(t["decision_id"], t["note"]) for t in tags] == [(held + 1, "tagged through the socket")]
    log = [json.loads(x) for x in (out / layout.RUN_LOG).read_text().splitlines()]
    sealed = [e for e in log if e["event"] == "trial-sealed"]
    assert sealed and sealed[0]["trial_key"] == key and log[-1]["event"] == "run-finished"


def _connect_as(uid: int, path: Path) -> int:
    """In a forked child running as `uid`: 0 refused by the server, 4 refused by the filesystem, 3 accepted."""
    pid = os.fork()
    if pid == 0:
        code = 5
        try:
            import socket

            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(5)
                try:
                    s.connect(str(path))
                except PermissionError:
                    os._exit(4)
                try:
                    s.sendall(b'{"op": "end", "trial": "X-01", "reason": "hostile"}\n')
                except OSError:
                    pass  # the server may have answered and closed first
                data = s.recv(4096)
            reply = json.loads(data.split(b"\n")[0])
            code = 0 if reply.get("ok") is False and "refused" in reply.get("error", "") else 3
        except BaseException as exc:
            code = 6
            print(f"child: {type(exc).__name__}: {exc}", file=sys.stderr)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another uid (os.setuid)")
def test_another_uid_is_refused_and_logged():
    root = Path(tempfile.mkdtemp(prefix="oakwatch-ctl-"))  # traversable by others, unlike pytest's tmp
    try:
        os.chmod(root, 0o755)
        calls: list[dict] = []
        refused: list[str] = []

        def handle(message: dict) -> dict:
            calls.append(message)
            return {"ok": True}

        with ControlServer(root, handle, on_refused=refused.append) as server:
            # The socket's mode stops another user at the filesystem ...
            assert _connect_as(NOBODY, server.path) == 4
            # ... and were its mode ever loosened, the peer's uid is still checked, refused and logged.
            os.chmod(server.path, 0o666)
            assert _connect_as(NOBODY, server.path) == 0
            wait_for(lambda: refused, timeout=5, what="the refusal callback")
            assert ControlClient(root).status()["ok"]  # the owner still gets in
        assert calls == [{"op": "status"}]  # the hostile end never reached the handler
        assert f"uid {NOBODY}" in refused[0] and "refused" in refused[0]
        assert not (root / LOG_NAME).exists()  # the runner's callback logs it (run.jsonl), no file beside
        with ControlServer(root, handle) as server:  # no callback: a line in control.log
            os.chmod(server.path, 0o666)
            assert _connect_as(NOBODY, server.path) == 0
            wait_for(lambda: (root / LOG_NAME).exists(), timeout=5, what="the refusal log")
        log = (root / LOG_NAME).read_text()
        assert f"uid {NOBODY}" in log and "refused" in log
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


def test_every_run_opens_its_control_channel_and_closes_it(tmp_path):
    """`oakwatch run` itself (no wrapper): attach finds the socket, pause holds the trial, end
    stops it as operator-abort, and the finished folder keeps no socket or pointer."""
    manifest = write_manifest(tmp_path, conditions=[{"id": "rnd", "policy": "random", "seed": 3}],
                              budgets={"accepted_actions": 200_000, "model_decisions": None,
                                       "wall_time_minutes": None, "unrecoverable_loop_repeats": None})
    out = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (out / POINTER).exists(), what="the control pointer")
        client = ControlClient(out)
        wait_for(lambda: client.status().get("trial"), what="a running trial")
        trial = client.status()["trial"]
        assert client.send({"op": "pause", "trial": trial})["ok"]
        wait_for(lambda: client.status()["paused"], what="the pause")
        trace = out / "trials" / trial / layout.TRACE
        time.sleep(0.3)
        held = trace.read_bytes().count(b"\n")
        time.sleep(0.5)
        assert trace.read_bytes().count(b"\n") == held  # paused at a decision boundary
        assert client.send({"op": "end", "trial": trial, "reason": "seen enough"})["ok"]
        out_text, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    (found,) = out.glob(f"void-*/{trial}/result.json")  # an operator-abort is invalid: its block is voided
    result = json.loads(found.read_text())
    assert result["termination_reason"] == "operator-abort" and result["termination_detail"] == "seen enough"
    assert not (out / POINTER).exists() and not (out / "control.sock").exists()


# -- bounded under load: idle peers never lock the operator out ---------------------------------------

def _sockets_open(pid: int | str = "self") -> int:
    """Socket descriptors a process holds (its listening socket and every connection)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


def _flood(path: Path, n: int) -> list:
    import socket

    peers = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX)
        s.connect(str(path))  # blocking: waits while the backlog is full, as a real flood would
        peers.append(s)
    return peers


def _closed_by_server(s) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_an_idle_flood_does_not_lock_the_operator_out(tmp_path):
    """300 connections that never send a line: the operator's pause and status still go through,
    the server never holds more than its cap, and every idle one is closed."""
    from sessions.execute.control_socket import MAX_CONNECTIONS

    control = RunControl()
    with ControlServer(tmp_path, runner_handler(control, lambda: "X-01")) as server:
        before = _sockets_open()
        peers = _flood(server.path, 300)
        try:
            client = ControlClient(tmp_path, timeout=30)
            assert client.pause("X-01") == {"ok": True, "state": "paused", "paused": True}
            assert client.status()["paused"] is True and control.paused
            # Ours are the 300 peers and the client's (closed); the server's are capped.
            assert _sockets_open() - before - len(peers) <= MAX_CONNECTIONS
            wait_for(lambda: all(_closed_by_server(s) for s in peers), timeout=60, what="the idle peers closed")
            assert client.resume("X-01")["ok"] and not control.paused  # and the channel still serves
        finally:
            for s in peers:
                s.close()


def test_a_peer_trickling_bytes_without_a_line_is_closed(tmp_path):
    """Sending a byte now and then is not activity: no complete message within the idle limit
    since connecting, and the connection goes (a per-recv timeout would keep it for ever)."""
    with ControlServer(tmp_path, echo, idle_seconds=1.0) as server:
        peers = _flood(server.path, 20)
        gone: set[int] = set()

        def all_gone() -> bool:
            for i, s in enumerate(peers):
                if i in gone:
                    continue
                try:
                    s.send(b" ")  # a partial message, never finished
                except OSError:
                    gone.add(i)
                    continue
                if _closed_by_server(s):
                    gone.add(i)
            time.sleep(0.2)
            return len(gone) == len(peers)

        try:
            wait_for(all_gone, timeout=60, what="the trickling peers closed")
            assert ControlClient(tmp_path).status()["ok"]
        finally:
            for s in peers:
                s.close()
        assert server.timeouts >= len(peers)


def test_a_slow_op_does_not_hold_up_the_others_and_replies_keep_order(tmp_path):
    import socket
    import threading

    release = threading.Event()

    def handle(message: dict) -> dict:
        if message["op"] == "end":
            release.wait(30)  # a worker that takes its time to answer
        return {"ok": True, "op": message["op"]}

    with ControlServer(tmp_path, handle) as server:
        slow = socket.socket(socket.AF_UNIX)
        slow.connect(str(server.path))
        slow.sendall(b'{"op": "end"}\n{"op": "status"}\n')  # pipelined: answered in order
        slow.shutdown(socket.SHUT_WR)  # a peer done sending still gets its replies
        assert ControlClient(tmp_path, timeout=30).status() == {"ok": True, "op": "status"}
        release.set()
        slow.settimeout(30)
        data = b""
        while True:
            chunk = slow.recv(4096)
            if not chunk:
                break
            data += chunk
        slow.close()
        assert [json.loads(x)["op"] for x in data.splitlines()] == ["end", "status"]
        with socket.socket(socket.AF_UNIX) as big:
            big.settimeout(30)
            big.connect(str(server.path))
            try:
                big.sendall(b"x" * (100 << 10))
            except OSError:
                pass  # answered and closed before it all went
            assert json.loads(big.recv(4096).split(b"\n")[0]) == {"ok": False, "error": "message too long"}


def test_a_real_run_answers_its_operator_through_an_idle_flood(tmp_path):
    """`oakwatch run --headless`: 300 idle connections to its channel, then pause, status and end
    go through; the run holds no more than its cap of connections."""
    from sessions.execute.control_socket import MAX_CONNECTIONS

    manifest = write_manifest(tmp_path, conditions=[{"id": "rnd", "policy": "random", "seed": 4}],
                              budgets={"accepted_actions": 200_000, "model_decisions": None,
                                       "wall_time_minutes": None, "unrecoverable_loop_repeats": None})
    out = tmp_path / "exp"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    peers = []
    try:
        client = ControlClient(out, timeout=30)
        wait_for(lambda: client.status().get("trial") or proc.poll() is not None, what="a running trial")
        trial = client.status()["trial"]
        peers = _flood(ControlClient(out).socket_path(), 300)
        assert client.pause(trial)["ok"]
        assert client.status()["paused"] is True
        assert _sockets_open(proc.pid) <= MAX_CONNECTIONS + 8  # its listening socket, a few of its own
        assert client.end(trial, "flooded")["ok"]
        proc.communicate(timeout=120)
    finally:
        for s in peers:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (found,) = out.glob(f"void-*/{trial}/result.json")
    result = json.loads(found.read_text())
    assert (result["termination_reason"], result["termination_detail"]) == ("operator-abort", "flooded")
