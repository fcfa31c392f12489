"""Bounded context (seed 003): a size-capped notebook and conversation segments of N turns.

Within a segment each request carries the segment's earlier turns (the user text sent and the
reply's text, in order; earlier screens are not sent again); after `segment_turns` turns the
history is dropped and the next segment starts from the deterministic observation and the
notebook alone. No summarisation call is made: the only memory across segments is the notebook,
which the model rewrites through its reply's `notebook` key and which is cut to `notebook_chars`
characters (the cut is recorded). Every decision's `record()` is what the trace shows of it. On the
gameplay track the party is sent whole at a segment's first request and as changes after
(`party_view`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

Turn = tuple[str, str]  # (the user text sent, the reply's text)


@dataclass(frozen=True)
class ContextRules:
    """The manifest's agent.context, frozen with it."""

    segment_turns: int
    notebook_chars: int

    def __post_init__(self) -> None:
        if self.segment_turns < 1 or self.notebook_chars < 0:
            raise ValueError("context: segment_turns must be at least 1 and notebook_chars at least 0")


@dataclass
class Conversation:
    rules: ContextRules
    segment: int = 0  # 0-based index of the current segment
    history: list[Turn] = field(default_factory=list)
    notebook: str = ""
    truncated: bool = False  # whether the last notebook write was cut to the limit
    party_sent: list[dict] | None = None  # the gameplay track's party as last sent in this segment

    def party_view(self, view: dict) -> dict:
        """The gameplay track's view as this segment's request sends it: the full party at the segment's
        first request (or after a member joined, left or changed species, level or max HP), else only
        `party_changes`, the HP, status and moves that changed since the segment's last request."""
        party = view.get("party")
        if party is None:
            return view
        changes = party_changes(self.party_sent, party)
        self.party_sent = party
        if changes is None:
            return view
        out = {k: v for k, v in view.items() if k != "party"}
        out["party_changes"] = changes
        return out

    @property
    def turn_in_segment(self) -> int:
        """1-based: the turn the next request is within its segment."""
        return len(self.history) + 1

    def record(self) -> dict:
        """The trace's `context` record of the request about to be sent."""
        return {"segment": self.segment, "turn_in_segment": self.turn_in_segment,
                "history_turns": len(self.history), "notebook_chars": len(self.notebook),
                "notebook_truncated": self.truncated}

    def notebook_text(self) -> str:
        return (f"Your notebook (kept across conversation segments; at most {self.rules.notebook_chars} "
                f"characters; replace it by giving `notebook` in your reply):\n{self.notebook or '(empty)'}")

    def after(self, user_text: str, reply_text: str) -> None:
        """One answered turn: the notebook the reply gives (cut to the limit), the turn kept for the
        segment's later requests, and a new segment once this one has its turns."""
        note = _notebook_of(reply_text)
        if note is not None:
            self.truncated = len(note) > self.rules.notebook_chars
            self.notebook = note[:self.rules.notebook_chars]
        self.history.append((user_text, reply_text))
        if len(self.history) >= self.rules.segment_turns:
            self.history = []
            self.segment += 1
            self.party_sent = None  # a new segment starts from the full state


CHANGING = ("hp", "status", "moves")  # what a party update within a segment sends as changes


def party_changes(before: list[dict] | None, after: list[dict]) -> list[dict] | None:
    """Per member, its slot and the HP, status and moves that differ; None when only the full state
    will do (nothing sent yet, or a member whose other facts changed)."""
    if before is None or len(before) != len(after):
        return None
    changes = []
    for old, new in zip(before, after, strict=True):
        if {k: v for k, v in old.items() if k not in CHANGING} != {k: v for k, v in new.items() if k not in CHANGING}:
            return None
        diff = {k: new.get(k) for k in CHANGING if old.get(k) != new.get(k)}
        if diff:
            changes.append({"slot": new["slot"], **diff})
    return changes


def _notebook_of(reply_text: str) -> str | None:
    try:
        data = json.loads(reply_text)
    except (ValueError, TypeError, RecursionError):
        return None
    note = data.get("notebook") if isinstance(data, dict) else None
    return note if isinstance(note, str) else None
