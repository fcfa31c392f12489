"""Reading a YAML file into a pydantic model, with one-line errors naming the file, line and field.

Strict on purpose: a duplicate key, a non-UTF-8 byte, a NUL, nesting deeper than MAX_DEPTH, an
integer too long to convert, an unknown tag or an alias bomb is refused before the model sees
the data; a validation error is reported as `FILE:LINE: field.path: message`, with the line of
the offending key and, for an unknown key, the closest known one.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from engine.text import decode_utf8, printable
from sessions.preflight.safe_read import MAX_TEXT_BYTES, InputFileError, read_input

M = TypeVar("M", bound=BaseModel)
MAX_DEPTH = 64  # no file of ours nests deeper than 5; the cap keeps recursion (ours, PyYAML's) bounded
# Values (after aliases are expanded: an alias bomb stops here, not in pydantic). Ours hold hundreds;
# notes for a very long run some tens of thousands.
MAX_NODES = 250_000

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: 4 MiB in well under 1 s
_TAG = "tag:yaml.org,2002:"
Path_ = tuple[Any, ...]


class _Refused(Exception):
    """A problem found while reading the YAML, with the line and the field where it is."""

    def __init__(self, line: int, path: Path_, message: str):
        super().__init__(message)
        self.line, self.path, self.message = line, path, message


def _field(path: Path_) -> str:
    text = ".".join(printable(p) for p in path)
    return text if len(text) <= 160 else f"{text[:100]}…{text[-50:]}"  # a recursive alias nests far


def _where(source: str, line: int, path: Path_ = ()) -> str:
    return f"{printable(source)}:{line}: " + (f"{_field(path)}: " if path else "")


# -- YAML text -> Python values, with the line of every key --------------------------------------

def _check_shape(text: str) -> None:
    """Walk the event stream (an iterative parser: no recursion) and refuse deep nesting before
    anything recursive (PyYAML's composer, libyaml's, our builder) sees it, and a huge number of
    values before the slow steps (composing and building take seconds per million)."""
    depth = 0
    values = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _Refused(event.start_mark.line + 1, (), f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            continue
        elif not isinstance(event, yaml.NodeEvent):
            continue
        values += 1
        if values > MAX_NODES:
            raise _Refused(event.start_mark.line + 1, (), f"more than {MAX_NODES:,} values")


class _Builder:
    """Python values from a composed node graph: duplicate keys refused, timestamps kept as the
    text written, aliases expanded with a node budget, lines recorded by field path."""

    def __init__(self) -> None:
        self.constructor = SafeConstructor()
        self.lines: dict[Path_, int] = {}
        self.nodes = 0

    def build(self, node: Node, path: Path_, depth: int) -> Any:
        line = node.start_mark.line + 1
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Refused(line, path, f"more than {MAX_NODES:,} values (aliases expanded)")
        if depth > MAX_DEPTH:  # only a recursive alias gets here: the text itself was checked
            raise _Refused(line, path, f"nested deeper than {MAX_DEPTH} levels (a recursive alias?)")
        self.lines.setdefault(path, line)
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if isinstance(node, SequenceNode):
            if node.tag != _TAG + "seq":
                raise _Refused(line, path, f"tag {_clip(node.tag)} is not supported")
            return [self.build(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        if isinstance(node, MappingNode):
            if node.tag != _TAG + "map":
                raise _Refused(line, path, f"tag {_clip(node.tag)} is not supported")
            return self.mapping(node, path, depth)
        raise _Refused(line, path, "unsupported YAML node")

    def scalar(self, node: ScalarNode, path: Path_) -> Any:
        line = node.start_mark.line + 1
        if node.tag == _TAG + "timestamp":  # no field is a date: keep what was written
            return node.value
        if node.tag == _TAG + "merge":
            raise _Refused(line, path, "merge keys (<<) are not supported")
        try:
            return self.constructor.construct_object(node, deep=True)
        except ValueError as exc:  # int('9' * 5001): Python's 4300-digit limit
            if "digits" in str(exc):
                raise _Refused(line, path, "number too large (more than 4300 digits)") from None
            raise _Refused(line, path, f"bad value ({_clip(_yaml_problem(exc))})") from None
        except Exception as exc:  # any constructor's failure (`!!bool maybe`: a KeyError) is bad data
            raise _Refused(line, path, f"bad value ({_clip(_yaml_problem(exc))})") from None

    def mapping(self, node: MappingNode, path: Path_, depth: int) -> dict:
        out: dict = {}
        key_lines: dict = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if not isinstance(key_node, ScalarNode):
                raise _Refused(line, path, "a key must be a plain value, not a list or mapping")
            key = self.scalar(key_node, path)
            try:
                first = key_lines.get(key)
            except TypeError:  # an unhashable key (a !!binary bytearray, say)
                raise _Refused(line, path, "a key must be a plain value") from None
            if first is not None:
                raise _Refused(line, (*path, key), f"duplicate key (first at line {first})")
            key_lines[key] = line
            self.lines[(*path, key)] = line  # errors about this entry point at its key
            out[key] = self.build(value_node, (*path, key), depth + 1)
        return out


def _clip(text: str, limit: int = 120) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _yaml_problem(exc: BaseException) -> str:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None)
    if problem is None:
        text = str(exc).strip()
        problem = text.splitlines()[0] if text else type(exc).__name__
    return str(problem)


def _yaml_line(exc: BaseException, text: str) -> int:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:  # an error at the end of the text is on its last line, not after it
        return min(mark.line + 1, text.count("\n") + 1)
    position = getattr(exc, "position", None)  # a ReaderError: a character offset
    if isinstance(position, int):
        return text.count("\n", 0, position) + 1
    return 1


def load_yaml_text(text: str, source: str) -> tuple[Any, dict[Path_, int]]:
    """Python values of a YAML document and the line of every field path.
    Raises ValueError with a one-line `SOURCE:LINE: ...` message."""
    nul = text.find("\0")
    if nul >= 0:
        raise ValueError(f"{_where(source, text.count(chr(10), 0, nul) + 1)}contains a NUL byte (not a text file?)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        line = text.count("\n", 0, exc.start) + 1
        raise ValueError(f"{_where(source, line)}not valid text (a lone surrogate)") from None
    try:
        _check_shape(text)
        root = yaml.compose(text, Loader=_Loader)
        if root is None:
            return None, {}
        builder = _Builder()
        data = builder.build(root, (), 0)
    except _Refused as exc:
        raise ValueError(f"{_where(source, exc.line, exc.path)}{exc.message}") from None
    except yaml.YAMLError as exc:
        problem = _yaml_problem(exc)
        if "nesting depth" in problem:  # libyaml's own cap (1000) met before ours
            raise ValueError(f"{_where(source, _yaml_line(exc, text))}nested deeper than {MAX_DEPTH} levels") from None
        raise ValueError(f"{_where(source, _yaml_line(exc, text))}not valid YAML ({_clip(problem)})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # the parsers' own limits, should any remain
        raise ValueError(f"{_where(source, 1)}not valid YAML ({printable(type(exc).__name__)})") from None
    return data, builder.lines


# -- validation errors -> FILE:LINE: field: message -------------------------------------------------

def _unwrap(tp: Any) -> list[Any]:
    """The concrete types an annotation can hold (through Annotated, Optional, unions)."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for arg in typing.get_args(tp) for t in _unwrap(arg)]
    return [tp]


