import itertools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.loop.contract import MemoryWrite
from engine.loop.memory import GUESS_CAP, MemoryRules, MemoryStore


def store(policy="persistent", recent_window=12, **rules):
    log = []
    return MemoryStore(policy, log=log.append, recent_window=recent_window, rules=MemoryRules(**rules)), log


def w(value, kind="inventory", confidence=0.9, evidence="seen on the BAG page", **kw):
    return MemoryWrite(kind=kind, value=value, confidence=confidence, evidence=evidence, **kw)


def test_confirmed_only_with_visible_evidence():
    s, log = store()
    confirmed = s.write(w("PARCEL"), 1, "a" * 64)
    guess = s.write(w("DEX", evidence="", confidence=0.95), 2, "b" * 64)
    assert s.facts[confirmed].confirmed and s.facts[confirmed].evidence_frame_sha256 == "a" * 64
    g = s.facts[guess]
    assert not g.confirmed and g.confidence == GUESS_CAP and g.evidence_frame_sha256 is None
    assert [e.op for e in log] == ["write", "write"]


def test_guess_does_not_silently_become_fact():
    s, _ = store()
    fid = s.write(w("MAPLE CITY", kind="location", evidence="", confidence=0.4), 1, "c" * 64)
    again = s.write(w("MAPLE CITY", kind="location", evidence="", confidence=0.9), 2, "d" * 64)
    assert again == fid and not s.facts[fid].confirmed and s.facts[fid].confidence == 0.4
    s.write(w("MAPLE CITY", kind="location", evidence="town sign"), 3, "e" * 64)
    assert s.facts[fid].confirmed and s.facts[fid].last_confirmed_decision == 3


def test_completed_is_marked_not_deleted():
    s, log = store()
    fid = s.write(w("deliver the parcel", kind="objective"), 1, "a" * 64)
    s.write(w("deliver the parcel", kind="objective", status="completed"), 9, "b" * 64)
    assert s.facts[fid].status == "completed"
    assert log[-1].op == "complete"
    assert any(f["fact_id"] == fid and f["status"] == "completed" for f in s.retrieve())


def test_supersede_marks_old_fact():
    s, log = store()
    old = s.write(w("ACORN TOWN", kind="location"), 1, "a" * 64)
    new = s.write(w("MAPLE CITY", kind="location", supersedes=old), 5, "b" * 64)
    assert s.facts[old].status == "superseded" and s.facts[new].supersedes == old
    assert [f["fact_id"] for f in s.retrieve()] == [new]
    assert "supersede" in [e.op for e in log]


def test_unsupported_overwrite_rejected():
    s, log = store()
    old = s.write(w("ACORN TOWN", kind="location"), 1, "a" * 64)
    assert s.write(w("LAB", kind="location", evidence="", supersedes=old), 2, "b" * 64) is None
    assert s.facts[old].status == "active" and log[-1].op == "reject"


def test_contradictory_active_facts_returned_together():
    s, _ = store(retrieve_records=2)
    for i in range(5):
        s.write(w(f"item {i}"), i + 1, "a" * 64)  # multi-valued: no contradiction
    a = s.write(w("holds parcel", kind="event", subject="parcel", predicate="status"), 6, "a" * 64)
    b = s.write(w("delivered", kind="event", subject="parcel", predicate="status"), 7, "a" * 64)
    assert s.contradictions() == [(a, b)]
    got = s.retrieve()
    assert {f["fact_id"] for f in got} == {a, b} and all(f["contradicted"] for f in got)


def test_retrieval_bounded_by_count_and_size():
    s, log = store(retrieve_records=3)
    for i in range(10):
        s.write(w(f"item {i}"), i, "a" * 64)
    got = s.retrieve()
    assert len(got) == 3
    s.log_retrieval(11, got)
    assert log[-1].op == "retrieve" and len(log[-1].fact_ids) == 3 and log[-1].decision_id == 11
    s2, _ = store(retrieve_chars=300)
    for i in range(10):
        s2.write(w(f"item {i}"), i, "a" * 64)
    assert 0 < len(s2.retrieve()) < 10


