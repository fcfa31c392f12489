"""Input scripts: the plain-text format of walkthroughs and scripted policies.

One or more action names per line, separated by spaces; `#` starts a comment;
`NAME*N` repeats an action N times. Example::

    UP UP RIGHT   # to the stairs
    A*3
"""

from __future__ import annotations

from pathlib import Path

from engine.actions import ACTIONS


class ScriptError(ValueError):
    """A script names an unknown action or a bad repeat count."""


def parse_script(text: str, source: str = "<script>") -> list[str]:
    actions: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0]
        for token in line.split():
            name, _, count = token.partition("*")
            name = name.upper()
            if name not in ACTIONS:
                raise ScriptError(f"{source}:{lineno}: unknown action {token!r} (allowed: {' '.join(ACTIONS)})")
            if count and (not count.isdigit() or int(count) < 1):
                raise ScriptError(f"{source}:{lineno}: bad repeat count in {token!r}")
            actions.extend([name] * (int(count) if count else 1))
    return actions


def load_script(path: str | Path) -> list[str]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read input script ({exc.strerror})") from exc
    return parse_script(text, str(path))
