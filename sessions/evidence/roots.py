"""The folder's root: one SHA-256 over the evidence and every layer beside it.

A folder is made of parts, each a folder with its own SHA256SUMS; a part's root is the SHA-256
of that file:

    SHA256SUMS                      the evidence (header files, trials, voids, run log, summary)
    annotations/<name>/SHA256SUMS   each annotation layer, operator and adjudication included; a
                                    frozen layer takes no more lines, so freezing fixes its root
    unblinded/SHA256SUMS            written once, by `oakwatch unblind`

The listing is what `sha256sum` prints for those files in byte order of their paths, and the
folder's root is the SHA-256 of the listing (HAND_CHECK recomputes it with coreutils). Adding,
editing, dropping or deleting anything in a part changes that part's SHA256SUMS (or leaves a file
its sums do not match, which verify reports), and so the root.

reports/ is not a part: a report is computed from the parts, and `oakwatch report` rewrites it
(a new seed, a ROM now present for replay, a newer oakwatch rightly give other bytes). Covering it
would make every regenerated report look like a changed experiment; instead each report cites the
root and every layer's root it was computed from (`cited`), so a reader checks the report against
the folder.

roots.jsonl records every root the folder has had, appended by whatever writes a part (a run's
end, every label and freeze, unblind), with its parts and each layer's state (whole lines, their
SHA-256, frozen). It is a record, not a seal: rewriting it is as easy as rewriting sums. Since
layers only ever grow, verify checks every recorded state (roots.jsonl's latest per layer, and
those unblinded/summary.json and reports/report.json record) is still the start of its layer, and
the whole layer once frozen, so a layer changed behind oakwatch's back is caught without a
published root; `--expect-root` uses the records to name the part that changed since the
published root was printed.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from engine.loop.records import Record, Sha256
from engine.loop.trial import utc_now
from sessions.evidence import layout
from sessions.evidence.checksums import file_sha256, render_sums
from sessions.evidence.durable import AppendLog, error_from
from sessions.evidence.reader import FormatProblem, iter_lines, short_error

LAYER_FILE = "annotations.jsonl"  # sessions.annotations.annotation_layer.LAYER_FILE
FROZEN_PREFIX = "FROZEN "
REPORT_JSON = f"{layout.REPORTS}/report.json"
UNBLINDED_SUMMARY = f"{layout.UNBLINDED}/{layout.SUMMARY}"
# Recomputes the root inside the folder with coreutils (GNU find, sort, xargs, sha256sum).
HAND_CHECK = ("find SHA256SUMS annotations unblinded -name SHA256SUMS -type f 2>/dev/null | LC_ALL=C sort "
              "| xargs sha256sum | sha256sum")
MAX_BYTES = 64 << 20  # a record file larger than this is not one of ours
MAX_SUBSET_PARTS = 12  # a published root is looked for among subsets of the parts up to this many
HEX64 = re.compile(r"[0-9a-f]{64}")
PART = re.compile(rf"{re.escape(layout.SUMS)}|{layout.ANNOTATIONS}/{layout.LAYER_NAME.pattern}/{layout.SUMS}|"
                  rf"{layout.UNBLINDED}/{layout.SUMS}")  # a part oakwatch writes (a record naming others is not ours)


class LayerState(Record):
    """An annotation layer at one moment: its whole lines so far, their SHA-256, whether frozen."""

    lines: int
    sha256: Sha256
    frozen: bool


class RootEntry(Record):
    """One line of roots.jsonl: the folder's root at a moment and what it was made of."""

    root: Sha256
    parts: dict[str, Sha256]  # each part's SHA256SUMS path -> the SHA-256 of that file
    layers: dict[str, LayerState]
    cause: str
    timestamp_utc: str


# -- the parts and the root ---------------------------------------------------------------------

def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def part_paths(folder: Path) -> list[str]:
    """Every part's SHA256SUMS, as HAND_CHECK's find lists them (no symlink followed), in byte order."""
    found = [layout.SUMS] if _regular(folder / layout.SUMS) else []
    for top in (layout.ANNOTATIONS, layout.UNBLINDED):
        base = folder / top
        if base.is_symlink() or not base.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(base):
            if layout.SUMS in files and _regular(Path(dirpath) / layout.SUMS):
                found.append((Path(dirpath) / layout.SUMS).relative_to(folder).as_posix())
    return sorted(found, key=os.fsencode)


def parts(folder: Path) -> dict[str, str]:
    """Each part's SHA256SUMS path -> its SHA-256 (an unreadable one is left out; verify names it)."""
    out = {}
    for rel in part_paths(folder):
        try:
            out[rel] = file_sha256(folder / rel)
        except OSError:
            continue
    return out


