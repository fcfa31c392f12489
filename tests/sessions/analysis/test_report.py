"""`oakwatch report` end to end on a real two-condition run of the bundled cartridge."""

import base64
import csv
import io
import itertools
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from app.cli import main
from sessions.analysis.report import build_report
from sessions.annotations import annotation_layer as al
from sessions.audit.verify import verify_experiment
from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.conftest import run_experiment, write_manifest

SECTIONS = ["conclusion", "trials", "conditions", "progress-actions", "progress-cost", "timelines",
            "memory-errors", "agreement", "long-horizon", "checklist", "reconciliation", "definitions"]


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.ids, self.external = [], set(), []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if "id" in a and tag == "section":
            self.ids.add(a["id"])
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http", "//")) or tag in ("script", "link"):
                self.external.append((tag, a))


@pytest.fixture(scope="module")
def two_conditions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two")
    data = yaml.safe_load(DEFAULT_MANIFEST.read_text())
    conditions = data["conditions"] + [{"id": "wander", "policy": "random", "seed": 7,
                                        "memory_policy": "recent-window", "actions_per_decision": 2}]
    manifest = write_manifest(tmp, conditions=conditions, trials={**data["trials"], "per_condition": 2,
                                                                      "blinding_seed": 0})  # X: the walkthrough
    root, summary, results = run_experiment(manifest, tmp / "exp")
    # two blind annotators on X-01: agree at decision 5, disagree at 9; then frozen
    al.add_label(root, "ann", "X-01", 5, type="omission", severity="material", refers_to="2", recovered_decision=7)
    al.add_label(root, "ann", "X-01", 9, type="fabrication", severity="minor", refers_to="3")
    al.add_label(root, "bob", "X-01", 5, type="omission", severity="material", refers_to="2", recovered_decision=7)
    for name in ("ann", "bob"):
        al.AnnotationLayer(root, name).freeze()
    return root, summary, results


