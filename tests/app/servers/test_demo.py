"""The key-free demo, end to end, as README's walkthrough runs it: `oakwatch demo-server` (the real
command, on a free port), `oakwatch run bundled:demo.yaml --workers 2` against it through the official
openai SDK, then verify, report, annotate, freeze, unblind and report again; Ctrl-C ends the server
with exit status 0."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading

import yaml

from app.cli import main
from app.servers.demo_server import DEFAULT_HOST, DEFAULT_PORT
from sessions.preflight.assets import ASSETS

URL = re.compile(r"oakwatch demo-server: (http://\S+/v1) ")


def _start_server() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "demo-server", "--port", "0", "--latency-ms", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=120)  # a loaded machine starts Python slowly
    found = URL.match(line[0]) if line else None
    if found is None:
        proc.kill()
        raise AssertionError(f"no start line from demo-server: {line!r} {proc.stderr.read()!r}")
    return proc, found.group(1)


def test_the_bundled_demo_names_the_servers_default_address():
    data = yaml.safe_load((ASSETS / "experiments" / "demo.yaml").read_text())
    assert {c["base_url"] for c in data["conditions"]} == {f"http://{DEFAULT_HOST}:{DEFAULT_PORT}/v1"}
    assert all("api_key_env" not in c and c["provider"] == "openai-compatible" for c in data["conditions"])


def test_demo_server_and_the_bundled_demo_run_report_annotate_unblind(tmp_path, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)  # no key anywhere: the demo needs none
    proc, base_url = _start_server()
    out = tmp_path / "demo"
    try:
        status = main(["run", "bundled:demo.yaml", "--workers", "2", "--headless", "--base-url", base_url,
                       "--output", str(out)])
    finally:
        proc.send_signal(signal.SIGINT)
        server_out, server_err = proc.communicate(timeout=60)
    assert proc.returncode == 0, server_err
    assert "stopped after" in server_out and server_err == ""
    assert status == 1  # valid game-failures (the random model's), no invalid trial
    results = {p.parent.name: json.loads(p.read_text()) for p in out.glob("trials/*/result.json")}
    blinding = json.loads((out / "blinding.json").read_text())["labels"]
    by_condition: dict[str, list[dict]] = {}
    for key, result in results.items():
        by_condition.setdefault(blinding[key.split("-")[0]], []).append(result)
    scripted, random_ = by_condition["scripted-model"], by_condition["random-model"]
    assert len(scripted) == len(random_) == 3
    assert all(r["outcome"] == "success" and r["deepest_milestone"] == "M8" for r in scripted)
    assert all(r["outcome"] == "game-failure" for r in random_)
    assert all(r["telemetry"]["cost_usd"] and r["telemetry"]["cost_usd"] > 0 for r in results.values())
    assert len({r["telemetry"]["accepted_actions"] for r in random_} | {0}) > 1
    assert main(["report", str(out), "--no-replay"]) == 0
    summary = json.loads((out / "reports" / "report.json").read_text())["summary"]
    assert sorted(summary["conditions"]) == sorted(blinding)  # both conditions, side by side, by label only
    points = {label: c["metrics"]["points"]["median"] for label, c in summary["conditions"].items()}
    assert {blinding[label]: p for label, p in points.items()} == {"scripted-model": 20, "random-model": 0}
    (effects,) = summary["effects"].values()
    assert effects["additional_milestones"]["n"] == 3  # paired by counterbalanced block

    x_trial = next(k for k in sorted(results) if k.startswith("X-"))
    for annotator, kind in (("alice", "omission"), ("bob", "contradiction")):
        assert main(["annotate", "add", str(out), "--annotator", annotator, "--trial", x_trial, "--decision", "20",
                     "--type", kind, "--severity", "minor", "--refers-to", "12"]) == 0
        assert main(["annotate", "freeze", str(out), "--annotator", annotator]) == 0
    assert main(["unblind", str(out)]) == 0
    unblinded = json.loads((out / "unblinded" / "summary.json").read_text())
    assert unblinded["conditions"] == blinding and sorted(unblinded["frozen_layers"]) == ["alice", "bob"]
    assert main(["verify", str(out)]) == 0  # the evidence, the report's sums and both frozen layers


def test_base_url_alone_needs_a_condition_it_can_point(tmp_path, capsys):
    out = tmp_path / "never"
    assert main(["run", "--headless", "--base-url", "http://127.0.0.1:9/v1", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--base-url" in err and "dry-run.yaml" in err
    assert not out.exists()


def test_run_looks_a_bundled_name_up_among_the_assets(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not read as a file called "bundled:..." in the working folder
    out = tmp_path / "never"
    assert main(["run", "bundled:no-such-demo.yaml", "--headless", "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{ASSETS}/no-such-demo.yaml" in err and "bundled:" not in err
    assert not out.exists()