def test_eviction_logged_and_prefers_superseded():
    s, log = store(max_facts=2)
    old = s.write(w("A", kind="location"), 1, "a" * 64)
    s.write(w("B", kind="location", supersedes=old), 2, "a" * 64)
    s.write(w("PARCEL"), 3, "a" * 64)
    evictions = [e for e in log if e.op == "evict"]
    assert [e.fact_id for e in evictions] == [old] and old not in s.facts


def test_reads_logged_with_misses():
    s, log = store()
    fid = s.write(w("PARCEL"), 1, "a" * 64)
    s.read([fid, "fact-9999"], 2)
    assert log[-1].model_dump(exclude_unset=True) == {"op": "read", "decision_id": 2, "fact_ids": [fid],
                                                   "missing": ["fact-9999"]}
    assert s.last_read == (fid,)


def test_recent_window_policy_keeps_no_store_but_logs():
    s, log = store("recent-window", recent_window=3)
    assert s.write(w("PARCEL"), 1, "a" * 64) is None
    assert log[-1].op == "reject" and not s.facts and s.retrieve() == ()
    for a in ["UP", "UP", "LEFT", "A"]:
        s.note_action(a)
    assert s.working().recent_actions == ("UP", "LEFT", "A")


def test_retrieval_follows_every_change():
    s, _ = store()
    a = s.write(w("ACORN TOWN", kind="location"), 1, "a" * 64)
    assert [f["fact_id"] for f in s.retrieve()] == [a]
    assert [f["fact_id"] for f in s.retrieve()] == [a]  # unchanged store, same answer
    b = s.write(w("LAB", kind="location", supersedes=a), 4, "b" * 64)
    assert [f["fact_id"] for f in s.retrieve()] == [b]
    s.write(w("LAB", kind="location", status="completed"), 6, "c" * 64)
    assert s.retrieve()[0]["status"] == "completed"


# -- the rules as a real model meets them ------------------------------------------------------------

CONFIRM = "confirmation needs visible evidence and confidence >= 0.7"


def ops(log, start=0):
    return [(e.op, e.fact_id) if e.op != "reject" else ("reject", e.reason) for e in log[start:]]


def test_a_guess_cannot_complete_a_confirmed_fact():
    s, log = store()
    fid = s.write(w("deliver the parcel", kind="objective"), 1, "a" * 64)
    before = s.facts[fid].model_copy()
    guess = w("deliver the parcel", kind="objective", evidence="", confidence=0.3, status="completed")
    assert s.write(guess, 2, "b" * 64) is None
    assert log[-1].model_dump(exclude_unset=True) == {
        "op": "reject", "decision_id": 2, "write": guess.model_dump(),
        "reason": f"would mark confirmed {fid} completed with an unconfirmed write ({CONFIRM})"}
    # Evidence without the confidence is not confirmation either.
    weak = w("deliver the parcel", kind="objective", evidence="the professor nodded", confidence=0.6,
             status="completed")
    assert s.write(weak, 3, "c" * 64) is None and log[-1].op == "reject"
    assert s.facts[fid] == before and s.contradictions() == []
    assert s.write(w("deliver the parcel", kind="objective", status="completed", evidence="he took it"),
                   4, "d" * 64) == fid
    assert ops(log) == [("write", fid), ("reject", log[1].reason), ("reject", log[2].reason), ("complete", fid)]
    done = s.facts[fid]
    assert (done.status, done.last_confirmed_decision, done.evidence_frame_sha256) == ("completed", 4, "d" * 64)


def test_completion_needs_confirmation_even_for_a_guess_or_a_new_fact():
    s, log = store()
    g = s.write(w("find the shop", kind="objective", evidence="", confidence=0.4), 1, "a" * 64)
    assert s.write(w("find the shop", kind="objective", evidence="", status="completed"), 2, "b" * 64) is None
    assert log[-1].reason == f"would mark {g} completed with an unconfirmed write ({CONFIRM})"
    assert s.write(w("beat the gym", kind="objective", evidence="", status="completed"), 3, "b" * 64) is None
    assert log[-1].reason == f"would mark a new fact completed with an unconfirmed write ({CONFIRM})"
    assert list(s.facts) == [g] and s.facts[g].status == "active"
    # A confirmed completion of the guess confirms it as well.
    assert s.write(w("find the shop", kind="objective", evidence="SHOP sign", status="completed"), 4, "c" * 64) == g
    assert s.facts[g].status == "completed" and s.facts[g].confirmed and log[-1].op == "complete"


