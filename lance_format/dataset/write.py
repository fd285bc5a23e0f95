"""Writing data: turning Arrow input into data files and fragments, and ``write_dataset``."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from lance_format.core.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    InvalidTypeError,
    NotFoundError,
    NotSupportedError,
    SchemaMismatchError,
)
from lance_format.core.types import LanceSchema, check_column_names, fields_from_arrow
from lance_format.dataset.multibase import BaseStoreParams, WriteTarget, new_bases, resolve_targets
from lance_format.dataset.session import Session
from lance_format.dataset.snapshot import Snapshot, reader_cache
from lance_format.file import LanceFileVersion, LanceFileWriter
from lance_format.file.reader import assign_columns
from lance_format.io.store import ObjectStore, store_for_uri
from lance_format.table.commit import CommitOptions, commit_transaction
from lance_format.table.model import (
    COMMIT_MESSAGE_KEY,
    Append,
    DataFile,
    DataFragment,
    DataStorageFormat,
    Manifest,
    Operation,
    Overwrite,
    Transaction,
)
from lance_format.table.naming import ManifestNaming, data_file_name
from lance_format.table.versions import load_manifest

__all__ = [
    "commit_properties",
    "commit_snapshot",
    "file_columns",
    "resolve_storage_version",
    "stage_fragments",
    "write_fragments",
    "write_snapshot",
]

#: pylance's default rows per data file.
DEFAULT_MAX_ROWS_PER_FILE = 1024 * 1024
#: pylance's default ``max_rows_per_group`` (row groups only exist in the legacy 0.1 format).
DEFAULT_MAX_ROWS_PER_GROUP = 1024
#: pylance's default ``max_bytes_per_file`` (90 GiB): object stores cap single objects near there.
DEFAULT_MAX_BYTES_PER_FILE = 90 * 1024**3
_MODES = ("create", "append", "overwrite")
#: Versions a write may ask for (the file writer encodes all three).
_WRITABLE_VERSIONS = ("2.0", "2.1", "2.2")
#: What a new dataset gets: pylance 14's ``lance.write_dataset`` default (its "stable" version).
DEFAULT_DATA_STORAGE_VERSION = "2.2"
#: pylance's names for versions ("legacy" is the 0.1 format, which we neither read nor write).
_VERSION_ALIASES = {"stable": "2.2", "legacy": "0.1"}


def resolve_storage_version(v: str | None) -> str:
    """The version a new dataset gets for ``data_storage_version`` (None = the default).

    Raises :class:`NotSupportedError` for versions we cannot write (``"legacy"``/``"0.1"``,
    ``"next"``/``"2.3"``) rather than silently writing another version.
    """
    if v is None:
        return DEFAULT_DATA_STORAGE_VERSION
    version = _VERSION_ALIASES.get(v.lower(), v)
    if version not in _WRITABLE_VERSIONS:
        raise NotSupportedError(
            f"writing data storage version {v!r} is not supported; "
            f"use one of {_WRITABLE_VERSIONS} or 'stable'"
        )
    return version


def _transaction_properties(values: dict[str, str] | None) -> dict[str, str]:
    if values is None:
        return {}
    if not isinstance(values, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in values.items()
    ):
        raise InvalidInputError("transaction_properties must be a dict of strings to strings")
    return dict(values)


def commit_properties(commit_message: str | None) -> dict[str, str]:
    """Transaction properties holding ``commit_message`` the way pylance stores it."""
    return {COMMIT_MESSAGE_KEY: commit_message} if commit_message else {}


def _coerce(data: Any, schema: pa.Schema | None) -> Any:
    """The inputs pylance's ``write_dataset`` accepts beyond Arrow tables, batches and readers, as
    a Table or RecordBatchReader; anything else comes back unchanged."""
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return data
    kind = type(data)
    if kind.__name__ == "DataFrame" and hasattr(data, "to_records"):  # pandas
        return pa.Table.from_pandas(data, schema=schema)
    if kind.__name__ == "DataFrame" and kind.__module__.startswith("polars"):
        return data.to_arrow()
    if isinstance(data, dict):
        try:
            return pa.Table.from_pydict(data, schema=schema)
        except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError) as e:  # not columns of values
            raise InvalidTypeError(f"a dict to write maps column names to values: {e}") from None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return pa.Table.from_pylist(data, schema=schema)
    if kind.__module__.startswith(("lance_format.", "lance.")) and callable(getattr(data, "scanner", None)):
        return data.scanner().to_reader()  # a LanceDataset (ours or pylance's)
    pds = sys.modules.get("pyarrow.dataset")  # only set when the caller could have made one
    if pds is not None and isinstance(data, pds.Dataset):
        return pds.Scanner.from_dataset(data).to_reader()
    if callable(getattr(data, "to_reader", None)):  # scanners: ours, pylance's, pyarrow's
        return data.to_reader()
    if hasattr(data, "__arrow_c_stream__"):  # any Arrow PyCapsule stream (polars, DuckDB, ...)
        return pa.RecordBatchReader.from_stream(data)
    return data


def to_reader(data: Any, schema: pa.Schema | None = None) -> pa.RecordBatchReader:
    """Any supported input as a RecordBatchReader (cast to ``schema`` when given)."""
    data = _coerce(data, schema)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        if schema is not None and not data.schema.equals(schema):
            data = _cast(data, schema)
        return data.to_reader()
    if isinstance(data, pa.RecordBatchReader):
        if schema is None or data.schema.equals(schema):
            return data
        return pa.RecordBatchReader.from_batches(schema, (_cast(b, schema) for b in data))
    if isinstance(data, Iterable) and not isinstance(data, str | bytes | dict):
        it = iter(data)
        if schema is None:
            try:
                first = next(it)
            except StopIteration:
                raise InvalidInputError("no batches and no schema given") from None
            if not isinstance(first, pa.RecordBatch | pa.Table):
                raise InvalidTypeError(f"expected RecordBatches, got {type(first).__name__}")
            schema = first.schema

            rest = it

            def chain() -> Iterator[pa.RecordBatch]:
                yield first
                yield from rest

            it = chain()
        return pa.RecordBatchReader.from_batches(schema, (_cast(b, schema) for b in it))
    raise InvalidTypeError(
        f"cannot write {type(data).__name__}: pass a pyarrow Table, RecordBatch, RecordBatchReader, "
        "Dataset or Scanner, a LanceDataset, an iterable of RecordBatches, a dict of columns, a list "
        "of row dicts, or a pandas / polars DataFrame"
    )


def _cast(batch: pa.RecordBatch | pa.Table, schema: pa.Schema) -> pa.RecordBatch | pa.Table:
    if not isinstance(batch, pa.RecordBatch | pa.Table):
        raise InvalidTypeError(f"expected RecordBatches, got {type(batch).__name__}")
    if batch.schema.equals(schema):
        return batch
    if sorted(batch.schema.names) != sorted(schema.names):
        raise SchemaMismatchError(f"data has columns {batch.schema.names}, the schema has {schema.names}")
    try:
        return batch.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as e:
        raise SchemaMismatchError(f"data does not match the schema: {e}") from None


def file_columns(schema: LanceSchema, version: LanceFileVersion) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``DataFile.fields`` / ``column_indices`` for a file holding every field of ``schema``.

    The file's own schema has ids 0.. in walk order; dataset ids are matched by walk position.
    """
    file_schema = fields_from_arrow(schema.to_arrow())
    cols = assign_columns(file_schema, version)
    fields, indices = [], []
    for ds_field, file_field in zip(schema.walk(), file_schema.walk(), strict=True):
        if file_field.id in cols:
            fields.append(ds_field.id)
            indices.append(cols[file_field.id])
    return tuple(fields), tuple(indices)


