"""Staged data files: written by a stage, owned by its writer until a commit names them.

A stage (the Flight server's ``do_put`` in stage mode, Spark's executors) writes data files that no
version references yet. Before each data file it writes a record ``_staged/{file}`` naming the
writer (the server's principal). The record lives in the dataset's own storage, so it holds across
server restarts and between worker processes, and it is written *before* the file, so every staged
file has one. Discarding staged files (:func:`discard_staged`) removes only files that

* have a record whose owner is the caller (a client cannot name another writer's files, nor any
  file written by a plain write, a compaction or pylance: those have no record), and
* no version of the dataset references (a committed or tagged file is never discarded, even when
  its record lingers because the committer died before removing it).

A commit drops the records of the files it committed (:func:`forget_staged`); cleanup removes
records and files of stages never committed once they are old enough
(:mod:`lance_format.dataset.cleanup`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Iterator, Sequence

from lance_format.core.errors import CorruptFileError, InvalidInputError, NotFoundError
from lance_format.core.types import LanceSchema
from lance_format.dataset.cleanup import files_of_every_version
from lance_format.file import LanceFileReader
from lance_format.io.store import ObjectStore
from lance_format.table.model import DataFragment
from lance_format.table.naming import staged_key

__all__ = [
    "StagingStore",
    "check_data_file",
    "check_staged_fragments",
    "discard_staged",
    "forget_staged",
    "staged_owner",
]

log = logging.getLogger("lance_format.staging")

_DATA = "data/"
#: A data file's ``fields`` entry for a column whose field was dropped (Lance's tombstone).
_TOMBSTONE = -2


#: Longest data file name (bytes): a path component of POSIX file systems (NAME_MAX); the names
#: writers give data files are ~40 bytes.
MAX_FILE_NAME_BYTES = 255


def check_data_file(name: object) -> str:
    """``name`` if it is a data file's name as fragments carry it (one plain name under ``data/``).

    Raises :class:`InvalidInputError` for anything else (``../other/data/x.lance``, ``a/b``):
    a version referencing files outside its own ``data/`` folder would let a commit read another
    dataset's files, and a drop of that dataset delete what this one references.
    """
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
        raise InvalidInputError(f"not a data file name: {name!r}")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_FILE_NAME_BYTES:
        # No file system holds such a name (its stat fails with ENAMETOOLONG, not "not found").
        raise InvalidInputError(f"not a data file name: {name[:40]!r}... is over {MAX_FILE_NAME_BYTES} bytes")
    return name


class StagingStore(ObjectStore):
    """An object store that records every data file written through it as staged by ``owner``.

    It also remembers each key it wrote, so a failed stage can remove them all
    (:meth:`remove_written`).
    """

    def __init__(self, inner: ObjectStore, owner: str) -> None:
        self.inner = inner
        self.owner = owner
        self.remote = inner.remote  # the read planner tunes request merging by it
        self.written: list[str] = []
        self._lock = threading.Lock()

    @property
    def uri(self) -> str:
        return self.inner.uri

    def size(self, key: str) -> int:
        return self.inner.size(key)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner.read_range(key, start, end)

    def read_all(self, key: str) -> bytes:
        return self.inner.read_all(key)

    def write(self, key: str, data: bytes) -> None:
        self.write_parts(key, (data,))

    def write_parts(self, key: str, parts: Sequence[bytes | memoryview]) -> None:
        if key.startswith(_DATA):
            record = staged_key(key[len(_DATA) :])
            with self._lock:
                self.written.append(record)
            self.inner.write(record, json.dumps({"owner": self.owner}).encode())
        with self._lock:
            self.written.append(key)
        self.inner.write_parts(key, parts)

    def put_if_not_exists(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_not_exists(key, data)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def modified(self, key: str) -> float | None:
        return self.inner.modified(key)

    def list(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        return self.inner.list(prefix)

    def list_dirs(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list_dirs(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def remove_written(self) -> None:
        """Remove every file and record this store wrote (best effort: cleanup gets the rest)."""
        with self._lock:
            keys, self.written = list(self.written), []
        for key in reversed(keys):  # files before their records
            try:
                self.inner.delete(key)
            except Exception:
                log.warning("could not remove a staged file", extra={"key": key}, exc_info=True)


def staged_owner(store: ObjectStore, data_file: str) -> str | None:
    """Who staged data file ``data_file`` (``None``: no staging record, it was not staged)."""
    try:
        doc = json.loads(store.read_all(staged_key(check_data_file(data_file))))
    except (NotFoundError, ValueError):
        return None
    owner = doc.get("owner") if isinstance(doc, dict) else None
    return owner if isinstance(owner, str) else None


def discard_staged(store: ObjectStore, data_files: Iterable[str], owner: str) -> int:
    """Delete staged data files of ``owner`` that no version references; the number deleted.

    Names that are not ``owner``'s staged files, or that some version (tagged or not) references,
    are left alone: discarding is safe to call with any list, and a hostile list deletes nothing
    that is not the caller's own uncommitted data.
    """
    names = [check_data_file(n) for n in data_files]
    mine = [n for n in dict.fromkeys(names) if staged_owner(store, n) == owner]
    if not mine:
        return 0
    referenced = files_of_every_version(store)
    removed = 0
    for name in mine:
        if f"{_DATA}{name}" in referenced:
            continue  # committed: it is the dataset's now
        store.delete(f"{_DATA}{name}")
        store.delete(staged_key(name))
        removed += 1
    return removed


def forget_staged(store: ObjectStore, data_files: Iterable[str]) -> None:
    """Drop the staging records of files a commit just made the dataset's (best effort)."""
    for name in data_files:
        try:
            store.delete(staged_key(check_data_file(name)))
        except Exception:
            log.warning("could not remove a staging record", extra={"file": name}, exc_info=True)


