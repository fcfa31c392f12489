"""The agent's memory: working memory plus an episodic store of atomic facts.

Rules (seed 000), with the numbers frozen in the manifest (`agent.memory`, `MemoryRules`):

* Confirmation. A write is *confirmed* when it gives visible evidence and a confidence of at
  least `confirm_threshold`; anything else is *unconfirmed*. A write without evidence is a
  guess: its confidence is capped at `guess_cap`. An unconfirmed write never confirms a fact.
* Status changes. Only a confirmed write may mark a fact completed (so a guess can neither
  complete a confirmed fact nor create an undeletable completed fact), an unconfirmed write may
  not supersede a confirmed fact, and nobody supersedes a completed fact (completed facts are
  history: marked, never replaced or deleted). Each refused write is logged as a `reject` op
  with its reason, and nothing in the store changes.
* Contradictions. Facts are compared on their normalised subject, predicate and object (case
  and runs of spaces ignored; in predicates, spaces and hyphens count as underscores).
  An *exclusive* predicate (`exclusive_predicates`: where the player is, the current objective,
  a thing's status) is single-valued per subject: two active facts with the same subject and
  predicate but different objects contradict each other. A *possession* predicate
  (`possession_predicates`: has_item, lacks_item, delivered_item) states whether the subject
  holds the item named by the object, and possession is single-valued per (subject, item):
  "has_item PARCEL" and "delivered_item PARCEL" cannot both be active. Every other predicate
  (happened, warning, ...) is multi-valued. Contradictions are reported, not resolved: the
  agent sees the facts together, marked, and resolves them by superseding.
* Retrieval is bounded by `retrieve_records` and `retrieve_chars`. Contradiction groups come
  first, each returned whole (or, when a group exceeds what the bounds leave, its newest members
  that fit if they are at least two, else not at all: never one side of a contradiction alone),
  marked `contradicted` with the ids it `conflicts_with`; then active facts, then completed ones,
  newest first; a fact that does not fit is skipped. Superseded facts are not offered.
* Eviction keeps the store at `max_facts`. It never evicts a completed fact or an active
  confirmed fact: superseded facts go first (oldest first), then active unconfirmed ones (lowest
  confidence, then oldest). A write that needs room when nothing may be evicted is rejected with
  the reason logged. Every eviction is logged as an `evict` op carrying the whole fact.
* Every read, write, update, supersession, completion, eviction and rejection is logged through
  `log`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from engine.loop.contract import MemoryWrite
from engine.loop.records import Fact, MemoryOp, build

MemoryPolicy = Literal["recent-window", "persistent"]

# The defaults of MemoryRules (and of the manifest's agent.memory).
CONFIRM_THRESHOLD = 0.7  # a write needs evidence and this confidence to count as confirmed
GUESS_CAP = 0.5  # an unevidenced write is a guess; its confidence is capped here
RETRIEVE_RECORDS = 24
RETRIEVE_CHARS = 4000
MAX_FACTS = 256
EXCLUSIVE_PREDICATES = ("is_at", "current_objective", "status")  # single-valued per subject
POSSESSION_PREDICATES = ("has_item", "lacks_item", "delivered_item")  # single-valued per (subject, item)

STORE_CHANGING_OPS = frozenset({"write", "update", "supersede", "complete", "evict"})  # logged ops that edit
DEFAULT_PREDICATE = {"objective": "current_objective", "location": "is_at", "event": "happened",
                     "inventory": "has_item", "warning": "warning"}

_SPACES = re.compile(r"\s+")
_PREDICATE_GAPS = re.compile(r"[\s_-]+")


def norm_text(text: str) -> str:
    """A subject or object as compared: case and runs of spaces ignored."""
    return _SPACES.sub(" ", text).strip().casefold()


def norm_predicate(text: str) -> str:
    """A predicate as compared: case ignored, spaces and hyphens count as underscores."""
    return _PREDICATE_GAPS.sub("_", text.strip().casefold()).strip("_")


@dataclass(frozen=True)
class MemoryRules:
    """The episodic store's rules: the same for every condition, frozen in the manifest."""

    confirm_threshold: float = CONFIRM_THRESHOLD
    guess_cap: float = GUESS_CAP
    retrieve_records: int = RETRIEVE_RECORDS
    retrieve_chars: int = RETRIEVE_CHARS
    max_facts: int = MAX_FACTS
    exclusive_predicates: tuple[str, ...] = EXCLUSIVE_PREDICATES
    possession_predicates: tuple[str, ...] = POSSESSION_PREDICATES
    # Derived: the predicate sets as compared (normalised).
    _exclusive: frozenset[str] = field(init=False, repr=False, compare=False)
    _possession: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("exclusive_predicates", "possession_predicates"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not 0 <= self.guess_cap < self.confirm_threshold <= 1:
            raise ValueError("memory rules: need 0 <= guess_cap < confirm_threshold <= 1")
        if min(self.retrieve_records, self.retrieve_chars, self.max_facts) < 1:
            raise ValueError("memory rules: retrieve_records, retrieve_chars and max_facts must be at least 1")
        exclusive = frozenset(norm_predicate(p) for p in self.exclusive_predicates)
        possession = frozenset(norm_predicate(p) for p in self.possession_predicates)
        if exclusive & possession:
            raise ValueError(f"memory rules: predicates both exclusive and possession: "
                             f"{', '.join(sorted(exclusive & possession))}")
        object.__setattr__(self, "_exclusive", exclusive)
        object.__setattr__(self, "_possession", possession)

    def as_dict(self) -> dict:
        """The rules as JSON values (for provenance): the manifest's agent.memory, field for field."""
        return {"confirm_threshold": self.confirm_threshold, "guess_cap": self.guess_cap,
                "retrieve_records": self.retrieve_records, "retrieve_chars": self.retrieve_chars,
                "max_facts": self.max_facts, "exclusive_predicates": list(self.exclusive_predicates),
                "possession_predicates": list(self.possession_predicates)}

    def conflict_key(self, subject: str, predicate: str, obj: str) -> tuple[tuple[str, ...], str] | None:
        """(group, value) for a fact whose predicate is single-valued, None for a multi-valued one.
        Two active facts in the same group with different values contradict each other."""
        p = norm_predicate(predicate)
        if p in self._exclusive:
            return ("exclusive", norm_text(subject), p), norm_text(obj)
        if p in self._possession:
            return ("possession", norm_text(subject), norm_text(obj)), p
        return None


def _view_size(view: dict) -> int:
    """Characters of a fact's view as compact JSON, estimated without encoding it (deterministic)."""
    return 2 + sum(len(k) + len(str(v)) + 6 for k, v in view.items())


def _recency(f: Fact) -> tuple[int, int]:
    return (-(f.last_confirmed_decision or 0), -f.first_seen_decision)


@dataclass(frozen=True)
class WorkingMemory:
    recent_actions: tuple[str, ...]
    recent_observations: tuple[dict, ...]
    current_objective: str | None
    refused_writes: tuple[str, ...] = ()  # the last decision's refused writes, so the agent learns why


def _unit_fit(views: list[dict], records: int, chars: int) -> tuple[Sequence[dict], int]:
    """What of a unit's views the bounds left take, and its size: the whole unit, or a group's newest
    members when they are at least two (each then names only the others kept); else nothing."""
    fitting, cost = _fitting(views, records, chars)
    if len(fitting) < len(views):
        if len(fitting) < 2:  # nothing of it, or one half of a contradiction: skip it
            return (), 0  # a constant: skipping allocates nothing
        kept = {v["fact_id"] for v in fitting}  # a group larger than what is left: its newest part
        for view in fitting:
            view["conflicts_with"] = [i for i in view["conflicts_with"] if i in kept]
    return fitting, cost


def _fitting(views: list[dict], records: int, chars: int) -> tuple[list[dict], int]:
    """The leading views that fit in `records` more records and `chars` more characters, and their size."""
    fitting: list[dict] = []
    cost = 0
    for view in views:
        more = _view_size(view)
        if len(fitting) >= records or cost + more > chars:
            break
        fitting.append(view)
        cost += more
    return fitting, cost


class MemoryStore:
    def __init__(self, policy: MemoryPolicy, *, log: Callable[[MemoryOp], None],
                 recent_window: int = 12, rules: MemoryRules = MemoryRules()):
        self.policy = policy
        self._log = log
        self.rules = rules
        self.facts: dict[str, Fact] = {}
        self._keys: dict[str, tuple[str, str, str]] = {}  # fact id -> normalised (subject, predicate, object)
        self._next_id = 1
        self._actions: deque[str] = deque(maxlen=recent_window)
        self._observations: deque[dict] = deque(maxlen=recent_window)
        self._refused: list[str] = []
        self._objective: str | None = None
        self.last_read: tuple[str, ...] = ()
        self._version = 0  # bumped by every change to the store
        self._retrieved: tuple[int, tuple[dict, ...], int] | None = None  # (store version, facts, chars)

    @property
    def max_facts(self) -> int:
        return self.rules.max_facts

    @property
    def retrieve_records(self) -> int:
        return self.rules.retrieve_records

    @property
    def retrieve_chars(self) -> int:
        return self.rules.retrieve_chars

    # -- working memory --------------------------------------------------------------
    def working(self) -> WorkingMemory:
        return WorkingMemory(tuple(self._actions), tuple(self._observations), self._objective,
                             tuple(self._refused))

    def note_observation(self, decision_id: int, observed: dict) -> None:
        self._refused = []  # a new decision's writes follow: only they are reported next turn
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
        """Groups of active facts that cannot all be true (see the module docstring), each in
        order of writing; the groups in order of their first fact."""
        groups: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        for f in self.facts.values():
            if f.status != "active":
                continue
            keyed = self.rules.conflict_key(*self._keys[f.fact_id])
            if keyed is not None:
                groups.setdefault(keyed[0], []).append((f.fact_id, keyed[1]))
        return [tuple(i for i, _ in members) for members in groups.values()
                if len({value for _, value in members}) > 1]

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

    @staticmethod
    def _view(f: Fact) -> dict:
        return {"fact_id": f.fact_id, "kind": f.kind, "subject": f.subject,
                "predicate": f.predicate, "object": f.object, "status": f.status,
                "confidence": f.confidence, "confirmed": f.confirmed,
                "last_confirmed_decision": f.last_confirmed_decision}

    def _select(self) -> tuple[dict, ...]:
        """The bounded retrieval; a pure function of the store, so cached until it changes.

        Units in order of priority: contradiction groups (newest first, members newest first), then
        the other active facts, then completed ones, newest first. Each unit is taken if it fits in
        what the bounds leave, else skipped; a group that does not fit whole gives its newest
        members that fit if they are at least two (a contradiction is never offered half)."""
        records, chars = self.rules.retrieve_records, self.rules.retrieve_chars
        chosen: list[dict] = []
        size = 0
        for unit in self._units():
            if len(chosen) >= records:
                break
            fitting, cost = _unit_fit(self._unit_views(unit), records - len(chosen), chars - size)
            if fitting:
                chosen += fitting
                size += cost
        return tuple(chosen)

    def _units(self) -> list[list[Fact]]:
        """The retrieval's units in priority order: contradiction groups (newest first, members newest
        first), then each other active fact, then each completed one, newest first."""
        groups = [sorted((self.facts[i] for i in g), key=_recency) for g in self.contradictions()]
        groups.sort(key=lambda members: _recency(members[0]))
        conflicted = {f.fact_id for g in groups for f in g}
        rest = sorted((f for f in self.facts.values() if f.status != "superseded" and f.fact_id not in conflicted),
                      key=lambda f: (f.status != "active", *_recency(f)))
        return [*groups, *([f] for f in rest)]

    def _unit_views(self, unit: list[Fact]) -> list[dict]:
        """A unit's views; a contradiction group's members each name the others."""
        views = [self._view(f) for f in unit]
        if len(unit) > 1:
            for view in views:
                view["contradicted"] = True
                view["conflicts_with"] = [f.fact_id for f in unit if f.fact_id != view["fact_id"]]
        return views

    def read(self, fact_ids: list[str], decision_id: int) -> None:
        hits = [i for i in fact_ids if i in self.facts]
        misses = [i for i in fact_ids if i not in self.facts]
        self.last_read = tuple(hits)
        self._log(build(MemoryOp, op="read", decision_id=decision_id, fact_ids=hits, missing=misses))

    def write(self, item: MemoryWrite, decision_id: int, frame_sha256: str) -> str | None:
        """Apply one write; return the affected fact id, or None if rejected (logged with the reason)."""
        self._version += 1  # conservatively: any write attempt may change the store
        if not self.persistent:
            return self._reject(item, decision_id, "memory policy recent-window keeps no episodic store")
        rules = self.rules
        subject = item.subject or "player"
        predicate = item.predicate or DEFAULT_PREDICATE[item.kind]
        confirmed, confidence = self._weigh(item)
        completing = item.status == "completed"
        key = (norm_text(subject), norm_predicate(predicate), norm_text(item.value))

        old, refused = self._superseded(item, confirmed)
        if refused is not None:
            return self._reject(item, decision_id, refused)
        same = self._same(key, completing) if old is None else None
        if completing and not confirmed:
            return self._reject(item, decision_id, self._completion_refused(same))
        if same is not None:
            self._update(same, item, decision_id, frame_sha256, confirmed, confidence)
            return same.fact_id
        if len(self.facts) >= rules.max_facts and self._victim(old) is None:
            return self._reject(item, decision_id, f"memory full: {len(self.facts)} facts, all completed or "
                                                   f"confirmed and active, which are never evicted")
        self._make_room(old, decision_id)

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
        self._keys[fact.fact_id] = key
        self._fact_op("write", decision_id, fact)
        return fact.fact_id

    def _weigh(self, item: MemoryWrite) -> tuple[bool, float]:
        """Whether a write is confirmed (visible evidence and enough confidence), and its confidence
        (a guess without evidence is capped)."""
        evidenced = bool(item.evidence.strip())
        confirmed = evidenced and item.confidence >= self.rules.confirm_threshold
        confidence = item.confidence if evidenced else min(item.confidence, self.rules.guess_cap)
        return confirmed, confidence

    def _completion_refused(self, same: Fact | None) -> str:
        target = f"{same.fact_id}" if same is not None else "a new fact"
        what = "confirmed " if same is not None and same.confirmed else ""
        unconfirmed = (f"an unconfirmed write (confirmation needs visible evidence and confidence >= "
                       f"{self.rules.confirm_threshold})")
        return f"would mark {what}{target} completed with {unconfirmed}"

    def _superseded(self, item: MemoryWrite, confirmed: bool) -> tuple[Fact | None, str | None]:
        """The fact a write supersedes (None: it supersedes none), or why it may not."""
        if item.supersedes is None:
            return None, None
        old = self.facts.get(item.supersedes)
        if old is None:
            gone = " (evicted)" if self.ever_held(item.supersedes) else ""
            return None, f"supersedes unknown fact {item.supersedes}{gone}"
        if old.status == "completed":
            return old, f"would supersede completed {old.fact_id}: completed facts are kept as they are"
        if old.confirmed and not confirmed:
            return old, f"would overwrite confirmed {old.fact_id} with an unconfirmed guess"
        return old, None

    def _same(self, key: tuple[str, str, str], completing: bool) -> Fact | None:
        """The active fact a write restates; completed again: the same fact, not a second one."""
        same = self._find(key, "active")
        if same is None and completing:
            same = self._find(key, "completed")
        return same

    def _update(self, same: Fact, item: MemoryWrite, decision_id: int, frame_sha256: str, confirmed: bool,
                confidence: float) -> None:
        op = "update"
        if item.status == "completed" and same.status == "active":
            same.status = "completed"
            op = "complete"
        if confirmed:
            same.confirmed = True
            same.last_confirmed_decision = decision_id
            same.evidence_frame_sha256 = frame_sha256
            same.evidence = item.evidence
            same.confidence = max(same.confidence, confidence)
        self._fact_op(op, decision_id, same)

    def _make_room(self, old: Fact | None, decision_id: int) -> None:
        """Mark the superseded fact, then evict until a new fact fits."""
        if old is not None:
            old.status = "superseded"
            self._fact_op("supersede", decision_id, old)
        while len(self.facts) >= self.rules.max_facts:
            victim = self._victim(None)
            del self.facts[victim.fact_id]
            del self._keys[victim.fact_id]
            self._fact_op("evict", decision_id, victim)

    def _find(self, key: tuple[str, str, str], status: str) -> Fact | None:
        return next((f for f in self.facts.values() if f.status == status and self._keys[f.fact_id] == key), None)

    def _victim(self, superseding: Fact | None) -> Fact | None:
        """The fact to evict next: superseded ones first (oldest first; `superseding` counts as one),
        then active unconfirmed ones (lowest confidence, then oldest). Never a completed fact, never
        an active confirmed one; None when only those are left."""
        candidates = [f for f in self.facts.values()
                      if f is superseding or f.status == "superseded" or (f.status == "active" and not f.confirmed)]
        if not candidates:
            return None
        return min(candidates, key=lambda f: (
            f is not superseding and f.status != "superseded",
            f.confidence if f.status == "active" and f is not superseding else 0.0,
            f.last_confirmed_decision or 0, f.first_seen_decision, int(f.fact_id.partition("-")[2])))

    def _fact_op(self, op: str, decision_id: int, fact: Fact) -> None:
        self._log(build(MemoryOp, op=op, decision_id=decision_id, fact_id=fact.fact_id,
                                           fact=fact.model_copy()))

    def _reject(self, item: MemoryWrite, decision_id: int, reason: str) -> None:
        self._log(build(MemoryOp, op="reject", decision_id=decision_id, reason=reason,
                                           write=item.model_dump()))
        self._refused.append(f"{item.value!r}: {reason}")
        return None