def test_completed_facts_are_never_superseded_nor_duplicated():
    s, log = store()
    fid = s.write(w("leave the house", kind="objective", status="completed", evidence="outside"), 1, "a" * 64)
    assert s.facts[fid].status == "completed" and log[-1].op == "write"
    assert s.write(w("leave the house again", kind="objective", supersedes=fid), 2, "b" * 64) is None
    assert log[-1].reason == f"would supersede completed {fid}: completed facts are kept as they are"
    # Completing it again refreshes the same fact instead of adding a second completed one.
    assert s.write(w("Leave  the HOUSE", kind="objective", status="completed", evidence="still outside"),
                   3, "c" * 64) == fid
    assert len(s.facts) == 1 and log[-1].op == "update" and s.facts[fid].last_confirmed_decision == 3


def test_a_guess_cannot_supersede_a_confirmed_fact_but_may_replace_a_guess():
    s, log = store()
    c = s.write(w("LAB", kind="location"), 1, "a" * 64)
    g = s.write(w("the north path?", kind="objective", evidence="", confidence=0.3), 2, "a" * 64)
    assert s.write(w("ROUTE 1", kind="location", evidence="", supersedes=c), 3, "b" * 64) is None
    assert log[-1].reason == f"would overwrite confirmed {c} with an unconfirmed guess"
    g2 = s.write(w("the shop?", kind="objective", evidence="", confidence=0.3, supersedes=g), 4, "b" * 64)
    assert s.facts[g].status == "superseded" and s.facts[g2].supersedes == g and s.facts[c].status == "active"
    assert ops(log)[-2:] == [("supersede", g), ("write", g2)]


def test_exclusive_predicates_are_single_valued_per_subject():
    s, _ = store()
    lab = s.write(w("LAB", kind="location"), 1, "a" * 64)
    assert s.write(w("  lab ", kind="location"), 2, "a" * 64) == lab  # the same fact, not a conflict
    town = s.write(w("ACORN TOWN", kind="location", subject="Player", predicate="Is At"), 3, "a" * 64)
    assert s.facts[town].predicate == "Is At"  # stored as written, compared normalised
    assert s.contradictions() == [(lab, town)]
    o1 = s.write(w("choose a starter", kind="objective"), 4, "a" * 64)
    o2 = s.write(w("talk to the clerk", kind="objective", evidence="", confidence=0.4), 5, "a" * 64)
    assert s.contradictions() == [(lab, town), (o1, o2)]
    # Another subject, a multi-valued predicate, a predicate not declared exclusive: no conflict.
    s.write(w("LAB", kind="location", subject="rival"), 6, "a" * 64)
    s.write(w("got a potion", kind="event"), 7, "a" * 64)
    s.write(w("lost a battle", kind="event"), 8, "a" * 64)
    s.write(w("go north", kind="event", subject="PROF. HAZEL", predicate="said"), 9, "a" * 64)
    s.write(w("bring the parcel", kind="event", subject="PROF. HAZEL", predicate="said"), 10, "a" * 64)
    assert s.contradictions() == [(lab, town), (o1, o2)]
    # Superseding resolves it.
    s.write(w("ACORN TOWN", kind="location", supersedes=lab), 11, "a" * 64)
    assert s.contradictions() == [(o1, o2)]


def test_possession_is_single_valued_per_subject_and_item():
    s, log = store()
    parcel = s.write(w("PARCEL"), 1, "a" * 64)
    dex = s.write(w("DEX"), 2, "a" * 64)
    assert s.contradictions() == []  # holding two items is fine
    gone = s.write(w("parcel", predicate="delivered-item", evidence="the professor took it"), 3, "a" * 64)
    assert s.contradictions() == [(parcel, gone)]
    got = {f["fact_id"]: f for f in s.retrieve()}
    assert got[parcel]["conflicts_with"] == [gone] and got[gone]["conflicts_with"] == [parcel]
    assert got[parcel]["contradicted"] and got[gone]["contradicted"] and "contradicted" not in got[dex]
    s2, _ = store()
    p = s2.write(w("PARCEL"), 1, "a" * 64)
    d = s2.write(w("PARCEL", predicate="delivered_item", evidence="delivered", supersedes=p), 2, "a" * 64)
    assert s2.contradictions() == [] and s2.facts[p].status == "superseded" and s2.facts[d].status == "active"
    lacks = s2.write(w("PARCEL", predicate="lacks_item", evidence="BAG is empty"), 3, "a" * 64)
    assert s2.contradictions() == [(d, lacks)]  # delivered and lacking are still two answers to one question