def check_staged_fragments(store: ObjectStore, schema: LanceSchema, frags: Iterable[DataFragment]) -> None:
    """Refuse fragment documents a commit must not write into a manifest.

    A commit takes fragment metadata from the client; a document that does not describe its data
    files would make every later read of the version fail (or read the wrong columns). Each
    fragment must have data files in this dataset's ``data/`` that exist, hold ``physical_rows``
    rows, are of the file version and size the document says, and store fields of ``schema``
    (each once), in columns the file has. A deletion file is refused: fragment ids (which name
    deletion files) are assigned by the commit.

    Raises :class:`InvalidInputError` for the first problem found.
    """
    known = {f.id for f in schema.walk()}
    for frag in frags:
        if frag.deletion_file is not None:
            raise InvalidInputError(
                "a staged fragment cannot carry a deletion file (ids are assigned at commit)"
            )
        if not frag.files:
            raise InvalidInputError("a staged fragment has no data files")
        seen: set[int] = set()
        for data_file in frag.files:
            name = check_data_file(data_file.path)
            ids = [i for i in data_file.fields if i != _TOMBSTONE]
            unknown = [i for i in ids if i not in known]
            if unknown:
                raise InvalidInputError(
                    f"data file {name!r} stores field {unknown[0]}, which the schema lacks"
                )
            twice = seen.intersection(ids)
            if twice or len(set(ids)) != len(ids):
                raise InvalidInputError(f"a staged fragment stores field {min(twice or ids)} twice")
            seen.update(ids)
            if data_file.column_indices and len(data_file.column_indices) != len(data_file.fields):
                raise InvalidInputError(
                    f"data file {name!r} has {len(data_file.fields)} fields but "
                    f"{len(data_file.column_indices)} column indices"
                )
            try:
                meta = LanceFileReader(f"{_DATA}{name}", store=store).metadata()
            except NotFoundError:
                raise InvalidInputError(f"staged data file {name!r} does not exist") from None
            except CorruptFileError:
                raise InvalidInputError(f"staged data file {name!r} is not a Lance data file") from None
            if meta.num_rows != frag.physical_rows:
                raise InvalidInputError(
                    f"data file {name!r} holds {meta.num_rows} rows, its fragment says {frag.physical_rows}"
                )
            recorded = (data_file.file_major_version, data_file.file_minor_version)
            if recorded != meta.version.manifest:
                raise InvalidInputError(
                    f"data file {name!r} is file version {meta.version.manifest}, "
                    f"its fragment says {recorded}"
                )
            if data_file.file_size_bytes not in (0, meta.file_size):
                raise InvalidInputError(
                    f"data file {name!r} is {meta.file_size} bytes, "
                    f"its fragment says {data_file.file_size_bytes}"
                )
            bad = [c for c in data_file.column_indices if not -1 <= c < len(meta.columns)]
            if bad:
                raise InvalidInputError(f"data file {name!r} has no column {bad[0]}")
