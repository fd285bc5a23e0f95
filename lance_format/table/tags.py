"""Tags: named versions stored as ``_refs/tags/{name}.json`` (pylance 14's JSON shape), and pins.

A tag keeps its version from cleanup. Cleanup lists the tags, deletes the manifests of the versions
it removes, lists the tags again and puts back the manifest of any version a tag created meanwhile
points at (keeping its files). A new tag checks, once written, that its version's manifest is
still there, and is withdrawn with :class:`VersionNotFoundError` if not. One of the two sees the
other, so a tag that was created successfully always keeps a readable version.

A pin (``_pins/{uuid}.json``, unknown to pylance) is an unnamed tag held while a commit copies an
old version's files (a restore): cleanup treats it as a tag until it is released, or until it is
older than :data:`PIN_EXPIRY_S` (left by a writer that died).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from lance_format.core.errors import (
    CorruptFileError,
    InvalidInputError,
    InvalidTypeError,
    NotFoundError,
    TagAlreadyExistsError,
    VersionNotFoundError,
)
from lance_format.io.store import ObjectStore
from lance_format.table.versions import VersionInfo

__all__ = [
    "PINS_DIR",
    "PIN_EXPIRY_S",
    "TAGS_DIR",
    "create_tag",
    "delete_tag",
    "get_tag",
    "list_pins",
    "list_tags",
    "pin_version",
    "unpin",
    "update_tag",
]

TAGS_DIR = "_refs/tags"
PINS_DIR = "_pins"
#: Seconds after which cleanup ignores (and removes) a pin: a restore holds one for the seconds its
#: commit takes, so one a day old was left by a writer that died.
PIN_EXPIRY_S = 24 * 3600.0
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: Longest tag name: a tag is the file ``{name}.json``, and file systems refuse names over 255 bytes.
MAX_TAG_NAME_CHARS = 200


def _key(name: str) -> str:
    if not isinstance(name, str):
        raise InvalidTypeError(f"a tag name is a string, not {name!r}")
    if not _NAME.match(name) or name.startswith(".") or ".." in name:
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


def _check_kept(store: ObjectStore, version: int, what: str) -> None:
    """Raise :class:`VersionNotFoundError` if ``version`` is gone now that a ref to it is written:
    a cleanup removed it before it could see the ref (see the module's docstring)."""
    if version not in VersionInfo(store).entries:
        raise VersionNotFoundError(f"{store.uri}: version {version} was cleaned up while {what}")


def create_tag(store: ObjectStore, name: str, version: int, manifest_size: int) -> None:
    """Create a tag; :class:`DatasetAlreadyExistsError` if it exists, :class:`VersionNotFoundError`
    if a cleanup removed ``version`` meanwhile (the tag is then withdrawn)."""
    key = _key(name)
    if not store.put_if_not_exists(key, _encode(version, manifest_size)):
        raise TagAlreadyExistsError(f"{store.uri}: tag {name!r} already exists")
    try:
        _check_kept(store, version, f"tag {name!r} was created")
    except VersionNotFoundError:
        store.delete(key)
        raise


def update_tag(store: ObjectStore, name: str, version: int, manifest_size: int) -> None:
    """Point an existing tag at another version (:class:`VersionNotFoundError` and the tag as it
    was if a cleanup removed ``version`` meanwhile)."""
    old = get_tag(store, name)
    key = _key(name)
    store.write(key, _encode(version, manifest_size, old.get("createdAt")))
    try:
        _check_kept(store, version, f"tag {name!r} was moved")
    except VersionNotFoundError:
        store.write(key, _encode(int(old["version"]), int(old.get("manifestSize", 0)), old.get("createdAt")))
        raise


def pin_version(store: ObjectStore, version: int) -> str:
    """Keep ``version`` from cleanup until :func:`unpin` (the returned key); raises
    :class:`VersionNotFoundError` (nothing pinned) if it is gone or a cleanup removed it."""
    key = f"{PINS_DIR}/{uuid.uuid4()}.json"
    store.write(key, json.dumps({"version": int(version)}).encode())
    try:
        _check_kept(store, version, "a commit read it")
    except VersionNotFoundError:
        store.delete(key)
        raise
    return key


def unpin(store: ObjectStore, key: str) -> None:
    """Release a pin taken by :func:`pin_version`."""
    store.delete(key)


def list_pins(store: ObjectStore) -> dict[str, int]:
    """``{key: version}`` of the pins younger than :data:`PIN_EXPIRY_S`; older ones are removed."""
    out: dict[str, int] = {}
    now = time.time()
    for key, _ in store.list(PINS_DIR):
        written = store.modified(key)
        try:
            version = int(json.loads(store.read_all(key))["version"])
        except NotFoundError:
            continue  # released meanwhile
        except (ValueError, KeyError, TypeError):
            version = -1  # not ours to read: expires like any other
        if written is not None and now - written > PIN_EXPIRY_S:
            store.delete(key)
            continue
        out[key] = version
    return out


def delete_tag(store: ObjectStore, name: str) -> None:
    """Remove a tag; :class:`NotFoundError` if it does not exist."""
    get_tag(store, name)
    store.delete(_key(name))
