"""Object names of a dataset: manifests (V1/V2 schemes), data files, transactions, hint file."""

from __future__ import annotations

import json
import uuid
from collections.abc import Hashable
from enum import Enum

from lance_format.core.errors import CorruptFileError, InvalidInputError
from lance_format.io.store import ObjectStore

__all__ = [
    "HINT_KEY",
    "STAGED_DIR",
    "TRANSACTIONS_DIR",
    "VERSIONS_DIR",
    "ManifestNaming",
    "data_file_name",
    "list_versions",
    "list_versions_tagged",
    "manifest_key",
    "migrate_to_v2",
    "parse_manifest_name",
    "staged_key",
    "transaction_key",
    "write_hint",
]

VERSIONS_DIR = "_versions"
TRANSACTIONS_DIR = "_transactions"
HINT_KEY = f"{VERSIONS_DIR}/latest_version_hint.json"
#: Records of data files staged (written, not yet committed), one per file: ``_staged/{file name}``.
#: lance-flight's own folder; pylance ignores it.
STAGED_DIR = "_staged"
_U64_MAX = (1 << 64) - 1
# "{20 digits}.manifest" is the V2 scheme; its length tells it apart from V1 names.
_V2_NAME_LEN = 20 + 1 + len("manifest")
#: Listings of _versions/ retried when a concurrent writer's temporary file vanishes mid-listing.
_LIST_ATTEMPTS = 8


class ManifestNaming(Enum):
    """``V1``: ``{version}.manifest``; ``V2``: ``{u64::MAX - version:020}.manifest`` (newest first)."""

    V1 = 1
    V2 = 2


def manifest_key(version: int, naming: ManifestNaming = ManifestNaming.V2) -> str:
    """Object key of a version's manifest."""
    if version < 1 or version > _U64_MAX:
        raise InvalidInputError(f"invalid dataset version {version}")
    if naming is ManifestNaming.V1:
        return f"{VERSIONS_DIR}/{version}.manifest"
    return f"{VERSIONS_DIR}/{_U64_MAX - version:020d}.manifest"


def parse_manifest_name(name: str) -> tuple[int, ManifestNaming] | None:
    """``(version, scheme)`` of a file name in ``_versions/``; ``None`` for anything else.

    Detached versions (``d...``), temporary and staging files, and the hint are ignored.
    """
    if not name.endswith(".manifest") or name.startswith("d"):
        return None
    stem = name[: -len(".manifest")]
    if not stem.isdigit():
        return None
    if len(name) == _V2_NAME_LEN:
        return _U64_MAX - int(stem), ManifestNaming.V2
    return int(stem), ManifestNaming.V1


def list_versions(store: ObjectStore) -> tuple[dict[int, tuple[str, int]], ManifestNaming | None]:
    """Every committed version with its ``(key, size)``, from one listing of ``_versions/``.

    Raises :class:`CorruptFileError` when both naming schemes are present.
    """
    found, naming, _ = list_versions_tagged(store)
    return found, naming


def list_versions_tagged(
    store: ObjectStore,
) -> tuple[dict[int, tuple[str, int]], ManifestNaming | None, dict[int, Hashable]]:
    """:func:`list_versions` plus each manifest's store tag (see :meth:`ObjectStore.list_tagged`):
    a dataset dropped and written again at one URI reuses manifest names, not tags."""
    found: dict[int, tuple[str, int]] = {}
    tags: dict[int, Hashable] = {}
    schemes: set[ManifestNaming] = set()
    for key, size, tag in _listing(store):
        parsed = parse_manifest_name(key.rsplit("/", 1)[-1])
        if parsed is None:
            continue
        version, scheme = parsed
        schemes.add(scheme)
        found[version] = (key, size)
        tags[version] = tag
    if len(schemes) > 1:
        raise CorruptFileError(
            f"{store.uri}/{VERSIONS_DIR}",
            "found multiple manifest naming schemes in the same directory",
        )
    return found, (schemes.pop() if schemes else None), tags


def migrate_to_v2(store: ObjectStore) -> int:
    """Copy every V1-named manifest to its V2 name, then remove the V1 name; returns how many moved.

    Copies come first so a reader never finds a version missing; in between it may see both
    schemes and refuse, as pylance does during its own migration.
    """
    found, naming = list_versions(store)
    if naming is not ManifestNaming.V1:
        return 0
    for version, (key, _) in found.items():
        store.put_if_not_exists(manifest_key(version, ManifestNaming.V2), store.read_all(key))
    for key, _ in found.values():
        store.delete(key)
    return len(found)


def _listing(store: ObjectStore) -> list[tuple[str, int, Hashable]]:
    # A temporary file of a concurrent writer can vanish between the directory read and its stat
    # (LocalStore.list raises FileNotFoundError then); listing again sees a consistent directory.
    for attempt in range(_LIST_ATTEMPTS):
        try:
            return list(store.list_tagged(VERSIONS_DIR))
        except FileNotFoundError:
            if attempt == _LIST_ATTEMPTS - 1:
                raise
    return []


def data_file_name() -> str:
    """A new data file name as pylance makes them: 24 bits as ``0``/``1`` then 26 hex digits."""
    raw = uuid.uuid4().bytes
    bits = "".join(f"{b:08b}" for b in raw[:3])
    return f"{bits}{raw[3:].hex()}.lance"


def staged_key(data_file: str) -> str:
    """The key of the staging record of data file ``data_file`` (a name under ``data/``)."""
    return f"{STAGED_DIR}/{data_file}"


def transaction_key(file_name: str) -> str:
    """Object key of a transaction file named in a manifest."""
    return f"{TRANSACTIONS_DIR}/{file_name}"


def write_hint(store: ObjectStore, version: int) -> None:
    """Write ``latest_version_hint.json`` (compact JSON, as pylance 14 writes it)."""
    store.write(HINT_KEY, json.dumps({"version": version}, separators=(",", ":")).encode())
