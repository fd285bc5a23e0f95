"""Reading one fragment: its data files side by side, its deletions, its row ids."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lance_format.core.errors import CorruptFileError, InvalidInputError, NotSupportedError
from lance_format.core.types import LanceSchema
from lance_format.dataset.assemble import LeafPaths, assemble_column, held_leaves, place_fields
from lance_format.dataset.cache import METADATA_CACHE, ByteLRU
from lance_format.dataset.multibase import BaseStoreParams, base_store_options
from lance_format.file import LanceFileReader
from lance_format.file.decoded import AdmitBudget, read_range_cached, take_cached
from lance_format.io.cache import ReadPolicy
from lance_format.io.store import ObjectStore, store_for_uri
from lance_format.table.deletion import read_deletion_file
from lance_format.table.model import BasePath, DataFile, DataFragment, ExternalFile
from lance_format.table.rowids import decode_row_ids, decode_row_versions

__all__ = ["FragmentReader", "ReaderCache"]

#: Bytes charged per cached open file beyond its column metadata (footer, schema, Python objects).
_READER_OVERHEAD_BYTES = 16 * 1024
#: Bytes charged per byte of a file's column metadata: parsed into Python objects (a ColumnInfo,
#: PageInfo and encoding dataclasses per column and page) it takes 5-14.5x its protobuf size
#: (measured with tracemalloc: 300 one-page columns 11.9x in session 8, 14.5x with the memoized
#: Arrow field per column and pyarrow 26 / numpy 2.4; 1,564 pages of 4 columns 9.1x, now 5.2x).
#: Charging the protobuf size alone let a 32 MiB metadata cache hold ~400 MiB of open wide files.
READER_CHARGE_FACTOR = 16
#: Projection plans kept per fragment reader: clients use a handful of column lists; the bound
#: keeps a client that sends endless distinct projections from growing a handle without limit.
_MAX_PLANS = 64
#: Physical rows per block whose deleted rows pylance fills from the block's first live row
#: (:meth:`FragmentReader.slot_sources`).
FILL_BLOCK_ROWS = 1024

#: One data file's share of a read: a projected reader (None: columns no file holds), the dataset
#: columns it provides, and where each column's leaves sit in it.
_Part = tuple[LanceFileReader | None, list[str], list[LeafPaths]]


class ReaderCache:
    """Open data files, deletion vectors and row ids of one store, in the process-wide
    :data:`~lance_format.dataset.cache.METADATA_CACHE` (so reopening a dataset stays warm).
    """

    def __init__(
        self,
        store: ObjectStore,
        cache: ByteLRU | None = None,
        storage_options: dict[str, str] | None = None,
        decoded: ByteLRU | None = None,
        base_store_params: BaseStoreParams | None = None,
    ) -> None:
        self.store = store
        self._cache = METADATA_CACHE if cache is None else cache  # (an empty cache is falsy)
        #: Decoded blocks of hot rows (None: the process-wide ``DECODED_CACHE``).
        self.decoded = decoded
        self._storage_options = storage_options
        #: pylance's ``base_store_params``: options of the stores of some bases, by base URI.
        self.base_store_params = base_store_params
        self._stores: dict[str, ObjectStore] = {}
        self._lock = threading.Lock()

    @property
    def metadata(self) -> ByteLRU:
        """The metadata cache these files, deletion vectors and row ids go in."""
        return self._cache

    def locate(
        self, base_id: int | None, folder: str, name: str, bases: dict[int, BasePath]
    ) -> tuple[ObjectStore, str]:
        """``(store, key)`` of a file named relative to ``folder`` of the root or of a base path."""
        if base_id is None:
            return self.store, f"{folder}/{name}"
        base = bases.get(base_id)
        if base is None:
            raise CorruptFileError(self.store.uri, f"{name} names base path {base_id}, which is not defined")
        with self._lock:
            store = self._stores.get(base.path)
            if store is None:
                options = base_store_options(base.path, self._storage_options, self.base_store_params)
                store = self._stores[base.path] = store_for_uri(
                    base.path, options, runtime=self.store.runtime
                )
        return store, (f"{folder}/{name}" if base.is_dataset_root else name)

    def reader(self, f: DataFile, bases: dict[int, BasePath] | None = None) -> LanceFileReader:
        """The open reader of a data file (opened once per process)."""
        store, key = self.locate(f.base_id, "data", f.path, bases or {})
        ckey = (store.uri, "file", key)
        r = self._cache.get(ckey)
        if r is None:
            r = LanceFileReader(key, store=store, size=f.file_size_bytes or None)
            meta = r.metadata()
            charge = meta.num_column_metadata_bytes * READER_CHARGE_FACTOR + _READER_OVERHEAD_BYTES
            self._cache.put(ckey, r, charge)
        return r

    def _sequence(
        self, frag: DataFragment, kind: str, seq: bytes | ExternalFile, decode: Callable[[bytes, str], Any]
    ) -> npt.NDArray[np.uint64]:
        """A fragment's decoded per-row sequence (inline or in an external file), cached."""
        ident = seq if isinstance(seq, ExternalFile) else (len(seq), hash(seq))
        ckey = (self.store.uri, kind, frag.id, ident)
        out: npt.NDArray[np.uint64] | None = self._cache.get(ckey)
        if out is None:
            if isinstance(seq, ExternalFile):
                data = self.store.read_range(seq.path, seq.offset, seq.offset + seq.size)
            else:
                data = seq
            out = decode(data, f"{self.store.uri} fragment {frag.id}")
            if len(out) != frag.physical_rows:
                raise CorruptFileError(
                    self.store.uri,
                    f"fragment {frag.id} has {len(out)} {kind} for {frag.physical_rows} rows",
                )
            self._cache.put(ckey, out, out.nbytes)
        return out

    def row_ids(self, frag: DataFragment) -> npt.NDArray[np.uint64]:
        """Decoded stable row ids of a fragment."""
        seq = frag.row_ids
        if seq is None:
            raise InvalidInputError(f"fragment {frag.id} has no stable row ids")
        return self._sequence(frag, "row ids", seq, decode_row_ids)

    def row_versions(self, frag: DataFragment, which: str) -> npt.NDArray[np.uint64]:
        """The version that created (``which="created"``) or last updated (``"updated"``) each
        physical row of ``frag``; :data:`~lance_format.table.rowids.DEFAULT_ROW_VERSION` where
        the fragment records none."""
        seq = frag.created_at_versions if which == "created" else frag.last_updated_at_versions
        rows = frag.physical_rows
        if seq is None:
            return decode_row_versions(None, rows, self.store.uri)
        return self._sequence(
            frag, f"row versions ({which})", seq, lambda data, path: decode_row_versions(data, rows, path)
        )

    def deleted(self, frag: DataFragment, bases: dict[int, BasePath] | None = None) -> npt.NDArray[np.uint32]:
        """Sorted deleted offsets of a fragment."""
        d = frag.deletion_file
        if d is None:
            return np.zeros(0, np.uint32)
        folder, _, name = d.key(frag.id).partition("/")
        store, key = self.locate(d.base_id, folder, name, bases or {})
        ckey = (store.uri, "deletion", key)
        arr = self._cache.get(ckey)
        if arr is None:
            arr = read_deletion_file(store, frag.id, d, key)
            self._cache.put(ckey, arr, arr.nbytes)
        return arr


