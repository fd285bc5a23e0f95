"""Tags: named versions stored as ``_refs/tags/{name}.json`` (pylance 14's JSON shape)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from lance_format.core.errors import (
    CorruptFileError,
    DatasetAlreadyExistsError,
    InvalidInputError,
    NotFoundError,
    VersionNotFoundError,
)
from lance_format.io.store import ObjectStore

__all__ = ["TAGS_DIR", "create_tag", "delete_tag", "get_tag", "list_tags", "update_tag"]

TAGS_DIR = "_refs/tags"
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: Longest tag name: a tag is the file ``{name}.json``, and file systems refuse names over 255 bytes.
MAX_TAG_NAME_CHARS = 200


def _key(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name) or name.startswith(".") or ".." in name:
        raise InvalidInputError(f"invalid tag name {name!r}: use letters, digits, '.', '_' and '-'")
    if len(name) > MAX_TAG_NAME_CHARS:
        raise InvalidInputError(f"tag names have at most {MAX_TAG_NAME_CHARS} characters, got {len(name)}")
    return f"{TAGS_DIR}/{name}.json"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _encode(version: int, manifest_size: int, created: str | None = None) -> bytes:
    now = _now()
    doc: dict[str, Any] = {
        "branch": None,
        "version": version,
        "createdAt": created or now,
        "updatedAt": now,
        "manifestSize": manifest_size,
        "metadata": {},
    }
    return json.dumps(doc, indent=2).encode()


def get_tag(store: ObjectStore, name: str) -> dict[str, Any]:
    """The tag's JSON document (``version`` and ``manifestSize`` at least)."""
    key = _key(name)
    try:
        data = store.read_all(key)
    except NotFoundError:
        raise VersionNotFoundError(f"{store.uri}: tag {name!r} not found") from None
    try:
        doc: dict[str, Any] = json.loads(data)
        int(doc["version"])
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptFileError(f"{store.uri}/{key}", f"bad tag file: {e}") from None
    return dict(doc)


def list_tags(store: ObjectStore) -> dict[str, dict[str, Any]]:
    """``{name: {"version": v, "manifest_size": n}}`` like pylance's ``tags.list()``."""
    out = {}
    for key, _ in store.list(TAGS_DIR):
        name = key.rsplit("/", 1)[-1]
        if not name.endswith(".json"):
            continue
        name = name[: -len(".json")]
        doc = get_tag(store, name)
        out[name] = {"version": int(doc["version"]), "manifest_size": doc.get("manifestSize", 0)}
    return out


def create_tag(store: ObjectStore, name: str, version: int, manifest_size: int) -> None:
    """Create a tag; :class:`DatasetAlreadyExistsError` if it exists."""
    if not store.put_if_not_exists(_key(name), _encode(version, manifest_size)):
        raise DatasetAlreadyExistsError(f"{store.uri}: tag {name!r} already exists")


def update_tag(store: ObjectStore, name: str, version: int, manifest_size: int) -> None:
    """Point an existing tag at another version."""
    old = get_tag(store, name)
    store.write(_key(name), _encode(version, manifest_size, old.get("createdAt")))


def delete_tag(store: ObjectStore, name: str) -> None:
    """Remove a tag; :class:`NotFoundError` if it does not exist."""
    get_tag(store, name)
    store.delete(_key(name))
