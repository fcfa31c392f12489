"""Input scripts: the plain-text format of walkthroughs and scripted policies.

One or more action names per line, separated by spaces; `#` starts a comment;
`NAME*N` repeats an action N times. Example::

    UP UP RIGHT   # to the stairs
    A*3

Bounded: a repeat count is at most MAX_REPEAT and a whole script at most MAX_ACTIONS actions,
checked before any list is built, so `UP*999999999999` is an error, not an allocation.
"""

from __future__ import annotations

import re

from engine.loop.contract import ACTIONS
from engine.text import decode_utf8, printable

MAX_REPEAT = 100_000
MAX_ACTIONS = 1_000_000
_COUNT = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit() also accepts '²'


class ScriptError(ValueError):
    """A script names an unknown action or a bad repeat count."""


def _shown(token: str) -> str:
    return repr(token if len(token) <= 40 else token[:40] + "…")  # repr: one line whatever the token


def parse_script(text: str | bytes, source: str = "<script>") -> list[str]:
    """The actions of a script (text, or bytes that must be UTF-8); errors name the line."""
    source = printable(source)  # a message is one line, whatever the file is called
    if isinstance(text, bytes):
        try:
            text = decode_utf8(text, source)
        except ValueError as exc:
            raise ScriptError(str(exc)) from None
    actions: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):  # "\n" only: editors' line numbers
        line = raw.split("#", 1)[0]
        for token in line.split():
            name, star, count = token.partition("*")
            name = name.upper()
            if name not in ACTIONS:
                raise ScriptError(f"{source}:{lineno}: unknown action {_shown(token)} (allowed: {' '.join(ACTIONS)})")
            n = 1
            if star:
                if not _COUNT.fullmatch(count) or not count.strip("0"):  # not digits, or zero
                    raise ScriptError(f"{source}:{lineno}: bad repeat count in {_shown(token)} "
                                      f"(a whole number from 1 to {MAX_REPEAT:,})")
                # compared as text first: never int() a count of thousands of digits
                if len(count.lstrip("0")) > len(str(MAX_REPEAT)) or int(count) > MAX_REPEAT:
                    raise ScriptError(f"{source}:{lineno}: repeat count in {_shown(token)} is too large "
                                      f"(at most {MAX_REPEAT:,})")
                n = int(count)
            if len(actions) + n > MAX_ACTIONS:
                raise ScriptError(f"{source}:{lineno}: script longer than {MAX_ACTIONS:,} actions")
            actions.extend([name] * n)
    return actions
