"""Reading a YAML file into a pydantic model, with one-line errors naming the file and field."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def describe(exc: ValidationError) -> str:
    """The first problem as `field.path: message`, and how many more there are."""
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
    msg = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
    more = len(exc.errors()) - 1
    return f"{loc}: {msg}" + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def parse_yaml_model(text: str, source: str, model: type[M], error: type[Exception], what: str) -> M:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{source}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise error(f"{source}: {what} must be a YAML mapping")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(f"{source}: {describe(exc)}") from None


def load_yaml_model(path: str | Path, model: type[M], error: type[Exception], what: str) -> M:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read {what} ({exc.strerror})") from None
    return parse_yaml_model(text, str(path), model, error, what)
