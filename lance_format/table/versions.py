"""Finding and loading versions: manifests by number, the latest one, and their transactions."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from lance_format.core.errors import (
    CorruptFileError,
    DatasetNotFoundError,
    NotFoundError,
    OutOfRangeError,
    VersionNotFoundError,
)
from lance_format.io.store import ObjectStore
from lance_format.table import _serde
from lance_format.table.external_store import finalize_pending, manifest_store_for
from lance_format.table.manifest_file import read_manifest, read_section
from lance_format.table.model import Manifest, Transaction
from lance_format.table.naming import (
    ManifestNaming,
    list_versions_tagged,
    manifest_key,
    transaction_key,
)

__all__ = ["VersionInfo", "load_manifest", "read_index_section", "read_transaction"]


class VersionInfo:
    """The versions of a dataset as one listing saw them."""

    __slots__ = ("entries", "naming", "tags", "uri")

    def __init__(self, store: ObjectStore) -> None:
        self.uri = store.uri
        self.entries, self.naming, self.tags = list_versions_tagged(store)

    @property
    def latest(self) -> int | None:
        """The newest version, ``None`` when there is none."""
        return max(self.entries) if self.entries else None


def load_manifest(
    store: ObjectStore,
    version: int | None = None,
    *,
    read: Callable[[ObjectStore, int, str, int, Hashable], Manifest] | None = None,
) -> tuple[Manifest, ManifestNaming]:
    """The manifest of ``version`` (the latest when ``None``) and the dataset's naming scheme.

    ``read(store, version, key, size, tag)`` replaces the plain manifest read (the dataset layer passes
    its metadata cache here).

    Raises :class:`NotFoundError` when there is no dataset or no such version. Datasets under a
    registered external manifest store first get a dead writer's pending version published.
    """
    external = manifest_store_for(store.uri)
    if external is not None:
        finalize_pending(store, external)
    info = VersionInfo(store)
    if info.naming is None:
        raise DatasetNotFoundError(f"{store.uri}: dataset not found (no manifests in _versions/)")
    if version is None:
        version = info.latest
        assert version is not None
    if isinstance(version, int) and not 0 <= version < 2**64:
        # pylance converts versions to unsigned 64-bit integers: OverflowError
        raise OutOfRangeError(f"versions are unsigned 64-bit integers, got {version}")
    entry = info.entries.get(version)
    if entry is None:
        raise VersionNotFoundError(
            f"{store.uri}: version {version} not found; versions are {min(info.entries)}..{max(info.entries)}"
        )
    key, size = entry
    tag = info.tags.get(version)
    manifest = read_manifest(store, key, size) if read is None else read(store, version, key, size, tag)
    if manifest.version != version:
        raise CorruptFileError(f"{store.uri}/{key}", f"manifest says version {manifest.version}")
    return manifest, info.naming


def read_transaction(store: ObjectStore, manifest: Manifest, naming: ManifestNaming) -> Transaction | None:
    """The transaction that produced ``manifest``: the ``.txn`` file, else the inline copy."""
    if manifest.transaction_file:
        try:
            key = transaction_key(manifest.transaction_file)
            return _serde.transaction_from_bytes(store.read_all(key), f"{store.uri}/{key}")
        except NotFoundError:
            pass
    if manifest.transaction_section is not None:
        key = manifest_key(manifest.version, naming)
        data = read_section(store, key, manifest.transaction_section)
        return _serde.transaction_from_bytes(data, f"{store.uri}/{key}")
    return None


def read_index_section(store: ObjectStore, manifest: Manifest, naming: ManifestNaming) -> bytes | None:
    """The serialized index section of a version, if it has one."""
    if manifest.index_section is None:
        return None
    return read_section(store, manifest_key(manifest.version, naming), manifest.index_section)
