"""`oakwatch portal`: a static results site (issue 32 item 5) opened in headless Chromium."""

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest

from app.cli import main
from sessions.evidence.roots import folder_root
from tests.app.servers.test_serve import _browser

# Leaf elements with text whose boxes intersect: overlapping text on the page.
OVERLAPS = """
const leaves = [...document.body.querySelectorAll('*')].filter(
  e => e.children.length === 0 && e.textContent.trim() && e.getClientRects().length);
const boxes = leaves.map(e => e.getBoundingClientRect());
const hits = [];
for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
  const a = boxes[i], b = boxes[j];
  if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
    hits.push(leaves[i].textContent.trim() + ' / ' + leaves[j].textContent.trim());
}
for (const e of leaves) if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).display !== 'inline')
  hits.push('overflows: ' + e.textContent.trim());
return hits;
"""


@pytest.fixture(scope="module")
def portal(tmp_path_factory):
    base = tmp_path_factory.mktemp("portal")
    batch = base / "batch"
    assert main(["tasks", "run", "leave-house", "reach-ground-floor", "--output", str(batch)]) == 0
    campaign = batch / "runs" / "leave-house"  # an experiment folder stands in for a campaign
    out = base / "site"
    assert main(["portal", str(batch), str(campaign), "--output", str(out)]) == 0
    return batch, campaign, out


def test_portal_has_a_page_per_benchmark_task_and_model_linked_to_evidence_and_root(portal):
    batch, campaign, out = portal
    names = {p.name for p in out.iterdir()}
    assert {"index.html", "bench-pokebench-focused.html", "bench-pokebench-long.html",
            "task-leave-house.html", "task-reach-ground-floor.html", "task-campaign.html",
            "model-scripted.html"} <= names
    focused = (out / "bench-pokebench-focused.html").read_text()
    root = folder_root(batch / "runs" / "reach-ground-floor")
    assert root and root in focused and 'href="../batch/runs/reach-ground-floor/"' in focused  # relative
    long_page = (out / "bench-pokebench-long.html").read_text()
    assert folder_root(campaign) in long_page and "reach-ground-floor" not in long_page  # never mixed
    assert "<td>null</td>" in long_page and "no long_horizon section" in long_page  # unknown, not 0
    for page in out.iterdir():  # self-contained: no external fetches
        text = page.read_text()
        assert not re.search(r"<(script|link|img)[^>]+(src|href)=\"https?:", text)
    ledger = json.loads((batch / "batch.json").read_text())
    assert len(ledger["tasks"]) == 2 and "ability average 1.000" in focused


def test_portal_opens_in_chromium_without_console_errors_or_overlapping_text(portal, tmp_path):
    _, _, out = portal
    driver = _browser(tmp_path)
    try:
        for page in sorted(out.iterdir()):
            driver.get(page.as_uri())
            errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
            assert errors == [], (page.name, errors)
            assert driver.execute_script(OVERLAPS) == [], page.name
    finally:
        driver.quit()


@pytest.mark.parametrize("make", ["missing", "not-evidence", "output-file"])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, make, portal):
    batch, _, _ = portal
    folder, out = batch, tmp_path / "site"
    if make == "missing":
        folder = tmp_path / "absent"
    elif make == "not-evidence":
        folder = tmp_path / "plain"
        folder.mkdir()
    else:
        out.write_text("x")
    assert main(["portal", str(folder), "--output", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err
    assert (out.read_text() == "x") if make == "output-file" else not out.exists()


def _links(page: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', page.read_text())


def test_the_site_and_its_evidence_copied_elsewhere_still_link_up(portal, tmp_path):
    batch, _, out = portal
    moved = tmp_path / "elsewhere"
    shutil.copytree(out.parent, moved)
    site = moved / out.name
    evidence = 0
    for page in site.iterdir():
        for href in _links(page):
            assert not href.startswith(("file:", "/")), (page.name, href)  # nothing absolute
            target = (site / unquote(href)).resolve()
            assert target.exists(), (page.name, href)
            assert moved.resolve() in target.parents or target.parent == site.resolve(), href  # the copy's own
            evidence += target.is_dir()
    assert evidence > 0


def test_a_model_is_joined_across_batches_and_with_a_campaign(portal, tmp_path):
    batch, campaign, _ = portal
    again = tmp_path / "again"
    assert main(["tasks", "run", "leave-house", "--output", str(again)]) == 0
    out = tmp_path / "site"
    assert main(["portal", str(batch), str(again), str(campaign), "--output", str(out)]) == 0
    task_page = (out / "task-leave-house.html").read_text()
    focused_rows = [row for row in task_page.split("<tr>") if "PokeBench focused" in row]
    assert len(focused_rows) == 1  # one row for the task and model, pooling both batches
    assert "<td>2</td>" in focused_rows[0] and "<td>1.000</td>" in focused_rows[0]
    assert folder_root(batch / "runs" / "leave-house") in focused_rows[0]
    assert folder_root(again / "runs" / "leave-house") in focused_rows[0]
    names = {p.name for p in out.iterdir()}
    assert [n for n in names if n.startswith("model-")] == ["model-scripted.html"]  # the campaign's too
    model_page = (out / "model-scripted.html").read_text()
    assert "PokeBench Long" in model_page and model_page.count('href="task-leave-house.html"') == 1