class FragmentReader:
    """Reads columns of one fragment by physical row offset."""

    def __init__(
        self,
        frag: DataFragment,
        schema: LanceSchema,
        cache: ReaderCache,
        bases: dict[int, BasePath] | None = None,
    ) -> None:
        self.frag = frag
        self.schema = schema
        self.cache = cache
        self.bases = bases or {}
        # Projection plans by column list: takes ask for the same columns again and again, and a
        # plan (projected reader views, name mapping) costs more than a small take's decode.
        self._plans: dict[tuple[str, ...], list[_Part]] = {}
        self._schemas: dict[tuple[str, ...], pa.Schema] = {}

    @property
    def physical_rows(self) -> int:
        """Rows in the fragment, deleted ones included."""
        return self.frag.physical_rows

    def deleted(self) -> npt.NDArray[np.uint32]:
        """Sorted deleted physical offsets."""
        return self.cache.deleted(self.frag, self.bases)

    def keep_mask(self) -> npt.NDArray[np.bool_] | None:
        """``True`` for live rows; ``None`` when nothing is deleted."""
        deleted = self.deleted()
        if not len(deleted):
            return None
        mask = np.ones(self.frag.physical_rows, dtype=bool)
        mask[deleted[deleted < self.frag.physical_rows]] = False
        return mask

    def slot_sources(self) -> npt.NDArray[np.int64] | None:
        """For every physical row, the physical row whose values a rewritten data file of this
        fragment holds there (``None`` when nothing is deleted: each row its own).

        A new file must line up with the fragment's others, so deleted rows keep a slot; pylance
        14 fills it with a copy of a live row, never evaluating anything on the deleted row (an
        expression or cast that would fail there must not fail the write), and never a null (the
        column may be non-nullable). Which live row, as observed of pylance's ``add_columns`` and
        ``alter_columns``: the first live row at or after the start of the deleted row's block of
        :data:`FILL_BLOCK_ROWS` physical rows, or the fragment's first live row when none is.
        ``include_deleted_rows`` scans show these copies.
        """
        keep = self.keep_mask()
        if keep is None:
            return None
        offsets = np.arange(len(keep), dtype=np.int64)
        live = np.flatnonzero(keep)
        if not len(live):
            return offsets  # a fragment with no live row is dropped at commit: nothing to copy
        at = np.searchsorted(live, offsets - offsets % FILL_BLOCK_ROWS)
        source = np.where(at < len(live), live[np.minimum(at, len(live) - 1)], live[0])
        return np.where(keep, offsets, source)

    def row_ids(self) -> npt.NDArray[np.uint64]:
        """Stable row ids of every physical row."""
        return self.cache.row_ids(self.frag)

    def row_versions(self, which: str) -> npt.NDArray[np.uint64]:
        """The version that created (``"created"``) or last updated (``"updated"``) every
        physical row (see :meth:`ReaderCache.row_versions`)."""
        return self.cache.row_versions(self.frag, which)

    def _plan(self, columns: Sequence[str]) -> list[_Part]:
        """Per data file: a projected reader and the dataset columns it provides (cached)."""
        key = tuple(columns)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._make_plan(columns)
            if len(self._plans) < _MAX_PLANS:
                self._plans[key] = plan
        return plan

    def _make_plan(self, columns: Sequence[str]) -> list[_Part]:
        """Per data file: a projected reader, the dataset column names it provides and where
        each column's leaves sit in it.

        A field's leaves are found through the data file's ``fields``/``column_indices`` and
        mapped to the file's own fields through the file's schema, so renamed and renumbered
        fields still resolve, and a struct whose members live in several files is read from
        each of them (see :mod:`lance_format.dataset.assemble`).
        """
        wanted = [self.schema.field_by_name(c) for c in columns]
        plan: list[_Part] = []
        covered: dict[int, set[int]] = {}
        for df in self.frag.files:
            if df.file_major_version < 2:
                raise NotSupportedError(
                    f"{self.cache.store.uri}/data/{df.path}: legacy (0.1) data files are not supported"
                )
            col_of = {fid: c for fid, c in zip(df.fields, df.column_indices, strict=False) if c >= 0}
            # Linear in fields: a set difference of every column per field would be quadratic.
            pending = [f for f in wanted if held_leaves(f, col_of).keys() - covered.get(f.id, set())]
            if not pending:
                continue
            reader = self.cache.reader(df, self.bases)
            file_schema = reader.metadata().lance_schema
            by_col = {c: fid for fid, c in reader.columns_of.items()}
            placed = place_fields(pending, col_of, file_schema, by_col, covered)
            if len(placed) < len(pending):
                lost = next(f for f in pending if all(p.field.id != f.id for p in placed))
                raise CorruptFileError(
                    f"{self.cache.store.uri}/data/{df.path}", f"no column for field {lost.name!r}"
                )
            plan.append(
                (
                    reader.view([p.file_field for p in placed]),
                    [p.field.name for p in placed],
                    [p.paths for p in placed],
                )
            )
        absent = [f.name for f in wanted if not covered.get(f.id)]
        if absent:
            plan.append((None, absent, [{} for _ in absent]))
        return plan

    def _assemble(
        self, columns: Sequence[str], parts: list[tuple[_Part, list[pa.ChunkedArray]]], n: int
    ) -> pa.Table:
        if not columns:  # no columns, but the row count still matters
            return pa.table({"_": pa.nulls(n, pa.int8())}).select([])
        sources: dict[str, list[tuple[pa.ChunkedArray, LeafPaths]]] = {}
        for (_, names, paths), arrays in parts:
            for name, leaf_paths, arr in zip(names, paths, arrays, strict=True):
                sources.setdefault(name, []).append((arr, leaf_paths))
        out = [assemble_column(self.schema.field_by_name(c), sources.get(c, []), n) for c in columns]
        return pa.Table.from_arrays(out, schema=self._out_schema(columns))

    def _out_schema(self, columns: Sequence[str]) -> pa.Schema:
        """The Arrow schema of ``columns`` (cached with the plans: takes ask for the same ones)."""
        key = tuple(columns)
        known = self._schemas.get(key)
        if known is None:
            arrow = self.schema.to_arrow()
            known = pa.schema([arrow.field(c) for c in columns])
            if len(self._schemas) < _MAX_PLANS:
                self._schemas[key] = known
        return known

    def read_range(
        self, columns: Sequence[str], start: int, stop: int, policy: ReadPolicy = ReadPolicy.CACHED
    ) -> pa.Table:
        """Physical rows ``[start, stop)`` (``policy``: the caches the read may use; scans pass
        :attr:`ReadPolicy.SCAN`)."""
        parts = []
        for part in self._plan(columns):
            if part[0] is None:
                continue
            t = read_range_cached(part[0], start, stop, self.cache.decoded, policy)
            parts.append((part, t.columns))
        return self._assemble(columns, parts, stop - start)

    def take(
        self,
        columns: Sequence[str],
        offsets: npt.NDArray[np.int64],
        budget: AdmitBudget | None = None,
        policy: ReadPolicy = ReadPolicy.CACHED,
    ) -> pa.Table:
        """Physical rows at ``offsets`` (sorted unique is cheapest; any order works).

        ``budget`` bounds the hot blocks the take may decode whole for the decoded-block cache
        (:mod:`lance_format.file.decoded`); share one between the fragments of one logical take.
        """
        parts = []
        for part in self._plan(columns):
            if part[0] is None:
                continue
            t = take_cached(part[0], offsets, budget, self.cache.decoded, policy)
            parts.append((part, t.columns))
        return self._assemble(columns, parts, len(offsets))
