"""The report's plots (sessions.analysis.report puts them into report.html as inline SVG).

The rules every figure keeps:
- a figure is drawn only when it has something to show; otherwise a sentence says why (never an
  empty axis);
- axes come from the data and start at 0 for the non-negative quantities (points, actions, cost,
  counts); a run whose every cost is a known $0 says so instead of drawing a zero-width cost axis;
- milestone labels on a timeline are placed in rows by their measured extents (matplotlib's renderer),
  so no two overlap and no label's stem crosses another label; labels that would need more than
  MAX_LEVELS rows become numbers with a sentence naming them;
- a trial that was not annotated is never drawn as zero memory errors: a condition without any
  annotated trial is named in a sentence instead.

Each `*_figure` function returns (a matplotlib Figure or None, sentences); the tests measure those
figures. `plots` turns them into `Plot`s: the SVG text and the sentences shown beside it.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from sessions.analysis.curve import cost_known, curve_print, points_of, top_points
from sessions.analysis.metrics import MEMORY_TYPES, SEVERITIES

WIDTH_IN = 7.0
LEGEND_MAX = 16  # more trials than this: one legend entry per condition
LINESTYLES = ("-", "--", "-.", ":")
SEVERITY_COLOURS = {"minor": "#e8b631", "material": "#dd6b20", "critical": "#a61b1b"}
# timeline geometry, in points (the timeline's y data unit is one point)
LABEL_FONT = 7
LEVEL_PT = 11  # one row of labels
STEM_PT = 7  # from the line to the first row
BELOW_PT = 6  # axes space under the line
ABOVE_PT = 3  # axes space over the top row
GAP_PX = 3  # the least horizontal gap between two labels (at the figure's dpi)
MERGE_PX = 2.5  # stems closer than this are one spot on the line
MAX_LEVELS = 4


@dataclass
class Plot:
    """One figure: its SVG, or None when there is nothing to draw; `notes` say why, or what is not drawn."""

    svg: str | None
    notes: list[str] = field(default_factory=list)


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "oakwatch", "font.size": 9})
    import matplotlib.pyplot as plt

    return plt


def svg_text(fig) -> str:
    """The figure as an inline <svg> element (no XML prologue, no RDF metadata); closes the figure."""
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)


def _integer_ticks(axis) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))  # round numbers: 0, 5, 10, 15, 20


def _points_top(rows: list[dict]) -> float:
    """The progress axis's top: the ladder's total (or the most any trial reached), never 0."""
    top = max([r.get("total_points") or 0 for r in rows] + [top_points(r["curve"]) for r in rows])
    return top or 1


def _styles(rows: list[dict]) -> dict[str, dict]:
    """A colour per condition, a line style per trial within it; trials drawn later are thinner so a
    curve drawn over an identical one leaves it visible."""
    colours = {c: f"C{i % 10}" for i, c in enumerate(sorted({r["condition"] for r in rows}))}
    seen: dict[str, int] = {}
    out = {}
    for r in rows:
        k = seen.get(r["condition"], 0)
        seen[r["condition"]] = k + 1
        out[r["trial_key"]] = {"color": colours[r["condition"]], "linestyle": LINESTYLES[k % len(LINESTYLES)],
                               "linewidth": max(0.9, 2.6 - 0.5 * k), "alpha": 1.0 if r["valid"] else 0.55,
                               "label": r["trial_key"] + ("" if r["valid"] else " (invalid)")}
    return out


def _legend(ax, rows: list[dict], styles: dict[str, dict]) -> None:
    """Outside the axes on the right, so it never hides a curve; per condition when there are many trials."""
    from matplotlib.lines import Line2D

    if len(rows) <= LEGEND_MAX:
        handles = None
    else:
        first = {}
        for r in rows:
            first.setdefault(r["condition"], styles[r["trial_key"]]["color"])
        handles = [Line2D([], [], color=c, label=f"condition {lab}") for lab, c in sorted(first.items())]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0,
              ncol=1 if len(handles or rows) <= 12 else 2)


def _same_curves(rows: list[dict], x: str) -> list[str]:
    """Sentences naming trials whose curves coincide (one is drawn over the other): the same (x,
    points) at every decision, told by the curves' fingerprints (sessions.analysis.curve)."""
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(curve_print(r["curve"], x), []).append(r["trial_key"])
    return [f"{', '.join(keys)}: the same curve (drawn over each other)" for keys in groups.values() if len(keys) > 1]


def _steps(r: dict, x: str, origin: float) -> tuple[list, list]:
    """A trial's step curve from the origin: every point, or a long curve's corners (the same line;
    sessions.analysis.curve.PLOT_POINTS)."""
    shown = points_of(r["curve"])
    return [origin] + [p[x] for p in shown], [0] + [p["points"] for p in shown]


