"""Frozen dataclasses made at the cost of plain ones, for the few the trial loop makes every decision.

A frozen dataclass's generated __init__ sets each field through `object.__setattr__` (its own
__setattr__ refuses): a call per field, about 1.5-3.5 µs for the loop's observation, reply and step
result, several times a decision. `quick_frozen` gives the class an __init__ with the same
signature and defaults that fills the instance's __dict__ at once. The instance is as frozen as
before (assignment still raises); equality, hashing and repr are the dataclass's own.
"""

from __future__ import annotations

import dataclasses

_MISSING = dataclasses.MISSING


class _Factory:
    """The default marker of a field with a default_factory (the factory runs per call)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def quick_frozen(cls: type) -> type:
    """Replace the __init__ of `cls`, a frozen dataclass without slots, __post_init__ or fields left
    out of __init__, with one that sets every field in one step."""
    params = dataclasses.fields(cls)
    if not (dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen):
        raise TypeError(f"{cls.__name__}: not a frozen dataclass")
    if hasattr(cls, "__slots__") or hasattr(cls, "__post_init__") or any(not f.init for f in params):
        raise TypeError(f"{cls.__name__}: quick_frozen takes plain fields only")
    names: dict[str, object] = {"_set": object.__setattr__, "_FACTORY": _FACTORY}
    args, keywords, fills = [], [], []
    for f in params:
        into = keywords if f.kw_only else args  # keyword-only fields follow the others, as dataclasses orders them
        if f.default is not _MISSING:
            names[f"_d_{f.name}"] = f.default
            into.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not _MISSING:
            names[f"_f_{f.name}"] = f.default_factory
            into.append(f"{f.name}=_FACTORY")
            fills.append(f"    if {f.name} is _FACTORY: {f.name} = _f_{f.name}()\n")
        else:
            into.append(f.name)
    if keywords:
        args += ["*", *keywords]
    body = ", ".join(f"{f.name!r}: {f.name}" for f in params)
    source = f"def __init__(self, {', '.join(args)}):\n{''.join(fills)}    _set(self, '__dict__', {{{body}}})\n"
    exec(source, names)  # noqa: S102 - our own field names, checked by dataclasses
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init
    return cls
