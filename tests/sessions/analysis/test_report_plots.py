"""The report's plot builders on hand-made trial rows: no axes for empty data, axes that start at 0,
and timeline labels whose rendered boxes (matplotlib's renderer) never overlap."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import pytest

from sessions.analysis.report_plots import (
    MAX_LEVELS,
    memory_figure,
    progress_actions_figure,
    progress_cost_figure,
    timeline_figure,
)

LADDER = [f"M{i}" for i in range(1, 9)]


def row(key: str, *, costs=None, points=None, actions=None, awards=(), labels=None, valid=True) -> dict:
    """A trial row as sessions.analysis.metrics makes it; `costs`/`points`/`actions` per decision."""
    n = len(points or costs or actions or [])
    points = points or [0] * n
    actions = actions or list(range(1, n + 1))
    costs = costs if costs is not None else [None] * n
    curve = [{"decision": d + 1, "actions": actions[d], "cost": costs[d], "points": points[d]} for d in range(n)]
    return {"trial_key": key, "folder": f"trials/{key}", "condition": key[0], "valid": valid, "outcome": "success",
            "end_reason": "final-milestone", "total_points": 20, "curve": curve,
            "cost_usd": None if any(c is None for c in costs) else (costs[-1] if costs else 0.0),
            "timeline": [{"id": m, "decision_id": d, "points": 1} for m, d in awards],
            "milestones_reached": [m for m, _ in awards],
            "memory_errors": None if labels is None else len(labels), "_labels": labels or []}


@pytest.fixture(autouse=True)
def no_figures_left():
    plt.close("all")
    yield
    plt.close("all")


def _no_new_figure(build, *args):
    before = plt.get_fignums()
    fig, notes = build(*args)
    assert fig is None and plt.get_fignums() == before, "an empty series draws no axes"
    return notes


def test_a_run_whose_every_cost_is_a_known_zero_says_so_instead_of_an_axis():
    rows = [row("X-01", costs=[0.0, 0.0], points=[0, 5]), row("Y-01", costs=[0.0, 0.0, 0.0])]
    notes = _no_new_figure(progress_cost_figure, rows)
    assert "known $0" in notes[0]
    # unknown cost is never drawn as $0, and with nothing known there is nothing to draw
    notes = _no_new_figure(progress_cost_figure, [row("X-01", points=[0, 5])])
    assert "No trial's cost is known" in notes[0]
    notes = _no_new_figure(progress_cost_figure, [row("X-01", costs=[0.0]), row("X-02", points=[1])])
    assert "X-01" in notes[0] and any("unknown" in n and "X-02" in n for n in notes)


def test_cost_and_progress_axes_start_at_zero_and_come_from_the_data():
    rows = [row("X-01", costs=[0.01, 0.03], points=[0, 5]), row("Y-01", costs=[0.0, 0.0], points=[0, 0]),
            row("Y-02", points=[1, 2])]
    fig, notes = progress_cost_figure(rows)
    ax = fig.axes[0]
    assert ax.get_xlim() == pytest.approx((0, 0.03 * 1.02)) and ax.get_ylim()[0] == 0 < ax.get_ylim()[1]
    assert any("Y-01" in n and "$0" in n for n in notes) and any("Y-02" in n and "unknown" in n for n in notes)
    assert {line.get_label() for line in ax.get_lines()} == {"X-01", "Y-01"}


def test_progress_against_actions_never_has_a_negative_range():
    rows = [row("X-01", actions=[2, 4, 4]), row("X-02", actions=[1, 3, 4])]  # no progress at all
    fig, notes = progress_actions_figure(rows)
    ax = fig.axes[0]
    assert ax.get_xlim() == pytest.approx((0, 4 * 1.02)) and ax.get_ylim()[0] == 0 < ax.get_ylim()[1]
    _no_new_figure(progress_actions_figure, [row("X-01", actions=[0, 0]), row("X-02")])


def _boxes(fig):
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    return [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]


def _disjoint(a, b) -> bool:
    return a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0


def test_timeline_labels_never_overlap_when_milestones_crowd():
    # the case, M7 and M8 on neighbouring decisions at the end, plus a crowded start
    awards = [("M1", 1), ("M2", 2), ("M3", 3), ("M4", 40), ("M5", 41), ("M6", 120), ("M7", 185), ("M8", 186)]
    fig, notes = timeline_figure(row("X-01", points=[0] * 186, awards=awards), LADDER)
    boxes = _boxes(fig)
    assert sorted(t for t, _ in boxes) == LADDER  # every milestone is labelled
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        assert _disjoint(a, b), f"{ta} overlaps {tb}"
    # no stem (from the line up to its label) runs through another label
    ax = fig.axes[0]
    for stem in (seg for c in ax.collections for seg in c.get_segments()):
        (x, _), (_, top) = ax.transData.transform(stem)
        assert not [t for t, b in boxes if b.x0 < x < b.x1 and b.y1 < top], f"the stem at {x:.0f} px crosses a label"
    # every label stays inside the drawing: its row is inside the axes, above the line
    bbox = ax.get_window_extent(fig.canvas.get_renderer())
    line_y = ax.transData.transform((0, 0))[1]
    assert all(line_y < b.y0 and b.y1 <= bbox.y1 for _, b in boxes)
    assert not notes  # every rung was reached


def test_milestones_on_one_decision_share_a_label_and_too_many_rows_become_numbers():
    fig, _ = timeline_figure(row("X-01", points=[0] * 10, awards=[("M1", 5), ("M2", 5)]), LADDER)
    assert [t for t, _ in _boxes(fig)] == ["M1 M2"]
    # on consecutive decisions of a long trial, markers within MERGE_PX are one spot with one label
    fig, _ = timeline_figure(row("X-01", points=[0] * 1000, awards=[(m, 500 + i) for i, m in enumerate(LADDER)]),
                             LADDER)
    texts = [t for t, _ in _boxes(fig)]
    assert " ".join(texts) == " ".join(LADDER) and len(texts) <= 4
    # a few pixels apart, eight rungs need more rows than MAX_LEVELS: numbers, named in a sentence
    awards = [(m, 500 + 7 * i) for i, m in enumerate(LADDER)]
    fig, notes = timeline_figure(row("X-01", points=[0] * 1000, awards=awards), LADDER)
    boxes = _boxes(fig)
    assert sorted(t for t, _ in boxes) == [str(i) for i in range(1, 9)]
    assert notes[0].startswith("milestones by number: 1 M1 (decision 500), 2 M2 (decision 507)")
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        assert _disjoint(a, b), f"{ta} overlaps {tb}"
    assert MAX_LEVELS >= 2


def test_a_trial_without_milestones_has_a_sentence_not_an_empty_timeline():
    notes = _no_new_figure(timeline_figure, row("Y-01", points=[0] * 200), LADDER)
    assert notes == ["Y-01: success, final-milestone: no milestone reached in 200 decision(s), nothing to draw."]


def test_memory_errors_are_drawn_only_for_annotated_trials_with_errors():
    omission = [{"type": "omission", "severity": "material"}]
    # nobody annotated: a sentence, never zero bars
    notes = _no_new_figure(memory_figure, [row("X-01", points=[1]), row("Y-01", points=[1])])
    assert notes == ["No valid trial was annotated for memory errors: there is nothing to draw."]
    # annotated, no confirmed error: still nothing to draw
    notes = _no_new_figure(memory_figure, [row("X-01", points=[1], labels=[])])
    assert "no confirmed memory error in 1 annotated trial" in notes[1]
    # one condition annotated with an error, the other not annotated: one panel, the other named
    fig, notes = memory_figure([row("X-01", points=[1], labels=omission), row("X-02", points=[1]),
                                row("Y-01", points=[1])])
    (ax,) = fig.axes
    assert ax.get_title() == "condition X: 1 of 2 valid trial(s) annotated"
    assert ax.get_xlim()[0] == 0 and notes == ["condition Y: not annotated (none of its 1 valid trial(s))"]
    assert sum(p.get_width() for p in ax.patches) == 1