def _no_decision(rows: list[dict]) -> list[str]:
    silent = [r["trial_key"] for r in rows if not r["curve"]]
    return [f"no decision recorded, not drawn: {', '.join(silent)}"] if silent else []


def progress_actions_figure(rows: list[dict]):
    """Progress points against accepted actions so far, one step curve per trial that took an action."""
    drawn = [r for r in rows if r["curve"]]
    most = max((r["curve"][-1]["actions"] for r in drawn), default=0)
    if not most:
        return None, ["No trial took an accepted action: there is no progress against actions to draw."]
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.4))
    styles = _styles(drawn)

    for r in drawn:
        xs, ys = _steps(r, "actions", 0)
        ax.step(xs, ys, where="post", clip_on=False, **styles[r["trial_key"]])  # a flat 0 shows on the axis
    ax.set_xlim(0, most * 1.02)  # a curve's last step stays off the frame
    ax.set_ylim(0, _points_top(drawn) * 1.04)
    _integer_ticks(ax.xaxis)
    _integer_ticks(ax.yaxis)
    ax.set_xlabel("accepted actions")
    ax.set_ylabel("progress points")
    ax.set_title("Progress against accepted actions, every trial")
    _legend(ax, drawn, styles)
    return fig, _same_curves(drawn, "actions") + _no_decision(rows)


def _cost_known(r: dict) -> bool:
    return r["cost_usd"] is not None and cost_known(r["curve"])


def _no_cost_axis(free: list[dict], unknown: list[str]) -> str:
    """Why there is no cost axis: every known cost is $0, or no cost is known."""
    if not free:
        return "No trial's cost is known: there is no progress against cost to draw."
    if not unknown:
        return (f"Every trial's cost is a known $0 ({len(free)} trial(s), no paid model call): there is no "
                "progress against cost to draw.")
    return (f"Every trial whose cost is known cost $0 ({', '.join(r['trial_key'] for r in free)}): "
            "there is no progress against cost to draw.")


def progress_cost_figure(rows: list[dict]):
    """Progress points against cost so far, for the trials whose cost is known. Unknown cost is never
    drawn as $0; when every known cost is $0 there is no cost axis to draw and a sentence says so."""
    with_curve = [r for r in rows if r["curve"]]
    unknown = [r["trial_key"] for r in with_curve if not _cost_known(r)]
    known = [r for r in with_curve if _cost_known(r)]
    free = [r for r in known if not r["curve"][-1]["cost"]]
    notes = [f"cost unknown, not drawn (never counted as $0): {', '.join(unknown)}"] if unknown else []
    notes += _no_decision(rows)
    if len(free) == len(known):
        return None, [_no_cost_axis(free, unknown)] + notes
    if free:
        notes.append(f"cost a known $0, drawn at $0: {', '.join(r['trial_key'] for r in free)}")
    plt = _mpl()
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.4))
    styles = _styles(known)

    for r in known:
        xs, ys = _steps(r, "cost", 0.0)
        ax.step(xs, ys, where="post", clip_on=False, **styles[r["trial_key"]])
    ax.set_xlim(0, max(r["curve"][-1]["cost"] for r in known) * 1.02)
    ax.set_ylim(0, _points_top(known) * 1.04)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"${v:g}"))
    _integer_ticks(ax.yaxis)
    ax.set_xlabel("cost so far (USD)")
    ax.set_ylabel("progress points")
    ax.set_title("Progress against cost, every trial whose cost is known")
    _legend(ax, known, styles)
    return fig, _same_curves(known, "cost") + notes


# -- timelines -------------------------------------------------------------------------------------

@dataclass
class _Placed:
    level: int
    x0: float
    x1: float
    stem: float


def _fits(level: int, x0: float, x1: float, stem: float, placed: list[_Placed]) -> bool:
    """No label on the same row within GAP_PX; our stem crosses no lower label; no higher label's
    stem crosses ours."""
    for p in placed:
        if p.level == level and not (x1 + GAP_PX <= p.x0 or p.x1 + GAP_PX <= x0):
            return False
        if p.level < level and p.x0 - 1 <= stem <= p.x1 + 1:
            return False
        if p.level > level and x0 - 1 <= p.stem <= x1 + 1:
            return False
    return True


def _place(fig, texts, stems_px: list[float]) -> list[int]:
    """Each label's row, the lowest it fits. Labels are right-aligned at their stems and taken left
    to right, so a label never covers a later stem and the next row up always fits; a stem within
    a pixel of the previous label's end takes a new top row (labels still never overlap)."""
    renderer = fig.canvas.get_renderer()
    placed: list[_Placed] = []
    for text, stem in zip(texts, stems_px, strict=True):
        box = text.get_window_extent(renderer)
        level, top = 0, 1 + max((p.level for p in placed), default=-1)
        while level < top and not _fits(level, box.x0, box.x1, stem, placed):
            level += 1
        placed.append(_Placed(level, box.x0, box.x1, stem))
    return [p.level for p in placed]


