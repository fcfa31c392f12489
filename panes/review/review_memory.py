"""Review: the memory store as it stood at a decision (app.review.review_data.MemoryView), with that
decision's operations on each fact in the first column (read ▶, offered ·, write ✎, update ✎,
supersede ↷, complete ✓, evict ✗); superseded facts dim and struck through, completed dim,
active facts in a contradiction highlighted; the decision's refused writes in the subtitle."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

COLUMNS = (("this", "ops"), ("id", "id"), ("kind", "kind"), ("subject / predicate / object", "fact"),
           ("status", "status"), ("conf", "conf"), ("first", "first"), ("last", "confirmed"))
GLYPHS = {"read": "▶", "offered": "·", "write": "✎", "update": "✎", "supersede": "↷", "complete": "✓",
          "evict": "✗"}
FACT_WIDTH = 40


def op_marks(ops: tuple[str, ...]) -> str:
    return "".join(GLYPHS.get(o, "?") for o in ops if o != "offered") or ("·" if "offered" in ops else "")


class ReviewMemoryPane(DataTable):
    DEFAULT_CSS = """
    ReviewMemoryPane { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        # A row cursor only while browsing: a highlighted row must not look like a marked fact.
        super().__init__(id=id, classes=classes, cursor_type="none", zebra_stripes=False)
        self.border_title = "Memory"
        self.shown_rows: list[tuple[str, ...]] = []  # plain cells, as shown (for tests and copy)

    def on_focus(self) -> None:
        self.cursor_type = "row"

    def on_blur(self) -> None:
        self.cursor_type = "none"

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key, width=FACT_WIDTH if key == "fact" else None)

    def show(self, snap) -> None:
        theme = self.app.current_theme
        conflicted = {i for group in snap.contradictions for i in group}
        marked = Style(color=theme.accent or theme.primary, bold=True)
        self.clear()
        self.shown_rows = []
        for fact in snap.facts:
            fid = fact["fact_id"]
            style = _row_style(fact["status"], fid in conflicted, theme)
            cells = _cells(fact, snap.marks.get(fid, ()), fid in conflicted)
            self.shown_rows.append(cells)
            self.add_row(Text(cells[0], style=marked), *(Text(c, style=style) for c in cells[1:]), key=fid)
        self.border_subtitle = _subtitle(snap)


def _row_style(status: str, conflicted: bool, theme) -> Style:
    """Superseded struck through, completed italic, contradicted in the error colour."""
    if status == "superseded":
        return Style(dim=True, strike=True)
    if status == "completed":
        return Style(dim=True, italic=True)
    if conflicted:
        return Style(color=theme.error, bold=True)
    return Style()


def _cells(fact: dict, ops, conflicted: bool) -> tuple[str, ...]:
    """A fact's plain cells, in COLUMNS order."""
    fid, status = fact["fact_id"], fact["status"]
    last = fact.get("last_confirmed_decision")
    text = f"{fact.get('subject')} / {fact.get('predicate')} / {fact.get('object')}"
    return (op_marks(ops), fid, str(fact.get("kind", "")),
            text if len(text) <= FACT_WIDTH else text[:FACT_WIDTH - 1] + "…",
            status + (" ⚠" if conflicted and status == "active" else ""),
            f"{fact.get('confidence', 0):.2f}", f"d{fact.get('first_seen_decision')}",
            "—" if last is None else f"d{last}")


def _subtitle(snap) -> str:
    """The facts, contradictions, reads, writes and refusals at this decision."""
    active = sum(1 for f in snap.facts if f["status"] == "active")
    parts = [f"at decision {snap.decision_id}: {len(snap.facts)} facts, {active} active"]
    if snap.contradictions:
        parts.append(f"{len(snap.contradictions)} contradiction(s)")
    read = [f for f, ops in snap.marks.items() if "read" in ops]
    wrote = [f for f, ops in snap.marks.items() if set(ops) & {"write", "update", "supersede", "complete"}]
    if read:
        parts.append("read " + ", ".join(read))
    if wrote:
        parts.append("wrote " + ", ".join(wrote))
    if snap.rejected:
        parts.append(f"{len(snap.rejected)} refused: " + "; ".join(snap.rejected))
    return " · ".join(parts)
