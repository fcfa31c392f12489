"""sessions.analysis.curve: a long curve is not held, yet reads back whole, draws the same steps and
is told apart from another by its fingerprint (issue 31 item 8: the report's memory is flat)."""

from __future__ import annotations

import json

from sessions.analysis.curve import (
    HELD_POINTS,
    PLOT_POINTS,
    Curve,
    DecisionCounts,
    corners,
    cost_known,
    curve_print,
    points_of,
    top_points,
)


def _points(n: int, step_at: tuple[int, ...] = (), cost=0.5) -> list[dict]:
    out, pts = [], 0
    for d in range(1, n + 1):
        pts += d in step_at
        out.append({"decision": d, "actions": 2 * d, "cost": None if cost is None else cost * d, "points": pts})
    return out


def _curve(points: list[dict]) -> tuple[Curve, list[int]]:
    reads = []

    def source():
        reads.append(1)
        return iter(points)

    c = Curve(source)
    for p in points:
        c.add(p)
    return c, reads


def test_a_long_curve_keeps_no_point_but_reads_back_whole_into_json():
    pts = _points(HELD_POINTS * 3, step_at=(5, 4000))
    c, reads = _curve(pts)
    assert list.__len__(c) == 0 and len(c) == len(pts) and c
    assert c[-1] == pts[-1] and c.top == 2 and c.cost_known
    assert json.dumps({"curve": c}, indent=1) == json.dumps({"curve": pts}, indent=1) and reads == [1]
    assert c == pts and c != pts[:-1]


def test_a_short_curve_is_held_and_equals_its_points():
    pts = _points(10, step_at=(3,), cost=None)
    c, reads = _curve(pts)
    assert list(c) == pts and c[3] == pts[3] and reads == []
    assert not c.cost_known and not cost_known(c) and top_points(c) == 1
    assert points_of(c) == pts  # short: drawn point by point


def test_a_long_curve_is_drawn_from_its_corners_which_trace_the_same_steps():
    pts = _points(PLOT_POINTS + 500, step_at=(7, 8, 1200))
    c, _ = _curve(pts)
    drawn = points_of(c)
    assert drawn == corners(pts) == points_of(pts)
    assert [p["decision"] for p in drawn] == [1, 7, 8, 1200, PLOT_POINTS + 500]

    def step_at(series, x):  # the height a post-step line has at x
        return max((p["points"] for p in series if p["actions"] <= x), default=0)

    for x in range(0, 2 * (PLOT_POINTS + 500) + 1, 37):
        assert step_at(drawn, x) == step_at(pts, x)


def test_fingerprints_tell_apart_curves_that_differ_anywhere():
    a, _ = _curve(_points(HELD_POINTS + 10, step_at=(9,)))
    b, _ = _curve(_points(HELD_POINTS + 10, step_at=(9,)))
    other = _points(HELD_POINTS + 10, step_at=(9,))
    other[1500] = {**other[1500], "actions": other[1500]["actions"] + 1}
    c, _ = _curve(other)
    assert curve_print(a, "actions") == curve_print(b, "actions") == curve_print(list(b), "actions")
    assert curve_print(c, "actions") != curve_print(a, "actions")
    assert curve_print(c, "cost") == curve_print(a, "cost")  # the cost series is the same


def test_decision_counts_read_like_the_dict_they_replace():
    counts = DecisionCounts()
    for d in (1, 1, 2, 4, 4, 4, 10**9):
        counts.add(d)
    assert counts == {1: 2, 2: 1, 4: 3, 10**9: 1}
    assert counts.get(3, 0) == 0 and counts.get(4) == 3 and counts.get(10**9) == 1