def timeline_groups(row: dict, ladder: list[str]) -> list[tuple[int, list[str]]]:
    """(decision, milestone ids) in decision order: milestones of one decision share a stem."""
    order = {m: i for i, m in enumerate(ladder)}
    by: dict[int, list[str]] = {}
    for t in row["timeline"]:
        by.setdefault(t["decision_id"], []).append(t["id"])
    return [(d, sorted(ids, key=lambda m: order.get(m, len(order)))) for d, ids in sorted(by.items())]


def timeline_figure(row: dict, ladder: list[str], span: int | None = None):
    """The decisions of one trial with a stem and a label at each milestone award (module docstring).
    `span`: the decision axis's end, shared by every trial's timeline so they compare at one scale."""
    head = f"{row['trial_key']}: {row['outcome']}, {row['end_reason']}"
    last = row["curve"][-1]["decision"] if row["curve"] else 0
    missing = [m for m in ladder if m not in row["milestones_reached"]]
    groups = timeline_groups(row, ladder)
    if not groups:
        return None, [f"{head}: no milestone reached in {last} decision(s), nothing to draw."]
    notes = [f"not reached: {' '.join(missing)}"] if missing else []
    plt = _mpl()
    span = max(span or 0, last, groups[-1][0], 1)
    fig = plt.figure(figsize=(WIDTH_IN, 1.5))
    ax = fig.add_axes((0.02, 0.3, 0.96, 0.5))
    ax.set_xlim(0, span * 1.02)  # a marker on the last decision stays whole
    ax.set_ylim(-BELOW_PT, 50)
    awards = groups
    groups, stems_px = _merge_stems(ax, awards)
    texts = _timeline_labels(ax, groups, numbered=False)
    levels = _place(fig, texts, stems_px)
    if max(levels) >= MAX_LEVELS:
        texts = _timeline_labels(ax, groups, numbered=True)
        levels = _place(fig, texts, stems_px)
        notes.insert(0, _numbers_note(groups, awards))
    _fit_rows(fig, ax, max(levels) + 1)
    ax.hlines(0, 0, span, color="0.6", linewidth=1)
    for (d, _), text, level in zip(groups, texts, levels, strict=True):
        y = STEM_PT + level * LEVEL_PT
        text.set_y(y)
        ax.vlines(d, 0, y, color="0.55", linewidth=0.6)
    ax.plot([d for d, _ in awards], [0] * len(awards), "o", color="C2", markersize=4, zorder=3, clip_on=False)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    _integer_ticks(ax.xaxis)
    ax.set_xlabel("decision")
    ax.set_title(head, fontsize=8)
    return fig, notes


def _merge_stems(ax, awards: list[tuple[int, list[str]]]) -> tuple[list[tuple[int, list[str]]], list[float]]:
    """Milestones whose stems would sit within MERGE_PX of each other are one spot: one stem, one
    label. The merged groups and each one's stem in pixels."""
    groups: list[tuple[int, list[str]]] = []
    stems_px: list[float] = []
    for d, ids in awards:
        x = ax.transData.transform((d, 0))[0]
        if stems_px and x - stems_px[-1] <= MERGE_PX:
            groups[-1] = (groups[-1][0], groups[-1][1] + ids)
        else:
            groups.append((d, ids))
            stems_px.append(x)
    return groups, stems_px


def _timeline_labels(ax, groups: list[tuple[int, list[str]]], numbered: bool) -> list:
    """One text per stem (the milestone ids, or their numbers), replacing any drawn before."""
    for t in list(ax.texts):
        t.remove()
    out, n = [], 0
    for d, ids in groups:
        if numbered:
            text = ",".join(str(n + i + 1) for i in range(len(ids)))
            n += len(ids)
        else:
            text = " ".join(ids)
        # right-aligned: the label ends at its stem (one at decision 1 may reach left of the axes)
        out.append(ax.text(d, STEM_PT, text, ha="right", va="bottom", fontsize=LABEL_FONT))
    return out


def _numbers_note(groups: list[tuple[int, list[str]]], awards: list[tuple[int, list[str]]]) -> str:
    ids = [m for _, ms in groups for m in ms]
    decision = {m: d for d, ms in awards for m in ms}
    return "milestones by number: " + ", ".join(f"{i + 1} {m} (decision {decision[m]})" for i, m in enumerate(ids))


