"""Reading Lance v2 files: :class:`LanceFileReader` (mirrors pylance's ``lance.file``)."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import CorruptFileError, InvalidInputError, LanceError
from lance_format.core.records import fast_init
from lance_format.core.types import LanceField, LanceSchema, json_from_storage
from lance_format.encodings import decode_field
from lance_format.encodings.base import (
    ColumnInfo,
    DecodeContext,
    RowRuns,
    drive,
    runs_for_range,
    runs_from_sorted_indices,
)
from lance_format.file import _serde
from lance_format.file.columns import ColumnParser, LazyColumns
from lance_format.file.format import FOOTER_LEN, Footer, LanceFileVersion, parse_footer, parse_offset_table
from lance_format.io.cache import ReadPolicy
from lance_format.io.planner import scan_limits
from lance_format.io.prefetch import FilePrefetch, ScanScope, current_scan_scope, scan_scope
from lance_format.io.reader import IOStats, RangeReader
from lance_format.io.store import ObjectStore, split_uri, store_for_uri

__all__ = ["FileMetadata", "LanceFileReader", "ReaderResults", "assign_columns"]

# First read when opening a file: the tail that holds footer, offset tables, column metadata and the
# schema. 64 KiB covers the metadata of files with hundreds of columns in one request; on local disk
# it costs the same as 4 KiB, and on object stores latency, not size, dominates.
TAIL_READ_BYTES = 64 * 1024

# Rows decoded per step when streaming batches: bounds memory of `to_batches` while keeping per-step
# overhead (planning, Python dispatch) small relative to the work.
STREAM_CHUNK_ROWS = 64 * 1024

# pylance's default batch size for the file API.
DEFAULT_BATCH_SIZE = 1024


def _is_packed_struct(f: LanceField, version: LanceFileVersion) -> bool:
    if not version.structural:
        # 2.0: pylance's 2.0 writer has its own metadata rule; follow it so its files map right.
        from lance_format.encodings.v20 import is_packed_struct

        return is_packed_struct(f)
    v = f.metadata.get("lance-encoding:packed") or f.metadata.get("packed")
    return f.logical_type == "struct" and v is not None and v.lower() in (b"true", b"1")


def assign_columns(schema: LanceSchema, version: LanceFileVersion) -> dict[int, int]:
    """Column index of every field that owns a column, by field id.

    2.0 gives every field a column (struct and list parents too) in depth-first pre-order. 2.1+ gives
    columns to leaves only; a list shares its leaf's column. A packed struct is one column either way.
    """
    out: dict[int, int] = {}
    for f in schema.fields:
        _assign(f, version, out)
    return out


def _assign(f: LanceField, version: LanceFileVersion, out: dict[int, int]) -> None:
    # A module function, not a closure calling itself (a reference cycle left to the collector).
    if _is_packed_struct(f, version):
        out[f.id] = len(out)
        return
    if not version.structural or f.is_leaf:
        out[f.id] = len(out)
    for c in f.children:
        _assign(c, version, out)


@fast_init
@dataclass(frozen=True)
class FileMetadata:
    """What the footer and metadata sections say about a file."""

    major_version: int
    minor_version: int
    version: LanceFileVersion
    num_rows: int
    schema: pa.Schema
    lance_schema: LanceSchema
    #: The columns by index (a sequence that parses each column's metadata on first use).
    columns: Sequence[ColumnInfo]
    global_buffers: tuple[tuple[int, int], ...]
    num_data_bytes: int
    num_column_metadata_bytes: int
    num_global_buffer_bytes: int
    file_size: int


class ReaderResults:
    """The rows of one read; decoded on demand by :meth:`to_table` or :meth:`to_batches`.

    ``order`` maps output rows to the selected rows when the caller asked for an order other than
    sorted-unique (takes in any order, with duplicates).
    """

    def __init__(
        self,
        reader: LanceFileReader,
        runs: RowRuns,
        batch_size: int,
        order: npt.NDArray[np.int64] | None = None,
        policy: ReadPolicy = ReadPolicy.CACHED,
    ) -> None:
        self._reader = reader
        self._runs = runs
        self._batch_size = batch_size
        self._order = order
        self._policy = policy

    def to_table(self) -> pa.Table:
        """All selected rows as one table."""
        batch = self._reader._read_runs(self._runs, self._policy)
        table = pa.Table.from_batches([batch], self._reader.schema)
        if self._order is not None:
            table = table.take(pa.array(self._order))
        return table

    def _iter_batches(self) -> Iterator[pa.RecordBatch]:
        if self._order is not None:
            yield from self.to_table().to_batches(self._batch_size)
            return
        runs = self._runs
        lengths = runs[:, 1] - runs[:, 0]
        ends = np.cumsum(lengths)
        done = 0
        total = int(ends[-1]) if len(ends) else 0
        # One run of rows (read_all, read_range) streamed in several chunks: its pages are read
        # ahead in large requests on object stores (lance_format.io.prefetch).
        scope = (
            ScanScope(int(runs[0, 0]), int(runs[0, 1]))
            if len(runs) == 1 and total > STREAM_CHUNK_ROWS
            else None
        )
        while done < total:
            stop = min(done + STREAM_CHUNK_ROWS, total)
            chunk = _slice_runs(runs, ends, done, stop)
            with scan_scope(scope):
                batch = self._reader._read_runs(chunk, self._policy)
            for off in range(0, batch.num_rows, self._batch_size):
                yield batch.slice(off, self._batch_size)
            done = stop

    def to_batches(self) -> pa.RecordBatchReader:
        """A stream of batches of at most ``batch_size`` rows, decoded a chunk at a time."""
        return pa.RecordBatchReader.from_batches(self._reader.schema, self._iter_batches())


def _slice_runs(runs: RowRuns, ends: npt.NDArray[np.int64], lo: int, hi: int) -> RowRuns:
    """The runs covering selected rows ``[lo, hi)`` (positions in the concatenated selection)."""
    starts = ends - (runs[:, 1] - runs[:, 0])
    first = int(np.searchsorted(ends, lo, side="right"))
    last = int(np.searchsorted(ends, hi, side="left"))
    out = runs[first : last + 1].copy()
    out[0, 0] += lo - starts[first]
    out[-1, 1] -= ends[last] - hi
    return out


class LanceFileReader:
    """Reads a Lance file (format 2.0, 2.1 or 2.2).

    Parameters
    ----------
    path:
        Local path, ``file://`` or ``memory://`` URI of the file.
    storage_options:
        Options for the object store (second, as in pylance's ``LanceFileReader``).
    columns:
        Top-level column names to read (all when omitted), in the order given.
    store, key, size:
        Read through an already-open store instead of ``path`` (``key`` relative to its root);
        ``size`` when known saves a request.

    Examples
    --------
    >>> reader = LanceFileReader("/tmp/data.lance")  # doctest: +SKIP
    >>> reader.take_rows([5, 1, 5]).to_table()  # doctest: +SKIP
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        storage_options: dict[str, str] | None = None,
        columns: Sequence[str] | None = None,
        *,
        store: ObjectStore | None = None,
        size: int | None = None,
    ) -> None:
        path = os.fspath(path)
        # Callers of the old (columns, storage_options) order must fail loudly, not read all columns.
        if storage_options is not None and not isinstance(storage_options, dict):
            raise InvalidInputError(
                f"storage_options must be a dict, got {type(storage_options).__name__} "
                "(the order is LanceFileReader(path, storage_options, columns), as in pylance)"
            )
        if isinstance(columns, str | bytes):
            raise InvalidInputError("columns must be a list of column names, not one string")
        if store is None:
            folder, key = split_uri(path)
            store = store_for_uri(folder, storage_options)
        else:
            key = path
        self.path = path
        self._io = RangeReader(store, key, size)
        # Decoded-block cache keys by field id (lance_format.file.decoded), shared with views.
        self._decoded_keys: dict[int, tuple[LanceField, tuple[Any, ...]]] = {}
        self._open()
        self._projection = self._resolve_columns(columns)
        # Every column: the file's Arrow schema as converted on open (the same fields and metadata).
        self.schema = (
            self._meta.schema
            if columns is None
            else pa.schema(
                [f.to_logical_arrow() for f in self._projection],
                metadata=self._meta.lance_schema.metadata or None,
            )
        )

    # -- opening -------------------------------------------------------------------------------
    def _open(self) -> None:
        path = self.path
        tail_start, tail = self._io.read_tail(TAIL_READ_BYTES)
        size = self._io.size
        footer = parse_footer(tail, size, path)
        gbo = parse_offset_table(
            self._slice(tail, tail_start, footer.global_buff_offsets_start, 16 * footer.num_global_buffers),
            footer.num_global_buffers,
            size,
            "global buffer offset",
            path,
        )
        meta_start, meta_len = gbo[0]
        if meta_start > footer.column_meta_start:
            raise CorruptFileError(path, "file descriptor is not before the column metadata")
        if meta_start < tail_start:
            # The metadata did not fit the first read: one more request for the missing prefix.
            # Metadata bytes are parsed once (and the reader cached): not for the page cache.
            head = self._io.read([(meta_start, tail_start - meta_start)], ReadPolicy.SCAN)[0]
            tail = memoryview(bytes(head) + bytes(tail))
            tail_start = meta_start
        cmo = parse_offset_table(
            self._slice(tail, tail_start, footer.column_meta_offsets_start, 16 * footer.num_columns),
            footer.num_columns,
            footer.column_meta_offsets_start + 1,
            "column metadata offset",
            path,
        )
        version = LanceFileVersion.from_footer(footer.major_version, footer.minor_version, path)
        schema, num_rows = _serde.parse_file_descriptor(
            self._slice(tail, tail_start, meta_start, meta_len), path
        )
        for i, (pos, _) in enumerate(cmo):
            if pos < footer.column_meta_start:
                raise CorruptFileError(path, f"column {i} metadata lies before the metadata section")
        # The column metadata section, parsed per column on first use (a take of a few columns of
        # a wide file, or a projection, pays only for the columns it reads).
        section_start = footer.column_meta_start
        section = bytes(self._slice(tail, tail_start, section_start, size - section_start))
        columns = LazyColumns(
            ColumnParser(path, section, section_start, cmo, version, size - FOOTER_LEN, num_rows)
        )
        # data_end bounds data-internal positions (2.1 blob descriptions).
        self._ctx = DecodeContext(
            path,
            (footer.major_version, footer.minor_version),
            columns,
            data_end=meta_start,
            page_pool=self._io.store.runtime.page_pool,  # the session's page-decode threads
        )
        self._columns_of = assign_columns(schema, version)
        if len(self._columns_of) != len(columns):
            raise CorruptFileError(
                path, f"schema implies {len(self._columns_of)} columns but the file has {len(columns)}"
            )
        if not version.structural:
            # 2.0: the items of a list are a column with one row per item, not per file row.
            columns.parser.nested = self._nested_columns(schema)
        self._meta = FileMetadata(
            major_version=footer.major_version,
            minor_version=footer.minor_version,
            version=version,
            num_rows=num_rows,
            schema=schema.to_arrow(),
            lance_schema=schema,
            columns=columns,
            global_buffers=tuple(gbo),
            num_data_bytes=meta_start,
            num_column_metadata_bytes=footer.global_buff_offsets_start - footer.column_meta_start,
            num_global_buffer_bytes=sum(n for _, n in gbo),
            file_size=size,
        )
        self._footer: Footer = footer

    def _nested_columns(self, schema: LanceSchema) -> frozenset[int]:
        """2.0: the columns below a list (their row counts are item counts)."""
        by_id = {f.id: f for f in schema.walk()}
        out = set()
        for fid, column in self._columns_of.items():
            f = by_id.get(fid)
            while f is not None and f.parent_id != -1:
                parent = by_id[f.parent_id]
                if parent.logical_type.startswith(("list", "large_list")):
                    out.add(column)
                    break
                f = parent
        return frozenset(out)

    def _slice(self, tail: memoryview, tail_start: int, pos: int, length: int) -> memoryview:
        lo = pos - tail_start
        if lo < 0 or length < 0 or lo + length > len(tail):
            raise CorruptFileError(
                self.path, f"metadata range [{pos}, {pos + length}) is outside the file tail"
            )
        return tail[lo : lo + length]

    def _resolve_columns(self, columns: Sequence[str] | None) -> list[LanceField]:
        """Top-level fields to read; ``"a.b"`` selects a struct member (the struct keeps only it)."""
        schema = self._meta.lance_schema
        if columns is None:
            return list(schema.fields)
        if isinstance(columns, str):
            raise InvalidInputError("columns must be a list of column names, not a string")
        picked: dict[int, LanceField] = {}
        for name in columns:
            if not isinstance(name, str):
                raise InvalidInputError(f"column names must be strings, got {name!r}")
            field = self._project_path(schema, name)
            prev = picked.get(field.id)
            picked[field.id] = field if prev is None else _merge_projection(prev, field)
        return list(picked.values())

    def _project_path(self, schema: LanceSchema, name: str) -> LanceField:
        try:
            return schema.field_by_name(name)
        except KeyError:
            pass
        parts = name.split(".")
        try:
            top = schema.field_by_name(parts[0])
        except KeyError:
            top = None
        chain = [top] if top is not None else []
        for part in parts[1:]:
            node = chain[-1] if chain else None
            if node is None or node.logical_type != "struct":
                chain = []
                break
            child = next((c for c in node.children if c.name == part), None)
            if child is None:
                chain = []
                break
            chain.append(child)
        if not chain:
            raise InvalidInputError(
                f"{self.path}: no column {name!r}; the file has {[f.name for f in schema.fields]}"
            )
        pruned = chain[-1]
        for parent in reversed(chain[:-1]):
            pruned = replace(parent, children=(pruned,))
        return pruned

        # -- public API ----------------------------------------------------------------------------

    @property
    def io_stats(self) -> IOStats:
        """Requests and bytes this reader has issued so far (opening included)."""
        return self._io.stats.snapshot()

    def num_rows(self) -> int:
        """Rows in the file."""
        return self._meta.num_rows

    def metadata(self) -> FileMetadata:
        """Footer, schema, columns and pages."""
        return self._meta

    @property
    def version(self) -> LanceFileVersion:
        return self._meta.version

    def read_all(
        self, *, batch_size: int = DEFAULT_BATCH_SIZE, policy: ReadPolicy = ReadPolicy.CACHED
    ) -> ReaderResults:
        """Every row (``policy``: the caches the read may use, see :class:`ReadPolicy`)."""
        runs = runs_for_range(0, self._meta.num_rows)
        return ReaderResults(self, runs, _check_batch(batch_size), policy=policy)

    def read_range(
        self,
        start: int,
        num_rows: int,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        policy: ReadPolicy = ReadPolicy.CACHED,
    ) -> ReaderResults:
        """Rows ``[start, start + num_rows)``."""
        n = self._meta.num_rows
        if not (isinstance(start, int | np.integer) and isinstance(num_rows, int | np.integer)):
            raise InvalidInputError("start and num_rows must be integers")
        if start < 0 or num_rows < 0 or start + num_rows > n:
            raise InvalidInputError(f"{self.path}: range [{start}, {start + num_rows}) is outside 0..{n}")
        runs = runs_for_range(int(start), int(start + num_rows))
        return ReaderResults(self, runs, _check_batch(batch_size), policy=policy)

    def take_rows(
        self,
        indices: Sequence[int] | npt.ArrayLike,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        policy: ReadPolicy = ReadPolicy.CACHED,
    ) -> ReaderResults:
        """Rows at ``indices``, in the order given; repeats allowed."""
        idx = _as_indices(indices)
        n = self._meta.num_rows
        # One row (one-row takes): the value itself, not two array reductions.
        one = int(idx[0]) if len(idx) == 1 else None
        if one is not None and not 0 <= one < n:
            raise InvalidInputError(f"{self.path}: row index {one} is out of range for {n} rows")
        if one is None and len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = int(idx[(idx < 0) | (idx >= n)][0])
            raise InvalidInputError(f"{self.path}: row index {bad} is out of range for {n} rows")
        if len(idx) <= 1 or bool((idx[1:] > idx[:-1]).all()):
            return ReaderResults(self, runs_from_sorted_indices(idx), _check_batch(batch_size), policy=policy)
        uniq, inverse = np.unique(idx, return_inverse=True)
        order = inverse.astype(np.int64)
        return ReaderResults(self, runs_from_sorted_indices(uniq), _check_batch(batch_size), order, policy)

    @property
    def columns_of(self) -> dict[int, int]:
        """The column index of every field that owns a column, by field id (see
        :func:`assign_columns`; computed on open, not to be modified)."""
        return self._columns_of

    @property
    def projection(self) -> list[LanceField]:
        """The top-level fields this reader decodes (a copy)."""
        return list(self._projection)

    def view(self, fields: Sequence[LanceField]) -> LanceFileReader:
        """A view of this open reader that decodes only ``fields`` (top-level, no new I/O)."""
        return self._view(fields)

    def field_cache_key(self, field: LanceField) -> tuple[Any, ...]:
        """A key naming ``field``'s decoded values in this file, for caches: the file (store, key,
        size) and the ids of the field's subtree, so two projections of one field differ."""
        known = self._decoded_keys.get(field.id)
        if known is not None and known[0] is field:
            return known[1]
        io = self._io
        key = (io.store.uri, "decoded", io.key, io.size, tuple(x.id for x in field.walk()))
        self._decoded_keys[field.id] = (field, key)  # one dict store: thread-safe
        return key

    def _view(self, fields: Sequence[LanceField]) -> LanceFileReader:
        """A view of this open reader that decodes only ``fields`` (top-level, no new I/O)."""
        if list(fields) == self._projection:  # (list == compares the same objects by identity first)
            return self
        view = copy.copy(self)
        view._projection = list(fields)
        view.schema = pa.schema([f.to_logical_arrow() for f in fields])
        return view

    # -- decoding ------------------------------------------------------------------------------
    def _read_runs(self, runs: RowRuns, policy: ReadPolicy = ReadPolicy.CACHED) -> pa.RecordBatch:
        gens = [decode_field(self.version, self._ctx, f, self._columns_of, runs) for f in self._projection]
        io = self._io

        prefetch = self._scan_prefetch()

        def direct(ranges: list[tuple[int, int]]) -> list[memoryview]:
            return io.read(ranges, policy)

        def read(ranges: list[tuple[int, int]]) -> list[memoryview]:
            return direct(ranges) if prefetch is None else prefetch.read(ranges, direct)

        try:
            arrays = drive(gens, read, pool=io.store.runtime.decode_pool)
        except LanceError:
            raise
        except (
            ValueError,
            IndexError,
            KeyError,
            TypeError,
            OverflowError,
            pa.ArrowException,
            MemoryError,
        ) as e:
            # Bytes that passed the structural checks but do not decode: corrupt, not a bug to leak.
            raise CorruptFileError(self.path, f"cannot decode data: {type(e).__name__}: {e}") from None
        arrays = [json_from_storage(f, a, self.path) for f, a in zip(self._projection, arrays, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _scan_prefetch(self) -> FilePrefetch | None:
        """The read-ahead of the scan this read belongs to (object stores only; ``None`` outside
        a :func:`~lance_format.io.prefetch.scan_scope`): the pages of this projection's columns in
        the scan's rows, fetched in large requests ahead of decoding."""
        scope = current_scan_scope()
        io = self._io
        if scope is None or not io.store.remote:
            return None
        meta = self._meta
        cols: list[int] = []
        for f in self._projection:
            for sub in f.walk():
                idx = self._columns_of.get(sub.id)
                # 2.0 list items count values, not rows: their pages are read on demand.
                if idx is not None and meta.columns[idx].num_rows == meta.num_rows:
                    cols.append(idx)
        lo, hi = scope.lo, min(scope.hi, meta.num_rows)

        def make() -> FilePrefetch:
            regions: list[tuple[int, int, int, int, int]] = []
            for c in cols:
                col = meta.columns[c]
                starts = col.page_starts
                first = max(0, int(np.searchsorted(starts, lo, side="right")) - 1)
                last = int(np.searchsorted(starts, hi, side="left"))
                for j in range(first, min(last, len(col.pages))):
                    r0, r1 = int(starts[j]), int(starts[j + 1])
                    page = col.pages[j]
                    regions += [
                        (o, n, r0, r1, c) for o, n in zip(page.buffer_offsets, page.buffer_sizes, strict=True)
                    ]
            window = scope.window or io.store.runtime.config.scan_prefetch_bytes
            return FilePrefetch(io, regions, scan_limits(io.store.plan_limits), window)

        # One per file: the first view's columns (a scan's later chunks may decode fewer fields when
        # the decoded-block cache holds some; their reads are then served, never fetched twice).
        return scope.file((io.store.uri, io.key, io.size), make)

    def close(self) -> None:
        """Nothing to release: reads are stateless. Present for API symmetry."""

    def __enter__(self) -> LanceFileReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _merge_projection(a: LanceField, b: LanceField) -> LanceField:
    """Union of two projections of the same field, children in schema order."""
    if a.logical_type != "struct" or not a.children or not b.children:
        return a if len(a.children) >= len(b.children) else b
    by_id = {c.id: c for c in a.children}
    for c in b.children:
        by_id[c.id] = _merge_projection(by_id[c.id], c) if c.id in by_id else c
    return replace(a, children=tuple(sorted(by_id.values(), key=lambda c: c.id)))


def _check_batch(batch_size: int) -> int:
    if not isinstance(batch_size, int | np.integer) or batch_size <= 0:
        raise InvalidInputError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


def _as_indices(indices: Sequence[int] | npt.ArrayLike) -> npt.NDArray[np.int64]:
    if isinstance(indices, pa.Array | pa.ChunkedArray):
        if indices.null_count:
            raise InvalidInputError("row indices must not be null")
        indices = indices.to_numpy(zero_copy_only=False)
    arr = np.asarray(indices)
    if arr.ndim != 1:
        arr = arr.reshape(-1) if arr.size == 0 else arr
        if arr.ndim != 1:
            raise InvalidInputError("row indices must be one-dimensional")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise InvalidInputError(f"row indices must be integers, got {arr.dtype}")
    if arr.dtype == np.uint64 and arr.max() > np.iinfo(np.int64).max:
        raise InvalidInputError("row index out of range")
    return arr.astype(np.int64, copy=False)
