"""The agent's memory: working memory plus an episodic store of atomic facts.

Rules (seed 000): facts are confirmed only with visible evidence; guesses carry lower
confidence and never silently become facts; completed facts are marked, not deleted;
contradictory active facts are returned together; retrieval is bounded by record count
and size; every read, write, update and eviction is logged through `log`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from engine.contract import MemoryWrite
from engine.records import Fact, MemoryOp, build

MemoryPolicy = Literal["recent-window", "persistent"]

CONFIRM_THRESHOLD = 0.7  # a write needs evidence and this confidence to count as confirmed
GUESS_CAP = 0.5  # an unevidenced write is a guess; its confidence is capped here
STORE_CHANGING_OPS = frozenset({"write", "update", "supersede", "complete", "evict"})  # logged ops that edit
MULTI_VALUED = frozenset({"has_item", "happened", "warning"})
DEFAULT_PREDICATE = {"objective": "current_objective", "location": "is_at", "event": "happened",
                     "inventory": "has_item", "warning": "warning"}


def _view_size(view: dict) -> int:
    """Characters of a fact's view as compact JSON, estimated without encoding it (deterministic)."""
    return 2 + sum(len(k) + len(str(v)) + 6 for k, v in view.items())


@dataclass(frozen=True)
class WorkingMemory:
    recent_actions: tuple[str, ...]
    recent_observations: tuple[dict, ...]
    current_objective: str | None