def _fit_rows(fig, ax, rows: int) -> None:
    """Grow the axes to hold every row of labels; one y unit stays one point, so the rows never touch."""
    rows_pt = BELOW_PT + STEM_PT + rows * LEVEL_PT + ABOVE_PT
    axes_in, title_in, ticks_in = rows_pt / 72, 0.3, 0.45
    height = axes_in + title_in + ticks_in
    fig.set_size_inches(WIDTH_IN, height)
    ax.set_position((0.02, ticks_in / height, 0.96, axes_in / height))
    ax.set_ylim(-BELOW_PT, rows_pt - BELOW_PT)


# -- memory errors ---------------------------------------------------------------------------------

def type_severity(row: dict, t: str, sev: str) -> int:
    """Counted memory errors of one type and severity in a trial (its `_labels`, see sessions.analysis.report)."""
    return sum(1 for lab in row.get("_labels", []) if lab["type"] == t and lab["severity"] == sev)


def memory_figure(rows: list[dict]):
    """Confirmed memory errors by type, stacked by severity, one panel per condition that has any.
    Only annotated valid trials count; a condition without one is named, never drawn as zero."""
    panels, notes = _memory_panels(rows)
    if not panels:
        if not any(r["memory_errors"] is not None for r in rows if r["valid"]):
            return None, ["No valid trial was annotated for memory errors: there is nothing to draw."]
        return None, ["No confirmed memory error in the annotated trials: there is nothing to draw."] + notes
    plt = _mpl()
    fig, axes = plt.subplots(1, len(panels), figsize=(WIDTH_IN, 0.28 * len(MEMORY_TYPES) + 1.0), squeeze=False,
                             sharey=True, sharex=True)
    most = max([1] + [_memory_panel(ax, *panel) for ax, panel in zip(axes[0], panels, strict=True)])
    axes[0][0].set_yticks(list(range(len(MEMORY_TYPES))), MEMORY_TYPES, fontsize=7)
    axes[0][0].invert_yaxis()
    axes[0][0].set_xlim(0, most * 1.15)  # room for the count at the longest bar
    _integer_ticks(axes[0][0].xaxis)
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(SEVERITIES), fontsize=7,
               frameon=False, title="severity", title_fontsize=7)
    return fig, notes


def _memory_panels(rows: list[dict]) -> tuple[list[tuple], list[str]]:
    """(label, annotated, valid, counts by (type, severity)) per condition with a counted error, and
    the sentences for the others."""
    panels, notes = [], []
    for label in sorted({r["condition"] for r in rows}):
        mine = [r for r in rows if r["condition"] == label and r["valid"]]
        annotated = [r for r in mine if r["memory_errors"] is not None]
        counts = {(t, s): sum(type_severity(r, t, s) for r in annotated) for t in MEMORY_TYPES for s in SEVERITIES}
        if not annotated:
            notes.append(f"condition {label}: not annotated (none of its {len(mine)} valid trial(s))")
        elif not any(counts.values()):
            notes.append(f"condition {label}: no confirmed memory error in {len(annotated)} annotated trial(s)")
        else:
            panels.append((label, len(annotated), len(mine), counts))
    return panels, notes


def _memory_panel(ax, label: str, n_ann: int, n_valid: int, counts: dict) -> int:
    """One condition's stacked bars with each bar's total beside it; the longest bar's length."""
    ys = range(len(MEMORY_TYPES))
    lefts = [0] * len(MEMORY_TYPES)
    for sev in SEVERITIES:
        widths = [counts[(t, sev)] for t in MEMORY_TYPES]
        ax.barh(ys, widths, left=lefts, color=SEVERITY_COLOURS[sev], label=sev, height=0.7)
        lefts = [a + b for a, b in zip(lefts, widths, strict=True)]
    for y, total in zip(ys, lefts, strict=True):
        if total:
            ax.annotate(str(total), (total, y), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=7)
    ax.set_title(f"condition {label}: {n_ann} of {n_valid} valid trial(s) annotated", fontsize=8)
    ax.set_xlabel("confirmed memory errors")
    return max(lefts)


def plots(rows: list[dict], game) -> dict:
    """Every figure of the report as a Plot; `timelines`: trial folder -> Plot."""
    def plot(made) -> Plot:
        fig, notes = made
        return Plot(svg_text(fig) if fig is not None else None, notes)

    ladder = [m.id for m in game.milestones] if game is not None else sorted(
        {t["id"] for r in rows for t in r["timeline"]})
    span = max((r["curve"][-1]["decision"] for r in rows if r["curve"]), default=0)
    return {"progress_vs_actions": plot(progress_actions_figure(rows)),
            "progress_vs_cost": plot(progress_cost_figure(rows)),
            "timelines": {r["folder"]: plot(timeline_figure(r, ladder, span)) for r in rows},
            "memory_errors": plot(memory_figure(rows))}
