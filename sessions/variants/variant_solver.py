"""The shortest press sequence from Parcel Quest's start to M8, read from a variant's tables.

The solver models what the game's code does with the tables (engine/games/cartridge_tables.py,
assets/cartridge/src/main.c): one D-pad press turns and moves one tile (or only turns when the
cell is solid or an actor stands there), stepping onto a warp moves you, A talks to whoever is in
front (across a `reach` cell too), and each script needs a fixed number of A presses. The rival
battle is searched exactly: the RNG (an 8-bit LFSR) steps once per press and once per damage roll,
so its outcome depends only on how many presses came before, and a wasted press (a direction
while text shows, B in the FIGHT menu) is the only way to change it.

The search is Dijkstra over (stage, ball, map, x, y, facing). Arriving later at any node never
helps (a later arrival is an earlier one plus wasted presses, which the battle search already
considers), so shortest arrivals suffice; the optimum to each rung is the earliest press at which
its condition first holds on any path.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from engine.games.cartridge_tables import KIND_REACH, KIND_WALK, MAP_H, MAP_W, Tables

DX = {0: 0, 1: 0, 2: -1, 3: 1}
DY = {0: 1, 1: -1, 2: 0, 3: 0}
DIR_NAME = {0: "DOWN", 1: "UP", 2: "LEFT", 3: "RIGHT"}
RNG_SEED = 0xA5
MAX_HP = 20
COUNTER = {1: 2, 2: 3, 3: 1}  # the rival takes the species strong against yours
PROF, RIVAL, BALL0, CLERK = 1, 2, 3, 8
TOWN_MAP, CITY_MAP = 2, 5
RUNGS = ("M1", "M2", "M3", "M4", "M5", "M6", "M7", "M8")

# stages: 0 before town, 1 in town before the stop, 2 in the lab choosing, 3 after the battle,
# 4 in MAPLE CITY without the parcel, 5 carrying the parcel
Node = tuple[int, int, int, int, int, int]  # stage, ball (-1 before choosing), map, x, y, facing


class Unsolvable(ValueError):
    """The variant cannot be completed (or not within the search's bounds); one line."""


@dataclass
class Solution:
    actions: list[str]
    optimal: dict[str, int]  # rung -> fewest presses to reach it from the start
    reached_at: dict[str, int] = field(default_factory=dict)  # rung -> press index (1-based) in `actions`


def lfsr(r: int) -> int:
    return (r >> 1) ^ 0xB8 if r & 1 else r >> 1


def rng_after(presses: int) -> int:
    r = RNG_SEED
    for _ in range(presses % 255):  # a maximal 8-bit LFSR has period 255
        r = lfsr(r)
    return r


# ---------------------------------------------------------------- battle

# battle phases as in main.c: 0 the FIGHT/RUN menu, else the text showing and what A does next
TO_MENU, TO_ENEMY, TO_WON, TO_LOST, TO_END = 1, 2, 3, 4, 5


def battle(rng: int) -> list[str]:
    """Fewest presses from the battle's first text (rng as it stands) to leaving the battle."""
    return _battle_cache.get(rng) or _battle_cache.setdefault(rng, _search_battle(rng))


_battle_cache: dict[int, list[str]] = {}


def _search_battle(rng: int) -> list[str]:
    start = (rng, MAX_HP, MAX_HP, TO_MENU, 0)
    prev: dict[tuple, tuple[tuple, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        for action in ("A", "B", "LEFT"):
            nxt = _battle_step(s, action)
            if nxt is None:  # TO_END: the press that leaves the battle
                return _presses_to(prev, s, action)
            if nxt not in prev:
                prev[nxt] = (s, action)
                queue.append(nxt)
    raise Unsolvable("the rival battle never ends")


def _battle_step(s: tuple, action: str) -> tuple | None:
    """The battle's state after one press (None: the press leaves the battle)."""
    r, php, ehp, phase, cur = s
    r1 = lfsr(r)  # every press steps the RNG before it is handled
    if phase == 0:  # menu
        return _menu_step(r1, php, ehp, cur, action)
    if action == "LEFT":
        return (r1, php, ehp, phase, cur)  # text: only A and B act
    if phase == TO_MENU:
        return (r1, php, ehp, 0, cur)
    if phase == TO_ENEMY:
        r2 = lfsr(r1)
        p = max(0, php - (3 + (r2 & 3) + 1))
        return (r2, p, ehp, TO_MENU if p else TO_LOST, cur)
    if phase in (TO_WON, TO_LOST):
        return (r1, php, ehp, TO_END, cur)
    return None


def _menu_step(r1: int, php: int, ehp: int, cur: int, action: str) -> tuple:
    if action == "LEFT":
        return (r1, php, ehp, 0, cur ^ 1)
    if action == "A" and cur == 0:
        r2 = lfsr(r1)
        e = max(0, ehp - (3 + (r2 & 3)))
        return (r2, php, e, TO_ENEMY if e else TO_WON, cur)
    if action == "A":
        return (r1, php, ehp, TO_MENU, cur)  # RUN: "no running" text
    return (r1, php, ehp, 0, cur)  # B does nothing in the menu


def _presses_to(prev: dict, s: tuple, last: str) -> list[str]:
    """The presses from the start to `s`, then `last`."""
    out = [last]
    back = prev[s]
    while back is not None:
        s, a = back
        out.append(a)
        back = prev[s]
    return out[::-1]


# ---------------------------------------------------------------- overworld


class World:
    def __init__(self, t: Tables) -> None:
        self.t = t
        self.warps = {(w.map, w.x, w.y): (w.to.map, w.to.x, w.to.y, w.to.facing) for w in reversed(t.warps)}

    def visible(self, actor: int, stage: int, ball: int) -> bool:
        if actor == PROF:
            return stage >= 2
        if actor == RIVAL:
            return stage <= 2
        if BALL0 <= actor < BALL0 + 3:
            if stage <= 2:
                return True
            mine = self.t.balls[ball]
            return self.t.balls[actor - BALL0] not in (mine, COUNTER[mine])
        return True

    def actor_at(self, m: int, x: int, y: int, stage: int, ball: int) -> int | None:
        for i, a in enumerate(self.t.actors):
            if a.map == m and a.x == x and a.y == y and self.visible(i, stage, ball):
                return i
        return None

    def walkable(self, m: int, x: int, y: int, stage: int, ball: int) -> bool:
        if not (0 <= x < MAP_W and 0 <= y < MAP_H):
            return False
        return self.t.kinds[m][y * MAP_W + x] == KIND_WALK and self.actor_at(m, x, y, stage, ball) is None

    def talks_to(self, node: Node) -> int | None:
        """The actor an A press talks to from this node, if any."""
        stage, ball, m, x, y, f = node
        tx, ty = x + DX[f], y + DY[f]
        if not (0 <= tx < MAP_W and 0 <= ty < MAP_H):
            return None
        i = self.actor_at(m, tx, ty, stage, ball)
        if i is None and self.t.kinds[m][ty * MAP_W + tx] == KIND_REACH:
            i = self.actor_at(m, tx + DX[f], ty + DY[f], stage, ball)
        return i

    def move(self, node: Node, d: int) -> tuple[Node, bool]:
        """The node after pressing direction d, and whether the press stepped into the stop row."""
        stage, ball, m, x, y, _ = node
        nx, ny = x + DX[d], y + DY[d]
        if not self.walkable(m, nx, ny, stage, ball):
            return (stage, ball, m, x, y, d), False
        warp = self.warps.get((m, nx, ny))
        if warp:
            return (stage, ball, *warp), False
        stop = self.t.stop
        return (stage, ball, m, nx, ny, d), (m == stop.map and ny == stop.row and stage <= 2)


def solve(t: Tables, max_nodes: int = 200_000) -> Solution:
    """The shortest plan to M8 and the fewest presses to each rung; Unsolvable if there is none."""
    search = _Search(t)
    goal = search.run(max_nodes)
    if goal is None:
        raise Unsolvable("no path from the start to M8")
    actions, reached = search.plan(goal)
    best = search.best
    # a rung that holds at the start (a start in town: M1) has no optimum: it is never reached
    sol = Solution(actions=actions, optimal={r: best[r] for r in RUNGS if r in best}, reached_at=reached)
    if len(actions) != best["M8"]:
        raise Unsolvable("internal: the plan is not the optimum")  # keeps the two bookkeepings honest
    return sol


class _Search:
    """Dijkstra over (stage, ball, map, x, y, facing): each node's shortest press count, how it was reached
    (via, presses, (rung, press) on the way), and the fewest presses to each rung."""

    def __init__(self, t: Tables):
        self.t, self.w = t, World(t)
        s = t.start
        self.start: Node = (1 if s.map == TOWN_MAP else 0, -1, s.map, s.x, s.y, s.facing)
        self.dist: dict[Node, int] = {self.start: 0}
        self.prev: dict[Node, tuple[Node, list[str], list[tuple[str, int]]]] = {}
        self.best: dict[str, int] = {}
        self.heap = [(0, self.start)]
        self.done: set[Node] = set()

    def relax(self, node: Node, n: int, via: Node, actions: list[str], events: list[tuple[str, int]]) -> None:
        if node not in self.done and n < self.dist.get(node, 1 << 30):
            self.dist[node] = n
            self.prev[node] = (via, actions, events)
            heapq.heappush(self.heap, (n, node))

    def reach(self, rung: str, n: int) -> None:
        self.best[rung] = min(self.best.get(rung, n), n)

    def run(self, max_nodes: int) -> Node | None:
        """The first goal node settled (stage 6), or None when every reachable node is settled first."""
        while self.heap:
            n, node = heapq.heappop(self.heap)
            if node in self.done:
                continue
            self.done.add(node)
            if len(self.done) > max_nodes:
                raise Unsolvable("search too large")
            if node[0] == 6:
                return node
            for d in range(4):
                self._step(node, n, d)
            self._talk(node, n)
        return None

    def _step(self, node: Node, n: int, d: int) -> None:
        """One press of direction `d`: into town (M1), onto the stop (M2, sent to the lab), into the city (M5)."""
        t = self.t
        nxt, stopped = self.w.move(node, d)
        ns = nxt[0]
        events: list[tuple[str, int]] = []
        if ns == 0 and nxt[2] == TOWN_MAP:
            self.reach("M1", n + 1)
            events.append(("M1", 1))
            ns = 1
        if stopped:
            if ns != 1:
                return  # the stop again after it sent you to the lab: a loop, never shorter
            self.reach("M2", n + 1)
            p = t.stop.to
            self.relax((2, -1, p.map, p.x, p.y, p.facing), n + 4, node, [DIR_NAME[d], "A", "A", "A"], [("M2", 1)])
            return
        if ns == 3 and nxt[2] == CITY_MAP:
            self.reach("M5", n + 1)
            events.append(("M5", 1))
            ns = 4
        self.relax((ns, *nxt[1:]), n + 1, node, [DIR_NAME[d]], events)

    def _talk(self, node: Node, n: int) -> None:
        """Talking to who is in front: a ball (M3, the battle M4), the clerk (M6), the professor (M7, M8)."""
        stage, ball, m, x, y, f = node
        who = self.w.talks_to(node)
        if stage == 2 and who is not None and BALL0 <= who < BALL0 + 3:
            b = who - BALL0
            # A (the ball, YES/NO), A (YES) = M3, three pages, then the battle from its first text
            self.reach("M3", n + 2)
            fight = battle(rng_after(n + 5))
            self.reach("M4", n + 5 + len(fight))
            self.relax((3, b, m, x, y, f), n + 5 + len(fight) + 3, node, ["A"] * 5 + fight + ["A"] * 3,
                       [("M3", 2), ("M4", 5 + len(fight))])
        elif stage == 4 and who == CLERK:
            self.reach("M6", n + 2)
            self.relax((5, ball, m, x, y, f), n + 3, node, ["A", "A", "A"], [("M6", 2)])
        elif stage == 5 and who == PROF:
            self.reach("M7", n + 2)
            self.reach("M8", n + 4)
            self.relax((6, ball, m, x, y, f), n + 4, node, ["A"] * 4, [("M7", 2), ("M8", 4)])

    def plan(self, goal: Node) -> tuple[list[str], dict[str, int]]:
        """The presses from the start to `goal`, and the press at which the plan reaches each rung."""
        actions: list[str] = []
        reached: dict[str, int] = {}
        node = goal
        while node in self.prev:
            via, acts, events = self.prev[node]
            for rung, offset in events:
                reached[rung] = self.dist[via] + offset
            actions[:0] = acts
            node = via
        return actions, reached
