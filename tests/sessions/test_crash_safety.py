"""A killed run leaves readable evidence: every trace line whole."""

import json
import signal
import subprocess
import sys
import time

from tests.conftest import write_manifest


def test_killed_run_leaves_whole_lines(tmp_path):
    manifest = write_manifest(tmp_path, conditions=[{"id": "rnd", "policy": "random", "seed": 9}],
                              budgets={"accepted_actions": 200000, "unrecoverable_loop_repeats": None})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    trace = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = list(out.glob("trials/*/trace.jsonl"))
        if found and found[0].stat().st_size > 20_000:
            trace = found[0]
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert trace is not None, proc.stderr.read().decode()
    lines = trace.read_text().splitlines()
    assert len(lines) > 10
    decoded = [json.loads(line) for line in lines]
    assert [d["decision_id"] for d in decoded] == list(range(1, len(decoded) + 1))
    assert trace.read_text().endswith("\n")


def test_interrupted_run_ends_cleanly_and_verifies(tmp_path):
    from sessions.verify import verify_experiment

    manifest = write_manifest(tmp_path, conditions=[{"id": "rnd", "policy": "random", "seed": 9}],
                              budgets={"accepted_actions": 200000, "unrecoverable_loop_repeats": None})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(manifest), "--headless", "--output",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(out.glob("trials/*/frames/000050.png")):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stdout + stderr  # the one requested trial ended as a game-failure
    result = json.loads(next(out.glob("trials/*/result.json")).read_text())
    assert result["termination_reason"] == "operator-terminate: interrupted by signal"
    assert verify_experiment(out) == []


def test_a_reader_that_goes_away_does_not_end_the_run(tmp_path):
    """`oakwatch run --headless | head -2`: the run finishes and its evidence is whole."""
    from sessions.verify import verify_experiment

    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", "--headless", "--output", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.readline()
    proc.stdout.close()  # the reader leaves after two lines
    assert proc.wait(timeout=120) == 0, proc.stderr.read().decode()
    assert b"Traceback" not in proc.stderr.read()
    result = json.loads(next(out.glob("trials/*/result.json")).read_text())
    assert result["outcome"] == "success"
    assert verify_experiment(out) == []
