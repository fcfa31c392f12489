"""`every` (the ladder's compiled conjunction) answers as `all(t(x) for t in tests)` does."""

from __future__ import annotations

import itertools

from engine.games.gamedef import every


def test_every_is_all_over_the_tests():
    calls: list[int] = []

    def test(i: int, answer: bool):
        def t(x):
            calls.append(i)
            return answer
        return t

    for n in range(5):
        for answers in itertools.product((True, False), repeat=n):
            tests = [test(i, a) for i, a in enumerate(answers)]
            calls.clear()
            got = every(tests)(None)
            fast_calls = list(calls)
            calls.clear()
            assert got is all(t(None) for t in tests)
            assert fast_calls == calls  # short-circuits at the same test
