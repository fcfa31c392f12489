import ast
import dataclasses
from pathlib import Path

import pytest

from engine.loop.script import ScriptError, parse_script
from engine.policies.policy import OBSERVATION_FIELDS, Observation

ROOT = Path(__file__).resolve().parents[3]


def test_script_format():
    assert parse_script("UP up # comment\nA*3\n\n# only a comment\nnoop") == ["UP", "UP", "A", "A", "A", "NOOP"]


@pytest.mark.parametrize("text, msg", [("JUMP", "unknown action"), ("A*0", "bad repeat"), ("A*x", "bad repeat"),
                                       ("A*²", "bad repeat"), ("UP*999999999999", "repeat count .* too large"),
                                       ("A*" + "9" * 5001, "repeat count .* too large"),
                                       ("A*100000 " * 11, "script longer than 1,000,000 actions")])
def test_script_errors_name_line(text, msg):
    with pytest.raises(ScriptError, match=f"<script>:1: {msg}"):
        parse_script(text)


def test_script_bytes_must_be_utf8_and_lines_count_newlines_only():
    assert parse_script(b"UP\nA*2\n") == ["UP", "A", "A"]
    with pytest.raises(ScriptError, match=r"s\.txt:2: not UTF-8"):
        parse_script(b"UP\nDOWN \xff\n", "s.txt")
    with pytest.raises(ScriptError, match="<script>:2: unknown action"):
        parse_script("UP\x0cA\nJUMP")  # a form feed is whitespace, not a new line


def test_engine_imports_no_ui_or_sessions():
    banned = {"textual", "app", "panes", "sessions", "rich"}
    offenders = []
    for path in (ROOT / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in banned]
    assert offenders == []


def test_observation_carries_only_what_the_agent_may_see():
    fields = {f.name for f in dataclasses.fields(Observation)}
    assert fields == OBSERVATION_FIELDS
    parts = {part for name in fields for part in name.split("_")}
    assert not parts & {"ram", "probe", "sample", "flags", "milestone", "milestones", "map", "position"}
