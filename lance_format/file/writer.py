"""Writing Lance v2 files: :class:`LanceFileWriter` (mirrors pylance's ``lance.file``)."""

from __future__ import annotations

import functools
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lance_format.core.errors import InvalidInputError, LanceError, SchemaMismatchError
from lance_format.core.types import LanceField, LanceSchema, empty_array, fields_from_arrow, json_to_storage
from lance_format.encodings import v20
from lance_format.encodings.base import EncodedPage
from lance_format.encodings.v20 import column_encoding_to_bytes
from lance_format.encodings.v20.model import Values
from lance_format.file import _serde
from lance_format.file.format import FOOTER_LEN, PAD_BYTE, PAGE_ALIGN, Footer, LanceFileVersion
from lance_format.file.reader import assign_columns
from lance_format.io.store import ObjectStore, split_uri, store_for_uri

__all__ = ["EncodedPage", "LanceFileWriter"]

# Bytes buffered per top-level column before a page is encoded. pylance's default (8 MiB per column)
# gives pages large enough that per-page overhead vanishes in scans. Override per writer
# (`data_cache_bytes`, split across columns) or with setting ``file_writer_data_cache_bytes``.
DEFAULT_PAGE_BUFFER_BYTES = 8 * 1024 * 1024

# Upper bound on one page's bytes (pylance's MAX_PAGE_BYTES for 2.0): keeps any single read and
# decode bounded. Override with `max_page_bytes` or setting ``file_writer_max_page_bytes``.
DEFAULT_MAX_PAGE_BYTES = 32 * 1024 * 1024

# Threads that encode pages of a file's columns side by side (2.1+ files) are the session's
# (IORuntime.encode_pool, setting ``encode_threads``; see lance_format.core.config for why its
# default), or per writer (`encode_threads`, 1 = encode on the calling thread).


@dataclass
class _ColumnPages:
    encoding: _serde.RawEncoding
    pages: list[tuple[list[int], list[int], int, int, _serde.RawEncoding]] = field(default_factory=list)


#: The column encoding of every 2.1+ column.
_VALUES_COLUMN = column_encoding_to_bytes(Values())

_VIEW_TYPES = {"string_view": pa.string(), "binary_view": pa.binary()}


