"""`oakwatch bench` still measures what it says: its phases run the harness's own code paths (a
changed runner signature once broke the timed dry-run without any test noticing)."""

from __future__ import annotations

import json

from app.cli import main


def test_the_bench_runs_its_default_phases(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # evidence goes under ./runs, removed at the end
    assert main(["bench", "--runs", "1", "--memory-actions", "0", "--verify-decisions", "0"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out.split("json: ", 1)[1])
    assert report["dry_run"]["median_seconds"]["c"] > 0
    assert report["process"]["as configured"]["oakwatch_seconds"]
    assert not (tmp_path / "runs").exists()
