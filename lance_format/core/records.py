"""Cheaper construction of frozen dataclasses.

A frozen dataclass's generated ``__init__`` stores each field with ``object.__setattr__`` (its own
``__setattr__`` refuses), about 0.4 us per field: a LanceField of eight fields cost ~4 us to build,
several times a plain class. A cold open and one-row take builds ~70 such records (manifest,
schema, column and page layouts, decoded pages). :func:`fast_init` gives a frozen dataclass an
``__init__`` that writes the fields straight into the instance ``__dict__``, with the same
signature, defaults and default factories; the class stays frozen (assignment still raises,
equality, hashing and ``dataclasses.replace`` are the dataclass's).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

T = TypeVar("T")

_NO_VALUE = object()


def fast_init(cls: type[T]) -> type[T]:
    """Replace the generated ``__init__`` of the frozen dataclass ``cls`` by one that stores the
    fields in the instance ``__dict__`` (apply above ``@dataclass(frozen=True)``).

    Raises
    ------
    TypeError
        ``cls`` is not a frozen dataclass with an instance ``__dict__`` and a generated
        ``__init__``, or it has what this does not handle (yet): a ``__post_init__``, init-only
        variables, fields left out of ``__init__`` or keyword-only fields.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or not params.init:
        raise TypeError(f"{cls.__name__}: fast_init needs a frozen dataclass with a generated __init__")
    if "__slots__" in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: fast_init needs an instance __dict__ and no __post_init__")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    # __dataclass_fields__ also lists class variables and init-only variables (fields() does not).
    if any("InitVar" in str(f.type) for f in cls.__dataclass_fields__.values()):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: fast_init does not handle init-only variables")
    if any(not f.init or f.kw_only for f in fields):
        raise TypeError(f"{cls.__name__}: fast_init does not handle fields outside the positional __init__")
    ns: dict[str, Any] = {"_NO_VALUE": _NO_VALUE}
    params_src: list[str] = []
    body: list[str] = []
    for f in fields:
        name = f.name
        value = name
        if f.default is not dataclasses.MISSING:
            ns[f"_dflt_{name}"] = f.default
            params_src.append(f"{name}=_dflt_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_fact_{name}"] = f.default_factory
            params_src.append(f"{name}=_NO_VALUE")
            value = f"_fact_{name}() if {name} is _NO_VALUE else {name}"
        else:
            params_src.append(name)
        body.append(f"    _fi_d[{name!r}] = {value}")
    src = f"def __init__({', '.join(['self', *params_src])}):\n    _fi_d = self.__dict__\n" + "\n".join(
        body or ["    pass"]
    )
    exec(src, ns)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
