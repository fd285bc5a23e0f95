"""A registry keyed by message type: how encodings and page layouts find their decoders.

Each encoding dataclass (2.0 node, 2.1 compressive encoding, 2.1 page layout) has exactly one entry;
a decode looks it up once per page (or per node of a page's encoding tree) by the message's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

__all__ = ["Registry"]

V = TypeVar("V")


class Registry(Generic[V]):
    """One value (a codec, a reader, a decoder function) per message type.

    Parameters
    ----------
    what:
        What the values are, for the error on a second registration (``"a codec"``).
    """

    def __init__(self, what: str) -> None:
        self._what = what
        self._by_type: dict[type[Any], V] = {}

    def add(self, kind: type[Any], value: V) -> None:
        """Register ``value`` for messages of type ``kind``.

        Raises
        ------
        ValueError
            ``kind`` already has a value (one per message type).
        """
        if kind in self._by_type:
            raise ValueError(f"{kind.__name__} already has {self._what}")
        self._by_type[kind] = value

    def of(self, message: object) -> V | None:
        """The value registered for ``message``'s type, or None."""
        return self._by_type.get(type(message))

    def view(self) -> Mapping[type[Any], V]:
        """Every registered type with its value (read-only)."""
        return MappingProxyType(self._by_type)

    @property
    def table(self) -> Mapping[type[Any], V]:
        """The live table itself, for hot lookups (``table.get(type(message))``); do not mutate."""
        return self._by_type