def test_report_end_to_end(two_conditions, tmp_path, capsys):
    root, summary, results = two_conditions
    out = tmp_path / "rep"
    assert main(["report", str(root), "--output", str(out), "--seed", "11"]) == 0
    printed = capsys.readouterr().out
    assert "replaying trials/X-01" in printed and "report written" in printed  # progress per step
    doc = json.loads((out / "report.json").read_text())
    page = (out / "report.html").read_text()
    parsed = _Html()
    parsed.feed(page)
    assert set(SECTIONS) <= parsed.ids
    assert not parsed.external  # self-contained: no script, stylesheet link or remote address
    # progress vs actions, a timeline per trial that reached a rung, memory errors by type and severity;
    # no progress-vs-cost plot: every cost is a known $0 (scripted and random players), and it says so
    assert parsed.tags.count("svg") == 1 + sum(bool(r.milestones) for r in results) + 1
    assert "cost is a known $0" in page
    assert "http" not in re.sub(r'xmlns(:\w+)?="[^"]*"', "", page)  # namespaces only, nothing to fetch
    # blinded: labels only, never the condition ids
    assert doc["blinded"] and "walkthrough" not in page and "wander" not in page
    # every number traced back to result.json
    by_key = {r["trial_key"]: r for r in doc["trials"]}
    for r in results:
        row = by_key[r.trial_key]
        on_disk = json.loads((root / "trials" / r.trial_key / "result.json").read_text())
        assert row["points"] == on_disk["progress_points"]
        assert row["accepted_actions"] == on_disk["telemetry"]["accepted_actions"]
        assert row["model_decisions"] == on_disk["telemetry"]["decisions"]
        assert row["cost_usd"] == on_disk["telemetry"]["cost_usd"]
        assert row["deepest"] == on_disk["deepest_milestone"]
        assert row["state_source"] == "replay"
        # without a required-backtracking declaration the replayed routes match the live tracker
        assert row["repeated_navigation_actions"] == on_disk["telemetry"]["repeated_navigation_actions"]
    assert doc["reconciliation"]["ok"] and "reconcile with summary.json" in (out / "report.md").read_text()
    # the agreed omission counts (recovery: decisions 5 and 6, one action each); the disputed one does not
    x1 = by_key["X-01"]
    assert (x1["memory_errors"], x1["material_errors"], x1["memory_recovery_cost"]) == (1, 1, 2)
    assert x1["memory_error_rate"] == pytest.approx(100 / x1["model_decisions"], abs=1e-6)
    pair = doc["agreement"]["pairs"][0]
    assert [d["decision_id"] for d in pair["disagreements"]] == [9]
    assert doc["summary"]["bootstrap"]["seed"] == 11
    assert "significance claims are not supported" in doc["summary"]["significance_note"]
    assert doc["conclusion"].startswith("Under the frozen Parcel Quest protocol")
    assert "condition X reached a deeper median milestone" in doc["conclusion"]
    checks = {c["check"]: c["status"] for c in doc["checklist"]}
    assert len(checks) == 12 and checks["sha256sum --check SHA256SUMS succeeds."] == "pass"
    assert checks["Annotators were blinded until labels were frozen."] == "pass"
    assert not doc["scorers"]["long_horizon"]["used"] and doc["scorers"]["long_horizon"]["reason"]
    with (out / "trials.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(results)
    with (out / "conditions.csv").open() as f:
        assert {r["condition"] for r in csv.DictReader(f)} == {"X", "Y"}


def test_default_output_keeps_the_folder_verifiable(two_conditions, tmp_path):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(two_conditions[0], root)
    assert main(["report", str(root), "--no-replay"]) == 0
    assert (root / "reports" / "report.html").is_file() and (root / "reports" / "SHA256SUMS").is_file()
    assert verify_experiment(root) == []


def test_export_package(two_conditions, tmp_path):
    root = two_conditions[0]
    out = tmp_path / "pkg"
    assert main(["export", str(root), "--output", str(out)]) == 0
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert {"manifest.redacted.yaml", "prompts/system.txt", "scoring/memory-error-rubric.yaml",
            "report/trials.csv", "annotation-disagreements.json", "SHA256SUMS", "README.md"} <= files
    assert not any(f.endswith(("frames.pack", "responses.jsonl", ".state", ".gb")) for f in files)
    assert "blinding.json" not in files and not any(f.startswith("conditions/") for f in files)  # still blinded
    for f in files:
        text = (out / f).read_bytes().decode("utf-8", "replace")
        assert str(root) not in text and str(tmp_path) not in text
    assert main(["export", str(root), "--output", str(out)]) == 2  # never over an existing folder
    raw = tmp_path / "raw"
    assert main(["export", str(root), "--output", str(raw), "--include-raw"]) == 0
    assert (raw / "trials" / "X-01" / "responses.jsonl").is_file()


@pytest.fixture(scope="module")
def two_report(two_conditions, tmp_path_factory):
    """The two-condition run's report, without replay (no figure here needs per-action state)."""
    out = tmp_path_factory.mktemp("two-report")
    doc = build_report(two_conditions[0], out, replay=False)
    return out, doc


def test_trials_nobody_annotated_are_null_never_zero(two_report):
    out, doc = two_report
    figures = ("memory_errors", "material_errors", "memory_error_rate", "material_memory_error_rate",
               "memory_recovery_cost", "storage_quality", "use_quality")
    rows = {r["trial_key"]: r for r in doc["trials"]}
    assert rows["X-01"]["memory_errors"] == 1  # the one trial the annotators labelled
    for key in ("X-02", "Y-01", "Y-02"):
        assert [rows[key][f] for f in figures] == [None] * len(figures), key
    with (out / "trials.csv").open() as f:
        csv_rows = {r["trial_key"]: r for r in csv.DictReader(f)}
    assert csv_rows["X-01"]["memory_errors"] == "1"
    assert {csv_rows[k]["memory_errors"] for k in ("X-02", "Y-01", "Y-02")} == {""}
    per = doc["summary"]["conditions"]
    assert (per["X"]["n_annotated"], per["Y"]["n_annotated"]) == (1, 0)
    assert per["Y"]["errors_by_type"] is None and per["X"]["errors_by_type"]["omission"] == 1
    with (out / "conditions.csv").open() as f:
        y = next(r for r in csv.DictReader(f) if r["condition"] == "Y" and r["metric"] == "memory_errors")
    assert (y["median"], y["unknown"]) == ("", "2")  # unknown, not a median of zeros
    md = (out / "report.md").read_text()
    assert "| Y | 0 of 2 | any | not annotated | not annotated | not annotated |" in md
    assert md.count("| not annotated |") >= 3  # the trial table's memory-error cells
    assert "| memory: material errors per 100 decisions | unknown: not every trial annotated | not annotated |" in md


def test_a_reviewed_trial_without_labels_counts_zero_errors(two_conditions, tmp_path, capsys):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(two_conditions[0], root)
    # a third annotator looks at all of Y-01 and Y-02 (two sittings for Y-02) and finds no memory error
    base = ["annotate", "reviewed", str(root), "--annotator", "cat", "--trial"]
    assert main([*base, "Y-01", "--note", "nothing found"]) == 0
    assert main([*base, "Y-02", "--to", "10"]) == 0
    assert main([*base, "Y-02", "--from", "11"]) == 0
    out = tmp_path / "rep"
    doc = build_report(root, out, replay=False)
    rows = {r["trial_key"]: r for r in doc["trials"]}
    figures = ("memory_errors", "material_errors", "memory_error_rate", "material_memory_error_rate",
               "memory_recovery_cost")
    for key in ("Y-01", "Y-02"):
        assert [rows[key][f] for f in figures] == [0, 0, 0.0, 0.0, 0], key  # known: reviewed, nothing found
    assert rows["X-01"]["memory_errors"] == 1  # cat did not look at X-01: ann and bob's agreement stands
    assert rows["X-02"]["memory_errors"] is None  # nobody looked at it: still not annotated
    with (out / "trials.csv").open() as f:
        csv_rows = {r["trial_key"]: r for r in csv.DictReader(f)}
    assert [csv_rows[k]["memory_errors"] for k in ("X-01", "X-02", "Y-01", "Y-02")] == ["1", "", "0", "0"]
    per = doc["summary"]["conditions"]
    assert (per["X"]["n_annotated"], per["Y"]["n_annotated"]) == (1, 2)
    assert per["Y"]["errors_by_type"] == {t: 0 for t in per["X"]["errors_by_type"]}
    # the condition's memory medians are filled now: a median of known zeros
    y = per["Y"]["metrics"]
    assert [(y[m]["median"], y[m]["unknown"]) for m in ("memory_errors", "material_memory_error_rate")] == \
        [(0, 0), (0.0, 0)]
    with (out / "conditions.csv").open() as f:
        ycsv = next(r for r in csv.DictReader(f) if r["condition"] == "Y" and r["metric"] == "memory_errors")
    assert (float(ycsv["median"]), ycsv["unknown"]) == (0.0, "0")
    # cat looked at no decision ann or bob did: no shared decision, so nothing to agree on
    pairs = {tuple(p["annotators"]): p for p in doc["agreement"]["pairs"]}
    assert (pairs[("ann", "cat")]["units"], pairs[("ann", "cat")]["kappa"]) == (0, None)
    assert pairs[("ann", "bob")]["units"] == rows["X-01"]["model_decisions"]


@pytest.mark.parametrize("command", [["report", "--no-replay"], ["export"]])
def test_a_malformed_layer_is_named_in_one_line_and_nothing_is_written(two_conditions, tmp_path, capsys, command):
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(two_conditions[0], root)
    assert main(["annotate", "reviewed", str(root), "--annotator", "cat", "--trial", "Y-01"]) == 0
    layer = root / "annotations" / "cat" / "annotations.jsonl"
    layer.write_text(layer.read_text().replace('"through_decision":', '"through_decision":"all","was":'))
    capsys.readouterr()
    out = tmp_path / "out"
    assert main([command[0], str(root), *command[1:], "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "annotations/cat/annotations.jsonl:1" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy"]  # no report or package, not even half of one


REPORT_GEOMETRY = """
const page = document.documentElement.getBoundingClientRect();
return [...document.querySelectorAll('svg')].map(svg => {
  const r = svg.getBoundingClientRect(), s = svg.closest('section').getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim()).map(t => {
    const b = t.getBoundingClientRect(); return [t.textContent.trim(), b.left, b.top, b.right, b.bottom]; });
  return {section: svg.closest('section').id, width: r.width, height: r.height,
          inside: r.left >= s.left - 0.5 && r.right <= s.right + 0.5 && r.right <= page.right + 0.5, texts};
});
"""


def _chromium(tmp_path):
    """Debian's chromium through the system chromedriver, offline (as tests/app/servers/test_serve.py)."""
    chromium = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).exists()), None)
    if chromium is None or not Path("/usr/bin/chromedriver").is_file():
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager fetch a driver
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no host resolves
                "--window-size=1280,900", f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    return driver