def write_fragments(
    store: ObjectStore,
    reader: pa.RecordBatchReader,
    schema: LanceSchema,
    version: str,
    max_rows_per_file: int,
    *,
    max_bytes_per_file: int | None = None,
    progress: Any = None,
    targets: Sequence[WriteTarget] | None = None,
) -> list[DataFragment]:
    """Write the stream into data files of at most ``max_rows_per_file`` rows; one fragment each.

    ``targets`` (a multi-base dataset's target bases) take the files in turn; without them every
    file goes to the dataset's own ``data/``.

    A file also ends once ``max_bytes_per_file`` bytes are written to it (checked between batches,
    so a file can exceed it by about one batch, as in pylance). ``progress`` (pylance's
    ``FragmentWriteProgress`` shape) hears ``begin(fragment)`` before and ``complete(fragment)``
    after each file.
    """
    file_version = LanceFileVersion(version)
    fields, indices = file_columns(schema, file_version)
    arrow = schema.to_arrow()
    major, minor = file_version.manifest
    frags: list[DataFragment] = []
    writer: LanceFileWriter | None = None
    name = ""
    places = list(targets) if targets else [WriteTarget(store, "data/", None)]
    place = places[0]

    def finish() -> None:
        nonlocal writer
        assert writer is not None
        rows = writer.close()
        frag = DataFragment(
            id=0,
            files=(DataFile(name, fields, indices, major, minor, writer.size, place.base_id),),
            physical_rows=rows,
        )
        frags.append(frag)
        if progress is not None:
            progress.complete(frag)
        writer = None

    rows_in_file = arrow_bytes = 0
    for batch in reader:
        offset = 0
        while offset < batch.num_rows:
            if writer is None:
                name = data_file_name()
                place = places[len(frags) % len(places)]
                writer = LanceFileWriter(f"{place.prefix}{name}", arrow, version=version, store=place.store)
                rows_in_file = arrow_bytes = 0
                if progress is not None:
                    progress.begin(DataFragment(0, (DataFile(name, fields, indices, major, minor),), 0))
            take = min(batch.num_rows - offset, max_rows_per_file - rows_in_file)
            part = batch.slice(offset, take)
            writer.write_batch(part)
            offset += take
            rows_in_file += take
            # The writer buffers pages, so its size lags: the Arrow bytes handed to it bound it too.
            arrow_bytes += part.nbytes
            full = max_bytes_per_file is not None and max(writer.size, arrow_bytes) >= max_bytes_per_file
            if rows_in_file >= max_rows_per_file or full:
                finish()
    if writer is not None and rows_in_file:
        finish()
    return frags


