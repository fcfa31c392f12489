"""Annotation layers on a real two-condition run of the cartridge (the scripted walkthrough and a
random player): annotators' labels checked against the evidence, two annotators who disagree, an
adjudication that keeps both originals, freezing, verify's checks of each layer, malformed layer
files (never a traceback) and the `oakwatch annotate` commands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.cli import main
from engine.loop.records import Annotation
from engine.loop.trial import TagRefused
from sessions.analysis.metrics import confirmed_labels
from sessions.annotations.annotation_layer import (
    AnnotationLayer,
    LayerError,
    add_label,
    add_reviewed,
    add_route,
    adjudicate,
    check_layer,
    late_tagger,
    read_layers,
)
from sessions.annotations.blinding import unblind, unblind_problems
from sessions.audit.verify import verify_experiment
from sessions.evidence.checksums import file_sha256
from sessions.preflight.assets import DEFAULT_MANIFEST
from tests.conftest import read_jsonl, run_experiment, write_manifest


@pytest.fixture(scope="module")
def two_conditions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two")
    walk = yaml.safe_load(DEFAULT_MANIFEST.read_text())["conditions"][0]
    manifest = write_manifest(tmp, conditions=[walk, {"id": "rnd", "policy": "random", "seed": 3}],
                              budgets={"accepted_actions": 60, "model_decisions": None, "wall_time_minutes": None})
    folder, summary, results = run_experiment(manifest, tmp / "exp")
    assert verify_experiment(folder) == []
    return folder


@pytest.fixture
def run(two_conditions, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(two_conditions, dst)
    return dst


def walk_key(root: Path) -> str:
    labels = json.loads((root / "blinding.json").read_text())["labels"]
    return next(f"{label}-01" for label, cid in labels.items() if cid == "walkthrough")


def rnd_key(root: Path) -> str:
    labels = json.loads((root / "blinding.json").read_text())["labels"]
    return next(f"{label}-01" for label, cid in labels.items() if cid == "rnd")


def writes(root: Path, key: str) -> dict[str, int]:
    """fact id -> the decision that first wrote it."""
    out: dict[str, int] = {}
    for op in read_jsonl(root / "trials" / key / "memory.jsonl"):
        if op["op"] == "write":
            out.setdefault(op["fact_id"], op["decision_id"])
    return out


def first_fact(root: Path, key: str, after: int = 0) -> tuple[str, int]:
    return next((f, d) for f, d in writes(root, key).items() if d > after)


# -- the record ------------------------------------------------------------------------------------

def test_a_tag_written_before_the_new_fields_still_loads():
    old = {"trial_key": "A-01", "decision_id": 3, "frame_sha256": None, "frame_index": None,
           "opened_utc": "2026-11-30T10:00:00.000Z", "timestamp_utc": "2026-11-30T10:00:01.000Z",
           "annotator": "operator", "source": "operator", "type": "omission", "severity": "minor",
           "refers_to": "2", "note": "", "prev_sha256": None}
    a = Annotation.model_validate_json(json.dumps(old))
    assert (a.kind, a.role, a.id, a.primary_id, a.recovered_decision) == ("memory-error", "primary", None, None, None)
    with pytest.raises(ValueError):  # still strict: a misspelt field is a problem, not a default
        Annotation.model_validate({**old, "recoverd_decision": 4})


# -- labels checked against the evidence -----------------------------------------------------------

def test_a_label_names_existing_decisions_and_facts(run):
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    later = written + 5
    a = add_label(run, "alice", key, later, type="omission", severity="material", refers_to=fact,
                  recovered_decision=later + 3, note="forgot the house")
    assert a.id == "alice-1" and a.source == "annotator" and a.kind == "memory-error" and a.role == "primary"
    trace = read_jsonl(run / "trials" / key / "trace.jsonl")
    assert a.frame_sha256 == trace[later - 1]["frame_sha256"]  # the frame the agent saw at that decision
    assert a.frame_index == trace[later - 2]["result_frame_index"]
    b = add_label(run, "alice", key, later + 1, type="duplicate-objective", severity="minor", refers_to=str(later))
    assert b.id == "alice-2"
    rows = read_jsonl(run / "annotations" / "alice" / "annotations.jsonl")
    assert rows[0]["prev_sha256"] == file_sha256_of(b"")
    assert rows[1]["prev_sha256"] == file_sha256_of((run / "annotations/alice/annotations.jsonl").read_bytes()
                                                    .splitlines(keepends=True)[0])
    assert verify_experiment(run) == []


def file_sha256_of(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def refused(run: Path, **changes) -> str:
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    label = {"type": "omission", "severity": "minor", "refers_to": fact, "key": key, "decision": written + 2}
    label.update(changes)
    key, decision = label.pop("key"), label.pop("decision")
    before = sorted(p.name for p in (run / "annotations").glob("*")) if (run / "annotations").is_dir() else []
    with pytest.raises(LayerError) as exc:
        add_label(run, "alice", key, decision, **label)
    layer = run / "annotations" / "alice" / "annotations.jsonl"
    assert not layer.exists() or "alice" in before  # nothing written for a refused label
    return str(exc.value)


def test_labels_that_do_not_stand_are_refused_with_the_reason(run):
    key = walk_key(run)
    facts = writes(run, key)
    late_fact, late_at = max(facts.items(), key=lambda kv: kv[1])
    assert "refers_to is required" in refused(run, refers_to=None)
    assert "refers_to is required" in refused(run, refers_to="  ")
    assert "no memory operation" in refused(run, refers_to="fact-9999")
    assert "after decision" in refused(run, refers_to=late_fact, decision=late_at - 1)
    assert "not before decision" in refused(run, refers_to="7", decision=7)
    assert "not before decision" in refused(run, refers_to="0")
    assert "give a fact id" in refused(run, refers_to="the house")
    assert "not a recorded decision" in refused(run, decision=0)
    assert "not a recorded decision" in refused(run, decision=61)
    assert "not one of the rubric's" in refused(run, type="forgetfulness")
    assert "needs a note" in refused(run, type="other")
    assert "must lie after" in refused(run, recovered_decision=1)
    assert "must lie after" in refused(run, recovered_decision=61)
    assert "not in" in refused(run, key="Q-01")
    assert "not in" in refused(run, key="../trials")
    assert "names its primary cause" in refused(run, role="consequence", primary_id=None)
    assert "names no primary_id" in refused(run, primary_id="alice-1")
    with pytest.raises(LayerError, match="reserved"):
        add_label(run, "adjudication", key, 5, type="omission", severity="minor", refers_to="1")
    with pytest.raises(LayerError, match="annotator"):
        AnnotationLayer(run, "../evil")
    assert not (run / "annotations" / "alice").exists()


def test_a_consequence_names_a_primary_in_the_same_layer(run):
    key, other = walk_key(run), rnd_key(run)
    fact, written = first_fact(run, key, after=1)
    primary = add_label(run, "alice", key, written + 2, type="false-persistence", severity="material",
                        refers_to=fact)
    theirs = add_label(run, "bob", key, written + 2, type="omission", severity="minor", refers_to=fact)
    with pytest.raises(LayerError, match="not an annotation of layer alice"):
        add_label(run, "alice", key, written + 4, type="duplicate-objective", severity="minor",
                  refers_to=str(written + 2), role="consequence", primary_id=theirs.id)
    consequence = add_label(run, "alice", key, written + 4, type="duplicate-objective", severity="minor",
                            refers_to=str(written + 2), role="consequence", primary_id=primary.id)
    assert (consequence.role, consequence.primary_id) == ("consequence", "alice-1")
    with pytest.raises(LayerError, match="not a primary"):
        add_label(run, "alice", key, written + 5, type="omission", severity="minor", refers_to="1",
                  role="consequence", primary_id=consequence.id)
    add_label(run, "alice", other, 9, type="omission", severity="minor", refers_to="4")
    with pytest.raises(LayerError, match="labels trial"):
        add_label(run, "alice", other, 10, type="omission", severity="minor", refers_to="4", role="consequence",
                  primary_id=primary.id)
    assert verify_experiment(run) == []


def test_route_annotations_where_coordinates_are_missing(run):
    key = rnd_key(run)
    r = add_route(run, "alice", key, 12, room="bedroom", landmark="stairs")
    assert (r.kind, r.type, r.severity, r.room, r.landmark, r.refers_to) == \
        ("route", "route", "minor", "bedroom", "stairs", None)
    with pytest.raises(LayerError, match="needs a room"):
        add_route(run, "alice", key, 12, room=" ")
    with pytest.raises(LayerError, match="not a recorded decision"):
        add_route(run, "alice", key, 99, room="lab")
    assert verify_experiment(run) == []


# -- reviewed records ----------------------------------------------------------------------------

def last_decision(root: Path, key: str) -> int:
    return json.loads((root / "trials" / key / "result.json").read_text())["last_decision"]


def roots_lines(root: Path) -> list[dict]:
    return read_jsonl(root / "roots.jsonl") if (root / "roots.jsonl").exists() else []


def test_a_reviewed_record_covers_the_trial_and_goes_through_the_layer(run):
    walk, rnd = walk_key(run), rnd_key(run)
    last = last_decision(run, walk)
    r = add_reviewed(run, "alice", walk, note="no memory error found")
    assert (r.id, r.kind, r.trial_key, r.decision_id, r.through_decision, r.note) == (
        "alice-1", "reviewed", walk, 1, last, "no memory error found")
    assert (r.type, r.severity, r.source, r.refers_to, r.frame_sha256) == ("reviewed", "minor", "annotator", None, None)
    (row,) = read_jsonl(run / "annotations/alice/annotations.jsonl")
    assert row["prev_sha256"] == file_sha256_of(b"") and row["through_decision"] == last
    assert roots_lines(run)[-1]["cause"] == "annotations/alice: alice-1 (reviewed)"
    assert roots_lines(run)[-1]["layers"]["alice"]["lines"] == 1
    # a review in parts: disjoint ranges stand; a decision reviewed twice in one layer does not
    add_reviewed(run, "bob", rnd, 1, 10)
    add_reviewed(run, "bob", rnd, 11)
    with pytest.raises(LayerError, match=r"decisions 5\.\.10 of .* already reviewed in this layer \(bob-1"):
        add_reviewed(run, "bob", rnd, 5, 10)
    add_reviewed(run, "alice", rnd, 1, 10)  # another layer's review of the same decisions is its own
    assert verify_experiment(run) == []
    # the metrics: both trials were looked at whole, so their counts are known
    got = confirmed_labels(read_layers(run))
    assert got.is_annotated(walk, last) and got.is_annotated(rnd, last_decision(run, rnd))
    # a reviewed record is not a label: nothing to adjudicate
    with pytest.raises(LayerError, match="alice-1 is a reviewed record, not a label"):
        adjudicate(run, ["alice-1"], "reject", "nothing to settle")
    # freezing and unblinding take layers of reviews alone
    assert unblind_problems(run) == ["layers not frozen: alice, bob (`oakwatch annotate freeze DIR --annotator NAME`)"]
    for name in ("alice", "bob"):
        AnnotationLayer(run, name).freeze()
    with pytest.raises(LayerError, match="frozen"):
        add_reviewed(run, "alice", rnd, 11)
    unblind(run)
    assert verify_experiment(run) == []


def test_bad_reviewed_records_are_refused_in_one_line_and_nothing_is_written(run, capsys):
    walk = walk_key(run)
    last = last_decision(run, walk)
    assert main(["annotate", "reviewed", str(run), "--annotator", "alice", "--trial", walk, "--to", "10"]) == 0
    layer = run / "annotations/alice/annotations.jsonl"
    before = (layer.read_bytes(), (run / "annotations/alice/SHA256SUMS").read_bytes(),
              (run / "roots.jsonl").read_bytes())
    capsys.readouterr()
    base = ["annotate", "reviewed", str(run), "--annotator"]
    for args, words in (
            (["alice", "--trial", "Q-01"], "trial Q-01 is not in"),
            (["alice", "--trial", "../trials"], "is not in"),
            (["alice", "--trial", walk, "--to", str(last + 1)], f"decision {last + 1} is past the last decision"),
            (["alice", "--trial", walk, "--from", "0"], "starts at decision 1 or later"),
            (["alice", "--trial", walk, "--from", "12", "--to", "11"], "ends before it starts"),
            (["alice", "--trial", walk, "--from", "10", "--to", "12"], "decisions 10..10 of"),
            (["alice", "--trial", walk], "decisions 1..10 of"),
            (["operator", "--trial", walk], "reserved"),
            (["adjudication", "--trial", walk], "reserved")):
        assert main([*base, *args]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, (args, err)
    assert (layer.read_bytes(), (run / "annotations/alice/SHA256SUMS").read_bytes(),
            (run / "roots.jsonl").read_bytes()) == before
    assert sorted(p.name for p in (run / "annotations").iterdir()) == ["alice"]
    assert main([*base, "alice", "--trial", walk, "--from", "11", "--note", "the rest"]) == 0
    assert f"alice-2 added to annotations/alice ({walk} reviewed, decisions 11..{last} (the rest))" in \
        capsys.readouterr().out
    assert main(["annotate", "list", str(run), "--annotator", "alice"]) == 0
    assert f"alice-1  {walk} reviewed, decisions 1..10" in capsys.readouterr().out
    assert verify_experiment(run) == []


def test_verify_names_a_reviewed_record_that_does_not_stand(run):
    """Written past the checks (as a hand-edited layer would be, its chain and sums made good)."""
    walk, rnd = walk_key(run), rnd_key(run)
    last = last_decision(run, walk)
    layer = AnnotationLayer(run, "alice")

    def put(key, first, through, **extra):
        now = "2026-01-01T00:00:00.000Z"
        fields = {"trial_key": key, "decision_id": first, "through_decision": through, "frame_sha256": None,
                  "frame_index": None, "opened_utc": now, "timestamp_utc": now, "annotator": "alice",
                  "source": "annotator", "kind": "reviewed", "type": "reviewed", "severity": "minor",
                  "refers_to": None, "note": ""}
        layer.append(Annotation.model_validate({**fields, **extra}), check=False)

    put(walk, 1, 20)
    put(walk, 15, last)  # overlaps alice-1
    put(walk, 1, last + 5)  # past the trial
    put(rnd, 0, 3)
    put(rnd, 9, None)
    put("Q-01", 1, 2)
    put(rnd, 30, 40, refers_to="4")
    add_label(run, "bob", rnd, 9, type="omission", severity="minor", refers_to="4")
    AnnotationLayer(run, "bob").append(Annotation.model_validate({
        **read_jsonl(run / "annotations/bob/annotations.jsonl")[0], "id": None, "prev_sha256": None,
        "decision_id": 12, "through_decision": 14}), check=False)
    problems = check_layer(run, "alice") + check_layer(run, "bob")
    where = "annotations/alice/annotations.jsonl"
    assert problems == [
        f"{where}:2: decisions 15..20 of {walk} are already reviewed in this layer (alice-1: decisions 1..20)",
        f"{where}:3: decision {last + 5} is past the last decision of {walk} ({last})",
        f"{where}:4: a review starts at decision 1 or later, not 0",
        f"{where}:5: a reviewed record names the last decision reviewed (through_decision)",
        f"{where}:6: trial Q-01 is not in {run / 'trials'}",
        f"{where}:7: a reviewed record names a trial, its decisions and a note only",
        "annotations/bob/annotations.jsonl:2: through_decision belongs to reviewed records"], problems
    assert all(p in verify_experiment(run) for p in problems)


REVIEWED_FIELDS = st.sampled_from(["trial_key", "decision_id", "through_decision", "kind", "type", "severity",
                                   "source", "annotator", "refers_to", "note", "id", "prev_sha256"])


@settings(max_examples=60, deadline=20_000,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_malformed_reviewed_lines_never_raise(run, data):
    from sessions.analysis.metrics import kappa

    shutil.rmtree(run / "annotations", ignore_errors=True)
    walk = walk_key(run)
    add_reviewed(run, "alice", walk, 1, 30)
    good = (run / "annotations/alice/annotations.jsonl").read_bytes()
    shutil.rmtree(run / "annotations")
    row = json.loads(good)
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(REVIEWED_FIELDS)
        row[name] = data.draw(st.one_of(JSONISH, st.integers(-2**63, 2**63), st.sampled_from(
            [None, 0, -1, 10**12, "reviewed", "memory-error", "Q-01", rnd_key(run)])))
    if data.draw(st.booleans()):
        row.pop(data.draw(REVIEWED_FIELDS), None)
    body = json.dumps(row).encode() + b"\n"
    body = body * data.draw(st.integers(1, 2))  # a second, identical line: a duplicate (and a broken chain)
    folder = run / "annotations" / "alice"
    folder.mkdir(parents=True)
    (folder / "annotations.jsonl").write_bytes(body)
    (folder / "SHA256SUMS").write_text(f"{file_sha256(folder / 'annotations.jsonl')}  annotations.jsonl\n")
    try:
        layers = read_layers(run)
    except LayerError as exc:
        assert "\n" not in str(exc)
    else:
        got = confirmed_labels(layers)
        got.is_annotated(walk, 60)
        kappa({**layers, "bob": layers["alice"]}, {walk: 60, rnd_key(run): 60})
    problems = verify_experiment(run)
    assert all(isinstance(p, str) and "\n" not in p for p in problems)
    assert main(["annotate", "list", str(run)]) in (0, 1)


# -- two annotators, adjudication, freezing ------------------------------------------------------

def test_two_annotators_disagree_and_an_adjudication_keeps_both(run):
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    evidence_sums = (run / "SHA256SUMS").read_bytes()
    a = add_label(run, "alice", key, written + 3, type="omission", severity="material", refers_to=fact)
    b = add_label(run, "bob", key, written + 3, type="contradiction", severity="minor", refers_to=fact)
    originals = {n: (run / "annotations" / n / "annotations.jsonl").read_bytes() for n in ("alice", "bob")}
    with pytest.raises(LayerError, match="reason"):
        adjudicate(run, [a.id, b.id], "accept", "  ")
    with pytest.raises(LayerError, match="relabel gives"):
        adjudicate(run, [a.id, b.id], "relabel", "both half right")
    with pytest.raises(LayerError, match="carol-1 is not an annotation"):
        adjudicate(run, [a.id, "carol-1"], "accept", "x")
    other = add_label(run, "bob", rnd_key(run), 9, type="omission", severity="minor", refers_to="4")
    with pytest.raises(LayerError, match="different trials"):
        adjudicate(run, [a.id, other.id], "accept", "x")
    settled = adjudicate(run, [a.id, b.id], "relabel", "the fact was held and then contradicted",
                         type="contradiction", severity="material")
    assert (settled.id, settled.kind, settled.resolves, settled.resolution) == \
        ("adjudication-1", "adjudication", ["alice-1", "bob-1"], "relabel")
    assert (settled.type, settled.severity, settled.trial_key, settled.decision_id) == \
        ("contradiction", "material", key, written + 3)
    accepted = adjudicate(run, [other.id], "reject", "the random player holds no memory to err with")
    assert (accepted.type, accepted.severity) == ("omission", "minor")  # the label it settles, rejected
    # The originals are untouched; every layer reads back; the evidence's sums never changed.
    for n, data in originals.items():
        assert (run / "annotations" / n / "annotations.jsonl").read_bytes().startswith(data)
    layers = read_layers(run)
    assert [x.id for x in layers["alice"]] == ["alice-1"] and layers["alice"][0].type == "omission"
    assert [x.id for x in layers["bob"]] == ["bob-1", "bob-2"] and layers["bob"][0].type == "contradiction"
    assert [x.id for x in layers["adjudication"]] == ["adjudication-1", "adjudication-2"]
    assert (run / "SHA256SUMS").read_bytes() == evidence_sums
    with pytest.raises(LayerError, match="cannot write to layer"):
        AnnotationLayer(run, "alice").append(settled)
    assert verify_experiment(run) == []


def test_freeze_seals_a_layer_and_refuses_appends(run):
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    layer = AnnotationLayer(run, "alice")
    with pytest.raises(LayerError, match="no labels"):
        layer.freeze()
    add_label(run, "alice", key, written + 3, type="omission", severity="material", refers_to=fact)
    assert not layer.frozen
    record = layer.freeze()
    assert layer.frozen and record.kind == "freeze" and record.id == "alice-2"
    sums = (run / "annotations/alice/SHA256SUMS").read_text().splitlines()
    digest = file_sha256(layer.path)
    assert sums == [f"{digest}  annotations.jsonl", f"FROZEN {digest}"]
    before = layer.path.read_bytes()
    with pytest.raises(LayerError, match="frozen"):
        add_label(run, "alice", key, written + 4, type="omission", severity="minor", refers_to=fact)
    with pytest.raises(LayerError, match="already frozen"):
        layer.freeze()
    assert layer.path.read_bytes() == before
    assert verify_experiment(run) == []


def test_verify_catches_a_changed_layer_even_with_its_sums_regenerated(run):
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    add_label(run, "alice", key, written + 3, type="omission", severity="material", refers_to=fact)
    add_label(run, "alice", key, written + 4, type="omission", severity="minor", refers_to=fact)
    layer = AnnotationLayer(run, "alice")
    layer.freeze()
    lines = layer.path.read_bytes().splitlines(keepends=True)
    row = json.loads(lines[0])
    row["severity"] = "critical"
    layer.path.write_bytes(json.dumps(row).encode() + b"\n" + b"".join(lines[1:]))
    problems = verify_experiment(run)
    assert any("alice/annotations.jsonl: content differs" in p for p in problems), problems
    # Regenerate its sums (FROZEN too): the chain and the frozen hash still give it away.
    digest = file_sha256(layer.path)
    (run / "annotations/alice/SHA256SUMS").write_text(f"{digest}  annotations.jsonl\nFROZEN {digest}\n")
    problems = verify_experiment(run)
    assert any("annotations.jsonl:2: hash chain broken" in p for p in problems), problems
    # A label whose reference was rewritten to something that never existed is caught as such.
    shutil.rmtree(run / "annotations")
    add_label(run, "bob", key, written + 3, type="omission", severity="material", refers_to=fact)
    path = run / "annotations/bob/annotations.jsonl"
    path.write_text(path.read_text().replace(f'"refers_to":"{fact}"', '"refers_to":"fact-9999"'))
    digest = file_sha256(path)
    (run / "annotations/bob/SHA256SUMS").write_text(f"{digest}  annotations.jsonl\n")
    assert any("bob/annotations.jsonl:1: refers to fact-9999" in p for p in verify_experiment(run))


def test_late_operator_tags_are_the_operators_layer(run):
    key = walk_key(run)
    tag = late_tagger(run)
    fact, written = first_fact(run, key, after=1)
    record = tag({"trial_key": key, "decision_id": written + 1, "type": "contradiction", "severity": "minor",
                  "refers_to": fact, "note": "", "kind": "memory-error", "source": "operator", "role": "primary"},
                 True)
    assert (record.id, record.source, record.kind, record.role) == ("operator-1", "operator", "memory-error", "primary")
    assert [a.id for a in read_layers(run)["operator"]] == ["operator-1"]
    assert verify_experiment(run) == []


# -- malformed layer files: one line, never a traceback -------------------------------------------

def _valid_line(run: Path) -> bytes:
    shutil.rmtree(run / "annotations", ignore_errors=True)
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    add_label(run, "alice", key, written + 3, type="omission", severity="material", refers_to=fact)
    data = (run / "annotations/alice/annotations.jsonl").read_bytes()
    shutil.rmtree(run / "annotations")
    return data


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                       lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids,
                                                                                max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=20_000,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_malformed_layer_files_never_raise_a_traceback(run, data):
    good = _valid_line(run)
    row = json.loads(good)
    choice = data.draw(st.sampled_from(["bytes", "field", "drop", "extra", "sums", "torn"]))
    if choice == "bytes":
        body = data.draw(st.binary(max_size=200))
    elif choice == "field":
        name = data.draw(st.sampled_from(sorted(row)))
        row[name] = data.draw(JSONISH)
        body = json.dumps(row).encode() + b"\n"
    elif choice == "drop":
        row.pop(data.draw(st.sampled_from(sorted(row))))
        body = json.dumps(row).encode() + b"\n"
    elif choice == "extra":
        row[data.draw(st.text(min_size=1, max_size=8))] = data.draw(JSONISH)
        body = json.dumps(row).encode() + b"\n"
    elif choice == "torn":
        body = good[: data.draw(st.integers(0, len(good) - 1))]
    else:
        body = good
    folder = run / "annotations" / "alice"
    shutil.rmtree(run / "annotations", ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "annotations.jsonl").write_bytes(body)
    sums = data.draw(st.one_of(st.just(f"{file_sha256(folder / 'annotations.jsonl')}  annotations.jsonl\n"),
                               st.text(max_size=120)))
    (folder / "SHA256SUMS").write_text(sums)
    try:
        AnnotationLayer(run, "alice").records()
    except LayerError as exc:
        assert "\n" not in str(exc)
    problems = verify_experiment(run)
    assert all(isinstance(p, str) for p in problems)
    assert main(["annotate", "list", str(run)]) in (0, 1)


# -- the commands --------------------------------------------------------------------------------

def test_annotate_commands_exit_status_and_one_line_errors(run, capsys):
    key = walk_key(run)
    fact, written = first_fact(run, key, after=1)
    d = str(written + 3)
    base = ["annotate", "add", str(run), "--trial", key, "--decision", d, "--refers-to", fact]
    assert main([*base, "--annotator", "alice", "--type", "omission", "--severity", "material",
                 "--recovered", str(written + 6), "--note", "forgot"]) == 0
    assert "alice-1 added to annotations/alice" in capsys.readouterr().out
    assert main([*base, "--annotator", "bob", "--type", "contradiction", "--severity", "minor"]) == 0
    assert main([*base, "--annotator", "alice", "--type", "omission", "--severity", "minor", "--role",
                 "consequence"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--primary" in err
    assert main([*base, "--annotator", "alice", "--type", "duplicate-objective", "--severity", "minor",
                 "--role", "consequence", "--primary", "alice-1"]) == 0
    assert main([*base[:-2], "--refers-to", "fact-9999", "--annotator", "alice", "--type", "omission",
                 "--severity", "minor"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fact-9999" in err
    assert main(["annotate", "route", str(run), "--annotator", "bob", "--trial", rnd_key(run), "--decision", "4",
                 "--room", "lab", "--landmark", "desk"]) == 0
    assert main(["annotate", "adjudicate", str(run), "--resolves", "alice-1", "bob-1", "--resolution", "relabel",
                 "--type", "contradiction", "--severity", "material", "--reason", "held, then contradicted"]) == 0
    assert main(["annotate", "adjudicate", str(run), "--resolves", "alice-1", "--resolution", "accept",
                 "--reason", ""]) == 2
    capsys.readouterr()
    assert main(["annotate", "list", str(run)]) == 0
    out = capsys.readouterr().out
    for rid in ("alice-1", "alice-2", "bob-1", "bob-2", "adjudication-1"):
        assert rid in out
    assert main(["annotate", "list", str(run), "--annotator", "bob"]) == 0
    out = capsys.readouterr().out
    assert "bob-2  " in out and "alice-1  " not in out
    assert main(["annotate", "freeze", str(run), "--annotator", "alice"]) == 0
    assert main(["annotate", "freeze", str(run), "--annotator", "alice"]) == 2
    assert main(["annotate", "freeze", str(run), "--annotator", "nobody"]) == 2
    assert main([*base, "--annotator", "alice", "--type", "omission", "--severity", "minor"]) == 2
    assert "frozen" in capsys.readouterr().err
    assert main(["annotate", "list", str(run / "missing")]) == 2
    (run / "annotations/bob/annotations.jsonl").write_bytes(b"{not json\n")
    assert main(["annotate", "list", str(run)]) == 1
    with pytest.raises(SystemExit) as exc:  # argparse's own bad-argument exit
        main(["annotate", "add", str(run), "--annotator", "alice", "--trial", key, "--decision", "x",
              "--type", "omission", "--severity", "minor", "--refers-to", "1"])
    assert exc.value.code == 2


# -- a label after unblind (issue 34 item 3): the condition ids are known by then, so a label made now is
# not a blind one. Refused in one line, exit 2, nothing written: verify passes, the report counts only blind labels.

def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_label_after_unblind_is_refused_in_one_line_and_nothing_is_written(run, capsys):
    walk, rnd = walk_key(run), rnd_key(run)
    add_reviewed(run, "alice", walk)
    add_reviewed(run, "alice", rnd)
    AnnotationLayer(run, "alice").freeze()
    unblind(run)
    assert verify_experiment(run) == []
    assert main(["report", str(run)]) in (0, 1)
    before = snapshot(run)
    fact, decision = first_fact(run, walk)
    capsys.readouterr()
    code = main(["annotate", "add", str(run), "--annotator", "bob", "--trial", walk, "--decision",
                 str(last_decision(run, walk)), "--type", "omission", "--severity", "minor", "--refers-to", fact])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unblinded" in err, err
    assert snapshot(run) == before  # nothing written: no layer, no root line
    assert verify_experiment(run) == []
    # every other way in is refused alike: the API, a review, an adjudication, a live tag, a freeze
    with pytest.raises(LayerError, match="unblinded"):
        add_label(run, "bob", walk, last_decision(run, walk), type="omission", severity="minor", refers_to=fact)
    with pytest.raises(LayerError, match="unblinded"):
        add_reviewed(run, "carol", walk)
    with pytest.raises(LayerError, match="unblinded"):
        adjudicate(run, ["alice-1"], "reject", "late")
    assert main(["annotate", "route", str(run), "--annotator", "bob", "--trial", walk, "--decision", "1",
                 "--room", "house"]) == 2
    capsys.readouterr()
    assert main(["review", str(run), "--annotator", "bob"]) == 2  # before any console opens
    assert "unblinded" in capsys.readouterr().err
    assert snapshot(run) == before and verify_experiment(run) == []
    with pytest.raises(TagRefused, match="unblinded"):  # a live tag from an attached console
        late_tagger(run)({"trial_key": walk, "decision_id": decision, "type": "note", "severity": "minor",
                          "note": "late"}, True)
    assert snapshot(run) == before and verify_experiment(run) == []