def _model_at(model: type[BaseModel], path: Path_) -> type[BaseModel] | None:
    """The model class that validates the mapping at `path`, if there is one."""
    current: list[Any] = [model]
    for part in path:
        nxt: list[Any] = []
        for tp in current:
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                if isinstance(part, str) and part in tp.model_fields:
                    nxt += _unwrap(tp.model_fields[part].annotation)
                continue
            origin, args = typing.get_origin(tp), typing.get_args(tp)
            if origin is list and args and isinstance(part, int):
                nxt += _unwrap(args[0])
            elif origin is dict and len(args) == 2:
                nxt += _unwrap(args[1])
        current = nxt
    return next((t for t in current if isinstance(t, type) and issubclass(t, BaseModel)), None)


def _kind(value: Any) -> str:
    return {bool: "true/false", int: "a whole number", float: "a number", str: "text", list: "a list",
            dict: "a mapping", type(None): "nothing (null)"}.get(type(value), type(value).__name__)


def _suggest(model: type[BaseModel] | None, path: Path_) -> str | None:
    """The known key closest to the unknown one at `path`, if one is close."""
    parent = _model_at(model, path[:-1]) if model is not None and path else None
    if parent is None or not isinstance(path[-1], str):
        return None
    close = difflib.get_close_matches(path[-1], list(parent.model_fields), n=1, cutoff=0.6)
    return close[0] if close else None


def _message(err: dict, model: type[BaseModel] | None, path: Path_) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        close = _suggest(model, path)
        return "unknown key" + (f" (did you mean {close!r}?)" if close else "")
    if kind == "missing":
        return "required key missing"
    if kind in ("value_error", "assertion_error") and "error" in err.get("ctx", {}):
        return _clip(str(err["ctx"]["error"]), 300)
    msg = _clip(err["msg"], 300)
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        msg = "Input should be a mapping (key: value lines)"
    if kind.endswith("_type"):
        msg += f", not {_kind(err.get('input'))}"
    return msg