def test_exclusive_and_possession_predicates_come_from_the_rules():
    s, _ = store(exclusive_predicates=("likes",), possession_predicates=())
    a = s.write(w("LAB", kind="location"), 1, "a" * 64)
    s.write(w("SHOP", kind="location"), 2, "a" * 64)
    s.write(w("PARCEL"), 3, "a" * 64)
    s.write(w("PARCEL", predicate="delivered_item"), 4, "a" * 64)
    assert s.contradictions() == []
    b = s.write(w("tea", kind="event", subject="rival", predicate="likes"), 5, "a" * 64)
    c = s.write(w("coffee", kind="event", subject="Rival", predicate="LIKES"), 6, "a" * 64)
    assert s.contradictions() == [(b, c)] and a in s.facts


def test_contradictions_are_retrieved_together_or_not_at_all():
    s, _ = store(retrieve_records=3)
    old = s.write(w("OLD NOTE", kind="warning"), 1, "a" * 64)
    ids = [s.write(w(place, kind="location"), d, "a" * 64) for d, place in enumerate(["A", "B", "C", "D"], 2)]
    got = s.retrieve()  # a group of four where three fit: the newest three, each naming the other two
    assert [f["fact_id"] for f in got] == ids[:0:-1]
    assert all(f["contradicted"] and set(f["conflicts_with"]) == set(ids[1:]) - {f["fact_id"]} for f in got)
    s1, _ = store(retrieve_records=1)
    s1.write(w("OLD NOTE", kind="warning"), 1, "a" * 64)
    x = s1.write(w("A", kind="location"), 2, "a" * 64)
    s1.write(w("B", kind="location"), 3, "a" * 64)
    assert [f["fact_id"] for f in s1.retrieve()] == [old]  # one side alone is never offered: skipped
    assert x in s1.facts


def test_eviction_never_drops_completed_or_confirmed_active_facts():
    s, log = store(max_facts=4)
    done = s.write(w("leave the house", kind="objective", status="completed", evidence="outside"), 1, "a" * 64)
    here = s.write(w("LAB", kind="location"), 2, "a" * 64)
    g_low = s.write(w("a potion?", evidence="", confidence=0.2), 3, "a" * 64)
    g_high = s.write(w("a map?", evidence="", confidence=0.45), 4, "a" * 64)
    # Full: the lowest-confidence guess goes first, then the other guess.
    n1 = s.write(w("PARCEL"), 5, "a" * 64)
    assert ops(log)[-2:] == [("evict", g_low), ("write", n1)]
    n2 = s.write(w("DEX"), 6, "a" * 64)
    assert ops(log)[-2:] == [("evict", g_high), ("write", n2)]
    assert log[-2].fact.model_dump()["object"] == "a map?" and log[-2].decision_id == 6
    # Only completed and confirmed active facts are left: a new fact is refused, nothing is evicted.
    before = dict(s.facts)
    assert s.write(w("SPROUTLE", kind="event"), 7, "a" * 64) is None
    assert log[-1].reason == "memory full: 4 facts, all completed or confirmed and active, which are never evicted"
    assert s.facts == before and set(s.facts) == {done, here, n1, n2}
    # An update needs no room; a supersession frees its own: the superseded fact is evicted, and logged.
    assert s.write(w("LAB", kind="location", evidence="still here"), 8, "a" * 64) == here
    moved = s.write(w("ACORN TOWN", kind="location", supersedes=here), 9, "a" * 64)
    assert ops(log)[-3:] == [("supersede", here), ("evict", here), ("write", moved)]
    assert log[-2].fact.status == "superseded" and s.facts[done].status == "completed"
    assert not s.write(w("X", kind="event"), 10, "a" * 64) and [e.op for e in log].count("evict") == 3