def root_of(listed: dict[str, str]) -> str:
    """The SHA-256 of the listing `sha256sum` prints for these parts."""
    return hashlib.sha256(render_sums(listed).encode("utf-8", "surrogateescape")).hexdigest()


def folder_root(folder: Path) -> str | None:
    """The folder's root now, or None when it has no part yet."""
    now = parts(folder)
    return root_of(now) if now else None


def part_name(rel: str) -> str:
    """SHA256SUMS for the evidence, else the part's folder (annotations/alice, unblinded), printable."""
    name = rel if rel == layout.SUMS else rel.rsplit("/", 1)[0]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)  # a problem stays on one line


def _whole_lines(path: Path, limit: int | None = None) -> tuple[int, str]:
    """(whole lines read, the SHA-256 of those lines): all of them, or the first `limit`."""
    h = hashlib.sha256()
    n = 0
    with path.open("rb") as f:
        for line in f:
            if (limit is not None and n == limit) or not line.endswith(b"\n"):
                break
            h.update(line)
            n += 1
    return n, h.hexdigest()


def _frozen(sums: Path) -> bool:
    try:
        if not _regular(sums) or sums.stat().st_size > MAX_BYTES:
            return False
        return any(line.startswith(FROZEN_PREFIX) for line in sums.read_text("utf-8", "replace").splitlines())
    except OSError:
        return False


