"""kill -9 during `oakwatch tasks run` (issue 34 item 8): the batch's verify and report used to exit 0
although a run folder still held `.lock` and `.control` and `batch.json` listed only the finished
tasks, and `recover BATCH` refused. Now verify fails it and report refuses it, `recover BATCH`
finishes every run folder and lists the task that was running, and `tasks run --resume BATCH`
reruns what that folder lacks and runs the tasks the batch never reached."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from sessions.evidence import layout
from tests.sessions.execute.test_faults import wait_for

ROOT = Path(__file__).resolve().parents[3]
OAKWATCH = [sys.executable, "-m", "app.cli"]


def task_file(tmp_path: Path, task_id: str, actions: int) -> Path:
    data = {"task_id": task_id, "title": task_id.replace("-", " "), "instruction": "Leave your house.",
            "experiment": "bundled:dry-run.yaml", "goal": {"milestones": ["M8"]},
            "budgets": {"accepted_actions": actions, "model_decisions": actions, "wall_time_minutes": 10},
            "track": "visual", "reference_script": "bundled:walkthrough.txt"}
    path = tmp_path / f"{task_id}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def oakwatch(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*OAKWATCH, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_kill_9_mid_batch_then_verify_fails_recover_and_resume_finish_it(tmp_path):
    long_task, short_task = task_file(tmp_path, "long-walk", 3000), task_file(tmp_path, "short-walk", 20)
    batch = tmp_path / "batch"
    proc = subprocess.Popen([*OAKWATCH, "tasks", "run", str(long_task), str(short_task), "--policy", "random",
                             "--output", str(batch)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        trace = batch / "runs" / "long-walk" / "trials" / "X-01" / "trace.jsonl"
        wait_for(lambda: (trace.is_file() and trace.stat().st_size > 0) or proc.poll() is not None, timeout=120,
                 what="the first task's trial to play")
        assert proc.poll() is None, "the batch ended before it could be killed"
        proc.send_signal(signal.SIGSTOP)  # held mid-trial, then killed where it stands
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = batch / "runs" / "long-walk"
    assert (run / layout.LOCK).exists()
    assert json.loads((batch / "batch.json").read_text())["tasks"] == []  # only finished tasks were listed

    done = oakwatch("verify", batch)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "runs/long-walk: its run did not finish" in done.stderr and "the batch did not finish" in done.stderr
    done = oakwatch("report", batch)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "recover" in done.stderr, done.stderr
    assert not (batch / "reports").exists()
    done = oakwatch("tasks", "run", "--resume", batch)  # not before recover
    assert done.returncode == 2 and f"oakwatch recover {batch}` first" in done.stderr, done.stderr

    done = oakwatch("recover", batch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "listed long-walk" in done.stdout and "not run yet: short-walk" in done.stdout
    assert not (run / layout.LOCK).exists() and not (run / ".control").exists()
    done = oakwatch("verify", batch)
    assert done.returncode == 0 and "stopped early" in done.stdout, done.stdout + done.stderr
    ledger = json.loads((batch / "batch.json").read_text())
    assert [t["task_id"] for t in ledger["tasks"]] == ["long-walk"] and ledger["tasks"][0]["trials"] == []
    done = oakwatch("report", batch)
    assert done.returncode == 0, done.stderr
    statuses = {t["task_id"]: t["status"] for t in json.loads((batch / "reports/tasks.json").read_text())["tasks"]}
    assert statuses == {"long-walk": "run", "short-walk": "not-run: stopped"}
    assert oakwatch("recover", batch).stdout.strip().endswith("nothing to recover")

    done = oakwatch("tasks", "run", "--resume", batch)
    assert done.returncode == 1, done.stdout + done.stderr  # random walkers fail their tasks: valid failures
    assert "long-walk: rerunning schedule position(s) 0" in done.stdout
    ledger = json.loads((batch / "batch.json").read_text())
    assert [t["task_id"] for t in ledger["tasks"]] == ["long-walk", "short-walk"]
    assert all(len(t["trials"]) == 1 for t in ledger["tasks"]) and ledger["finished_utc"] and not ledger["stopped"]
    assert list((run).glob("void-*/X-01"))  # the killed attempt, kept as void evidence
    done = oakwatch("verify", batch)
    assert done.returncode == 0 and "stopped early" not in done.stdout, done.stdout + done.stderr
    assert oakwatch("report", batch).returncode == 0
    before = (batch / "batch.json").read_bytes()
    assert "nothing to resume" in oakwatch("tasks", "run", "--resume", batch).stdout
    assert (batch / "batch.json").read_bytes() == before
