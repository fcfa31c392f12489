"""Seed 004's runs on the GBA cartridge: `oakwatch tasks run --policy cli` over boss tasks, each trial an SDK
client (tests/fakes/mcp_boss_agent.py) on oakwatch's MCP server with the battle ruleset, E = 10 episodes;
the batch verifies, its report (Markdown and HTML) has the success-within-E curves per task and pooled,
the first-episode win rates and each episode's team; replay re-applies every encrypted write, and a
trace without them diverges."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from app.cli import main
from tests.gba.conftest import needs_mgba

pytestmark = needs_mgba
ROOT = Path(__file__).resolve().parents[2]
BOSSES = ROOT / "assets" / "tasks" / "gba-bosses"
AGENT = ROOT / "tests" / "fakes" / "mcp_boss_agent.py"
EASY, HARD = "pqa-boss-1-scout-tomas", "pqa-boss-2-picnicker-mae"


@pytest.fixture(scope="module")
def boss_client(client_install) -> Path:
    """The boss agent installed as a client is (outside oakwatch's tree, which it may not read): the
    script, the type chart it knows, the reference teams as JSON, and a launcher with the SDK's site."""
    import yaml

    home = client_install / "boss"
    home.mkdir(exist_ok=True)
    shutil.copy2(AGENT, home / AGENT.name)
    shutil.copy2(ROOT / "assets" / "gba-cartridge" / "tools" / "battle_data.py", home / "battle_data.py")
    for ref in BOSSES.glob("*.reference.yml"):
        team = yaml.safe_load(ref.read_text())["team"]
        (home / ref.name.replace(".reference.yml", ".team.json")).write_text(json.dumps(team))
    exe = home / "boss-agent"
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={client_install / 'site'} exec {os.path.realpath(sys.executable)} "
                   f"{home / AGENT.name} \"$@\"\n")
    exe.chmod(0o755)
    return home


def _run(tmp_path, client: Path, tasks: list[str], *mode: str) -> Path:
    out = tmp_path / "batch"
    agent = " ".join([str(client / "boss-agent"), *mode, "--mcp-config", "{mcp_config}"])
    code = main(["tasks", "run", "--dir", str(BOSSES), *tasks, "--policy", "cli", "--agent", agent,
                 "--allow-file-and-shell-tools", "--client-reads", str(client.parent), "--client-reads",
                 sys.base_prefix, "--output", str(out)])
    assert code in (0, 1)
    return out


def test_reference_agent_over_mcp_wins_reports_verifies_and_replays(tmp_path, boss_client):
    from sessions.audit.replay import Divergence, replay_trial

    out = _run(tmp_path, boss_client, [EASY, HARD], "--team-dir", str(boss_client))
    ledger = json.loads((out / "batch.json").read_text())
    assert ledger["policy"]["policy"] == "cli" and [t["task_id"] for t in ledger["tasks"]] == [EASY, HARD]
    for row in ledger["tasks"]:
        assert row["status"] == "run" and row["episode_budget"] == 10 and row["battle"]["task_sha256"]
        (trial,) = row["trials"]
        assert trial["success"] and trial["success_episode"] == 1  # the reference team wins at once
    assert main(["verify", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    md = (out / "reports" / "tasks.md").read_text()
    page = (out / "reports" / "tasks.html").read_text()
    doc = json.loads((out / "reports" / "tasks.json").read_text())
    assert doc["success_within_episodes_pooled"] == [1.0] * 10 and doc["first_episode_win_rate_pooled"] == 1.0
    assert "Pooled over every episodic trial" in md and "First-episode win rate: 1.000" in md
    assert page.count("<polyline") == 3 and "first-episode win rate" in page  # two tasks and the pool
    assert "team ZAPLING, PUNCHLET" in md and "ZAPLING, PUNCHLET" in page  # the team change log
    trial = out / "runs" / EASY / "trials" / "X-01"
    trace = [json.loads(line) for line in (trial / "trace.jsonl").read_text().splitlines()]
    writes = [t["battle"]["writes"] for t in trace if t.get("battle", {}).get("tool") == "apply_team"]
    assert writes and len(writes[0]) == 7  # the count byte and six 100-byte records (two teamed, four blank)
    assert main(["replay", str(trial)]) == 0
    # the same trace without its encrypted writes: the battle screen shows the start state's party instead
    stripped = tmp_path / "stripped"
    shutil.copytree(out / "runs" / EASY, stripped)
    lines = []
    for t in trace:
        if t.get("battle"):
            t["battle"]["writes"] = []
        lines.append(json.dumps(t))
    (stripped / "trials" / "X-01" / "trace.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(Divergence):
        replay_trial(stripped / "trials" / "X-01")


@pytest.mark.slow
def test_all_eight_boss_tasks_over_mcp_reference_and_random_agents(tmp_path, boss_client):
    """The whole set, E = 10: the reference agent wins every task in its first episode; a random team
    (its moves still chosen greedily) wins few."""
    tasks = sorted(p.stem for p in BOSSES.glob("*.yaml"))
    ref = _run(tmp_path / "ref", boss_client, tasks, "--team-dir", str(boss_client))
    rows = json.loads((ref / "batch.json").read_text())["tasks"]
    assert len(rows) == 8 and all(r["trials"][0]["success"] for r in rows), rows
    rnd = _run(tmp_path / "rnd", boss_client, tasks, "--random", "5")
    rows = json.loads((rnd / "batch.json").read_text())["tasks"]
    assert sum(1 for r in rows if r["trials"][0]["success"]) <= 4, rows
