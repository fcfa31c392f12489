"""Scripted policy: plays an input script, a fixed number of actions per decision.

Optional notes, keyed by decision number, add what the script "saw" and "remembered" there
(an observation, memory reads and writes); an observation carries forward until the next.
"""

from __future__ import annotations

import json

from engine.policies.base import contract_json
from engine.policies.policy import Observation, PolicyExhausted, PolicyReply


class ScriptedPolicy:
    name = "scripted"
    model_id = None
    paid = False
    transport = None

    def __init__(self, actions: list[str], actions_per_decision: int = 1, notes: dict[int, dict] | None = None):
        if actions_per_decision < 1:
            raise ValueError("actions_per_decision must be at least 1")
        self._actions = list(actions)
        self._per = actions_per_decision
        self._pos = 0
        self._notes = notes or {}
        self._decisions = 0
        self._observed: dict | None = None
        self._observed_json: str | None = None

    async def decide(self, observation: Observation) -> PolicyReply:
        if self._pos >= len(self._actions):
            raise PolicyExhausted("the input script has no actions left")
        take = min(self._per, observation.max_actions)
        chunk = self._actions[self._pos:self._pos + take]
        self._pos += len(chunk)
        self._decisions += 1
        note = self._notes.get(self._decisions, {})
        if "observed" in note:
            self._observed = note["observed"]
            self._observed_json = json.dumps(self._observed)  # encoded once, carried forward
        text = contract_json(chunk, summary=f"script step {self._pos}/{len(self._actions)}",
                             observed=self._observed, memory_read=note.get("memory_read"),
                             memory_write=note.get("memory_write"), observed_json=self._observed_json)
        return PolicyReply(text=text)

    def close(self) -> None:
        pass
