"""Declarative game definitions: the RAM fields a probe reads and the milestone ladder.

A definition is data (YAML under assets/games/); this module is its schema and the
condition evaluator. Conditions are structured, never evaluated as code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Sample = dict[str, "int | list[int]"]


Name = Annotated[str, Field(min_length=1, max_length=64)]
Text = Annotated[str, Field(max_length=500)]
Value = Annotated[int, Field(ge=0, le=0xFFFFFFFF)]  # what a probed field can hold (u8 .. u32le)
ADDRESS_SPACE = {"gb": 0x10000, "gbc": 0x10000, "gba": 0x1_0000_0000}


class _Strict(BaseModel):
    # strict: `true` is not a number and "12" is not 12
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class RamField(_Strict):
    address: Annotated[int, Field(ge=0, le=0xFFFFFFFF)]
    kind: Literal["u8", "u16le", "u32le", "bytes"] = "u8"
    length: Annotated[int, Field(ge=1, le=256)] = 1
    source: Text | None = None  # where the address comes from (disassembly symbol, our RAM.md)

    @property
    def width(self) -> int:
        return {"u8": 1, "u16le": 2, "u32le": 4}.get(self.kind, self.length)

    @model_validator(mode="after")
    def _length_matches_kind(self) -> RamField:
        if self.kind != "bytes" and self.length != 1:
            raise ValueError("length applies only to kind 'bytes'")
        return self


class Condition(_Strict):
    """One test on one probed field; every key given must hold."""

    field: Name
    eq: Value | None = None
    ne: Value | None = None
    ge: Value | None = None
    le: Value | None = None
    bit_set: Annotated[int, Field(ge=0, le=31)] | None = None
    bit_clear: Annotated[int, Field(ge=0, le=31)] | None = None
    contains: Annotated[int, Field(ge=0, le=255)] | None = None  # a byte of a `bytes` field
    lacks: Annotated[int, Field(ge=0, le=255)] | None = None

    @model_validator(mode="after")
    def _has_test(self) -> Condition:
        tests = self.model_dump(exclude={"field"}, exclude_none=True)
        if not tests:
            raise ValueError(f"condition on {self.field!r} names no test (eq, ne, ge, le, bit_set, ...)")
        return self

    def compile(self) -> Callable[[Sample], bool]:
        """The same test as `holds`, as one closure with the dispatch decided once."""
        f = self.field
        tests: list[Callable[[int], bool]] = []
        if self.contains is not None or self.lacks is not None:
            contains, lacks = self.contains, self.lacks
            return lambda s: (contains is None or contains in s[f]) and (lacks is None or lacks not in s[f])
        if self.eq is not None:
            tests.append(lambda v, x=self.eq: v == x)
        if self.ne is not None:
            tests.append(lambda v, x=self.ne: v != x)
        if self.ge is not None:
            tests.append(lambda v, x=self.ge: v >= x)
        if self.le is not None:
            tests.append(lambda v, x=self.le: v <= x)
        if self.bit_set is not None:
            tests.append(lambda v, m=1 << self.bit_set: bool(v & m))
        if self.bit_clear is not None:
            tests.append(lambda v, m=1 << self.bit_clear: not v & m)
        if len(tests) == 1:
            (test,) = tests
            return lambda s: test(s[f])
        return lambda s: all(t(s[f]) for t in tests)

    def holds(self, sample: Sample) -> bool:
        value = sample[self.field]
        if isinstance(value, list):
            if self.contains is not None and self.contains not in value:
                return False
            if self.lacks is not None and self.lacks in value:
                return False
            return True
        if self.eq is not None and value != self.eq:
            return False
        if self.ne is not None and value == self.ne:
            return False
        if self.ge is not None and value < self.ge:
            return False
        if self.le is not None and value > self.le:
            return False
        if self.bit_set is not None and not (value >> self.bit_set) & 1:
            return False
        if self.bit_clear is not None and (value >> self.bit_clear) & 1:
            return False
        return True


class MilestoneDef(_Strict):
    id: Name
    name: Annotated[str, Field(max_length=200)]
    points: Annotated[int, Field(ge=0, le=1_000_000)]
    all: Annotated[list[Condition], Field(min_length=1, max_length=64)]

    def holds(self, sample: Sample) -> bool:
        return all(c.holds(sample) for c in self.all)

    def compile(self) -> Callable[[Sample], bool]:
        tests = [c.compile() for c in self.all]
        if len(tests) == 1:
            return tests[0]
        return lambda s: all(t(s) for t in tests)


class Position(_Strict):
    map: Name
    x: Name
    y: Name


class GameDefinition(_Strict):
    id: Name
    title: Annotated[str, Field(max_length=200)]
    platform: Literal["gb", "gbc", "gba"]
    rom_sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    fields: Annotated[dict[Name, RamField], Field(min_length=1, max_length=1024)]
    # probe results mean nothing until these hold (e.g. an init magic byte)
    ready: Annotated[list[Condition], Field(max_length=64)] = []
    position: Position | None = None  # for route tracking
    # a change in any of these resets route-repetition tracking
    progress_fields: Annotated[list[Name], Field(max_length=1024)] = []
    milestones: Annotated[list[MilestoneDef], Field(min_length=1, max_length=256)]
    final_milestone: Name | None = None  # defaults to the last rung

    @model_validator(mode="after")
    def _references_exist(self) -> GameDefinition:
        space = ADDRESS_SPACE[self.platform]
        outside = sorted(name for name, f in self.fields.items() if f.address + f.width > space)
        if outside:
            raise ValueError(f"fields outside the {self.platform} address space (0x0-0x{space - 1:X}): "
                             f"{', '.join(outside)}")
        known = set(self.fields)
        refs = [c.field for c in self.ready] + list(self.progress_fields)
        refs += [c.field for m in self.milestones for c in m.all]
        if self.position:
            refs += [self.position.map, self.position.x, self.position.y]
        missing = sorted(set(refs) - known)
        if missing:
            raise ValueError(f"conditions refer to undefined fields: {', '.join(missing)}")
        # A test that does not fit its field's kind would fail mid-trial (`in` on a number), so refuse it here.
        for c in [*self.ready, *(c for m in self.milestones for c in m.all)]:
            is_bytes = self.fields[c.field].kind == "bytes"
            if is_bytes and c.model_dump(include={"eq", "ne", "ge", "le", "bit_set", "bit_clear"}, exclude_none=True):
                raise ValueError(f"field {c.field!r} holds bytes: test it with contains or lacks")
            if not is_bytes and (c.contains is not None or c.lacks is not None):
                raise ValueError(f"field {c.field!r} holds a number: contains and lacks apply to kind 'bytes'")
        if self.position and any(self.fields[f].kind == "bytes" for f in self.position.model_dump().values()):
            raise ValueError("position fields must hold numbers, not bytes")
        ids = [m.id for m in self.milestones]
        if len(set(ids)) != len(ids):
            raise ValueError("milestone ids must be unique")
        if self.final_milestone is not None and self.final_milestone not in ids:
            raise ValueError(f"final_milestone {self.final_milestone!r} is not a milestone id")
        return self

    @property
    def final_id(self) -> str:
        return self.final_milestone or self.milestones[-1].id

    @property
    def total_points(self) -> int:
        return sum(m.points for m in self.milestones)

    def is_ready(self, sample: Sample) -> bool:
        return all(c.holds(sample) for c in self.ready)
