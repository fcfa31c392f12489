"""Replay policy: feeds a recorded trial's raw responses back through the full loop.

Every recorded attempt is replayed in order, invalid ones too, so the contract, memory
rules and retries behave exactly as they did (an answer that was over the reply cap is replayed
as that same oversized answer). Needs no model and makes no paid call.
"""

from __future__ import annotations

from engine.loop.records import ReplyOversize
from engine.policies.policy import Observation, PolicyExhausted, PolicyReply


class ReplayPolicy:
    name = "replay"
    model_id = None
    paid = False
    transport = None

    def __init__(self, attempts: list[list[str | ReplyOversize]]):
        """attempts: per decision, the raw texts of each attempt (or its oversize record), in order."""
        self._queue = [raw for decision in attempts for raw in decision]
        self._pos = 0

    async def decide(self, observation: Observation) -> PolicyReply:
        if self._pos >= len(self._queue):
            raise PolicyExhausted("the recorded trace has no responses left")
        raw = self._queue[self._pos]
        self._pos += 1
        if isinstance(raw, ReplyOversize):
            return PolicyReply(text="", oversize=raw)
        return PolicyReply(text=raw)

    def close(self) -> None:
        pass