class MemoryStore:
    def __init__(self, policy: MemoryPolicy, *, log: Callable[[MemoryOp], None],
                 recent_window: int = 12, max_facts: int = 256,
                 retrieve_records: int = 24, retrieve_chars: int = 4000):
        self.policy = policy
        self._log = log
        self.max_facts = max_facts
        self.retrieve_records = retrieve_records
        self.retrieve_chars = retrieve_chars
        self.facts: dict[str, Fact] = {}
        self._next_id = 1
        self._actions: deque[str] = deque(maxlen=recent_window)
        self._observations: deque[dict] = deque(maxlen=recent_window)
        self._objective: str | None = None
        self.last_read: tuple[str, ...] = ()
        self._version = 0  # bumped by every change to the store
        self._retrieved: tuple[int, tuple[dict, ...], int] | None = None  # (store version, facts, chars)

    # -- working memory --------------------------------------------------------------
    def working(self) -> WorkingMemory:
        return WorkingMemory(tuple(self._actions), tuple(self._observations), self._objective)

    def note_observation(self, decision_id: int, observed: dict) -> None:
        self._observations.append({"decision_id": decision_id, **observed})
        objective = observed.get("objective_guess")
        if objective:
            self._objective = objective

    def note_action(self, action: str) -> None:
        self._actions.append(action)

    # -- episodic store ---------------------------------------------------------------
    def ever_held(self, fact_id: str) -> bool:
        """True for any fact id this store has issued, evicted ones included."""
        prefix, _, number = fact_id.partition("-")
        return prefix == "fact" and number.isdigit() and 1 <= int(number) < self._next_id

    @property
    def persistent(self) -> bool:
        return self.policy == "persistent"

    def contradictions(self) -> list[tuple[str, ...]]:
        """Groups of active facts that cannot all be true."""
        groups: dict[tuple[str, str], list[str]] = {}
        for f in self.facts.values():
            if f.status == "active" and f.predicate not in MULTI_VALUED:
                groups.setdefault((f.subject, f.predicate), []).append(f.fact_id)
        return [tuple(ids) for ids in groups.values()
                if len({self.facts[i].object for i in ids}) > 1]

    def retrieve(self) -> tuple[dict, ...]:
        """Facts to offer the agent: contradictions together, active before completed.

        Logged by `log_retrieval` once the decision is known to happen (a policy with nothing
        left to play never sees them)."""
        if not self.persistent or not self.facts:
            return ()
        if self._retrieved is None or self._retrieved[0] != self._version:
            views = self._select()
            self._retrieved = (self._version, views, sum(_view_size(v) for v in views))
        return self._retrieved[1]

    def log_retrieval(self, decision_id: int, retrieved: tuple[dict, ...]) -> None:
        if retrieved:  # nothing stored, nothing read: no log line
            self._log(build(MemoryOp, op="retrieve", decision_id=decision_id,
                                               fact_ids=[v["fact_id"] for v in retrieved],
                                               chars=self._chars(retrieved)))

    def _chars(self, retrieved: tuple[dict, ...]) -> int:
        cached = self._retrieved
        if cached is not None and cached[1] is retrieved:
            return cached[2]
        return sum(_view_size(v) for v in retrieved)

    def _select(self) -> tuple[dict, ...]:
        """The bounded retrieval; a pure function of the store, so cached until it changes."""
        conflicted = {i for group in self.contradictions() for i in group}
        order = sorted(self.facts.values(), key=lambda f: (
            f.status != "active", f.fact_id not in conflicted, -(f.last_confirmed_decision or 0),
            -f.first_seen_decision))
        chosen: list[dict] = []
        size = 0
        for f in order:
            if f.status == "superseded":
                continue
            view = {"fact_id": f.fact_id, "kind": f.kind, "subject": f.subject,
                    "predicate": f.predicate, "object": f.object, "status": f.status,
                    "confidence": f.confidence, "confirmed": f.confirmed,
                    "last_confirmed_decision": f.last_confirmed_decision}
            if f.fact_id in conflicted:
                view["contradicted"] = True
            cost = _view_size(view)
            if len(chosen) >= self.retrieve_records or size + cost > self.retrieve_chars:
                break
            chosen.append(view)
            size += cost
        return tuple(chosen)

    def read(self, fact_ids: list[str], decision_id: int) -> None:
        hits = [i for i in fact_ids if i in self.facts]
        misses = [i for i in fact_ids if i not in self.facts]
        self.last_read = tuple(hits)
        self._log(build(MemoryOp, op="read", decision_id=decision_id, fact_ids=hits, missing=misses))

    def write(self, item: MemoryWrite, decision_id: int, frame_sha256: str) -> str | None:
        """Apply one write; return the affected fact id, or None if rejected."""
        self._version += 1  # conservatively: any write attempt may change the store
        if not self.persistent:
            return self._reject(item, decision_id, "memory policy recent-window keeps no episodic store")
        subject = item.subject or "player"
        predicate = item.predicate or DEFAULT_PREDICATE[item.kind]
        confirmed = bool(item.evidence.strip()) and item.confidence >= CONFIRM_THRESHOLD
        confidence = item.confidence if item.evidence.strip() else min(item.confidence, GUESS_CAP)

        if item.supersedes is not None:
            old = self.facts.get(item.supersedes)
            if old is None:
                return self._reject(item, decision_id, f"supersedes unknown fact {item.supersedes}")
            if old.confirmed and not confirmed:
                return self._reject(item, decision_id,
                                    f"would overwrite confirmed {old.fact_id} with an unconfirmed guess")
            old.status = "superseded"
            self._fact_op("supersede", decision_id, old)

        same = next((f for f in self.facts.values() if f.status == "active" and
                     (f.subject, f.predicate, f.object) == (subject, predicate, item.value)), None)
        if same is not None and item.supersedes is None:
            if item.status == "completed":
                same.status = "completed"
            if confirmed:
                same.confirmed = True
                same.last_confirmed_decision = decision_id
                same.evidence_frame_sha256 = frame_sha256
                same.evidence = item.evidence
            same.confidence = max(same.confidence, confidence) if confirmed else same.confidence
            op = "complete" if item.status == "completed" else "update"
            self._fact_op(op, decision_id, same)
            return same.fact_id

        fact = build(
            Fact,
            fact_id=f"fact-{self._next_id:04d}", kind=item.kind, subject=subject, predicate=predicate,
            object=item.value, status=item.status, confidence=confidence, confirmed=confirmed,
            first_seen_decision=decision_id,
            last_confirmed_decision=decision_id if confirmed else None,
            evidence_frame_sha256=frame_sha256 if confirmed else None,
            evidence=item.evidence, supersedes=item.supersedes)
        self._next_id += 1
        self.facts[fact.fact_id] = fact
        self._fact_op("write", decision_id, fact)
        self._evict(decision_id)
        return fact.fact_id

    def _fact_op(self, op: str, decision_id: int, fact: Fact) -> None:
        self._log(build(MemoryOp, op=op, decision_id=decision_id, fact_id=fact.fact_id,
                                           fact=fact.model_copy()))

    def _reject(self, item: MemoryWrite, decision_id: int, reason: str) -> None:
        self._log(build(MemoryOp, op="reject", decision_id=decision_id, reason=reason,
                                           write=item.model_dump()))
        return None

    def _evict(self, decision_id: int) -> None:
        while len(self.facts) > self.max_facts:
            rank = {"superseded": 0, "completed": 1, "active": 2}
            victim = min(self.facts.values(), key=lambda f: (
                rank[f.status], f.confirmed, f.confidence, f.last_confirmed_decision or 0,
                f.first_seen_decision))
            del self.facts[victim.fact_id]
            self._fact_op("evict", decision_id, victim)
