"""Scans: stream a version's fragments with projection, filter, limit/offset and row ids."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, InvalidTypeError, NotSupportedError, OutOfRangeError
from lance_format.dataset.arrow_dataset import check_arrow_options
from lance_format.dataset.expr import Predicate
from lance_format.dataset.filters import ComputedValue, Filter, evaluate, parse_filter, parse_value
from lance_format.dataset.fragment import FragmentReader
from lance_format.dataset.projection import MemberPath, flatten_member, member_path
from lance_format.dataset.row_versions import CREATED, UPDATED
from lance_format.dataset.scan_options import (
    ScanOptions,
    combine_table,
    scan_options,
    sort_table,
    strict_batches,
)
from lance_format.io.cache import ReadPolicy
from lance_format.io.prefetch import ScanScope, scan_scope
from lance_format.io.scheduler import ReadAhead

if TYPE_CHECKING:
    from lance_format.dataset.snapshot import SnapshotSource
    from lance_format.table.model import DataFragment

__all__ = [
    "CREATED_AT",
    "DEFAULT_BATCH_SIZE",
    "ROW_VERSION_COLUMNS",
    "UPDATED_AT",
    "VIRTUAL_COLUMNS",
    "LanceScanner",
    "conform_schema",
    "row_id_columns",
]

#: pylance's scan batch size on local disk.
DEFAULT_BATCH_SIZE = 8192


def _table_bytes(table: pa.Table) -> int:
    # The buffers' sizes (O(buffers)); ``nbytes`` works out the bytes each slice references
    # (~30 us for a 4-column chunk against ~1 us), and a budget needs the memory held anyway.
    return int(table.get_total_buffer_size())


ROWID = "_rowid"
ROWADDR = "_rowaddr"
#: The version that created / last updated each row (pylance's names): columns a scan, a filter
#: or a take may name, read from the fragments' row version sequences.
CREATED_AT = "_row_created_at_version"
UPDATED_AT = "_row_last_updated_at_version"
ROW_VERSION_COLUMNS = {CREATED_AT: CREATED, UPDATED_AT: UPDATED}
#: Columns every dataset has without storing them.
VIRTUAL_COLUMNS = (ROWID, ROWADDR, CREATED_AT, UPDATED_AT)
#: A column of nulls (no buffers) that carries the row count of a scan projecting no columns while
#: its chunks are sliced and counted: pyarrow does not clamp ``slice`` on a zero-column table
#: (``slice(0, 10**6)`` of 1,000 rows reports 1,000,000), so chunks never lose their last column
#: until the scan hands them out.
_ROWS = "__lance_rows"


#: The offsets of a chunk whose rows need none (no row id, address or placeholder column).
_NO_OFFSETS = np.zeros(0, dtype=np.int64)


def _with_rows(table: pa.Table, rows: int) -> pa.Table:
    """``table``, or the row-count carrier when it has no columns left."""
    return table if table.num_columns else pa.table({_ROWS: pa.nulls(rows)})


def conform_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``: a cast only where a type differs. A cast to the same type still
    checks non-nullable struct members, and fails on the null member values under a null struct
    (how such a column is stored and read, in every engine)."""
    if table.schema.equals(schema, check_metadata=True):
        return table
    if table.schema.equals(schema):  # field or schema metadata only
        return pa.Table.from_arrays(table.columns, schema=schema)
    return table.cast(schema)


#: The arguments of :class:`LanceScanner` that :meth:`LanceScanner.open` passes on by name.
_OWN_ARGUMENTS = (
    "columns",
    "filter",
    "limit",
    "offset",
    "batch_size",
    "with_row_id",
    "with_row_address",
    "fragments",
    "use_scalar_index",
)

#: Counts (limit, offset, batch size) are signed 64-bit integers, as in pylance.
MAX_COUNT = 2**63 - 1


