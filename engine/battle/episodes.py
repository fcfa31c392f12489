"""Episodes within one trial (seed 004): task, episode, trial.

A trial of an episodic task plays up to `budget` episodes, each from the task's start state. An
episode ends with the decision in which the failure predicate held (every test, on two frames
running, as a rung's do), its `actions` were used up, or a reset was asked for (Trial.request_reset);
the trial then restores the start state (the same restore check as the trial's first) and a new
episode begins, the agent's memory kept: what it learnt is the point. The ladder is the trial's,
awards once-only across episodes; the goal reached in any episode ends the trial as a success.
After the last episode ends without the goal, the trial ends as `episode-budget` (a game-failure).

Each trace line carries its episode and, on an episode's last decision, why it ended; the result's
`episodes` list (and its change log: the memory writes of each episode) is recomputed from the trace
by verify with `episode_records`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from engine.games.gamedef import Condition, Sample
from engine.loop.records import EpisodeRecord, build


@dataclass(frozen=True)
class EpisodeRules:
    budget: int
    failure: tuple[Condition, ...] = ()
    actions: int | None = None  # accepted actions per episode

    def failure_test(self) -> Callable[[Sample, Sample], bool] | None:
        """True when every failure test holds on both of two consecutive frames' samples."""
        if not self.failure:
            return None
        tests = [c.compile() for c in self.failure]
        return lambda previous, current: all(t(current) and t(previous) for t in tests)


@dataclass(frozen=True)
class Step:
    """What the episode records need of one committed decision."""

    decision_id: int
    episode: int
    episode_end: str | None
    memory_writes: tuple[str | None, ...]
    team: list[dict] | None = None  # the team a battle call made the party (engine.battle.battle)


def episode_records(steps: Iterable[Step], termination_reason: str | None, success: bool) -> list[EpisodeRecord]:
    """The episodes of a trial from its decisions in order; the last episode ended as the trial did."""
    out: list[dict] = []
    for s in steps:
        if not out or out[-1]["episode"] != s.episode:
            out.append({"episode": s.episode, "first_decision": s.decision_id, "last_decision": s.decision_id,
                        "ended": None, "goal_reached": False, "memory_writes": []})
        e = out[-1]
        e["last_decision"] = s.decision_id
        e["ended"] = s.episode_end
        e["memory_writes"] += [w for w in s.memory_writes if w is not None]
        if s.team is not None:
            e["team"] = s.team
    if out:
        last = out[-1]
        last["goal_reached"] = success
        last["ended"] = last["ended"] if last["ended"] is not None and not success else termination_reason
    for e in out:
        e["ended"] = e["ended"] or "unknown"  # an interrupted trial's last episode (recover)
    return [build(EpisodeRecord, **e) for e in out]