def _check_schema(data: pa.Schema, manifest: Manifest) -> pa.Schema:
    target = manifest.schema.to_arrow()
    if sorted(data.names) != sorted(target.names):
        raise SchemaMismatchError(
            f"cannot append: data has columns {data.names}, the dataset has {target.names}"
        )
    for f in target:
        other = data.field(f.name)
        if not other.type.equals(f.type):
            raise SchemaMismatchError(
                f"cannot append: column {f.name!r} is {other.type} in the data, {f.type} in the dataset"
            )
    return target


def write_snapshot(
    data_obj: Any,
    uri: str | os.PathLike[str],
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int = DEFAULT_MAX_BYTES_PER_FILE,
    progress: Any = None,
    data_storage_version: str | None = None,
    enable_stable_row_ids: bool = False,
    enable_v2_manifest_paths: bool = True,
    storage_options: dict[str, str] | None = None,
    commit_message: str | None = None,
    transaction_properties: dict[str, str] | None = None,
    initial_bases: list[Any] | None = None,
    target_bases: list[str] | None = None,
    target_all_bases: bool | None = None,
    session: Session | None = None,
    base_store_params: BaseStoreParams | None = None,
) -> Snapshot:
    """Write Arrow data as a Lance dataset version; the snapshot of the version written.

    :func:`lance_format.dataset.write_dataset` (which returns a ``LanceDataset``) documents the
    parameters.
    """

    if mode not in _MODES:
        raise InvalidInputError(f"mode must be one of {_MODES}, got {mode!r}")
    for name, value in (
        ("max_rows_per_file", max_rows_per_file),
        ("max_rows_per_group", max_rows_per_group),
        ("max_bytes_per_file", max_bytes_per_file),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    uri = os.fspath(uri)
    # The session's store: its writers take the session's settings and threads.
    store = (session or Session.default()).store_for(uri, storage_options)
    base: Manifest | None
    naming: ManifestNaming | None
    try:
        base, naming = load_manifest(store)
    except NotFoundError:
        base, naming = None, None
    if base is not None and mode == "create":
        raise DatasetAlreadyExistsError(f"{uri}: dataset already exists (use mode='append' or 'overwrite')")
    creating = base is None or mode != "append"
    if initial_bases and not creating:
        raise InvalidInputError("initial_bases is only for mode='create' or 'overwrite'")
    bases = new_bases(initial_bases) if initial_bases else (base.base_paths if base else ())
    targets = resolve_targets(
        bases, target_bases, target_all_bases, storage_options, store.runtime, base_store_params
    )
    reader = to_reader(data_obj, schema)
    if base is not None and mode == "append":
        target = _check_schema(reader.schema, base)
        reader = to_reader(reader, target)
        lance_schema = base.schema
        version = base.data_format.version
    else:
        check_column_names(reader.schema.names)
        lance_schema = fields_from_arrow(reader.schema)
        version = resolve_storage_version(data_storage_version)
    if version not in _WRITABLE_VERSIONS:
        raise NotSupportedError(
            f"writing data storage version {version!r} is not supported; use one of {_WRITABLE_VERSIONS}"
        )
    frags = tuple(
        write_fragments(
            store,
            reader,
            lance_schema,
            version,
            max_rows_per_file,
            max_bytes_per_file=max_bytes_per_file,
            progress=progress,
            targets=targets,
        )
    )
    if not creating:
        op: Operation = Append(frags)
    else:
        op = Overwrite(frags, lance_schema, initial_bases=new_bases(initial_bases) if initial_bases else ())
    props = _transaction_properties(transaction_properties) | commit_properties(commit_message)
    txn = Transaction(base.version if base else 0, str(uuid.uuid4()), op, properties=props)
    options = CommitOptions(
        naming=ManifestNaming.V2 if enable_v2_manifest_paths else ManifestNaming.V1,
        data_format=DataStorageFormat("lance", version),
        stable_row_ids=enable_stable_row_ids,
        create_only=mode == "create",
    )
    manifest = commit_transaction(store, txn, base, naming, options)
    cache = reader_cache(store, storage_options, session, base_store_params)
    return Snapshot(uri, store, manifest, naming or options.naming, cache, storage_options, session)


def stage_fragments(
    data: Any,
    uri: str | os.PathLike[str],
    schema: pa.Schema | None = None,
    *,
    max_rows_per_file: int = DEFAULT_MAX_ROWS_PER_FILE,
    data_storage_version: str | None = None,
    storage_options: dict[str, str] | None = None,
    store: ObjectStore | None = None,
    overwrite: bool = False,
    max_bytes_per_file: int | None = None,
    progress: Any = None,
    targets: Sequence[WriteTarget] | None = None,
) -> list[DataFragment]:
    """Write data files without committing; commit the fragments later with :func:`commit`.

    Against an existing dataset the data must match its schema (field ids are the dataset's); for a
    new dataset, or with ``overwrite``, the fragments belong with
    ``Overwrite(fragments, fields_from_arrow(schema))``.
    ``store`` (the store of ``uri``) lets a caller see each file written, e.g. to remove them when
    the stream fails half-way (the Flight server's stage mode does); ``progress`` hears each file
    begin and complete (as in :func:`write_dataset`; what it raises stops the stage).
    """
    store = store or store_for_uri(os.fspath(uri), storage_options)
    reader = to_reader(data, schema)
    try:
        if overwrite:
            raise NotFoundError("overwrite: the data's own schema")
        base, _ = load_manifest(store)
    except NotFoundError:
        check_column_names(reader.schema.names)
        lance_schema, version = (
            fields_from_arrow(reader.schema),
            resolve_storage_version(data_storage_version),
        )
    else:
        reader = to_reader(reader, _check_schema(reader.schema, base))
        lance_schema, version = base.schema, base.data_format.version
    return write_fragments(
        store,
        reader,
        lance_schema,
        version,
        max_rows_per_file,
        max_bytes_per_file=max_bytes_per_file,
        progress=progress,
        targets=targets,
    )


def commit_snapshot(
    uri: str | os.PathLike[str],
    operation: Operation,
    read_version: int | None = None,
    *,
    storage_options: dict[str, str] | None = None,
    data_storage_version: str | None = None,
) -> Snapshot:
    """Commit an operation (e.g. ``Append`` of staged fragments) planned against ``read_version``.

    Returns the snapshot of the new version. Concurrent commits are rebased or raise
    :class:`~lance_format.core.errors.CommitConflictError`.
    """
    uri = os.fspath(uri)
    store = store_for_uri(uri, storage_options)
    base: Manifest | None
    naming: ManifestNaming | None
    try:
        base, naming = load_manifest(store, read_version)
    except NotFoundError:
        if read_version is not None:
            raise
        base, naming = None, None
    txn = Transaction(base.version if base else 0, str(uuid.uuid4()), operation)
    options = CommitOptions(
        data_format=DataStorageFormat("lance", resolve_storage_version(data_storage_version))
    )
    manifest = commit_transaction(store, txn, base, naming, options)
    cache = reader_cache(store, storage_options)
    return Snapshot(uri, store, manifest, naming or options.naming, cache, storage_options)
