"""The README and docs/ as a new user reads them: the README opens with the two commands CI runs,
then the walkthrough and the short paths; every relative link (and #anchor) points at something
that exists; every docs page is in the README's map; the protocol documents are named by a link,
never as a bare "seed 000"."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]

INSTALL = "pip install uv && uv run oakwatch"
TEST_COMMAND = "uv run pytest -q"  # .ci/run runs it verbatim
# The README's sections, in the order a new user needs them.
README_SECTIONS = ["Try a model without an API key", "Evaluate your model", "Your own ROM", "Documentation",
                   "The protocol"]

_FENCE = re.compile(r"^```.*?$(.*?)^```\s*$", re.S | re.M)
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text outside fenced blocks and code spans, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_readme_opens_with_the_two_commands_then_the_walkthrough() -> None:
    text = README.read_text()
    assert text.startswith("# oakwatch\n")
    blocks = [b.strip() for b in _FENCE.findall(text)]
    assert blocks[:2] == [INSTALL, TEST_COMMAND]
    # What it is comes first (a paragraph between the title and the first command), no section before.
    intro = text[:text.index("```")]
    assert "##" not in intro and len(intro.split()) > 20
    headings = re.findall(r"^## (.*)$", _FENCE.sub("", text), re.M)
    assert headings == README_SECTIONS
    assert text.index(TEST_COMMAND) < text.index("## Try a model without an API key")


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in _LINK.findall(_prose(page.read_text())):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_readme_maps_every_docs_page() -> None:
    linked = {Path(t.partition("#")[0]).name for t in _LINK.findall(_prose(README.read_text()))
              if t.startswith("docs/")}
    assert sorted(p.name for p in DOCS if p.name not in linked) == []


def test_protocol_documents_are_named_by_a_link_not_a_bare_seed_number() -> None:
    bare = []
    for page in PAGES:
        if page.name == "protocol.md":  # the page that says what "seed 000" means
            continue
        for n, line in enumerate(page.read_text().splitlines(), 1):
            # A quoted "seed 000" introduces the name (the README's protocol section); a bare one refers.
            if re.search(r"seed 00\d\b|the seed's", re.sub(r'"seed 00\d"', "", line)):
                bare.append(f"{page.name}:{n}: {line.strip()}")
    assert bare == []