def test_eviction_takes_superseded_before_guesses():
    s, log = store(max_facts=3)
    a = s.write(w("A", kind="location"), 1, "a" * 64)
    guess = s.write(w("a potion?", evidence="", confidence=0.1), 2, "a" * 64)
    s.write(w("B", kind="location", supersedes=a), 3, "a" * 64)
    s.write(w("PARCEL"), 4, "a" * 64)
    assert [e.fact_id for e in log if e.op == "evict"] == [a] and guess in s.facts
    s.write(w("DEX"), 5, "a" * 64)
    assert [e.fact_id for e in log if e.op == "evict"] == [a, guess]


def test_memory_rules_are_validated_and_used():
    import pytest

    for bad in ({"guess_cap": 0.7}, {"confirm_threshold": 1.5}, {"max_facts": 0}, {"retrieve_records": 0},
                {"exclusive_predicates": ("is_at",), "possession_predicates": ("IS-AT",)}):
        with pytest.raises(ValueError, match="memory rules"):
            MemoryRules(**bad)
    rules = MemoryRules(confirm_threshold=0.9, guess_cap=0.2, exclusive_predicates=["is_at"])
    assert rules.exclusive_predicates == ("is_at",) and hash(rules) == hash(MemoryRules(
        confirm_threshold=0.9, guess_cap=0.2, exclusive_predicates=("is_at",)))
    s, _ = store(confirm_threshold=0.9, guess_cap=0.2)
    assert not s.facts[s.write(w("LAB", kind="location", confidence=0.85), 1, "a" * 64)].confirmed
    assert s.facts[s.write(w("DEX", confidence=0.85, evidence=""), 2, "a" * 64)].confidence == 0.2
    assert MemoryRules().as_dict() == {
        "confirm_threshold": 0.7, "guess_cap": 0.5, "retrieve_records": 24, "retrieve_chars": 4000,
        "max_facts": 256, "exclusive_predicates": ["is_at", "current_objective", "status"],
        "possession_predicates": ["has_item", "lacks_item", "delivered_item"]}


def test_the_trial_config_carries_the_rules_to_the_store():
    from engine.loop.trial import TrialConfig
    from tests.engine.loop.test_loop_rules import make_trial

    assert TrialConfig.__dataclass_fields__["memory_rules"].default == MemoryRules()
    trial, _, _ = make_trial(None, memory_rules=MemoryRules(max_facts=3, retrieve_records=2))
    assert trial.memory.rules == MemoryRules(max_facts=3, retrieve_records=2)


# -- property: random sequences keep every rule -------------------------------------------------------

def _norm(text):
    return " ".join(text.split()).casefold()


def _norm_p(text):
    return re.sub(r"[\s_-]+", "_", text.strip().casefold()).strip("_")


def _conflict(rules, a, b):
    """The documented rule, pairwise (independent of the store's grouping)."""
    if a.status != "active" or b.status != "active" or _norm(a.subject) != _norm(b.subject):
        return False
    pa, pb = _norm_p(a.predicate), _norm_p(b.predicate)
    if pa == pb and pa in rules.exclusive_predicates:
        return _norm(a.object) != _norm(b.object)
    possession = set(rules.possession_predicates)
    return pa != pb and pa in possession and pb in possession and _norm(a.object) == _norm(b.object)


_writes = st.builds(
    lambda kind, value, confidence, evidence, subject, predicate, status, supersedes: MemoryWrite(
        kind=kind, value=value, confidence=confidence, evidence=evidence, subject=subject, predicate=predicate,
        status=status, supersedes=None if supersedes is None else f"fact-{supersedes:04d}"),
    st.sampled_from(["objective", "location", "event", "inventory", "warning"]),
    st.sampled_from(["LAB", "lab ", "ACORN  TOWN", "PARCEL", "parcel"]),
    st.sampled_from([0.1, 0.5, 0.69, 0.7, 0.95]),
    st.sampled_from(["", "seen on screen"]),
    st.sampled_from([None, None, "Player", "rival"]),
    st.sampled_from([None, None, "Is At", "current_objective", "has_item", "lacks_item", "delivered-item",
                     "happened", "said"]),
    st.sampled_from(["active", "active", "completed"]),
    st.one_of(st.none(), st.none(), st.integers(1, 8)))


