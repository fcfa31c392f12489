"""`oakwatch frames`: a trial's decision-boundary frames as PNG files, for any decision range.

The store keeps each distinct frame once; the trace names which frame each decision ended on.
Each exported file is `<decision>.png` (000000.png is the start frame), byte for byte the PNG
in the store.
"""

from __future__ import annotations

import os
from pathlib import Path

from sessions.evidence import layout
from sessions.evidence.framestore import iter_pngs, scan_store
from sessions.evidence.reader import FormatProblem, TrialReader


class ExportError(ValueError):
    pass


def _range(spec: str | None) -> tuple[int, int | None]:
    if spec is None:
        return 0, None
    first, sep, last = spec.partition(":")
    try:
        a = int(first) if first else 0
        b = int(last) if last else None
    except ValueError:
        raise ExportError(f"--decisions {spec!r}: give A:B with whole numbers, e.g. 10:20") from None
    if not sep:
        b = a
    if a < 0 or (b is not None and b < a):
        raise ExportError(f"--decisions {spec!r}: the range is empty or negative")
    return a, b


def export_frames(trial: Path, decisions: str | None, output: Path) -> int:
    first, last = _range(decisions)
    store = trial / layout.FRAMES
    if not (trial / layout.TRACE).is_file() or not store.is_file():
        raise ExportError(f"{trial}: not a trial folder with a frame store (<exp>/trials/<label>-<NN>)")
    if output.exists():
        raise ExportError(f"output folder already exists: {output}")
    wanted = _wanted(trial, first, last)
    frames, _good, problem = scan_store(store)
    by_sha = {f.sha256: f for f in frames}
    missing = sorted(d for d, sha in wanted.items() if sha not in by_sha)
    if missing:
        raise ExportError(f"{store}: frames for decisions {missing[:5]} are not stored"
                          + (f" ({problem})" if problem else ""))
    output.mkdir(parents=True)
    needed = {sha: by_sha[sha] for sha in set(wanted.values())}
    pngs = {f.sha256: png for f, png in iter_pngs(store, sorted(needed.values(), key=lambda f: f.offset))}
    for decision, sha in sorted(wanted.items()):
        _write_new(output / f"{decision:06d}.png", pngs[sha])
    return len(wanted)


def _wanted(trial: Path, first: int, last: int | None) -> dict[int, str]:
    """decision -> the frame it ended on, for the range (0: the start frame, when the range starts at 0)."""
    wanted: dict[int, str] = {}
    try:
        for t in TrialReader(trial).trace():
            if t.decision_id == 1 and first == 0:
                wanted[0] = t.frame_sha256
            if first <= t.decision_id and (last is None or t.decision_id <= last):
                wanted[t.decision_id] = t.result_frame_sha256
            if last is not None and t.decision_id >= last:
                break
    except FormatProblem as exc:
        raise ExportError(str(exc)) from None
    return wanted


def _write_new(path: Path, data: bytes) -> None:
    """Write a file that must not exist yet (O_EXCL)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
