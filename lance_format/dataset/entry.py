"""The package's entry points that open or write and return a :class:`LanceDataset`: ``dataset``,
``write_dataset`` and ``commit`` (pylance's names). The work is in :mod:`lance_format.dataset.write`,
which returns snapshots; this module wraps them in the facade.
"""

from __future__ import annotations

import os
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa

from lance_format.core.errors import InvalidInputError, InvalidTypeError, NotFoundError, NotSupportedError
from lance_format.dataset import write
from lance_format.dataset.compat import check_accepted_sizes
from lance_format.dataset.dataset import LanceDataset
from lance_format.dataset.multibase import BaseStoreParams, check_base_store_params
from lance_format.dataset.session import Session
from lance_format.table.model import Operation
from lance_format.table.versions import VersionInfo

__all__ = ["commit", "dataset", "write_dataset"]


def write_dataset(
    data_obj: Any,
    uri: str | os.PathLike[str] | LanceDataset,
    schema: pa.Schema | None = None,
    mode: str = "create",
    *,
    max_rows_per_file: int = write.DEFAULT_MAX_ROWS_PER_FILE,
    max_rows_per_group: int = write.DEFAULT_MAX_ROWS_PER_GROUP,
    max_bytes_per_file: int = write.DEFAULT_MAX_BYTES_PER_FILE,
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
    data_cache_bytes: int | None = None,
    max_page_bytes: int | None = None,
    use_legacy_format: bool | None = None,
    commit_lock: Any = None,
    auto_cleanup_options: Any = None,
) -> LanceDataset:
    """Write Arrow data as a Lance dataset (create, append to or overwrite one).

    Parameters
    ----------
    data_obj:
        A pyarrow Table, RecordBatch, RecordBatchReader, ``pyarrow.dataset`` Dataset or Scanner, a
        LanceDataset or scanner (ours or pylance's), an iterable of RecordBatches, a dict of
        columns, a list of row dicts, a pandas or polars DataFrame, or any Arrow PyCapsule stream.
    uri:
        Local path, ``file://`` or ``memory://`` URI of the dataset root, or a LanceDataset.
    schema:
        Schema to cast the data to (required for an empty iterable).
    mode:
        ``"create"`` (fails if the dataset exists), ``"append"`` (creates it when missing) or
        ``"overwrite"``.
    max_rows_per_file:
        Rows per data file (each file is one fragment).
    max_rows_per_group:
        Accepted for pylance compatibility: file format v2 has no row groups (pages are sized by
        bytes), so it only has to be a positive integer.
    max_bytes_per_file:
        A data file ends once about this many bytes are written to it (90 GiB, pylance's default).
    progress:
        An object with ``begin(fragment)`` and ``complete(fragment)`` methods (pylance's
        ``FragmentWriteProgress``), told about each data file.
    data_storage_version:
        File format version of a new dataset (``"2.0"``, ``"2.1"``, ``"2.2"`` or ``"stable"``);
        None = :data:`~lance_format.dataset.write.DEFAULT_DATA_STORAGE_VERSION` (2.2, pylance 14's
        default). ``"legacy"`` (the 0.1 format) and ``"next"`` raise :class:`NotSupportedError`.
        Appends keep the dataset's own version.
    enable_stable_row_ids:
        Give rows stable ids (only when creating the dataset).
    enable_v2_manifest_paths:
        Name manifests with the V2 scheme (new datasets only).
    storage_options:
        Options for the object store.
    commit_message:
        Stored in the transaction properties under ``__lance_commit_message``, as pylance does.
    transaction_properties:
        Key/value pairs stored with the transaction (``commit_message`` wins for its key).
    initial_bases:
        Base paths (``DatasetBasePath``) of a new dataset: other roots its data files may live
        under (create and overwrite only).
    target_bases, target_all_bases:
        Write the new data files to these bases (names or paths; in turn), or to all of them;
        the dataset's own ``data/`` otherwise.
    session:
        The :class:`~lance_format.dataset.session.Session` to write through (its object stores,
        encode threads and writer settings) and that serves the returned dataset; a
        ``LanceDataset`` passed as ``uri`` lends its own; the default session otherwise.
    base_store_params:
        Object-store options by base path URI for the stores of those bases (new files written
        there, and reads of the returned dataset); they replace ``storage_options`` for them, as
        pylance's. A ``LanceDataset`` passed as ``uri`` lends its own.
    data_cache_bytes, max_page_bytes:
        pylance's buffering hints: validated (positive integers), they change no result.
    use_legacy_format:
        pylance's deprecated switch: ``True`` is ``data_storage_version="legacy"`` (refused),
        ``False`` is ``"stable"``, unless ``data_storage_version`` is given.
    commit_lock, auto_cleanup_options:
        Raise :class:`NotSupportedError` (no custom commit locks; no cleanup after commits).

    Returns
    -------
    LanceDataset
        The dataset at the version just written.
    """
    check_accepted_sizes(data_cache_bytes=data_cache_bytes, max_page_bytes=max_page_bytes)
    if commit_lock is not None:
        raise NotSupportedError("write_dataset(commit_lock=...) is not supported: commits are atomic")
    if auto_cleanup_options is not None:
        raise NotSupportedError(
            "write_dataset(auto_cleanup_options=...) is not supported: run cleanup_old_versions"
        )
    if use_legacy_format is not None and data_storage_version is None:
        data_storage_version = "legacy" if use_legacy_format else "stable"
    if isinstance(uri, LanceDataset):
        storage_options = storage_options or uri.storage_options
        session = session or uri.session
        base_store_params = base_store_params or uri.snapshot.base_store_params
        uri = uri.uri
    snapshot = write.write_snapshot(
        data_obj,
        uri,
        schema,
        mode,
        max_rows_per_file=max_rows_per_file,
        max_rows_per_group=max_rows_per_group,
        max_bytes_per_file=max_bytes_per_file,
        progress=progress,
        data_storage_version=data_storage_version,
        enable_stable_row_ids=enable_stable_row_ids,
        enable_v2_manifest_paths=enable_v2_manifest_paths,
        storage_options=storage_options,
        commit_message=commit_message,
        transaction_properties=transaction_properties,
        initial_bases=initial_bases,
        target_bases=target_bases,
        target_all_bases=target_all_bases,
        session=session,
        base_store_params=check_base_store_params(base_store_params),
    )
    return LanceDataset.from_snapshot(snapshot)