def layer_states(folder: Path) -> dict[str, LayerState]:
    """Every annotation layer's state now, by name."""
    base = folder / layout.ANNOTATIONS
    try:
        names = sorted(p.name for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return {}
    out = {}
    for name in names:
        path = base / name / LAYER_FILE
        if not layout.LAYER_NAME.fullmatch(name) or not _regular(path) or path.stat().st_size > MAX_BYTES:
            continue
        try:
            lines, digest = _whole_lines(path)
        except OSError:
            continue
        out[name] = LayerState(lines=lines, sha256=digest, frozen=_frozen(base / name / layout.SUMS))
    return out


def cited(folder: Path) -> dict:
    """What a report or unblinded/summary.json records of the folder it was computed from: the root,
    every part's root, and each layer's state with its own root (fixed once the layer is frozen)."""
    now = parts(folder)
    layers = {name: {**s.model_dump(), "root": now.get(f"{layout.ANNOTATIONS}/{name}/{layout.SUMS}")}
              for name, s in layer_states(folder).items()}
    return {"root": root_of(now) if now else None, "parts": now, "layers": layers}


def cited_lines(r: dict | None) -> list[str]:
    """A report's "Computed from": the folder root, the other parts' roots, each layer's root and state."""
    r = r or {}
    lines = [f"the folder whose root is {r.get('root')} (the evidence, every annotation layer and unblinded/; "
             f"not reports/; recompute it inside the folder: {HAND_CHECK})"]
    for rel, digest in (r.get("parts") or {}).items():
        if not rel.startswith(layout.ANNOTATIONS + "/"):  # layers below, with their state
            lines.append(f"{rel}: {digest} (sha256sum {rel})")
    for name, s in (r.get("layers") or {}).items():
        state = "frozen, so its root is fixed" if s.get("frozen") else "not frozen: later labels change its root"
        lines.append(f"layer {name}: {s.get('lines')} line(s), root {s.get('root')} "
                     f"(sha256sum {layout.ANNOTATIONS}/{name}/{layout.SUMS}), {state}")
    return lines


# -- roots.jsonl ------------------------------------------------------------------------------------

def record(folder: Path, cause: str) -> str | None:
    """Append the folder's root now to roots.jsonl unless it is already the last line there, and
    return it (None: no part yet). Raises EvidenceError when it cannot be written."""
    path = folder / layout.ROOTS_LOG
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise error_from(exc, layout.ROOTS_LOG) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # writers of different parts take turns: the last line sees them all
        now = parts(folder)
        if not now:
            return None
        entry = RootEntry(root=root_of(now), parts=now, layers=layer_states(folder), cause=cause,
                          timestamp_utc=utc_now())
        if _cut_to_last_line(fd, entry):
            # One write on an append-only descriptor; a failed one is cut back (sessions.evidence.durable).
            log = AppendLog(path, what=layout.ROOTS_LOG, exclusive=False)
            try:
                log.append((entry.model_dump_json() + "\n").encode())
                log.sync()
            finally:
                log.close()
        return entry.root
    except OSError as exc:
        raise error_from(exc, layout.ROOTS_LOG) from None
    finally:
        os.close(fd)  # releases the lock


def _cut_to_last_line(fd: int, entry: RootEntry) -> bool:
    """Cut a line torn by a kill; False when the last whole line already records this root."""
    size = os.fstat(fd).st_size
    start = max(0, size - (1 << 20))
    tail = os.pread(fd, size - start, start)
    end = start + tail.rfind(b"\n") + 1 if b"\n" in tail else (0 if start == 0 else size)
    if end < size:
        os.ftruncate(fd, end)
    last = tail[: end - start].rstrip(b"\n").rsplit(b"\n", 1)[-1]
    try:
        previous = RootEntry.model_validate_json(last)
    except (ValidationError, ValueError):
        return True
    return (previous.root, previous.layers) != (entry.root, entry.layers)


def history(folder: Path) -> tuple[list[tuple[int, RootEntry]], list[str]]:
    """roots.jsonl's entries as (line number, entry), and one problem per line that is not one."""
    path = folder / layout.ROOTS_LOG
    if not os.path.lexists(path):
        return [], []
    if not _regular(path):
        return [], [f"{layout.ROOTS_LOG}: not a regular file"]
    if path.stat().st_size > MAX_BYTES:
        return [], [f"{layout.ROOTS_LOG}: larger than {MAX_BYTES >> 20} MiB"]
    entries, problems = [], []
    try:
        for n, line in iter_lines(path, layout.ROOTS_LOG):
            where = f"{layout.ROOTS_LOG}:{n}"
            try:
                e = RootEntry.model_validate_json(line)
            except ValidationError as exc:
                problems.append(f"{where}: {short_error(exc)}")
                continue
            if e.root != root_of(e.parts):
                problems.append(f"{where}: its root is not the SHA-256 of its parts' listing (the line was edited)")
            elif any(not layout.LAYER_NAME.fullmatch(name) for name in e.layers) or \
                    any(not PART.fullmatch(rel) for rel in e.parts):
                problems.append(f"{where}: names a part or layer that cannot be one")
            else:
                entries.append((n, e))
    except FormatProblem as exc:
        problems.append(str(exc))
    except OSError as exc:
        problems.append(f"{layout.ROOTS_LOG}: cannot read ({exc.strerror or exc})")
    return entries, problems


# -- what verify checks without a published root ----------------------------------------------------

@dataclass
class Recorded:
    """A layer's state as some record outside the layer saw it."""

    lines: int | None  # None: the whole layer (unblinded/summary.json's frozen_layers)
    sha256: str
    frozen: bool
    source: str


def _read_json(folder: Path, rel: str) -> tuple[dict | None, str | None]:
    path = folder / rel
    if not _regular(path):
        return None, None
    try:
        if path.stat().st_size > MAX_BYTES:
            return None, f"{rel}: larger than {MAX_BYTES >> 20} MiB"
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None, f"{rel}: not JSON"
    return (data, None) if isinstance(data, dict) else (None, f"{rel}: not a JSON object")


def _cited_states(doc: dict | None, source: str) -> dict[str, Recorded]:
    """The layer states a report or unblinded summary cites (`cited`), or its frozen_layers."""
    out: dict[str, Recorded] = {}
    if doc is None:
        return out
    layers = (doc.get("roots") or {}).get("layers") if isinstance(doc.get("roots"), dict) else None
    if isinstance(layers, dict):
        for name, value in layers.items():
            try:
                s = LayerState.model_validate({k: value.get(k) for k in ("lines", "sha256", "frozen")})
            except (ValidationError, AttributeError):
                continue
            if layout.LAYER_NAME.fullmatch(str(name)):
                out[name] = Recorded(s.lines, s.sha256, s.frozen, source)
        return out
    frozen = doc.get("frozen_layers")  # an unblinded summary written before roots were cited
    for name, digest in (frozen.items() if isinstance(frozen, dict) else ()):
        if isinstance(digest, str) and HEX64.fullmatch(digest) and layout.LAYER_NAME.fullmatch(str(name)):
            out[name] = Recorded(None, digest, True, f"{source} (frozen_layers)")
    return out


def _cited_parts(doc: dict | None) -> dict[str, str]:
    roots = doc.get("roots") if doc is not None else None
    listed = roots.get("parts") if isinstance(roots, dict) else None
    if not isinstance(listed, dict):
        return {}
    return {k: v for k, v in listed.items() if isinstance(k, str) and PART.fullmatch(k)
            and isinstance(v, str) and HEX64.fullmatch(v)}


def _check_layer(folder: Path, name: str, seen: list[Recorded]) -> str | None:
    where = f"{layout.ANNOTATIONS}/{name}"
    path = folder / where / LAYER_FILE
    sources = ", ".join(r.source for r in seen)
    if not _regular(path):
        return f"{where}: the layer is gone, yet {sources} recorded it"
    try:
        frozen = _not_as_frozen(path, seen)
        if frozen:
            return (f"{where}/{LAYER_FILE}: not the layer that was frozen ({', '.join(r.source for r in frozen)} "
                    f"recorded it frozen with SHA-256 {frozen[0].sha256[:12]}…)")
        grown = [r for r in seen if not r.frozen and r.lines is not None
                 and _whole_lines(path, r.lines) != (r.lines, r.sha256)]
    except OSError as exc:
        return f"{where}/{LAYER_FILE}: cannot read ({exc.strerror or exc})"
    if grown:
        return (f"{where}/{LAYER_FILE}: its first {min(r.lines for r in grown)} line(s) are not the ones "
                f"{', '.join(r.source for r in grown)} recorded (a label was edited or dropped)")
    return None


def _not_as_frozen(path: Path, seen: list[Recorded]) -> list[Recorded]:
    """The records that froze the layer in a state it is no longer in (whole lines, or the whole file)."""
    whole = _whole_lines(path)
    whole_file = file_sha256(path)
    return [r for r in seen if r.frozen and (whole_file != r.sha256 if r.lines is None
                                             else whole != (r.lines, r.sha256))]


def check(folder: Path) -> list[str]:
    """verify's checks of the layers against what was recorded outside them; one line per problem."""
    entries, problems = history(folder)
    seen: dict[str, list[Recorded]] = {}
    latest, unblinded_at = _logged(entries)
    for name, r in latest.items():
        seen.setdefault(name, []).append(r)
    summary, problem = _read_json(folder, UNBLINDED_SUMMARY)
    report, report_problem = _read_json(folder, REPORT_JSON)
    problems += [p for p in (problem, report_problem) if p]
    for doc, source in ((summary, UNBLINDED_SUMMARY), (report, REPORT_JSON)):
        for name, r in _cited_states(doc, source).items():
            seen.setdefault(name, []).append(r)
    for name in sorted(seen):
        line = _check_layer(folder, name, seen[name])
        if line:
            problems.append(line)
    now = parts(folder)
    problems += _unblinded_problems(folder, report, unblinded_at, now)
    if summary is not None:
        problems += _check_since_unblinding(folder, summary, now)
    return problems


def _logged(entries) -> tuple[dict[str, Recorded], dict[str, str]]:
    """From the roots log: each layer's latest recorded state, and the latest line's record of
    unblinded/'s sums (where, digest)."""
    latest: dict[str, Recorded] = {}
    unblinded_at: dict[str, str] = {}
    for n, e in entries:
        for name, s in e.layers.items():
            latest[name] = Recorded(s.lines, s.sha256, s.frozen, f"{layout.ROOTS_LOG}:{n}")
        unblinded = e.parts.get(f"{layout.UNBLINDED}/{layout.SUMS}")
        if unblinded:  # the latest line that lists it
            unblinded_at = {f"{layout.ROOTS_LOG}:{n}": unblinded}
    return latest, unblinded_at


def _unblinded_problems(folder: Path, report: dict | None, unblinded_at: dict[str, str],
                        now: dict[str, str]) -> list[str]:
    """unblinded/ is written once: every record of its sums (the log's, the report's) must be the file there."""
    key = f"{layout.UNBLINDED}/{layout.SUMS}"
    if report is not None and key in _cited_parts(report):
        unblinded_at[REPORT_JSON] = _cited_parts(report)[key]
    if unblinded_at and not (folder / layout.UNBLINDED).exists():
        return [f"{layout.UNBLINDED}: gone, yet {', '.join(unblinded_at)} recorded it"]
    wrong = [src for src, digest in unblinded_at.items() if now.get(key) != digest]
    if wrong:
        return [f"{key}: not the one `oakwatch unblind` wrote ({', '.join(wrong)} recorded "
                f"{unblinded_at[wrong[0]][:12]}…)"]
    return []


def _check_since_unblinding(folder: Path, summary: dict, now: dict[str, str]) -> list[str]:
    """The evidence and the set of layers as they were when the folder was unblinded."""
    out = []
    evidence = _cited_parts(summary).get(layout.SUMS)
    if evidence and now.get(layout.SUMS) != evidence:
        out.append(f"{layout.SUMS}: the evidence changed after the folder was unblinded ({UNBLINDED_SUMMARY} "
                   f"records its root {evidence[:12]}…)")
    roots = summary.get("roots")
    known = (roots.get("layers") if isinstance(roots, dict) else None) or summary.get("frozen_layers")
    if isinstance(known, dict):
        for name in sorted(set(layer_states(folder)) - set(known)):
            out.append(f"{layout.ANNOTATIONS}/{name}: a layer added after the folder was unblinded "
                       f"({UNBLINDED_SUMMARY} lists {', '.join(sorted(map(str, known))) or 'none'})")
    return out


# -- what --expect-root says ------------------------------------------------------------------------

Found = tuple[dict[str, str], str, bool]


def _published(folder: Path, expected: str, now: dict[str, str]) -> Found | None:
    """The parts the published root was made of, where they are recorded, and whether it is the
    evidence's own root (the SHA-256 of SHA256SUMS, printed by oakwatch before roots covered layers)."""
    entries, _ = history(folder)
    for n, e in reversed(entries):
        if e.root == expected:
            return e.parts, f"the root {layout.ROOTS_LOG}:{n} recorded at {e.timestamp_utc}, after {e.cause}", False
    found = _cited_root(folder, expected, now)
    if found is not None:
        return found
    if now.get(layout.SUMS) == expected or any(e.parts.get(layout.SUMS) == expected for _, e in entries):
        return ({layout.SUMS: expected}, "the evidence's own root (the SHA-256 of SHA256SUMS alone, as oakwatch "
                                         "printed it before roots covered the layers)", True)
    return _earlier_root(expected, now)


def _cited_root(folder: Path, expected: str, now: dict[str, str]) -> Found | None:
    """What unblind or a report was computed from, with any part written after it as it is now (the
    root printed after unblinding covers unblinded/ too)."""
    for rel in (UNBLINDED_SUMMARY, REPORT_JSON):
        listed = _cited_parts(_read_json(folder, rel)[0])
        later = sorted(set(now) - set(listed))
        for size in range(len(later) + 1) if listed and len(later) <= MAX_SUBSET_PARTS else ():
            for extra in itertools.combinations(later, size):
                candidate = {**listed, **{p: now[p] for p in extra}}
                if root_of(candidate) == expected:
                    also = f", with {', '.join(part_name(p) for p in extra)} as it is now" if extra else ""
                    return candidate, f"the root of what {rel} was computed from{also}", False
    return None


def _earlier_root(expected: str, now: dict[str, str]) -> Found | None:
    """The root of the folder as it was before some of its parts were written (largest subsets first)."""
    names = sorted(now)
    if len(names) > MAX_SUBSET_PARTS:
        return None
    for size in range(len(names) - 1, 0, -1):
        for subset in itertools.combinations(names, size):
            listed = {p: now[p] for p in subset}
            if root_of(listed) == expected:
                later = ", ".join(part_name(p) for p in names if p not in listed)
                return listed, f"the root of this folder without {later} (printed before they were written)", False
    return None


def compare(folder: Path, expected: str) -> list[str]:
    """`verify --expect-root`: nothing when the folder's root is `expected` (a SHA-256 in lowercase hex),
    else one line for the root and one per part removed, changed or added since it was printed."""
    now = parts(folder)
    current = root_of(now) if now else None
    if current == expected:
        return []
    found = _published(folder, expected, now)
    if found is None:
        covers = ", ".join(part_name(p) for p in now) or "no part"
        return [f"root: the folder's root is {current}, not the published {expected}, and no record of that root "
                f"is left in the folder ({layout.ROOTS_LOG} has none): which part changed cannot be told "
                f"(the root now covers {covers})"]
    listed, source, legacy = found
    if legacy and set(now) == {layout.SUMS}:
        return []  # an evidence-only folder, checked against the root an older oakwatch printed for it
    unchanged = [part_name(p) for p in sorted(listed) if now.get(p) == listed[p]]
    lines = [f"root: the folder's root is {current}, not the published {expected}, which is {source}; "
             f"unchanged since: {', '.join(unchanged) or 'no part'}"]
    for rel in sorted(set(listed) | set(now)):
        name = part_name(rel)
        if rel not in now:
            lines.append(f"{name}: removed since the published root, which covers it (its {layout.SUMS} was "
                         f"{listed[rel][:12]}…)")
        elif rel not in listed:
            lines.append(f"{name}: added since the published root (it does not cover it)")
        elif now[rel] != listed[rel]:
            lines.append(f"{name}: changed since the published root (its {layout.SUMS} was {listed[rel][:12]}…, "
                         f"is {now[rel][:12]}…)")
    return lines
