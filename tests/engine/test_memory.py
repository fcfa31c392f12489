from engine.contract import MemoryWrite
from engine.memory import GUESS_CAP, MemoryStore


def store(policy="persistent", **kw):
    log = []
    return MemoryStore(policy, log=log.append, **kw), log


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