def _check_count(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidTypeError(f"{name} must be an integer from 0 to 2**63-1, got {value!r}")
    if not 0 <= value <= MAX_COUNT:
        raise OutOfRangeError(f"{name} must be an integer from 0 to 2**63-1, got {value!r}")
    return int(value)


def row_id_columns(
    reader: FragmentReader,
    offsets: npt.NDArray[np.int64],
    with_row_id: bool,
    with_row_address: bool,
    stable: bool,
    versions: Sequence[str] = (),
) -> list[tuple[str, pa.Array]]:
    """``_rowid`` / ``_rowaddr`` columns for physical ``offsets`` of one fragment, then the row
    version columns named in ``versions`` (:data:`ROW_VERSION_COLUMNS`)."""
    out: list[tuple[str, pa.Array]] = []
    if not (with_row_address or (with_row_id and not stable)):
        if with_row_id:
            out.append((ROWID, pa.array(reader.row_ids()[offsets], pa.uint64())))
    else:
        addr = (np.uint64(reader.frag.id) << np.uint64(32)) | offsets.astype(np.uint64)
        if with_row_id:
            ids = reader.row_ids()[offsets] if stable else addr
            out.append((ROWID, pa.array(ids, pa.uint64())))
        if with_row_address:
            out.append((ROWADDR, pa.array(addr, pa.uint64())))
    for name in versions:
        out.append((name, pa.array(reader.row_versions(ROW_VERSION_COLUMNS[name])[offsets], pa.uint64())))
    return out


class LanceScanner:
    """A planned scan of one dataset version (mirrors pylance's ``LanceScanner``)."""

    def __init__(
        self,
        dataset: SnapshotSource,
        columns: Sequence[str] | dict[str, str] | None = None,
        filter: Filter | None = None,
        limit: int | None = None,
        offset: int | None = None,
        batch_size: int | None = None,
        with_row_id: bool = False,
        with_row_address: bool = False,
        fragments: Sequence[DataFragment] | None = None,
        use_scalar_index: bool = True,
        options: ScanOptions | None = None,
    ) -> None:
        self._ds = dataset = dataset.snapshot
        self._options = options = options or ScanOptions()
        # Statistics describe live rows only: a scan returning deleted rows reads every row.
        use_scalar_index = use_scalar_index and not options.include_deleted_rows
        # Zone statistics narrow a filtered scan to the row ranges that can match (pylance's name).
        self._use_scalar_index = use_scalar_index
        arrow = dataset.schema
        self._exprs: dict[str, ComputedValue] | None = None
        self._expr_refs: set[str] = set()
        if isinstance(columns, dict):
            # {output name: SQL expression}, as pylance accepts.
            self._exprs = {}
            used_by_exprs: set[str] = set()
            for name, sql in columns.items():
                # Bound with ``_rowid`` / ``_rowaddr`` too: pylance's computed columns may read them.
                value = self._exprs[str(name)] = parse_value(sql, self.filter_schema(arrow))
                used_by_exprs |= value.columns
            if self._exprs and not used_by_exprs and not (with_row_id or with_row_address):
                # pylance refuses it ("Scans must request at least one column. Received only
                # dynamic expressions"), with a filter or a limit too.
                raise NotSupportedError(
                    f"a scan must read at least one column; {list(self._exprs)} are only literal expressions"
                )
            self._expr_refs = used_by_exprs
            columns = [c for c in arrow.names if c in used_by_exprs]
        elif columns is None:
            columns = list(arrow.names)
        elif (
            isinstance(columns, str)
            or not isinstance(columns, Iterable)
            or not all(isinstance(c, str) for c in columns)
        ):
            raise InvalidTypeError("columns must be a list of column names or a dict of SQL expressions")
        elif len(set(columns)) != len(columns):
            # pylance refuses it too ("Duplicate column name"); the fragment plan failed on it.
            twice = next(c for i, c in enumerate(columns) if c in columns[:i])
            raise InvalidInputError(f"Duplicate column name: {twice}")
        # ``_rowid`` / ``_rowaddr`` named among the columns come out where they are named, unless
        # also asked for by with_row_id / with_row_address: then last, as pylance orders them.
        order: list[str] | None = None
        virtual = [c for c in VIRTUAL_COLUMNS if c not in arrow.names]
        named_versions: list[str] = []
        if self._exprs is None and any(c in columns for c in virtual) and ROWID not in arrow.names:
            flagged = {n for n, on in ((ROWID, with_row_id), (ROWADDR, with_row_address)) if on}
            order = [c for c in dict.fromkeys(columns) if c not in flagged]
            with_row_id = with_row_id or ROWID in order
            with_row_address = with_row_address or ROWADDR in order
            named_versions = [c for c in order if c in ROW_VERSION_COLUMNS and c in virtual]
            columns = [c for c in columns if c not in virtual]
        # One set of names: ``Schema.names`` builds a new list per access (quadratic in a loop).
        known = set(arrow.names)
        #: Struct members named by path (``"ss.in.z"``): flat columns computed from their roots.
        self._members: dict[str, MemberPath] = {}
        for c in columns:
            if c not in known:
                self._members[c] = member_path(arrow, c)
        self._columns = list(columns)
        roots = list(dict.fromkeys(self._members[c].root if c in self._members else c for c in columns))
        self._predicate: Predicate | None = None
        self._filter: pc.Expression | None = None
        extra: list[str] = []
        used: set[str] = set(self._expr_refs)
        if filter is not None:
            self._predicate = parse_filter(filter, self.filter_schema(arrow))
            self._filter = self._predicate.expression
            used |= self._predicate.columns
        extra = [c for c in arrow.names if c in used and c not in roots]
        # Sort keys not in the projection are read too, and dropped after sorting; a struct member
        # ("s.a") is read through its struct and sorted on as a flat column named by its path.
        self._sort_members = {
            o.column_name: member_path(arrow, o.column_name)
            for o in options.order_by
            if o.column_name not in known and o.column_name not in self._members
        }
        sort_roots = (
            self._sort_members[o.column_name].root if o.column_name in self._sort_members else o.column_name
            for o in options.order_by
        )
        self._sort_extra = [c for c in dict.fromkeys(sort_roots) if c not in (*self._columns, *roots, *extra)]
        self._read = roots + extra + self._sort_extra
        self._limit = _check_count(limit, "limit")
        self._offset = _check_count(offset, "offset") or 0
        self._paged = limit is not None or offset is not None  # even offset=0: count_rows refuses it
        bs = _check_count(batch_size, "batch_size")
        if bs == 0:
            raise InvalidInputError("batch_size must be positive")
        self._batch_size = bs or DEFAULT_BATCH_SIZE
        for flag, on in (("with_row_id", with_row_id), ("with_row_address", with_row_address)):
            if not isinstance(on, bool | np.bool_):  # pylance: TypeError
                raise InvalidTypeError(f"{flag} must be a bool, not {on!r}")
        if options.include_deleted_rows and not with_row_id:
            raise InvalidInputError("include_deleted_rows is set but with_row_id is false")
        self._with_row_id = with_row_id
        self._with_row_address = with_row_address
        self._compute_row_id = with_row_id or ROWID in used
        self._compute_row_address = with_row_address or ROWADDR in used
        self._versions = [
            c for c in ROW_VERSION_COLUMNS if (c in named_versions or c in used) and c not in arrow.names
        ]
        self._fragments = list(fragments) if fragments is not None else list(dataset.manifest.fragments)
        # Every projection carries the schema-level metadata, as pylance's scans do.
        if self._exprs is None and self._columns == arrow.names:
            # Every column in order: the dataset's own fields, without a Python object per field
            # (wide tables: 100,000 columns).
            projected = arrow
        elif self._exprs is None:
            projected = pa.schema(
                [self._output_field(arrow, c) for c in self._columns], metadata=arrow.metadata
            )
        else:
            empty = self.filter_schema(pa.schema([arrow.field(c) for c in self._columns])).empty_table()
            projected = pa.schema(list(self._project(empty).schema), metadata=arrow.metadata)
        if with_row_id:
            projected = projected.append(pa.field(ROWID, pa.uint64(), nullable=True))
        if with_row_address:
            projected = projected.append(pa.field(ROWADDR, pa.uint64(), nullable=True))
        for name in named_versions:
            projected = projected.append(pa.field(name, pa.uint64(), nullable=True))
        if order is not None:
            order += [c for c in projected.names if c not in order]
            projected = pa.schema([projected.field(c) for c in order])
        self._projected_schema = projected
        sort_cols = [o.column_name for o in options.order_by if o.column_name not in projected.names]
        self._load_names = [*projected.names, *dict.fromkeys(sort_cols)]

    @classmethod
    def open(cls, dataset: SnapshotSource, **kwargs: Any) -> LanceScanner:
        """A scan from ``LanceDataset.scanner``'s keyword arguments (``fragments`` as table-model
        fragments): this class's own, pylance's further options (``order_by``,
        ``strict_batch_size`` ...; see :func:`~lance_format.dataset.scan_options.scan_options`) and
        pyarrow's tuning options; ``None`` leaves an argument at its default."""
        snapshot = dataset.snapshot
        options = scan_options(kwargs, snapshot.schema)  # pylance's options beyond pyarrow's
        args = {name: kwargs.pop(name) for name in _OWN_ARGUMENTS if kwargs.get(name) is not None}
        kwargs = {k: v for k, v in kwargs.items() if k not in _OWN_ARGUMENTS}
        check_arrow_options(kwargs)
        if "use_scalar_index" in args:
            args["use_scalar_index"] = args["use_scalar_index"] is not False
        return cls(snapshot, **args, options=options)

    @property
    def projected_schema(self) -> pa.Schema:
        """The schema of the scan's output (columns, computed columns, ``_rowid`` / ``_rowaddr``),
        as pylance's ``projected_schema``."""
        return self._projected_schema

    @staticmethod
    def from_dataset(*args: Any, **kwargs: Any) -> LanceScanner:
        """Refused, as pylance's (``NotImplementedError``): use ``LanceDataset.scanner``."""
        raise NotSupportedError("LanceScanner.from_dataset: use LanceDataset.scanner(...)")

    @staticmethod
    def from_fragment(*args: Any, **kwargs: Any) -> LanceScanner:
        """Refused, as pylance's (``NotImplementedError``): use ``LanceFragment.scanner``."""
        raise NotSupportedError("LanceScanner.from_fragment: use LanceFragment.scanner(...)")

    @staticmethod
    def from_batches(*args: Any, **kwargs: Any) -> LanceScanner:
        """Refused, as pylance's (``NotImplementedError``): a Lance scanner reads a dataset."""
        raise NotSupportedError("LanceScanner.from_batches: a Lance scanner reads a Lance dataset")

    def _output_field(self, arrow: pa.Schema, name: str) -> pa.Field:
        path = self._members.get(name)
        return arrow.field(name) if path is None else path.field

    @property
    def predicate(self) -> Predicate | None:
        """The scan's filter, parsed and bound (``None`` without one)."""
        return self._predicate

    @staticmethod
    def filter_schema(schema: pa.Schema) -> pa.Schema:
        """The schema filters are bound to: the dataset's columns, then ``_rowid``, ``_rowaddr``
        and the row version columns (filters may test them, as in pylance)."""
        for name in VIRTUAL_COLUMNS:
            if name not in schema.names:
                schema = schema.append(pa.field(name, pa.uint64()))
        return schema

    # -- execution -----------------------------------------------------------------------------
    def _plan(self) -> Iterator[tuple[FragmentReader, int, int, int]]:
        """Chunks to read: ``(reader, start, stop, live rows to skip)``.

        Without a filter the offset is resolved here from deletion counts, so skipped fragments and
        chunks are never read.
        """
        chunk = self._ds.session.setting("scan_chunk_rows")
        if self._filter is not None and self._use_scalar_index:
            yield from self._pruned_plan(chunk)
            return
        if self._filter is not None:
            for frag in self._fragments:
                reader = self._ds.fragment_reader(frag)
                for start in range(0, frag.physical_rows, chunk):
                    yield reader, start, min(start + chunk, frag.physical_rows), 0
            return
        # No filter: offset and limit are row counts, so only the physical rows they cover are
        # read (a page of 1000 rows deep in a dataset decodes those rows, not whole chunks).
        skip, need = self._offset, self._limit
        deleted_too = self._options.include_deleted_rows
        if self._options.order_by:  # offset and limit apply after sorting
            skip, need = 0, None
        for frag in self._fragments:
            if need == 0:
                return
            rows = frag.physical_rows if deleted_too else frag.num_rows
            if skip >= rows:
                skip -= rows
                continue
            reader = self._ds.fragment_reader(frag)
            keep = reader.keep_mask() if (skip or need is not None) and not deleted_too else None
            for start in range(0, frag.physical_rows, chunk):
                stop = min(start + chunk, frag.physical_rows)
                live = None if keep is None else np.flatnonzero(keep[start:stop])
                n_live = stop - start if live is None else len(live)
                if skip >= n_live:
                    skip -= n_live
                    continue
                first = start + (skip if live is None else int(live[skip]))
                last = stop
                if need is not None and need < n_live - skip:
                    last = first + need if live is None else start + int(live[skip + need - 1]) + 1
                yield reader, first, last, 0
                if need is not None:
                    need -= min(need, n_live - skip)
                    if need == 0:
                        return
                skip = 0

    def _pruned_plan(self, chunk: int) -> Iterator[tuple[FragmentReader, int, int, int]]:
        """Chunks of a filtered scan, limited to the row ranges statistics say can match."""
        from lance_format.dataset.pruning import candidate_ranges

        assert self._predicate is not None
        ranges = candidate_ranges(self._ds, self._predicate.tree, self._fragments)
        for frag in self._fragments:
            reader = self._ds.fragment_reader(frag)
            spans = [(0, frag.physical_rows)] if ranges is None else ranges.get(frag.id, [])
            for lo, hi in spans:
                for start in range(lo, hi, chunk):
                    yield reader, start, min(start + chunk, hi), 0

    def _load(self, reader: FragmentReader, start: int, stop: int, skip: int) -> pa.Table:
        """One chunk: decoded, deleted rows dropped, row ids added, filtered, projected."""
        # Physical offsets only when a row id, address or placeholder needs them: a plain scan
        # would otherwise write (and fault in) 8 bytes per row for nothing.
        ids = self._compute_row_id or self._compute_row_address or bool(self._versions)
        offsets = np.arange(start, stop, dtype=np.int64) if ids or not self._read else _NO_OFFSETS
        # With nothing to decode, a placeholder column carries the row count.
        # Scans read each byte once: they leave the page cache to the random takes it exists for.
        if self._read:
            table = reader.read_range(self._read, start, stop, ReadPolicy.SCAN)
        else:
            table = pa.table({"__n": offsets})
        keep = reader.keep_mask()
        dead: npt.NDArray[np.bool_] | None = None
        if keep is not None and self._options.include_deleted_rows:
            dead = ~keep[start:stop]
        elif keep is not None:
            live = keep[start:stop]
            table = table.filter(pa.array(live))
            offsets = offsets[live] if len(offsets) else offsets
        if skip:
            table, offsets = table.slice(skip), offsets[skip:]
            dead = None if dead is None else dead[skip:]
        if ids:
            stable = self._ds.has_stable_row_ids
            for name, col in row_id_columns(
                reader, offsets, self._compute_row_id, self._compute_row_address, stable, self._versions
            ):
                if dead is not None and dead.any():  # a deleted row has no id nor address (pylance)
                    col = pc.if_else(pa.array(dead), pa.scalar(None, pa.uint64()), col)
                table = table.append_column(name, col)
        if self._filter is not None:
            table = self._apply_filter(table)
        for path in (*self._members.values(), *self._sort_members.values()):
            table = table.append_column(path.field, flatten_member(table.column(path.root), path))
        if self._exprs is None:
            return _with_rows(table.select(self._load_names), table.num_rows)
        projected = self._project(table)
        for name in self._load_names[projected.num_columns :]:
            projected = projected.append_column(name, table.column(name))
        return _with_rows(projected, table.num_rows)

    def _fragment_tables(self) -> Iterator[pa.Table]:
        """Chunks in order, decoded ahead on worker threads.

        At most the session's ``readahead_chunks`` chunks and its byte budget ahead of the
        consumer; chunk ``i`` reads at I/O priority ``i``, so earlier rows are fetched first.
        """
        skip = self._offset if self._filter is not None and not self._options.order_by else 0
        tasks = self._scoped_tasks()
        session = self._ds.session
        ahead = ReadAhead(
            tasks, _table_bytes, session.dataset_pool().submit, max_tasks=session.setting("readahead_chunks")
        )
        for table in ahead:
            if skip:
                cut = min(skip, table.num_rows)
                table, skip = table.slice(cut), skip - cut
            yield table

    def _scoped_tasks(self) -> Iterator[Callable[[], pa.Table]]:
        """The chunk loads, each under the :class:`ScanScope` of its fragment when the scan reads
        every row from its first chunk on (no limit, no index pruning): object-store files then
        fetch those rows' pages ahead in large requests (:mod:`lance_format.io.prefetch`)."""
        whole = self._limit is None or bool(self._options.order_by)
        whole = whole and not (self._filter is not None and self._use_scalar_index)
        scope: ScanScope | None = None
        frag_id: int | None = None
        for reader, start, stop, skip in self._plan():
            if whole and reader.frag.id != frag_id:
                frag_id, scope = reader.frag.id, ScanScope(start, reader.frag.physical_rows)
            yield partial(self._load_scoped, scope, reader, start, stop, skip)

    def _load_scoped(
        self, scope: ScanScope | None, reader: FragmentReader, start: int, stop: int, skip: int
    ) -> pa.Table:
        with scan_scope(scope):
            return self._load(reader, start, stop, skip)

    def _project(self, table: pa.Table) -> pa.Table:
        assert self._exprs is not None
        return evaluate(table, self._exprs)

    def _apply_filter(self, table: pa.Table) -> pa.Table:
        try:
            return table.filter(self._filter)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
            raise InvalidInputError(f"cannot evaluate filter {self._filter}: {e}") from None

    def _sorted_tables(self) -> Iterator[pa.Table]:
        """Every matching row, sorted by ``order_by``, then offset and limit (sort keys read only
        for sorting are dropped)."""
        tables = list(self._fragment_tables())
        if not tables:
            return
        table = sort_table(pa.concat_tables(tables), self._options.order_by)
        table = table.slice(self._offset, self._limit)  # (offset, length)
        yield _with_rows(table.select(self.projected_schema.names), table.num_rows)

    def _tables(self) -> Iterator[pa.Table]:
        remaining = self._limit
        if remaining == 0:
            return
        if self._options.order_by:
            yield from self._sorted_tables()
            return
        for table in self._fragment_tables():
            if remaining is not None:
                table = table.slice(0, remaining)
                remaining -= table.num_rows
            if table.num_rows:
                yield table
            if remaining == 0:
                return

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Batches of at most ``batch_size`` rows, in fragment order."""
        batches = self._batches()
        if self._options.strict_batch_size:
            batches = strict_batches(batches, self._batch_size)
        return batches

    def _batches(self) -> Iterator[pa.RecordBatch]:
        empty = not self.projected_schema
        metadata = self.projected_schema.metadata
        for table in self._tables():
            for batch in combine_table(table).to_batches(self._batch_size):
                # The schema-level metadata, as pylance's batches carry it (no data is copied);
                # set before the select: on a batch of no columns it would drop the row count.
                batch = batch.replace_schema_metadata(metadata) if metadata else batch
                yield batch.select([]) if empty else batch  # drops the row-count carrier

    def scan_batches(self) -> list[pa.RecordBatch]:
        """Every batch of the scan, as a list (pylance 14.0.2's ``scan_batches`` returns the
        plain batches of :meth:`to_reader`, not pyarrow's ``TaggedRecordBatch``)."""
        return list(self.to_batches())

    def take(self, indices: Any) -> pa.Table:
        """Refused, as pylance's (``NotImplementedError``): use ``LanceDataset.take``."""
        raise NotSupportedError("LanceScanner.take: use LanceDataset.take(indices, columns)")

    def to_reader(self) -> pa.RecordBatchReader:
        """The scan as a RecordBatchReader."""
        return pa.RecordBatchReader.from_batches(self.projected_schema, self.to_batches())

    def to_pandas(self, **kwargs: Any) -> Any:
        """The rows as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        return self.to_table().to_pandas(**kwargs)

    def to_table(self) -> pa.Table:
        """Every selected row as one table."""
        tables = list(self._tables())
        if not self.projected_schema:
            # No columns: still report the row count, as pylance does.
            rows = pa.table({_ROWS: pa.nulls(sum(t.num_rows for t in tables))})
            # select, not replace_schema_metadata: that would drop the row count of no columns.
            return rows.replace_schema_metadata(self.projected_schema.metadata).select([])
        if not tables:
            return self.projected_schema.empty_table()
        return conform_schema(pa.concat_tables(tables), self.projected_schema)

    @property
    def dataset_schema(self) -> pa.Schema:
        """The scanned version's full schema (pyarrow's ``Scanner.dataset_schema``)."""
        return self._ds.schema

    def head(self, num_rows: int) -> pa.Table:
        """The scan's first ``num_rows`` rows."""
        n = _check_count(num_rows, "num_rows") or 0
        tables, got = [], 0
        for table in self._tables():
            tables.append(table.slice(0, n - got))
            got += tables[-1].num_rows
            if got >= n:
                break
        if not tables:
            return self.projected_schema.empty_table()
        return conform_schema(pa.concat_tables(tables), self.projected_schema)

    def count_rows(self) -> int:
        """Rows the scan matches (deletions read, data not, unless a filter needs it).

        Raises
        ------
        InvalidInputError
            When the scan has a ``limit`` or ``offset``, as pylance refuses it (count the table
            instead).
        """
        if self._paged:
            raise InvalidInputError(
                "Cannot use limit/offset with aggregate: count_rows() counts every matching row; "
                "apply the limit to the result instead"
            )
        if self._filter is None:
            deleted_too = self._options.include_deleted_rows
            total = sum(f.physical_rows if deleted_too else f.num_rows for f in self._fragments)
            total = max(0, total - self._offset)
            return total if self._limit is None else min(total, self._limit)
        return sum(t.num_rows for t in self._tables())

    # -- plans (pylance's explain_plan / analyze_plan) -------------------------------------------
    def _plan_lines(self, verbose: bool) -> list[str]:
        output = list(self.projected_schema.names)
        read = ", ".join(self._read) or "<row count only>"
        flt = "None" if self._filter is None else str(self._filter)
        pruning = self._filter is not None and self._use_scalar_index
        lines = [f"ProjectionExec: expr=[{', '.join(output)}]"]
        if self._limit is not None or self._offset:
            lines.append(f"  GlobalLimitExec: skip={self._offset}, fetch={self._limit}")
        pad = "  " * len(lines)
        lines.append(
            f"{pad}LanceRead: uri={self._ds.uri}, projection=[{read}], num_fragments={len(self._fragments)}, "
            f"row_id={self._compute_row_id}, row_addr={self._compute_row_address}, "
            f"full_filter={flt}, zone_map_pruning={pruning}"
        )
        if verbose:
            frags = ", ".join(f"{f.id}:{f.num_rows}" for f in self._fragments)
            lines.append(f"{pad}  fragments (id:live rows)=[{frags}], batch_size={self._batch_size}")
        return lines

    def explain_plan(self, verbose: bool = False) -> str:
        """The scan's plan as text, without running it (the shape of pylance's plan)."""
        return "\n".join(self._plan_lines(verbose)) + "\n"

    def analyze_plan(self, count_rows: bool = False) -> str:
        """Run the scan and return its plan annotated with what it did (rows, batches, time);
        ``count_rows=True`` runs :meth:`count_rows` instead (one output row), as pylance's."""
        import time

        start = time.perf_counter()
        rows = batches = 0
        if count_rows:
            self.count_rows()  # refuses a limit / offset, as pylance's COUNT(*) plan does
            rows = batches = 1
        else:
            for batch in self.to_batches():
                rows += batch.num_rows
                batches += 1
        elapsed_ms = (time.perf_counter() - start) * 1000
        head = f"AnalyzeExec verbose=true, elapsed={elapsed_ms:.3f}ms"
        metrics = (
            f", metrics=[output_rows={rows}, output_batches={batches}, fragments={len(self._fragments)}]"
        )
        lines = self._plan_lines(False)
        lines[0] += metrics
        return "\n".join([head, *("  " + line for line in lines)]) + "\n"