# A step: a new write, or (a quarter of the time) the completion of an earlier one, confirmed or guessed.
_steps = st.tuples(st.integers(0, 3), _writes, st.integers(0, 40), st.booleans())


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(_steps, min_size=4, max_size=40),
       max_facts=st.integers(1, 6), records=st.integers(1, 6), chars=st.sampled_from([300, 700, 4000]))
def test_random_sequences_keep_the_rules(steps, max_facts, records, chars):
    s, log = store(max_facts=max_facts, retrieve_records=records, retrieve_chars=chars)
    rules = s.rules
    ever_completed: set[str] = set()
    done: list[MemoryWrite] = []
    for n, (choice, item, earlier, sure) in enumerate(steps, 1):
        if choice == 0 and done:
            item = done[earlier % len(done)].model_copy(update={
                "status": "completed", "supersedes": None, "evidence": "it is done" if sure else "",
                "confidence": 0.9})
        done.append(item)
        before = {i: f.model_copy() for i, f in s.facts.items()}
        start = len(log)
        got = s.write(item, n, f"{n:064x}")
        step = log[start:]
        confirmed = bool(item.evidence.strip()) and item.confidence >= rules.confirm_threshold
        if got is None:  # a refusal changes nothing and says why
            assert [e.op for e in step] == ["reject"] and step[0].reason and s.facts == before
        else:
            assert got in s.facts and step[-1].fact_id == got and "reject" not in [e.op for e in step]
        assert len(s.facts) <= max_facts
        evicted = {e.fact_id: e.fact for e in step if e.op == "evict"}
        assert set(before) - set(s.facts) == set(evicted)  # nothing disappears without an evict op
        for fact in evicted.values():
            assert fact.status == "superseded" or (fact.status == "active" and not fact.confirmed)
        for i, old in before.items():
            now = s.facts.get(i)
            if not confirmed and old.confirmed and now is not None:  # a guess moves no confirmed fact
                assert now.status == old.status and now.confirmed
            if not confirmed and now is not None:
                assert now.confirmed == old.confirmed  # ... and confirms nothing
        # Completed facts stay, completed, for good.
        ever_completed |= {i for i, f in s.facts.items() if f.status == "completed"}
        assert all(s.facts[i].status == "completed" for i in ever_completed)
        # Every pair of active facts in contradiction is reported in one group; every group is one.
        groups = s.contradictions()
        active = [f for f in s.facts.values() if f.status == "active"]
        for a, b in itertools.combinations(active, 2):
            if _conflict(rules, a, b):
                assert any(a.fact_id in g and b.fact_id in g for g in groups), (a, b, groups)
        for g in groups:
            members = [s.facts[i] for i in g]
            assert len(g) >= 2 and all(any(_conflict(rules, m, o) for o in members) for m in members)
        # Retrieval: bounded, no superseded fact, never one side of a contradiction alone.
        views = s.retrieve()
        ids = [v["fact_id"] for v in views]
        assert len(views) <= records and sum(len(k) + len(str(v)) + 6 for x in views for k, v in x.items()) \
            + 2 * len(views) <= chars
        assert all(s.facts[i].status != "superseded" for i in ids)
        for g in groups:
            assert sum(i in ids for i in g) != 1
        for v in views:
            if v.get("contradicted"):
                assert v["conflicts_with"] and set(v["conflicts_with"]) <= set(ids)


def test_refusals_are_reported_for_the_last_decision_only():
    s, _ = store()
    s.note_observation(1, {"objective_guess": "x"})
    s.write(w("deliver the parcel", kind="objective", evidence="", status="completed"), 1, "a" * 64)
    s.write(w("PARCEL"), 1, "a" * 64)  # accepted: not reported
    (refusal,) = s.working().refused_writes
    assert refusal.startswith("'deliver the parcel': ") and "unconfirmed" in refusal
    s.note_observation(2, {"objective_guess": "x"})  # the next decision's writes start afresh
    assert s.working().refused_writes == ()
    r, _ = store(policy="recent-window")
    r.note_observation(1, {})
    r.write(w("PARCEL"), 1, "a" * 64)
    assert "keeps no episodic store" in r.working().refused_writes[0]