def _without_views(schema: pa.Schema) -> pa.Schema:
    """2.1+ files store top-level string/binary views as plain strings/binaries (as pylance does)."""
    if not any(pa.types.is_string_view(f.type) or pa.types.is_binary_view(f.type) for f in schema):
        return schema
    fields = [f.with_type(_VIEW_TYPES[str(f.type)]) if str(f.type) in _VIEW_TYPES else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


@dataclass(frozen=True)
class _SchemaPlan:
    """What a writer derives from its Arrow schema alone (shared by writers of one schema)."""

    schema: pa.Schema
    lance: LanceSchema
    columns_of: dict[int, int]
    column_encodings: tuple[_serde.RawEncoding, ...]
    #: The file descriptor without its row count (see :func:`_serde.with_length`).
    descriptor: bytes
    #: Per top-level field, whether it holds JSON (stored as JSONB, converted on write).
    json: tuple[bool, ...]
    #: Per top-level field, whether it stores blobs out of line (2.1+: encoded inline, not pooled).
    blobs: tuple[bool, ...]


#: Schema plans by (serialized Arrow schema, version): a process writing many files of one schema
#: (every fragment of a dataset, every small write) derives its fields, column assignment and
#: descriptor once, not per file. Bounded because schemas come from clients.
_PLANS: dict[tuple[bytes, LanceFileVersion], _SchemaPlan] = {}
_PLANS_MAX = 64
#: Columns the kept plans may describe in all: a plan takes ~600 bytes per column (1.2 MiB for 2,000
#: columns), so 64 plans of 10,000-column schemas would hold ~370 MiB; this keeps them near 12 MiB.
PLAN_COLUMNS_MAX = 20_000
_plan_columns = 0


#: The last plans handed out, with the schema each was asked for: a writer of a schema seen just
#: before finds its plan by one comparison (serializing the schema for the key costs more than a
#: small file's page encode).
_RECENT: deque[tuple[pa.Schema, LanceFileVersion, _SchemaPlan]] = deque(maxlen=8)


def _schema_plan(schema: pa.Schema, version: LanceFileVersion) -> _SchemaPlan:
    for seen, v, plan in tuple(_RECENT):  # (a copy: other threads' writers add to it)
        # With metadata: the schema's and every field's (both shape the file).
        if v is version and (seen is schema or seen.equals(schema, check_metadata=True)):
            return plan
    plan = _plan_by_bytes(schema, version)
    _RECENT.appendleft((schema, version, plan))
    return plan


def _plan_by_bytes(schema: pa.Schema, version: LanceFileVersion) -> _SchemaPlan:
    # The serialized schema keys on everything that shapes the file (field metadata included,
    # which Schema equality ignores).
    key = (schema.serialize().to_pybytes(), version)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    # (Imported on first use: numba's kernels load only for 2.1+ files. This form of import finds
    # a loaded module without the Python-level from-list step, which showed in small writes.)
    import lance_format.encodings.v21.encode as v21_encode

    if version.structural:
        schema = _without_views(schema)
    lance = fields_from_arrow(schema)
    for f in lance.walk():
        v20.check_writable(f)
    columns_of = assign_columns(lance, version)
    # 2.1+ columns are plain "values" columns, blobs included (their pages say blob).
    encodings = {
        c: v20.column_encoding_for(f) if not version.structural else _VALUES_COLUMN
        for f in lance.walk()
        if (c := columns_of.get(f.id)) is not None
    }
    plan = _SchemaPlan(
        schema,
        lance,
        columns_of,
        tuple(encodings[c] for c in range(len(encodings))),
        _serde.file_descriptor_bytes(lance, 0),
        tuple(f.has_json for f in lance.fields),
        tuple(version.structural and v21_encode.has_blobs(f) for f in lance.fields),
    )
    global _plan_columns
    if len(_PLANS) >= _PLANS_MAX or _plan_columns + len(encodings) > PLAN_COLUMNS_MAX:
        _PLANS.clear()
        _plan_columns = 0
    _PLANS[key] = plan
    _plan_columns += len(encodings)
    return plan


class LanceFileWriter:
    """Writes one Lance file.

    Parameters
    ----------
    path:
        Local path, ``file://`` or ``memory://`` URI of the file to create.
    schema:
        Arrow schema; taken from the first batch when omitted.
    version:
        File format version: ``"2.0"`` (the default here), ``"2.1"`` or ``"2.2"``.
    data_cache_bytes:
        Bytes buffered across all columns before pages are written.
    max_page_bytes:
        Largest page to write.
    store:
        Write through an already-open store (``path`` is then a key relative to its root).
    encode_threads:
        Pages encoded at once on the shared encode pool (1: on the calling thread); default
        ``LANCE_FORMAT_ENCODE_THREADS`` or the number of cores (at most 4). The file's bytes do not
        depend on it.

    Examples
    --------
    >>> with LanceFileWriter("/tmp/x.lance") as w:  # doctest: +SKIP
    ...     w.write_batch(pa.table({"a": [1, 2, 3]}))
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        schema: pa.Schema | None = None,
        *,
        version: str | LanceFileVersion = "2.0",
        data_cache_bytes: int | None = None,
        max_page_bytes: int | None = None,
        storage_options: dict[str, str] | None = None,
        store: ObjectStore | None = None,
        encode_threads: int | None = None,
    ) -> None:
        path = os.fspath(path)
        if store is None:
            folder, key = split_uri(path)
            store = _local_store(folder) if storage_options is None else None
            if store is None:
                store = store_for_uri(folder, storage_options)
        else:
            key = path
        self.path = path
        self._store = store
        self._key = key
        self.version = LanceFileVersion.parse(version)
        # Settings not given come from the session that opened the store (the process's otherwise).
        config = store.runtime.config
        self._cache_bytes = data_cache_bytes or config.file_writer_data_cache_bytes or None
        self._max_page = max_page_bytes or config.file_writer_max_page_bytes
        self._threads = encode_threads or config.encode_threads
        self._dict_threshold = config.dict_encoding_threshold  # 2.0 string pages
        self._encode_pool = store.runtime.encode_pool
        # Large string pages split their dictionary build and FSST coding over the session's
        # split pool (None when the writer encodes on its calling thread only).
        self._split_pool = store.runtime.split_pool if self._threads > 1 else None
        # Pages being encoded on the pool (with the encode itself, so a waiting writer can run one
        # the pool has not started), added to the file in submission order (so the bytes are the
        # same whatever the threads).
        self._inflight: deque[tuple[Future[list[EncodedPage]], Callable[[], list[EncodedPage]]]] = deque()
        self._parts: list[bytes | memoryview] = []
        self._pos = 0
        self._rows = 0
        self._closed = False
        self._schema: pa.Schema | None = None
        self._lance: LanceSchema | None = None
        if schema is not None:
            self._init_schema(schema)

    # -- setup -----------------------------------------------------------------------------------
    def _init_schema(self, schema: pa.Schema) -> None:
        plan = _schema_plan(schema, self.version)
        self._schema = schema = plan.schema
        self._lance = plan.lance
        self._descriptor = plan.descriptor
        n = len(plan.json)  # top-level fields (iterating an Arrow schema builds each field)
        self._next_row = [0] * n
        self._columns_of = plan.columns_of
        self._columns = [_ColumnPages(enc) for enc in plan.column_encodings]
        self._json = plan.json
        self._blobs = plan.blobs
        ntop = max(1, n)
        total = self._cache_bytes or DEFAULT_PAGE_BUFFER_BYTES * ntop
        self._page_budget = max(1, total // ntop)
        self._pending: list[list[pa.Array]] = [[] for _ in range(n)]
        # Per column: an upper bound of the buffered chunks' bytes (their whole buffers, known at no
        # cost) and Arrow's exact count (which walks the buffers) for the first ``_measured``
        # chunks, asked only once the bound reaches a limit.
        self._pending_bound = [0] * n
        self._pending_bytes = [0] * n
        self._measured = [0] * n

    @property
    def schema(self) -> pa.Schema | None:
        return self._schema

    # -- writing -----------------------------------------------------------------------------------
    def write_batch(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Append rows (a RecordBatch or a Table) matching the writer's schema."""
        if self._closed:
            raise InvalidInputError(f"{self.path}: writer is closed")
        if not isinstance(batch, pa.RecordBatch | pa.Table):
            raise InvalidInputError(f"write_batch takes a RecordBatch or Table, got {type(batch).__name__}")
        if self._schema is None:
            self._init_schema(batch.schema)
        assert self._schema is not None
        assert self._lance is not None
        if not batch.schema.equals(self._schema, check_metadata=False):
            try:
                batch = batch.select(self._schema.names).cast(self._schema)
            except (KeyError, ValueError, pa.ArrowException) as e:
                raise SchemaMismatchError(
                    f"{self.path}: batch schema does not match the file schema: {e}"
                ) from None
        for i, top in enumerate(self._lance.fields):
            col = batch.column(i)
            if self._json[i]:
                col = json_to_storage(top, col)
            chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
            for chunk in chunks:
                if len(chunk):
                    self._pending[i].append(chunk)
                    self._pending_bound[i] += chunk.get_total_buffer_size()
            if self._pending_bound[i] >= self._page_budget and self._measure(i) >= self._page_budget:
                self._flush(i, top)
        self._rows += batch.num_rows

    def _flush(self, i: int, top: LanceField, last: bool = False) -> None:
        """Encode column ``i``'s buffered rows; ``last``: nothing is flushed after them, so the
        final piece is encoded on this thread (which would otherwise only wait for the pool)."""
        chunks = self._pending[i]
        if not chunks:
            return
        import lance_format.encodings.v21.encode as v21_encode  # (see _plan_by_bytes)

        arr = _concat(chunks) if len(chunks) > 1 else chunks[0]
        # Cut oversized pages by rows so no page exceeds the limit (roughly: bytes are assumed even).
        # Below the limit the bound decides as well as the exact count (one piece either way).
        if len(chunks) > 1:
            nbytes = arr.nbytes
        elif self._pending_bound[i] < self._max_page:
            nbytes = self._pending_bound[i]
        else:
            nbytes = self._measure(i)
        nbytes = max(1, nbytes)
        self._pending[i] = []
        self._pending_bound[i] = self._pending_bytes[i] = self._measured[i] = 0
        pieces = -(-nbytes // self._max_page)
        step = max(1, -(-len(arr) // pieces))
        for start in range(0, len(arr), step):
            piece = arr if step >= len(arr) else arr.slice(start, step)
            if self.version.structural:
                large = self.version is LanceFileVersion.V2_2
                first = self._next_row[i]
                self._next_row[i] += len(piece)
                if self._threads > 1 and not self._blobs[i]:
                    # Blob fields write their bytes to the file while encoding: those stay inline.
                    # One job per leaf column of a struct, so its leaves encode side by side too.
                    jobs = v21_encode.encode_jobs(
                        top, piece, self._columns_of, first, large, self._split_pool
                    )
                    if last and start + step >= len(arr):
                        # The file's last page: encode it here rather than wait for a pool thread.
                        *pooled, mine = jobs
                        for job in pooled:
                            self._inflight.append((self._encode_pool().submit(job), job))
                        pages = mine()
                        self._drain(0)
                        for page in pages:
                            self._add_page(page)
                        continue
                    for job in jobs:
                        self._inflight.append((self._encode_pool().submit(job), job))
                        self._drain(self._threads)
                    continue
                self._drain(0)
                pages = v21_encode.encode_field(
                    top,
                    piece,
                    self._columns_of,
                    first,
                    large=large,
                    write_external=self._write_external,
                    split=self._split_pool,
                )
            else:
                pages = v20.encode_field(
                    top,
                    piece,
                    self._columns_of,
                    write_external=self._write_external,
                    dict_threshold=self._dict_threshold,
                )
            for page in pages:
                self._add_page(page)

    def _measure(self, i: int) -> int:
        """Exact bytes of column ``i``'s buffered chunks (Arrow's nbytes, each chunk asked once)."""
        pending = self._pending[i]
        for chunk in pending[self._measured[i] :]:
            self._pending_bytes[i] += chunk.nbytes
        self._measured[i] = len(pending)
        return self._pending_bytes[i]

    def _drain(self, keep: int) -> None:
        """Add the pages of encodes in flight, oldest first, until at most ``keep`` remain."""
        while len(self._inflight) > keep:
            fut, job = self._inflight[0]
            try:
                # Not started yet: encode it here rather than wait for a pool thread.
                pages = job() if fut.cancel() else fut.result()
            finally:
                self._inflight.popleft()
            for page in pages:
                self._add_page(page)

    def _write_external(self, data: memoryview) -> int:
        """Store a buffer out of line (2.0 blob bytes) and return its position; padded like pages."""
        pos = self._write(data.cast("B"))
        self._pad()
        return pos

    def _write(self, data: bytes | memoryview) -> int:
        pos = self._pos
        if len(data):
            self._parts.append(data)
            self._pos += len(data)
        return pos

    def _pad(self) -> None:
        rem = self._pos % PAGE_ALIGN
        if rem:
            self._write(PAD_BYTE * (PAGE_ALIGN - rem))

    def _add_page(self, page: EncodedPage) -> None:
        pages = self._columns[page.column].pages
        if page.accumulate and pages and not pages[-1][0] and pages[-1][4] == page.encoding:
            # 2.0 struct headers of one column merge into one page: pylance writes one per column and
            # reads struct columns only when they have a single page.
            offsets0, sizes0, rows, priority, enc = pages[-1]
            pages[-1] = (offsets0, sizes0, rows + page.num_rows, priority, enc)
            return
        offsets, sizes = [], []
        for buf in page.buffers:
            mv = memoryview(buf)
            offsets.append(self._write(mv.cast("B")))
            sizes.append(mv.nbytes)
            self._pad()
        self._columns[page.column].pages.append((offsets, sizes, page.num_rows, page.priority, page.encoding))

    def close(self) -> int:
        """Flush pages, write metadata and footer, store the file; returns the rows written."""
        if self._closed:
            return self._rows
        if self._schema is None:
            raise InvalidInputError(f"{self.path}: no schema (pass one or write a batch before closing)")
        assert self._lance is not None
        try:
            last = max((i for i, chunks in enumerate(self._pending) if chunks), default=-1)
            for i, top in enumerate(self._lance.fields):
                self._flush(i, top, last=i == last)
            self._drain(0)
            if self._rows == 0:
                # A file without rows still has one (0-row) page per struct column, as pylance's.
                for f in self._lance.fields:
                    if self.version.structural:
                        # pylance writes 2.1+ files without rows with no pages at all.
                        continue
                    for page in v20.encode_field(f, empty_array(f.to_arrow().type), self._columns_of):
                        self._add_page(page)
        except LanceError:
            self._abandon()
            raise
        except (pa.ArrowException, ValueError, TypeError) as e:
            self._abandon()
            raise InvalidInputError(f"{self.path}: cannot encode data: {e}") from None
        self._pad()
        # Global buffer 0 (the file descriptor) must sit right before the column metadata.
        fd = _serde.with_length(self._descriptor, self._rows)
        fd_pos = self._write(fd)
        col_meta_start = self._pos
        cmo = []
        for c in range(len(self._columns)):
            col = self._columns[c]
            data = _serde.column_metadata_bytes(col.encoding, col.pages)
            cmo.append((self._write(data), len(data)))
        cmo_start = self._pos
        self._write(b"".join(p.to_bytes(8, "little") + s.to_bytes(8, "little") for p, s in cmo))
        gbo_start = self._pos
        self._write(fd_pos.to_bytes(8, "little") + len(fd).to_bytes(8, "little"))
        major, minor = self.version.footer
        footer = Footer(col_meta_start, cmo_start, gbo_start, 1, len(cmo), major, minor)
        self._write(footer.pack())
        assert self._pos - gbo_start == 16 + FOOTER_LEN
        self._store.write_parts(self._key, self._parts)
        self._parts = []
        self._closed = True
        return self._rows

    def _abandon(self) -> None:
        """After a failed encode: wait for the other encodes in flight and drop their pages."""
        while self._inflight:
            fut, _job = self._inflight.popleft()
            if not fut.cancel():
                fut.exception()

    @property
    def size(self) -> int:
        """Bytes written so far (the file size once closed)."""
        return self._pos

    def __enter__(self) -> LanceFileWriter:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.close()


def _local_store(folder: str) -> ObjectStore | None:
    """The store of an absolute local folder, opened once (a writer per small file would otherwise
    parse and resolve its path each time); None for URIs and relative paths (those depend on the
    working directory)."""
    if "://" in folder or not os.path.isabs(folder):
        return None
    return _open_local(folder)


@functools.lru_cache(maxsize=64)
def _open_local(folder: str) -> ObjectStore:
    return store_for_uri(folder)


def _concat(chunks: list[pa.Array]) -> pa.Array:
    """One array of ``chunks``; dictionary chunks Arrow cannot unify (different dictionaries with a
    null item, as file version 2.0 reads them) are joined as values and encoded again."""
    try:
        return pa.concat_arrays(chunks)
    except pa.ArrowInvalid:
        t = chunks[0].type
        if not pa.types.is_dictionary(t):
            raise
        values = pa.concat_arrays([c.cast(t.value_type) for c in chunks])
        return pc.dictionary_encode(values).cast(t)
