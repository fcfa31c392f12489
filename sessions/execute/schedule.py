"""Trial order and blinded condition labels."""

from __future__ import annotations

import random


def blind_labels(condition_ids: list[str], seed: int | None) -> dict[str, str]:
    """Map each condition id to a neutral label (X, Y, Z, ...), in a shuffled assignment."""
    pool = list("XYZWVUTSRQPONMLKJIHGFEDCBA")
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    ids = list(condition_ids)
    rng.shuffle(ids)
    return {cid: pool[i] for i, cid in enumerate(ids)}


def trial_order(labels: list[str], per_condition: int, order: str | list[str]) -> list[tuple[str, int]]:
    """(label, trial number) pairs in run order.

    counterbalanced: blocks alternate forward and reversed (X Y Y X X Y Y X X Y for two
    conditions, five trials each); sequential: all of one condition, then the next; a list:
    exactly that order of labels, which must use each label per_condition times.
    """
    if isinstance(order, list):
        sequence = list(order)
        for label in labels:
            if sequence.count(label) != per_condition:
                raise ValueError(f"trials.order must list {label!r} exactly {per_condition} times")
        if set(sequence) - set(labels):
            raise ValueError(f"trials.order names unknown labels: {sorted(set(sequence) - set(labels))}")
    elif order == "sequential":
        sequence = [label for label in labels for _ in range(per_condition)]
    else:
        sequence = []
        for block in range(per_condition):
            sequence += labels if block % 2 == 0 else labels[::-1]
    counts = dict.fromkeys(labels, 0)
    out = []
    for label in sequence:
        counts[label] += 1
        out.append((label, counts[label]))
    return out


