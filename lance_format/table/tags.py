"""Tags: named versions stored as ``_refs/tags/{name}.json`` (pylance 14's JSON shape), and pins.

A tag keeps its version from cleanup. Cleanup lists the tags, deletes the manifests of the versions
it removes, lists the tags again and puts back the manifest of any version a tag created meanwhile
points at (keeping its files). A new tag checks, once written, that its version's manifest is
still there, and is withdrawn with :class:`VersionNotFoundError` if not. One of the two sees the
other, so a tag that was created successfully always keeps a readable version.

A pin (``_pins/{uuid}.json``, unknown to pylance) is held by a commit while it runs, until it is
released or older than :data:`PIN_EXPIRY_S` (left by a writer that died). It names

* ``version``: a version whose files the commit copies (a restore); cleanup treats it as a tag;
* ``since``: the version the commit was planned on; cleanup keeps it and every later version.
  The commit lists the versions only after writing the pin, and puts the manifest numbered after
  the latest it listed. A version cleanup removes must be in cleanup's listing, which comes before
  its reading of the pins; so a version committed after the commit's listing is either still
  there at the put (which then loses and rebases) or was removed by a cleanup that saw the pin,
  which it cannot be. Without the pin, the put of a number committed and cleaned up meanwhile
  won, under the latest version: a lost write.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

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
    "Pin",
    "create_tag",
    "delete_tag",
    "get_tag",
    "list_pins",
    "list_tags",
    "pin_commit",
    "pin_version",
    "read_put_back",
    "referenced",
    "unpin",
    "update_tag",
]

TAGS_DIR = "_refs/tags"
PINS_DIR = "_pins"
#: Seconds after which cleanup ignores (and removes) a pin: a restore holds one for the seconds its
#: commit takes, so one a day old was left by a writer that died.
PIN_EXPIRY_S = 24 * 3600.0
#: Seconds between a reader's tries of a version being put back (see :func:`read_put_back`).
PUT_BACK_POLL_S = 0.02
T = TypeVar("T")
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


@dataclass(frozen=True)
class Pin:
    """What a pin keeps: the version ``version`` (a restore's source), and every version from
    ``since`` on (a commit's base); either may be ``None``."""

    version: int | None = None
    since: int | None = None


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _write_pin(store: ObjectStore, pin: Pin) -> str:
    key = f"{PINS_DIR}/{uuid.uuid4()}.json"
    doc = {k: v for k, v in (("version", pin.version), ("since", pin.since)) if v is not None}
    store.write(key, json.dumps(doc).encode())
    return key


def pin_version(store: ObjectStore, version: int) -> str:
    """Keep ``version`` from cleanup until :func:`unpin` (the returned key); raises
    :class:`VersionNotFoundError` (nothing pinned) if it is gone or a cleanup removed it."""
    return pin_commit(store, None, version)


def pin_commit(store: ObjectStore, since: int | None, version: int | None = None) -> str:
    """Pin a commit's base ``since`` and every later version, and ``version`` whose files it
    copies, until :func:`unpin` (the returned key). Raises :class:`VersionNotFoundError` (nothing
    pinned) if ``version`` is gone or a cleanup removed it; ``since`` needs no such check: the
    commit lists the versions after this call (see the module's docstring)."""
    key = _write_pin(store, Pin(_int_or_none(version), _int_or_none(since)))
    if version is not None:
        try:
            _check_kept(store, version, "a commit read it")
        except VersionNotFoundError:
            store.delete(key)
            raise
    return key


def unpin(store: ObjectStore, key: str) -> None:
    """Release a pin taken by :func:`pin_commit` or :func:`pin_version`."""
    store.delete(key)


def list_pins(store: ObjectStore) -> dict[str, Pin]:
    """``{key: pin}`` of the pins younger than :data:`PIN_EXPIRY_S`; older ones are removed."""
    out: dict[str, Pin] = {}
    now = time.time()
    for key, _ in store.list(PINS_DIR):
        written = store.modified(key)
        try:
            doc = json.loads(store.read_all(key))
            pin = Pin(_int_or_none(doc.get("version")), _int_or_none(doc.get("since")))
        except NotFoundError:
            continue  # released meanwhile
        except (ValueError, KeyError, TypeError, AttributeError):
            pin = Pin(-1)  # not ours to read: expires like any other
        if written is not None and now - written > PIN_EXPIRY_S:
            store.delete(key)
            continue
        out[key] = pin
    return out


def referenced(store: ObjectStore, version: int) -> bool:
    """Whether a tag or a pin names ``version`` (so a cleanup keeps it, or is putting it back)."""
    if any(int(t["version"]) == version for t in list_tags(store).values()):
        return True
    return any(p.version == version for p in list_pins(store).values())


def read_put_back(store: ObjectStore, version: int, read: Callable[[], T], wait_s: float) -> T:
    """``read()`` of ``version``, tried again for up to ``wait_s`` seconds while it fails with
    :class:`VersionNotFoundError` and a tag or pin names the version.

    A tag or pin created while a cleanup runs may name a version whose manifest the cleanup has
    just removed; the cleanup puts it back once it lists the tags and pins again (see the module's
    docstring), or the tag is withdrawn. A reader in that window waits for either, instead of
    refusing a version a tag keeps.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return read()
        except VersionNotFoundError:
            if time.monotonic() >= deadline or not referenced(store, version):
                raise
        time.sleep(PUT_BACK_POLL_S)


def delete_tag(store: ObjectStore, name: str) -> None:
    """Remove a tag; :class:`NotFoundError` if it does not exist."""
    get_tag(store, name)
    store.delete(_key(name))
