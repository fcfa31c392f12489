"""Bounded context (seed 003): a size-capped notebook and conversation segments of N turns.

Within a segment each request carries the segment's earlier turns (the user text sent and the
reply's text, in order; earlier screens are not sent again); after `segment_turns` turns the
history is dropped and the next segment starts from the deterministic observation and the
notebook alone. No summarisation call is made: the only memory across segments is the notebook,
which the model rewrites through its reply's `notebook` key and which is cut to `notebook_chars`
characters (the cut is recorded). Every decision's `record()` is what the trace shows of it.
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


def _notebook_of(reply_text: str) -> str | None:
    try:
        data = json.loads(reply_text)
    except (ValueError, TypeError, RecursionError):
        return None
    note = data.get("notebook") if isinstance(data, dict) else None
    return note if isinstance(note, str) else None
