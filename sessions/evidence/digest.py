"""A trial's content digest: SHA-256 over what a deterministic trial must reproduce exactly.

It covers the inputs (each accepted action, its press/release/capture frame numbers and the
captured frame's hash), the trace (per decision: the frame seen, the actions accepted, the
resulting frame and its number, the milestones after it, its termination reason), the
milestone awards (id, points, decision, frame, frame hash) and the ending (outcome,
termination reason, invalid cause). It leaves out whatever varies between two runs of the same
play: timestamps, latencies, process ids, attempt numbers, hash-chain links (they cover
timestamps) and the trial's folder. A serial run and a `--workers N` run of a deterministic
manifest give every trial the same digest.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sessions.evidence import layout

_INPUT_FIELDS = ("decision_id", "index", "action", "press_frame", "release_frame", "capture_frame", "frame_sha256")
_TRACE_FIELDS = ("decision_id", "frame_sha256", "parsed_actions", "accepted_actions", "invalid_output",
                 "result_frame_sha256", "result_frame_index", "milestones_after", "termination_reason")
_AWARD_FIELDS = ("id", "points", "decision_id", "frame_index", "frame_sha256")
_RESULT_FIELDS = ("trial_key", "outcome", "termination_reason", "invalid_cause", "milestones_reached",
                  "deepest_milestone", "progress_points")


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def digest_parts(trial_dir: Path) -> dict:
    """What the digest covers, as plain data (for a diff when two digests differ)."""
    trial_dir = Path(trial_dir)
    result = json.loads((trial_dir / layout.RESULT).read_text(encoding="utf-8"))
    return {
        "inputs": [[row.get(f) for f in _INPUT_FIELDS] for row in _rows(trial_dir / layout.INPUTS)],
        "trace": [[row.get(f) for f in _TRACE_FIELDS] for row in _rows(trial_dir / layout.TRACE)],
        "milestones": [[m.get(f) for f in _AWARD_FIELDS] for m in result.get("milestones") or []],
        "result": [result.get(f) for f in _RESULT_FIELDS],
    }


def trial_digest(trial_dir: Path) -> str:
    """The hex SHA-256 of the trial's deterministic content (see the module's docstring)."""
    data = json.dumps(digest_parts(trial_dir), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()
