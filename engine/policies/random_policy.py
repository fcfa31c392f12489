"""Random policy: uniformly chosen allowed actions from a seeded generator (a floor baseline)."""

from __future__ import annotations

import random

from engine.policies.base import contract_json
from engine.policies.policy import Observation, PolicyReply


class RandomPolicy:
    name = "random"
    model_id = None
    paid = False
    transport = None

    def __init__(self, seed: int, actions_per_decision: int = 1):
        self._rng = random.Random(seed)
        self._per = actions_per_decision

    async def decide(self, observation: Observation) -> PolicyReply:
        count = min(self._per, observation.max_actions)
        actions = [self._rng.choice(observation.allowed_actions) for _ in range(count)]
        return PolicyReply(text=contract_json(actions, summary="random"))

    def close(self) -> None:
        pass
