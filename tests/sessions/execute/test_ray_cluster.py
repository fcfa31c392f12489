"""`oakwatch run --executor ray --ray-address HOST:PORT` against a real cluster started with Ray's own
`ray start --head`, as docs/ray.md says, on loopback only. The machine has a Ray token
(~/.ray/auth_token, as any earlier local Ray run leaves one), so Ray 2.60's `ray start` turns token
authentication on; the driver must follow it with nothing set by hand. Every trial's Ray worker then
exits cleanly after its trial is sealed (no SIGSEGV or SIGABRT at teardown). A driver without the
token is refused, in one line that names authentication."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sessions.audit.verify import verify_experiment
from sessions.evidence import layout
from tests.conftest import write_manifest
from tests.sessions.execute.test_ray_executor import two_conditions
from tests.sessions.execute.test_workers import budget, summary_of

pytest.importorskip("ray", reason="Ray (the optional extra `ray`) is not installed")
# One Ray at a time: under xdist these share a worker. Slow: a cluster starts (~15 s) and a Ray run, or
# Ray's own retries of a refused driver (~20 s), follow; together over a minute on a 2-core machine.
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
RAY = Path(sys.executable).parent / "ray"
# What a crashed Ray worker leaves in its .err log (Ray's own signal handler, Python's faulthandler).
CRASHED = re.compile(r"SIGSEGV received|SIGABRT received|SIGBUS received|Fatal Python error")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")}
    # Loopback only: with this Ray names the node 127.0.0.1 and its servers listen there alone (and the
    # driver does not turn 127.0.0.1 into the machine's network address).
    return {**env, "HOME": str(home), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0",
            "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def cluster():
    """`ray start --head --block` in its own process group, under a short folder of its own (Ray's unix
    sockets live there), with a home that holds a token; stopped, every process of it, at the end."""
    base = Path(tempfile.mkdtemp(prefix="owray-", dir="/tmp"))
    home = base / "home"
    (home / ".ray").mkdir(parents=True)
    token = home / ".ray" / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    port = free_port()
    env = ray_env(home)
    log = base / "ray-start.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(RAY), "start", "--head", "--block", "--port", str(port), "--num-cpus", "2",
                                 "--include-dashboard", "false", "--disable-usage-stats",
                                 "--dashboard-agent-listen-port", str(free_port()),
                                 "--metrics-export-port", str(free_port()), "--temp-dir", str(base / "ray")],
                                env=env, cwd=base, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while b"Ray runtime started" not in log.read_bytes():
            assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "ray start did not come up in 120 s"
            time.sleep(0.5)
        yield SimpleNamespace(address=f"127.0.0.1:{port}", home=home, base=base, log=log)
    finally:
        proc.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # anything of this cluster still running (its group only)
        except ProcessLookupError:
            pass
        proc.wait()
        shutil.rmtree(base, ignore_errors=True)


def oakwatch_run(cluster, manifest: Path, out: Path, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--executor", "ray",
                           "--ray-address", cluster.address, "--output", str(out)],
                          cwd=REPO, env=ray_env(home), capture_output=True, text=True, timeout=300)


def wait_gone(pids: set[int], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while any(Path(f"/proc/{p}").exists() for p in pids):
        assert time.monotonic() < deadline, f"Ray workers {sorted(p for p in pids if Path(f'/proc/{p}').exists())} " \
                                            "did not exit"
        time.sleep(0.2)


def test_the_documented_cluster_runs_with_token_auth_and_every_worker_exits_cleanly(cluster, tmp_path):
    start_log = cluster.log.read_text(errors="replace")
    assert "Token authentication is enabled" in start_log  # the case of the issue: ray start turned it on
    assert "Local node IP: 127.0.0.1" in start_log
    manifest = write_manifest(tmp_path, budgets=budget(60), **two_conditions(2))
    out = tmp_path / "exp"
    done = oakwatch_run(cluster, manifest, out, cluster.home)  # RAY_AUTH_MODE unset, as docs/ray.md runs it
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    assert verify_experiment(out) == []
    summary = summary_of(out)
    assert summary.completed == 4 and not summary.stopped_early
    # Each trial's worker exits once its trial is sealed, and exits cleanly: its log has no crash.
    pids = {json.loads((p / layout.TRIAL).read_text())["pid"] for p in (out / "trials").iterdir()}
    assert len(pids) == 4
    wait_gone(pids)
    logs = cluster.base / "ray" / "session_latest" / "logs"
    trial_workers = {}
    for err in logs.glob("worker-*.err"):
        text = err.read_text(errors="replace")
        if ":actor_name:RayTrial" in text:  # the header Ray writes in a trial worker's log
            trial_workers[int(err.stem.rsplit("-", 1)[1])] = text
    assert pids <= set(trial_workers)
    crashed = {pid: CRASHED.search(text).group(0) for pid, text in trial_workers.items() if CRASHED.search(text)}
    assert not crashed, f"{len(crashed)} of {len(trial_workers)} trial workers crashed at exit: {crashed}"


def test_a_driver_without_the_token_is_refused_in_a_line_that_names_authentication(cluster, tmp_path):
    manifest = write_manifest(tmp_path, budgets=budget(60), **two_conditions(1))
    home = tmp_path / "home"  # no token here
    home.mkdir()
    out = tmp_path / "exp"
    done = oakwatch_run(cluster, manifest, out, home)
    assert done.returncode == 2
    error = [line for line in done.stderr.splitlines() if "Ray cluster at" in line]
    assert error and "token authentication" in error[0] and "~/.ray/auth_token" in error[0], done.stderr[-2000:]
    summary = summary_of(out)
    assert summary.stop_reason == "executor-unavailable" and summary.completed == 0