def _overlaps(a, b) -> bool:
    return a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5 and a[2] < b[4] - 0.5 and b[2] < a[4] - 0.5


def test_report_html_renders_in_headless_chromium(two_report, tmp_path):
    from PIL import Image

    out, _ = two_report
    driver = _chromium(tmp_path)
    try:
        driver.get((out / "report.html").as_uri())
        figures = driver.execute_script(REPORT_GEOMETRY)
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        loaded = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        no_plot = driver.execute_script(
            "return [...document.querySelectorAll('.no-plot')].map(p => p.closest('section').id)")
    finally:
        driver.quit()
    assert loaded == []  # self-contained: the page fetched nothing
    png = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
    if os.environ.get("OAKWATCH_REPORT_SCREENSHOT"):  # to look at the page
        Path(os.environ["OAKWATCH_REPORT_SCREENSHOT"]).write_bytes(base64.b64decode(shot["data"]))
    assert png.height > 900 and len(set(png.resize((200, 400)).getdata())) > 16  # drawn, not blank
    # the drawn figures: progress against actions, X's two timelines, memory errors; cost (all $0)
    # and Y's timelines (no rung reached) are sentences
    assert [f["section"] for f in figures] == ["progress-actions", "timelines", "timelines", "memory-errors"]
    assert sorted(no_plot) == ["progress-cost", "timelines", "timelines"]
    for f in figures:
        assert f["width"] > 100 and f["height"] > 50 and f["inside"], f
        for a, b in itertools.combinations(f["texts"], 2):  # M7 and M8 among them, a decision apart
            assert not _overlaps(a, b), f"{f['section']}: {a[0]!r} overlaps {b[0]!r}"


def test_the_actions_logged_check_names_a_decision_whose_input_line_is_gone(two_conditions, tmp_path):
    """The checklist line counts inputs.jsonl per decision in the compact array (a dict per decision
    grew the report by 45 MB at a million decisions); it must still name the decision that lost a line."""
    import shutil

    from sessions.analysis.report import _actions_logged, _Folder

    root = tmp_path / "copy"
    shutil.copytree(two_conditions[0], root)
    rows = [{"folder": p.parent.relative_to(root).as_posix()} for p in sorted(root.glob("trials/*/inputs.jsonl"))]
    folder = _Folder(root, rows, rows, {}, "", [], {}, None, {}, None)
    assert _actions_logged(folder)["status"] == "pass"
    inputs = root / rows[0]["folder"] / "inputs.jsonl"
    lines = inputs.read_bytes().splitlines(keepends=True)
    gone = json.loads(lines[3])["decision_id"]
    inputs.write_bytes(b"".join(lines[:3] + lines[4:]))
    line = _actions_logged(folder)
    assert line["status"] == "fail" and line["detail"] == f"{rows[0]['folder']} decision {gone}"
