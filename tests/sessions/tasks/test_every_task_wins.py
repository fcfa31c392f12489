"""Issue 32 item 4: every ready task's reference trace wins it, all in one batch (the everyday command)."""

import json

from app.cli import main
from sessions.tasks.tasks import catalog

POKEBENCH_CATEGORIES = {"navigation", "battle", "quests", "menu", "preparation"}


def test_every_ready_task_s_reference_trace_wins_in_one_batch(tmp_path):
    tasks = {t.id: t for t in catalog() if t.template is None}
    ready = list(tasks)
    out = tmp_path / "batch"
    assert main(["tasks", "run", *ready, "--output", str(out)]) == 0
    ledger = json.loads((out / "batch.json").read_text())
    outcomes = {t["task_id"]: [trial["outcome"] for trial in t["trials"]] for t in ledger["tasks"]}
    assert set(outcomes) == set(ready)
    lost = {task: o for task, o in outcomes.items() if not o or o[-1] != "success"}
    assert not lost, f"reference traces that do not win: {lost}"
    assert main(["verify", str(out)]) == 0
    for task_id, task in tasks.items():  # the task's shortcut permissions, frozen in every result
        for result in (out / "runs" / task_id / "trials").glob("*/result.json"):
            provenance = json.loads(result.read_text())["provenance"]
            assert provenance["shortcuts"] == list(task.file.shortcuts)
            # a variant task played its seeded variant (the preflight made it from the base's seed)
            assert (provenance.get("variant_label") == "seen") == ("variant" in task.file.tags)
    platforms = {tasks[t].game.platform for t in ready}
    assert platforms >= {"gb", "gba"}  # the GB cartridge, its variant and the GBA cartridge


def test_pokebench_tasks_name_a_category():
    tagged = [t for t in catalog() if "pokebench" in (t.file.tags or [])]
    assert len(tagged) >= 15
    assert all(POKEBENCH_CATEGORIES & set(t.file.tags) for t in tagged)
    assert all(not t.file.shortcuts for t in tagged if "menu" in t.file.tags)  # menu tasks: every press the agent's
    assert any(t.file.shortcuts for t in tagged)
    # preparation with the GBA cartridge's own mechanics: a heal at home and a shop (src/main.c mom_heal, shop_buy)
    assert {"pqa-heal-at-home", "pqa-buy-a-ball"} <= {t.id for t in tagged if "preparation" in t.file.tags}
    # manual menu operation on the GBA cartridge's party menu outside battle (src/main.c field_party_*)
    assert "pqa-reorder-party" in {t.id for t in tagged if "menu" in t.file.tags}
