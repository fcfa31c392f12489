"""`tasks run --resume` of a `policy: cli` batch: the task's agent data used to sit in a temporary folder
that the frozen manifest named and that was gone by resume, so the resume refused ("… does not exist").
It is now the batch's agent-data/<task> folder: the rerun trial's client is given it again."""

from __future__ import annotations

import json
from pathlib import Path

from tests.sessions.tasks.test_batch_recover import oakwatch, task_file

# A client that reads its data folder, says what it holds on stderr (kept in its transcript), and leaves
# before a single call: each attempt is void, so its schedule position is what a resume reruns.
CLIENT = """#!/bin/sh
if [ "$1" = "--version" ]; then echo "1.0.0 (fake)"; exit 0; fi
echo "data: $OAKWATCH_TASK_DATA holds: $(ls -A "$OAKWATCH_TASK_DATA" 2>&1 | tr '\\n' ' ')" >&2
exit 1
"""


def _transcript_stderr(attempt: Path) -> str:
    lines = [json.loads(x) for x in (attempt / "client-transcript.jsonl").read_text().splitlines()]
    return next(x["text"] for x in lines if x["source"] == "stderr")


def test_a_resumed_cli_batch_gives_the_rerun_client_the_tasks_data_again(tmp_path):
    client = tmp_path / "client-bin" / "claude"
    client.parent.mkdir()
    client.write_text(CLIENT)
    client.chmod(0o755)
    task = task_file(tmp_path, "short-walk", 20)
    batch = tmp_path / "batch"
    agent = f"{client} -p go --mcp-config {{mcp_config}} --tools ''"
    done = oakwatch("tasks", "run", task, "--policy", "cli", "--agent", agent, "--client-reads", client.parent,
                    "--output", batch)
    assert done.returncode == 1, done.stdout + done.stderr  # no valid trial: the client left at once
    data = (batch / "agent-data" / "short-walk").resolve()
    run = batch / "runs" / "short-walk"
    assert _transcript_stderr(run / "void-1" / "X-01").startswith(f"data: {data} holds:")
    assert str(data) in (run / "manifest.yaml").read_text()  # what the frozen condition lets it read

    done = oakwatch("tasks", "run", "--resume", batch)
    assert done.returncode == 1, done.stdout + done.stderr  # ran again (it used to refuse: exit 2)
    assert "short-walk: rerunning schedule position(s) 0" in done.stdout
    assert _transcript_stderr(run / "void-2" / "X-01").startswith(f"data: {data} holds:")
    done = oakwatch("verify", batch)
    assert done.returncode == 0, done.stdout + done.stderr  # agent-data/ is a known part of the batch
