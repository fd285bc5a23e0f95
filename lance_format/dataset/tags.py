"""``ds.tags``: named versions (create, delete, update, list), as in pylance."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from lance_format.core.errors import InvalidInputError
from lance_format.table import tags as _tags
from lance_format.table.versions import VersionInfo

if TYPE_CHECKING:
    from lance_format.dataset.dataset import LanceDataset

__all__ = ["Tags"]


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

    def __init__(self, ds: LanceDataset) -> None:
        self._ds = ds
        self._store = ds.store

    def _manifest_size(self, version: int) -> int:
        if isinstance(version, bool) or not isinstance(version, int | np.integer):
            raise InvalidInputError(f"a tag points at a version number, not {version!r}")
        info = VersionInfo(self._store)
        entry = info.entries.get(version)
        if entry is None:
            raise InvalidInputError(f"{self._ds.uri}: cannot tag version {version}: it does not exist")
        return entry[1]

    def create(self, tag: str, version: int) -> None:
        """Point a new tag at ``version``."""
        size = self._manifest_size(version)
        _tags.create_tag(self._store, tag, int(version), size)

    def update(self, tag: str, version: int) -> None:
        """Move an existing tag to ``version``."""
        size = self._manifest_size(version)
        _tags.update_tag(self._store, tag, int(version), size)

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
