"""sessions.evidence.mirror: a folder copied as it grows (appends, atomic replacements, new files, big
files in pieces) arrives byte for byte, and a copy that lost or changed anything is caught."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.evidence import mirror as mirror_mod
from sessions.evidence.mirror import FolderMirror, MirrorWriter

NAMES = ["trace.jsonl", "inputs.jsonl", "result.json", "frames/frames.pack"]

op = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(NAMES), st.binary(min_size=0, max_size=300)),
    st.tuples(st.just("replace"), st.sampled_from(NAMES), st.binary(min_size=0, max_size=300)),
    st.tuples(st.just("sync"), st.just(""), st.just(b"")),
)


def apply(src: Path, kind: str, name: str, data: bytes) -> None:
    path = src / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "append":
        with open(path, "ab") as fh:
            fh.write(data)
    else:  # as the recorder's atomic writes do: a new file renamed over the old
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, max_size=30), chunk=st.sampled_from([7, 64, 4 << 20]))
def test_the_copy_equals_the_folder_after_any_history(tmp_path_factory, ops, chunk):
    base = tmp_path_factory.mktemp("m")
    src, dst = base / "src", base / "dst"
    src.mkdir()
    old = mirror_mod.CHUNK
    mirror_mod.CHUNK = chunk  # small pieces exercise a file sent in many messages
    try:
        writer = MirrorWriter(dst)
        m = FolderMirror(src, writer.apply)
        for kind, name, data in ops:
            if kind == "sync":
                m.sync()
            else:
                apply(src, kind, name, data)
        m.sync()
    finally:
        mirror_mod.CHUNK = old
    assert writer.check(m.sums()) is None
    assert tree(dst) == tree(src)


def test_a_lost_or_changed_piece_is_caught(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    sent: list[tuple] = []
    m = FolderMirror(src, sent.append)
    apply(src, "append", "trace.jsonl", b"line 1\n")
    m.sync()
    apply(src, "append", "trace.jsonl", b"line 2\n")
    apply(src, "replace", "result.json", b"{}")
    m.sync()

    whole = MirrorWriter(dst / "a")
    for message in sent:
        whole.apply(message)
    assert whole.check(m.sums()) is None

    lost = MirrorWriter(dst / "b")  # the second append never arrived, the third one did
    for message in sent[:1] + sent[2:]:
        lost.apply(message)
    assert lost.check(m.sums()) is not None

    changed = MirrorWriter(dst / "c")
    for message in sent:
        changed.apply(message)
    (dst / "c" / "trace.jsonl").write_bytes(b"line 1\nline X\n")
    assert "SHA-256" in changed.check(m.sums())

    partial = MirrorWriter(dst / "d")  # the run ended before result.json arrived
    for message in sent:
        if message[1] != "result.json":
            partial.apply(message)
    assert "never arrived" in partial.check(m.sums())


def test_a_path_out_of_the_trial_folder_is_refused(tmp_path):
    writer = MirrorWriter(tmp_path / "trial")
    for rel in ("../escape", "/etc/passwd", "a/../../b", "", "a//b"):
        writer.problem = None
        writer.apply(("file", rel, 0, b"x", True))
        assert writer.problem is not None, rel
    assert not (tmp_path / "escape").exists()


def test_the_trace_is_measured_before_the_streams_it_commits(tmp_path):
    """A decision's lines are appended to inputs/responses before its trace line: a copy taken while
    the recorder writes must never hold a trace line whose input lines it lacks."""
    src = tmp_path / "src"
    src.mkdir()
    writer = MirrorWriter(tmp_path / "dst")
    order: list[str] = []

    def send(message):
        order.append(message[1])
        writer.apply(message)

    m = FolderMirror(src, send)
    apply(src, "append", "inputs.jsonl", b"i1\n")
    apply(src, "append", "trace.jsonl", b"t1\n")
    real_fstat = os.fstat
    grown = []

    def fstat_then_write(fd):
        st_ = real_fstat(fd)
        if not grown:  # the recorder writes decision 2 right after the first size is taken
            grown.append(1)
            apply(src, "append", "inputs.jsonl", b"i2\n")
            apply(src, "append", "trace.jsonl", b"t2\n")
        return st_

    os.fstat = fstat_then_write
    try:
        m.sync()
    finally:
        os.fstat = real_fstat
    got = tree(tmp_path / "dst")
    assert got["trace.jsonl"].count(b"\n") <= got["inputs.jsonl"].count(b"\n")


def test_the_trace_arrives_after_what_its_lines_name(tmp_path):
    """The driver's copy grows with the same promise as the worker's folder: when a trace line
    arrives, trial.json and the lines it names are there already (a Ray test read a trace with
    20 lines and found no trial.json beside it)."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    writer = MirrorWriter(dst)
    seen: list[tuple[bool, int, int]] = []

    def send(message):
        writer.apply(message)
        if message[1] == "trace.jsonl":
            got = tree(dst)
            lines = [got.get(name, b"").count(b"\n") for name in ("trace.jsonl", "inputs.jsonl")]
            seen.append(("trial.json" in got, *lines))

    m = FolderMirror(src, send)
    apply(src, "replace", "trial.json", b"{}")
    for n in range(1, 4):
        apply(src, "append", "inputs.jsonl", b"i%d\n" % n)
        apply(src, "append", "trace.jsonl", b"t%d\n" % n)
        m.sync()
    assert seen == [(True, n, n) for n in range(1, 4)]
