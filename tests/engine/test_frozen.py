"""engine.frozen.quick_frozen: the same instances as the dataclass's own __init__, still frozen."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from engine.emulators.emulator import StepResult
from engine.frozen import quick_frozen
from engine.loop.events import DecisionRecorded
from engine.policies.policy import Observation, PolicyReply

QUICK = (Observation, PolicyReply, StepResult, DecisionRecorded)


def twin(cls: type) -> type:
    """The same fields under the dataclass's own generated __init__."""
    ns: dict = {"__annotations__": {f.name: f.type for f in dataclasses.fields(cls)}}
    for f in dataclasses.fields(cls):
        ns[f.name] = dataclasses.field(default=f.default, default_factory=f.default_factory, kw_only=f.kw_only)
    return dataclasses.dataclass(frozen=True)(type(cls.__name__, (), ns))


def as_dict(obj) -> dict:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_signature_is_the_dataclasses(cls):
    ours, theirs = inspect.signature(cls.__init__), inspect.signature(twin(cls).__init__)
    kinds = [(p.name, p.kind) for p in ours.parameters.values()]
    assert kinds == [(p.name, p.kind) for p in theirs.parameters.values()]
    for p, q in zip(ours.parameters.values(), theirs.parameters.values(), strict=True):
        assert (p.default is inspect.Parameter.empty) == (q.default is inspect.Parameter.empty)
        if q.default is not inspect.Parameter.empty and repr(q.default) != "<factory>":
            assert p.default is q.default


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_instances_are_the_dataclasses_and_stay_frozen(cls):
    ref = twin(cls)
    required = [f for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    args = [object() for _ in required]
    ours, theirs = cls(*args), ref(*args)
    assert as_dict(ours) == as_dict(theirs)
    for f in dataclasses.fields(cls):  # each field given by keyword lands in its own place
        ours = cls(*args, **{f.name: "given"}) if f not in required else cls(**{
            g.name: ("given" if g is f else a) for g, a in zip(required, args, strict=True)})
        assert getattr(ours, f.name) == "given"
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(ours, f.name, 1)
    assert repr(cls(*args)) == repr(ref(*args)).replace(ref.__qualname__, cls.__qualname__, 1)
    assert cls(*args) == cls(*args)


def test_a_factory_default_is_fresh_per_instance():
    assert PolicyReply("a").extra == {} and PolicyReply("a").extra is not PolicyReply("a").extra


def test_a_class_it_cannot_speed_up_is_refused():
    with pytest.raises(TypeError, match="not a frozen dataclass"):
        quick_frozen(dataclasses.dataclass(type("Plain", (), {"__annotations__": {"a": int}})))

    @dataclasses.dataclass(frozen=True)
    class Checked:
        a: int

        def __post_init__(self):
            pass

    with pytest.raises(TypeError, match="plain fields only"):
        quick_frozen(Checked)
