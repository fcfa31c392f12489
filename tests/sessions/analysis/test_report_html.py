"""report.html from the Jinja2 template (sessions/analysis/report_templates/): the structure a reader relies
on and the escaping of text a user wrote (a condition's name, the experiment id) on a real dry run."""

import re
from html.parser import HTMLParser

import pytest

from sessions.analysis import report

SECTIONS = ["conclusion", "game-and-rom", "trials", "conditions", "progress-actions", "progress-cost",
            "timelines", "memory-errors", "agreement", "long-horizon", "checklist", "reconciliation", "roots",
            "definitions"]


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections, self.timelines, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "section":
            self.sections.append(a["id"])
        if tag == "div" and a.get("class") == "timeline":
            self.timelines.append(a["id"])


@pytest.fixture(scope="module")
def rendered(dry_run, tmp_path_factory):
    """build_report over the session's dry run; render_html's own inputs kept for re-rendering."""
    seen = []
    real = report.render_html

    def keep(doc, rows, figures):
        seen.append((doc, rows, figures))
        return real(doc, rows, figures)

    report.render_html = keep
    try:
        out = tmp_path_factory.mktemp("html")
        report.build_report(dry_run[0], out, replay=False)
    finally:
        report.render_html = real
    return (out / "report.html").read_bytes(), seen[0]


def test_the_page_has_every_section_table_and_figure(rendered):
    page, (doc, rows, figures) = rendered
    text = page.decode("utf-8")
    assert text.startswith("<!DOCTYPE html>\n<html lang=\"en\">") and text.endswith("</body></html>\n")
    p = _Page()
    p.feed(text)
    assert p.sections == [s for s in SECTIONS if s != "game-and-rom" or doc.get("game_and_rom")]
    # one section a line: the page diffs line by line against an earlier report
    assert [line[len('<section id="'):].split('"')[0] for line in text.splitlines()
            if line.startswith("<section")] == p.sections
    assert p.timelines == [f"timeline-{k.replace('/', '-')}" for k in figures["timelines"]]
    drawn = [f for f in (figures["progress_vs_actions"], figures["progress_vs_cost"], figures["memory_errors"],
                         *figures["timelines"].values()) if f.svg]
    assert text.count('<figure class="plot"><svg') == len(drawn) > 0
    trials = re.search(r'<section id="trials">.*?</section>', text).group(0)
    assert trials.count("<tr>") == 1 + len(rows)  # the head and one row per trial
    assert all(f"<td>{r['end_reason']}</td>" in trials for r in rows)
    assert text.count("</style></head>") == 1 and "script" not in p.tags and "link" not in p.tags  # no network


def test_text_a_user_wrote_is_escaped_the_way_the_string_built_page_did(rendered):
    _page, (doc, rows, figures) = rendered
    hostile = "<script>alert('x')</script> & \"q\""
    doc = {**doc, "experiment_id": hostile, "conclusion": "a <b>claim</b>"}
    rows = [{**r, "condition": "<script>alert(1)</script>"} for r in rows]
    text = report.render_html(doc, rows, figures)
    assert "<script" not in text and "<b>claim" not in text
    # html.escape's spelling (&#x27;), not markupsafe's (&#39;): the bytes stay those of the old report
    assert "<title>Report: &lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;q&quot;</title>" in text
    trials = re.search(r'<section id="trials">.*?</section>', text).group(0)
    assert trials.count("<td>&lt;script&gt;alert(1)&lt;/script&gt;") == len(rows)
    assert "<p>a &lt;b&gt;claim&lt;/b&gt;</p>" in text


def test_a_template_naming_a_missing_value_fails_loudly(rendered):
    _page, (doc, rows, figures) = rendered
    broken = {k: v for k, v in doc.items() if k != "conclusion"}
    with pytest.raises(Exception, match="conclusion"):
        report.render_html(broken, rows, figures)
