"""fast_init: frozen dataclasses built by writing their __dict__, same behaviour as the generated
__init__ (defaults, factories, equality, hashing, replace, pickling), and the hot records use it."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from lance_format.core.records import fast_init
from lance_format.core.types import LanceField, LanceSchema
from lance_format.encodings.base import ColumnInfo, PageInfo
from lance_format.table.model import DataFile, DataFragment, Manifest


@fast_init
@dataclass(frozen=True)
class _Rec:
    a: int
    b: str = "x"
    c: dict[str, int] = field(default_factory=dict)
    d: tuple[int, ...] = ()


@fast_init
@dataclass(frozen=True)
class _Pair:
    a: int
    b: str


@dataclass(frozen=True)
class _Plain:
    a: int
    b: str = "x"
    c: dict[str, int] = field(default_factory=dict)
    d: tuple[int, ...] = ()


def test_same_values_as_the_generated_init() -> None:
    for args, kwargs in [((1,), {}), ((1, "y"), {}), ((2,), {"c": {"k": 1}}), ((3, "z", {"q": 2}, (4,)), {})]:
        fast, plain = _Rec(*args, **kwargs), _Plain(*args, **kwargs)
        assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
    # A default factory makes a new object per instance.
    assert _Rec(1).c is not _Rec(1).c
    with pytest.raises(TypeError):
        _Rec()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Rec(1, "x", {}, (), 5)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Rec(1, e=2)  # type: ignore[call-arg]


def test_still_frozen_hashable_and_replaceable() -> None:
    r = _Rec(1, "y")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.a = 2  # type: ignore[misc]
    assert r == _Rec(1, "y")
    assert r != _Rec(2, "y")
    # Hashing is the dataclass's: over the fields (so a dict field makes it unhashable, as before).
    assert hash(_Pair(1, "y")) == hash(_Pair(1, "y")) == hash((1, "y"))
    with pytest.raises(TypeError, match="unhashable"):
        hash(r)
    assert dataclasses.replace(r, a=5) == _Rec(5, "y")
    assert pickle.loads(pickle.dumps(r)) == r


def test_refuses_what_it_does_not_handle() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class KwOnly:
        a: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    for cls in (Mutable, Post, KwOnly, Slotted):
        with pytest.raises(TypeError):
            fast_init(cls)


def test_hot_records_use_it() -> None:
    # The records a cold open + one-row take builds (~70 of them) store fields without
    # object.__setattr__: the generated __init__ is replaced (its code is not from dataclasses).
    for cls in (LanceField, LanceSchema, PageInfo, ColumnInfo, DataFile, DataFragment, Manifest):
        assert cls.__init__.__code__.co_filename == "<string>"
        assert "__setattr__" not in cls.__init__.__code__.co_names, cls
    f = LanceField(1, -1, "x", "int64")
    assert f.metadata == {}
    assert f.children == ()
    assert f.nullable
