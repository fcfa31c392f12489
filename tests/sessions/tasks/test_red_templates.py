"""Red / Blue's template tasks (issue 32 item 4, PokeBench's categories; conformant to pret/pokered's facts, not
verified on the commercial game, which does not ship): each loads as a template against
pokemon-red-blue-en, its goal and shortcuts checked and its derived definition valid, and the task catalog's
docs list it. Templates cannot run here (no ROM, no start state)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sessions.tasks.tasks import TASKS_DIR, TaskError, catalog, derived_game, goal_fields, load_task

DOCS = Path(__file__).resolve().parents[3] / "docs" / "tasks.md"
CATEGORIES = {"navigation", "battle", "menu", "preparation", "quests"}
NEW = {"red-reach-oaks-lab": "navigation", "red-get-parcel": "quests", "red-deliver-parcel": "quests",
       "red-heal-at-center": "preparation", "red-set-options": "menu", "red-rival-battle-shortcuts": "battle"}


@pytest.fixture(scope="module")
def red():
    return {t.id: t for t in catalog() if t.id.startswith("red-")}


def test_every_red_template_loads_against_red_and_its_derived_definition(red):
    assert set(NEW) <= set(red)
    for task in red.values():
        assert task.template is not None and task.game.id == "pokemon-red-blue-en"
        assert "template" in task.file.tags and len(CATEGORIES & set(task.file.tags)) == 1
        derived = derived_game(task.file, task.game)
        assert set(derived.shortcuts) == set(task.file.shortcuts)  # only the permitted ones
        shown = derived.tracks.gameplay.fields + derived.tracks.structured.fields
        assert not goal_fields(task.file, task.game) & set(shown)  # the goal stays hidden
    assert {NEW[i] for i in NEW} == CATEGORIES and all(NEW[i] in red[i].file.tags for i in NEW)


def test_the_derived_definitions_hide_what_each_goal_reads(red):
    lab = derived_game(red["red-reach-oaks-lab"].file, red["red-reach-oaks-lab"].game).tracks.gameplay
    assert "map_id" not in lab.fields and lab.outcomes is None and lab.terrain is not None  # the map is the goal
    menu = derived_game(red["red-set-options"].file, red["red-set-options"].game)
    assert menu.shortcuts == {} and red["red-set-options"].file.track == "visual"  # every press the agent's
    heal = derived_game(red["red-heal-at-center"].file, red["red-heal-at-center"].game)
    assert heal.milestones[-1].all[0].field == "last_blackout_map" and heal.tracks.gameplay.party is not None


def test_a_red_task_permitting_use_item_is_refused_in_one_line(tmp_path):
    """Red defines no use_item: the bag holds the parcel rungs M6 and M7 read, so no inventory is shown."""
    data = yaml.safe_load((TASKS_DIR / "red-get-parcel.yaml").read_text(encoding="utf-8"))
    data["shortcuts"] = ["use_item"]
    path = tmp_path / "red-use-item.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    with pytest.raises(TaskError) as info:
        load_task(path)
    message = str(info.value)
    assert "use_item is not a shortcut pokemon-red-blue-en defines" in message and "\n" not in message


def test_the_task_catalog_docs_list_every_red_template(red):
    text = DOCS.read_text(encoding="utf-8")
    assert [i for i in red if f"`{i}`" not in text] == []
