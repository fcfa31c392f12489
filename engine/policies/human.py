"""Human policy: the operator plays from the keyboard, one action per decision.

The console puts actions on a queue as keys are pressed; `decide` waits for the next one
and answers in the action contract's JSON, so every press is checked, logged and timed
exactly like an agent's. While waiting it polls `should_stop`, so a terminate or quit
wakes it up (PolicyExhausted; the trial records the operator's reason).
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable

from engine.policies.base import contract_json
from engine.policies.policy import Observation, PolicyExhausted, PolicyReply

KEY_QUEUE_SIZE = 8  # presses beyond this while the loop is busy are dropped, not stockpiled


def key_queue() -> queue.Queue[str]:
    return queue.Queue(maxsize=KEY_QUEUE_SIZE)


def offer(keys: queue.Queue[str], action: str) -> bool:
    """Queue one action from the UI thread; False if the queue is full (the press is dropped)."""
    try:
        keys.put_nowait(action)
    except queue.Full:
        return False
    return True


class HumanPolicy:
    name = "human"
    model_id = None
    paid = False
    transport = None

    def __init__(self, keys: queue.Queue[str], should_stop: Callable[[], str | None],
                 poll_seconds: float = 0.02):
        self._keys = keys
        self._should_stop = should_stop
        self._poll = poll_seconds
        while True:  # presses made before this trial began belong to no decision
            try:
                keys.get_nowait()
            except queue.Empty:
                break

    async def decide(self, observation: Observation) -> PolicyReply:
        while True:
            reason = self._should_stop()
            if reason is not None:
                raise PolicyExhausted(f"operator ended the trial while the human policy waited: {reason}")
            try:
                action = self._keys.get_nowait()
            except queue.Empty:
                await asyncio.sleep(self._poll)
                continue
            return PolicyReply(text=contract_json([action], summary="operator key press"))

    def close(self) -> None:
        pass
