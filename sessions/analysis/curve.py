"""A trial's progress curve (per decision: actions, cost and points so far) without holding it.

The report writes every point into report.json and draws the curve twice, but a trial can run to a
million decisions (issue 31 item 8: the report's memory must not grow with the run). So:
- `DecisionCounts` keeps the accepted actions per decision in an array (4 bytes a decision, not a
  dict entry's ~100);
- `Curve` keeps, from the one streamed pass over the trace, what the figures ask of the whole curve
  (its last point, its highest points, whether every cost is known, a fingerprint to find identical
  curves, and its corners); the points themselves are kept only while the curve is short, and a long
  one is read again from the trace when report.json is written (json.dump streams a list).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Iterable, Iterator

from engine.loop.records import TraceLine, TrialResult

HELD_POINTS = 2000  # a curve this short is kept whole; a longer one is read again when needed
# A step plot this long is drawn from its corners: a point whose progress equals the previous one's
# only extends a flat step, which its neighbours already draw (same line, fewer vertices). A
# 7-inch figure cannot show more points than this anyway; every number in the curve stays exact.
PLOT_POINTS = 2000
_SPREAD = 1 << 16  # a decision id this far past the last one goes in the dict, not the array


class DecisionCounts:
    """Accepted actions per decision id, compact: an array indexed by id (ids run 1, 2, 3, ...),
    with a dict for an id that does not fit (never in a well-formed folder). Reads like the dict it
    replaces: `get`, `items` (decisions with at least one action) and == a dict."""

    def __init__(self) -> None:
        self._by_id = array("I")
        self._other: dict[int, int] = {}

    def add(self, decision: int) -> None:
        if 0 <= decision < len(self._by_id):
            self._by_id[decision] += 1
        elif 0 <= decision <= len(self._by_id) + _SPREAD:
            self._by_id.extend([0] * (decision - len(self._by_id)))
            self._by_id.append(1)
        else:
            self._other[decision] = self._other.get(decision, 0) + 1

    def get(self, decision: int, default: int = 0) -> int:
        if 0 <= decision < len(self._by_id) and self._by_id[decision]:
            return self._by_id[decision]
        return self._other.get(decision, default)

    def items(self) -> Iterator[tuple[int, int]]:
        yield from ((d, n) for d, n in enumerate(self._by_id) if n)
        yield from self._other.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DecisionCounts):
            other = dict(other.items())
        return dict(self.items()) == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DecisionCounts({dict(self.items())!r})"


def curve_points(trace: Iterable[TraceLine], per_decision: DecisionCounts | dict[int, int], r: TrialResult,
                 each: Callable[[TraceLine], None] | None = None) -> Iterator[dict]:
    """Per decision: accepted actions so far, cost so far (null once any is unknown), points so far.
    `each` sees every trace line on the way (the one pass over the trace)."""
    points_of = {a.id: a.points for a in r.milestones}
    cost, pts, actions = 0.0, 0, 0
    seen: set[str] = set()
    for t in trace:
        if each is not None:
            each(t)
        actions += per_decision.get(t.decision_id, 0)
        if t.paid_calls:
            cost = None if cost is None or t.provider_cost_usd is None else cost + t.provider_cost_usd
        for mid in t.milestones_after:
            if mid not in seen:
                seen.add(mid)
                pts += points_of.get(mid, 0)
        yield {"decision": t.decision_id, "actions": actions, "cost": cost, "points": pts}


def fingerprint(points: Iterable[dict], x: str) -> str:
    """A digest of the (x, points) series from the origin on: two curves drawn over each other have
    the same one (the figures name them)."""
    h = hashlib.sha256()
    for p in points:
        h.update(repr((p[x], p["points"])).encode())
    return h.hexdigest()


def corners(points: Iterable[dict]) -> list[dict]:
    """The points a step plot (drawn 'post') needs: the first, each whose progress differs from the
    one before, and the last. The others lie on a flat step their neighbours draw."""
    out: list[dict] = []
    last = None
    for p in points:
        if not out or p["points"] != out[-1]["points"]:
            out.append(p)
            last = None
        else:
            last = p
    if last is not None:
        out.append(last)
    return out


class Curve(list):
    """A trial's curve as the report uses it: iterating it gives every point (read again from the
    trace when it is long), `len` is its decisions, `[-1]` its last point.

    It is a list only so that json.dump (whose indented encoder writes a list item by item) streams
    it into report.json; its own storage holds the points only while there are at most HELD_POINTS."""

    def __init__(self, source: Callable[[], Iterator[dict]]):
        super().__init__()
        self._source = source
        self.count = 0
        self.last: dict | None = None
        self.top = 0  # the most points reached
        self.cost_known = True  # every point's cost is known
        self.corners: list[dict] = []
        self._prints = {"actions": hashlib.sha256(), "cost": hashlib.sha256()}
        self._last_corner: dict | None = None

    def add(self, p: dict) -> None:
        """One more point, in order (the streamed pass)."""
        self.count += 1
        if self.count <= HELD_POINTS:
            super().append(p)
        elif self.count == HELD_POINTS + 1:
            super().clear()
        self.last = p
        self.top = max(self.top, p["points"])
        self.cost_known = self.cost_known and p["cost"] is not None
        for x, h in self._prints.items():
            h.update(repr((p[x], p["points"])).encode())
        if not self.corners or p["points"] != self.corners[-1]["points"]:
            self.corners.append(p)
            self._last_corner = None
        else:
            self._last_corner = p

    def fingerprint(self, x: str) -> str:
        return self._prints[x].hexdigest()

    def plotted(self) -> list[dict]:
        """The points a step plot draws: all of them, or the corners of a long curve (PLOT_POINTS)."""
        if self.count <= PLOT_POINTS:
            return list(self)
        return self.corners + ([self._last_corner] if self._last_corner is not None else [])

    def __iter__(self) -> Iterator[dict]:
        if self.count <= HELD_POINTS:
            return super().__iter__()
        return self._source()

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    def __getitem__(self, i):
        if isinstance(i, int) and i in (-1, self.count - 1) and self.last is not None:
            return self.last
        if self.count <= HELD_POINTS:
            return super().__getitem__(i)
        return list(self)[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, list) and len(self) == len(other) and all(
            a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Curve({self.count} points, last {self.last!r})"


def points_of(curve: list[dict]) -> list[dict]:
    """What a plot draws of a row's curve: a `Curve`'s `plotted`, or a plain list (hand-made rows)
    whole when short and by its corners when long."""
    if isinstance(curve, Curve):
        return curve.plotted()
    return curve if len(curve) <= PLOT_POINTS else corners(curve)


def top_points(curve: list[dict]) -> int:
    return curve.top if isinstance(curve, Curve) else max((p["points"] for p in curve), default=0)


def cost_known(curve: list[dict]) -> bool:
    return curve.cost_known if isinstance(curve, Curve) else all(p["cost"] is not None for p in curve)


def curve_print(curve: list[dict], x: str) -> str:
    return curve.fingerprint(x) if isinstance(curve, Curve) else fingerprint(curve, x)
