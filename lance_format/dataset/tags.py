"""``ds.tags``: named versions (create, delete, update, list), as in pylance."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from lance_format.core.errors import InvalidInputError, InvalidTypeError, NotSupportedError, OutOfRangeError
from lance_format.table import tags as _tags
from lance_format.table.versions import VersionInfo

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import Snapshot

__all__ = ["Reference", "Tags"]

#: What pylance's tag calls accept to name a version.
Reference: TypeAlias = "int | str | tuple[str | None, int | None] | None"


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        # Keep microseconds: Python parses at most 6 fractional digits.
        head, _, frac = text.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}+00:00")
    except ValueError:
        return None


class Tags:
    """Tags of a dataset: names pointing at versions, kept in ``_refs/tags/``."""

    def __init__(self, ds: Snapshot) -> None:
        self._ds = ds
        self._store = ds.store

    def _manifest_size(self, version: int) -> int:
        if isinstance(version, bool) or not isinstance(version, int | np.integer):
            raise InvalidTypeError(f"a tag points at a version number, not {version!r}")
        if not 0 <= version < 2**64:
            raise OutOfRangeError(f"versions are unsigned 64-bit integers, got {version}")
        info = VersionInfo(self._store)
        entry = info.entries.get(version)
        if entry is None:
            raise InvalidInputError(f"{self._ds.uri}: cannot tag version {version}: it does not exist")
        return entry[1]

    def resolve(self, reference: Reference) -> int:
        """The version a pylance-style reference names: ``None`` is this handle's version, a
        string a tag, ``(branch, version)`` a version of the main branch (``None``: the latest)."""
        if reference is None:
            return self._ds.version
        if isinstance(reference, str):
            return self.get_version(reference)
        if isinstance(reference, tuple):
            if len(reference) != 2:
                raise InvalidInputError(f"a reference tuple is (branch, version), got {reference!r}")
            branch, version = reference
            if branch not in (None, "main"):
                raise NotSupportedError(f"branches are not supported (reference to branch {branch!r})")
            if version is None:
                latest = VersionInfo(self._store).latest
                if latest is None:
                    raise InvalidInputError(f"{self._ds.uri}: the dataset has no versions")
                return latest
            return self.resolve(version)
        if isinstance(reference, bool) or not isinstance(reference, int | np.integer):
            raise InvalidInputError(f"a tag points at a version number or tag, not {reference!r}")
        return int(reference)

    def create(self, tag: str, reference: Reference = None) -> None:
        """Point a new tag at ``reference`` (a version number, a tag name, ``(branch, version)``,
        or ``None`` for this handle's version), as pylance's ``tags.create`` does."""
        version = self.resolve(reference)
        size = self._manifest_size(version)
        _tags.create_tag(self._store, tag, version, size)

    def update(self, tag: str, reference: Reference = None) -> None:
        """Move an existing tag to ``reference`` (see :meth:`create`)."""
        version = self.resolve(reference)
        size = self._manifest_size(version)
        _tags.update_tag(self._store, tag, version, size)

    def delete(self, tag: str) -> None:
        """Remove a tag."""
        _tags.delete_tag(self._store, tag)

    def get_version(self, tag: str) -> int:
        """The version a tag points at."""
        return int(_tags.get_tag(self._store, tag)["version"])

    def list(self) -> dict[str, dict[str, Any]]:
        """``{name: {"branch", "version", "created_at", "updated_at", "manifest_size", "metadata"}}``."""
        out = {}
        for name in sorted(_tags.list_tags(self._store)):
            doc = _tags.get_tag(self._store, name)
            out[name] = {
                "branch": doc.get("branch"),
                "version": int(doc["version"]),
                "created_at": _parse_time(doc.get("createdAt")),
                "updated_at": _parse_time(doc.get("updatedAt")),
                "manifest_size": doc.get("manifestSize", 0),
                "metadata": doc.get("metadata", {}),
            }
        return out

    def list_ordered(self) -> builtins.list[tuple[str, dict[str, Any]]]:
        """Tags, newest version first."""
        return sorted(self.list().items(), key=lambda kv: -kv[1]["version"])