def _real_path(err: dict, data: Any) -> Path_:
    """The error's location as a path into the data: union member tags and `[key]` dropped."""
    loc = err["loc"]
    path: list[Any] = []
    current = data
    for i, part in enumerate(loc):
        if isinstance(current, dict) and _has_key(current, part):
            current = current[part]
            path.append(part)
        elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
            current = current[part]
            path.append(part)
        elif i == len(loc) - 1 and err["type"] == "missing" and isinstance(current, dict):
            path.append(part)
    return tuple(path)


def _has_key(mapping: dict, key: Any) -> bool:
    try:
        return key in mapping
    except TypeError:
        return False


def _line_for(path: Path_, lines: dict[Path_, int]) -> int:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return 1


def describe_validation(exc: ValidationError, source: str, data: Any, lines: dict[Path_, int],
                        model: type[BaseModel], named: typing.Callable[[Path_], str | None]) -> str:
    """The first problem of validating `data` (read from `source`, with its `lines`), one line:
    `named(field path)` names the field where the user set it some other way (a command-line
    option, for a manifest oakwatch built: `--base-url: message`); None keeps `SOURCE:LINE: field`."""
    return _describe_at(exc, source, data, lines, model, named)


def _describe_at(exc: ValidationError, source: str, data: Any, lines: dict[Path_, int],
                 model: type[BaseModel] | None, named: typing.Callable[[Path_], str | None] | None = None) -> str:
    errors = exc.errors()
    described = [(e, _real_path(e, data)) for e in errors]
    missing = {p for e, p in described if e["type"] == "missing"}

    def misspelt(e: dict, p: Path_) -> bool:
        return e["type"] == "extra_forbidden" and (p[:-1] + (_suggest(model, p),)) in missing

    # A misspelt key also shows up as the right key missing: report the misspelling, it is the cause.
    first, path = next(((e, p) for e, p in described if misspelt(e, p)), described[0])
    message = _message(first, model, path)
    others = {p for _, p in described} - {path}  # union members repeat one field
    more = len(others)
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    label = named(path) if named is not None else None
    if label is not None:
        return f"{printable(label)}: {message}{tail}"
    return f"{_where(source, _line_for(path, lines), path)}{message}{tail}"


def describe(exc: ValidationError) -> str:
    """The first problem as `field.path: message`, and how many more there are (no lines)."""
    first = exc.errors()[0]
    loc = ".".join(printable(p) for p in first["loc"]) or "(top level)"
    more = len(exc.errors()) - 1
    return f"{loc}: {_message(first, None, tuple(first['loc']))}" + (
        f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


# -- the two entry points ------------------------------------------------------------------------------

def parse_yaml_model(text: str, source: str, model: type[M], error: type[Exception], what: str) -> M:
    try:
        data, lines = load_yaml_text(text, source)
    except ValueError as exc:
        raise error(str(exc)) from None
    if not isinstance(data, dict):
        raise error(f"{_where(source, 1)}{what} must be a YAML mapping (key: value lines), "
                    f"not {_kind(data)}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(_describe_at(exc, source, data, lines, model)) from None
    except RecursionError:  # cannot happen below MAX_DEPTH; never a traceback if it does
        raise error(f"{_where(source, 1)}nested too deeply") from None


def load_yaml_model(path: str | Path, model: type[M], error: type[Exception], what: str) -> M:
    try:
        raw = read_input(path, what=what, max_bytes=MAX_TEXT_BYTES)
    except InputFileError as exc:
        raise error(f"{printable(path)}: cannot read {what} ({exc.reason})") from None
    try:
        text = decode_utf8(raw, str(path))
    except ValueError as exc:
        raise error(str(exc)) from None
    return parse_yaml_model(text, str(path), model, error, what)


def field_line(path: str | Path, field: str) -> int | None:
    """The line where `field` (dotted; list items by number: `conditions.0.seed`) is written in a
    YAML file, for messages about a value that parsed but cannot be used; None if unknown."""
    try:
        raw = read_input(path, what="YAML file", max_bytes=MAX_TEXT_BYTES)
        _, lines = load_yaml_text(decode_utf8(raw, str(path)), str(path))
    except ValueError:
        return None
    parts = tuple(int(p) if p.isdigit() else p for p in field.split("."))
    return _line_for(parts, lines) if lines else None