def commit(
    uri: str | os.PathLike[str],
    operation: Operation,
    read_version: int | None = None,
    *,
    storage_options: dict[str, str] | None = None,
    data_storage_version: str | None = None,
) -> LanceDataset:
    """Commit an operation (e.g. ``Append`` of staged fragments) planned against ``read_version``.

    Returns the dataset at the new version. Concurrent commits are rebased or raise
    :class:`~lance_format.core.errors.CommitConflictError`.
    """
    snapshot = write.commit_snapshot(
        uri,
        operation,
        read_version,
        storage_options=storage_options,
        data_storage_version=data_storage_version,
    )
    return LanceDataset.from_snapshot(snapshot)


def dataset(
    uri: str | os.PathLike[str],
    version: int | str | None = None,
    storage_options: dict[str, str] | None = None,
    *,
    asof: datetime | None = None,
    session: Session | None = None,
    block_size: int | None = None,
    commit_lock: Any = None,
    index_cache_size: int | None = None,
    metadata_cache_size_bytes: int | None = None,
    index_cache_size_bytes: int | None = None,
    read_params: dict[str, Any] | None = None,
    default_scan_options: dict[str, Any] | None = None,
    base_store_params: dict[str, dict[str, str]] | None = None,
) -> LanceDataset:
    """Open a Lance dataset.

    Parameters
    ----------
    uri:
        Local path, ``file://`` or ``memory://`` URI of the dataset root.
    version:
        Version number or tag name; the latest version when omitted.
    storage_options:
        Options for the object store.
    asof:
        Open the newest version committed at or before this time (naive datetimes are local time,
        as in pylance). Not combinable with ``version``.
    session:
        The :class:`~lance_format.dataset.session.Session` whose caches and object stores serve
        the dataset (the default session when omitted), as pylance's ``session=``.
    block_size, index_cache_size, metadata_cache_size_bytes, index_cache_size_bytes:
        pylance's I/O and cache size hints: validated (positive integers), they change no result
        (caches are sized by the session's settings).
    read_params:
        pylance's read parameters (a dict): accepted, they change no result.
    commit_lock:
        Raises :class:`NotSupportedError` (no custom commit locks).
    default_scan_options:
        pylance's scanner defaults for every scan of this handle and the versions checked out
        from it: a dict keyed by pylance's ``ScannerBuilder`` setters (``with_row_id``, ``filter``,
        ``columns``, ``limit``, ``batch_size``, ``with_fragments`` ...); arguments given to a scan
        win. ``schema`` becomes their scan's projected schema. They do not apply to takes,
        ``sample``, ``count_rows`` (but with an Expression filter) nor fragments, as in pylance.
        See :mod:`lance_format.dataset.scan_defaults`.
    base_store_params:
        Object-store options by base path URI (exactly as ``base_paths()`` lists it) for the
        stores of those bases, replacing ``storage_options`` there, as pylance's; kept by the
        versions checked out from the handle, its pickles and its writes.

    Returns
    -------
    LanceDataset
    """
    check_accepted_sizes(
        block_size=block_size,
        index_cache_size=index_cache_size,
        metadata_cache_size_bytes=metadata_cache_size_bytes,
        index_cache_size_bytes=index_cache_size_bytes,
    )
    if read_params is not None and not isinstance(read_params, dict):
        raise InvalidTypeError(f"read_params must be a dict, got {type(read_params).__name__}")
    if commit_lock is not None:
        raise NotSupportedError("dataset(commit_lock=...) is not supported: commits are atomic")
    open_handle = partial(
        LanceDataset,
        session=session,
        default_scan_options=default_scan_options,
        base_store_params=base_store_params,
    )
    if asof is None:
        return open_handle(uri, version, storage_options)
    if version is not None:
        raise InvalidInputError("pass either version or asof, not both")
    ds = open_handle(uri, None, storage_options)
    cutoff = int(asof.timestamp() * 1_000_000_000)
    found = None
    for v in reversed(sorted(VersionInfo(ds.store).entries)):
        m = ds.checkout_version(v).manifest
        if m.timestamp_ns <= cutoff:
            found = v
            break
    if found is None:
        raise NotFoundError(f"{ds.uri}: no version was committed at or before {asof.isoformat()}")
    return ds.checkout_version(found)
