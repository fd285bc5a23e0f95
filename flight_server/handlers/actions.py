"""``do_action``: dataset management (create, drop, delete, versions, tags, schema evolution,
compaction, cleanup, staged commits) and introspection (stats, cache stats, health).

Each action takes an :class:`~flight_server.requests.ActionRequest` body and answers with one
:class:`~flight_server.requests.ActionResult`. :data:`ACTIONS` says which fields each one reads
and whether it writes (write actions are refused to read-only callers).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flight_server.catalog import Catalog
from flight_server.handlers.filters import resolve_filter
from flight_server.handlers.put import same_schema
from flight_server.heap import heap_stats
from flight_server.requests import ActionRequest, ActionResult, TagEntry, VersionEntry
from lance_format import LanceDataset, write_dataset
from lance_format.core.errors import (
    DatasetAlreadyExistsError,
    InvalidInputError,
    SchemaMismatchError,
)
from lance_format.core.types import check_column_names, fields_from_arrow
from lance_format.dataset import DEFAULT_DATA_STORAGE_VERSION
from lance_format.dataset import commit as commit_operation
from lance_format.dataset.staging import (
    check_data_file,
    check_staged_fragments,
    discard_staged,
    forget_staged,
)
from lance_format.io import io_stats
from lance_format.io.descriptors import DESCRIPTORS
from lance_format.table.fragment_json import fragment_from_json
from lance_format.table.model import Append, DataFragment, Overwrite

__all__ = ["ACTIONS", "ActionSpec", "run_action"]


@dataclass(frozen=True)
class ActionSpec:
    """One action: what it does (shown by ``list_actions``), whether it writes, and its code."""

    description: str
    writes: bool
    run: Callable[..., ActionResult]
    #: ``run`` takes the caller's principal as a third argument (actions on what the caller owns).
    with_caller: bool = False
    #: ``run`` takes ``checkpoint=``: long work calls it and stops with what it raises.
    cancellable: bool = False


def _state(req: ActionRequest, ds: LanceDataset) -> ActionResult:
    """The answer of an action that changed or resolved a dataset: its version, rows and schema."""
    return ActionResult(req.dataset, ds.version, ds.count_rows(), schema=ds.schema)


def _ds(catalog: Catalog, req: ActionRequest, shared: bool = True) -> LanceDataset:
    if req.version is not None and req.tag:
        raise InvalidInputError("pass a version or a tag, not both")
    return catalog.open(req.dataset, req.tag or req.version, shared=shared)


def _latest(catalog: Catalog, req: ActionRequest) -> LanceDataset:
    """The latest version in a handle of this action's own (writes move it to the new version)."""
    return catalog.open(req.dataset, shared=False)


def _create(catalog: Catalog, req: ActionRequest) -> ActionResult:
    if req.schema is None:
        raise InvalidInputError("create needs the Arrow schema of the new dataset")
    uri = catalog.uri(req.dataset)
    if catalog.exists(req.dataset):
        if req.if_exists:
            ds = catalog.open(req.dataset)
            return _state(req, ds)
        raise DatasetAlreadyExistsError(f"dataset {req.dataset!r} already exists")
    ds = write_dataset(
        req.schema.empty_table(),
        uri,
        mode="create",
        data_storage_version=req.data_storage_version or None,  # None: the engine's (pylance's) default
        enable_stable_row_ids=req.enable_stable_row_ids,
        storage_options=catalog.storage_options or None,
        session=catalog.session,
    )
    catalog.forget(req.dataset)
    return ActionResult(req.dataset, ds.version, 0, schema=ds.schema)


def _drop(catalog: Catalog, req: ActionRequest) -> ActionResult:
    if req.if_exists and not catalog.exists(req.dataset):
        return ActionResult(req.dataset, status="absent")
    catalog.drop(req.dataset)
    return ActionResult(req.dataset, status="dropped")


def _filter(req: ActionRequest, ds: LanceDataset) -> Any:
    flt = resolve_filter(req.filter_sql, req.filter_substrait, ds.schema)
    if flt is None:
        raise InvalidInputError("delete needs filter_sql or filter_substrait (use 'true' to delete all)")
    return flt


def _delete(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _latest(catalog, req)
    flt = _filter(req, ds)
    n = ds.delete(flt)["num_deleted_rows"]
    return ActionResult(req.dataset, ds.version, int(n))


def _versions(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _latest(catalog, req)
    entries = []
    for v in ds.versions():
        ts = v["timestamp"]
        entries.append(
            VersionEntry(int(v["version"]), int(ts.timestamp() * 1_000_000_000), dict(v["metadata"]))
        )
    return ActionResult(req.dataset, ds.version, ds.count_rows(), versions=tuple(entries))


def _tags(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _latest(catalog, req)
    tags = tuple(TagEntry(name, int(info["version"])) for name, info in sorted(ds.tags.list().items()))
    return ActionResult(req.dataset, ds.version, tags=tags)


def _need_tag(req: ActionRequest) -> str:
    if not req.tag:
        raise InvalidInputError("this action needs a tag name")
    return req.tag


def _create_tag(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _latest(catalog, req)
    version = ds.version if req.version is None else req.version
    ds.tags.create(_need_tag(req), version)
    return _tags(catalog, req)


def _update_tag(catalog: Catalog, req: ActionRequest) -> ActionResult:
    if req.version is None:
        raise InvalidInputError("update_tag needs a version")
    _latest(catalog, req).tags.update(_need_tag(req), req.version)
    return _tags(catalog, req)


def _delete_tag(catalog: Catalog, req: ActionRequest) -> ActionResult:
    _latest(catalog, req).tags.delete(_need_tag(req))
    return _tags(catalog, req)


def _checkout(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _ds(catalog, req)
    return _state(req, ds)


def _restore(catalog: Catalog, req: ActionRequest) -> ActionResult:
    if req.version is None and not req.tag:
        raise InvalidInputError("restore needs the version or tag to make the latest again")
    ds = _ds(catalog, req, shared=False)
    ds.restore()
    return _state(req, ds)


def _add_columns(catalog: Catalog, req: ActionRequest) -> ActionResult:
    if not req.transforms:
        raise InvalidInputError("add_columns needs transforms {name: SQL expression}")
    ds = _latest(catalog, req)
    ds.add_columns(dict(req.transforms))
    return _state(req, ds)


def _drop_columns(catalog: Catalog, req: ActionRequest) -> ActionResult:
    if not req.columns:
        raise InvalidInputError("drop_columns needs column names")
    ds = _latest(catalog, req)
    ds.drop_columns(list(req.columns))
    return _state(req, ds)


#: pylance's default target size of compacted fragments.
DEFAULT_TARGET_ROWS = 1024 * 1024


def _compact(catalog: Catalog, req: ActionRequest, *, checkpoint: Callable[[], None]) -> ActionResult:
    ds = _latest(catalog, req)
    stats = ds.compact_files(req.target_rows_per_fragment or DEFAULT_TARGET_ROWS, checkpoint=checkpoint)
    return ActionResult(
        req.dataset, ds.version, ds.count_rows(), counters={k: int(v) for k, v in stats.items()}
    )


def _cleanup(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _latest(catalog, req)
    # The action has no tag option: tagged versions are kept silently (never removed either way).
    kwargs: dict[str, Any] = {
        "delete_unverified": req.delete_unverified,
        "error_if_tagged_old_versions": False,
        "min_orphan_age_seconds": catalog.orphan_min_age_seconds,  # writes in flight
    }
    if req.older_than_seconds is not None:
        kwargs["older_than_seconds"] = req.older_than_seconds  # the engine checks the range
    stats = ds.cleanup_old_versions(**kwargs)
    catalog.forget(req.dataset)
    return ActionResult(req.dataset, ds.version, counters=stats.as_dict())


def _fragments(req: ActionRequest) -> tuple[DataFragment, ...]:
    out = []
    for blob in req.fragments:
        try:
            doc = json.loads(blob)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"a staged fragment is not fragment JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise InvalidInputError("a staged fragment is not a JSON object")
        try:
            frag = fragment_from_json(doc)
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"a staged fragment is malformed: {exc}") from None
        for data_file in frag.files:
            check_data_file(data_file.path)  # inside this dataset's data/, nowhere else
        out.append(frag)
    return tuple(out)


def _files_version(frags: tuple[DataFragment, ...]) -> str | None:
    """The data storage version the staged files were written in (a commit must record it)."""
    for frag in frags:
        for data_file in frag.files:
            return f"{data_file.file_major_version}.{data_file.file_minor_version}"
    return None


#: The version of a dataset created empty by a commit of zero fragments: what any new dataset gets.
EMPTY_COMMIT_VERSION = DEFAULT_DATA_STORAGE_VERSION


def _dataset_version(catalog: Catalog, req: ActionRequest, exists: bool) -> str:
    return catalog.open(req.dataset).data_storage_version if exists else EMPTY_COMMIT_VERSION


def _commit(catalog: Catalog, req: ActionRequest) -> ActionResult:
    frags = _fragments(req)
    exists = catalog.exists(req.dataset)
    mode = req.mode if req.mode != "auto" else "append"
    if mode == "create" and exists:
        raise DatasetAlreadyExistsError(f"dataset {req.dataset!r} already exists")
    if mode not in ("create", "append", "overwrite"):
        raise InvalidInputError(f"commit mode must be create, append or overwrite, not {mode!r}")
    uri = catalog.uri(req.dataset)
    version = req.data_storage_version or _files_version(frags) or _dataset_version(catalog, req, exists)
    if mode == "append" and exists:
        ds = catalog.open(req.dataset)
        if req.schema is not None and not same_schema(req.schema, ds.schema):
            # Staging gave data of another schema fresh field ids: only an overwrite can take it.
            raise SchemaMismatchError(
                f"cannot append: staged data has columns {req.schema.names}, "
                f"the dataset has {ds.schema.names}"
            )
        if not frags:
            return ActionResult(req.dataset, ds.version, 0)
        op: Append | Overwrite = Append(frags)
    else:
        if req.schema is None:
            if not exists:
                raise InvalidInputError("committing to a new dataset needs the schema of the staged data")
            schema = catalog.open(req.dataset).lance_schema
        elif exists and same_schema(req.schema, catalog.open(req.dataset).schema):
            # Staged against the dataset's own schema, the files carry its field ids (see
            # handlers.put._stage), which fresh ids would not match after columns were dropped.
            schema = catalog.open(req.dataset).lance_schema
        else:
            check_column_names(req.schema.names)
            schema = fields_from_arrow(req.schema)
        op = Overwrite(frags, schema)
    check_staged_fragments(
        catalog.session.store_for(uri, catalog.storage_options or None),
        op.schema if isinstance(op, Overwrite) else ds.lance_schema,
        frags,
    )
    ds = commit_operation(
        uri,
        op,
        req.read_version,
        storage_options=catalog.storage_options or None,
        data_storage_version=version,
    )
    if mode != "append":
        catalog.forget(req.dataset)
    forget_staged(ds.store, [d.path for f in frags for d in f.files])  # the dataset's now
    return ActionResult(req.dataset, ds.version, sum(f.num_rows for f in frags))


def _discard(catalog: Catalog, req: ActionRequest, caller: str = "") -> ActionResult:
    """Delete the caller's staged files that no version references (see
    :mod:`lance_format.dataset.staging`: anything else named is left alone)."""
    frags = _fragments(req)
    store = catalog.session.store_for(catalog.uri(req.dataset), catalog.storage_options or None)
    names = [data_file.path for frag in frags for data_file in frag.files]
    removed = discard_staged(store, names, caller)
    return ActionResult(req.dataset, counters={"files_removed": removed})


def _stats(catalog: Catalog, req: ActionRequest) -> ActionResult:
    ds = _ds(catalog, req)
    m = ds.manifest
    counters = {
        "version": ds.version,
        "rows": ds.count_rows(),
        "fragments": len(m.fragments),
        "data_files": sum(len(f.files) for f in m.fragments),
        "deleted_rows": sum(f.num_deleted_rows for f in m.fragments if f.deletion_file is not None),
        "physical_rows": sum(f.physical_rows for f in m.fragments),
        "data_bytes": sum(d.file_size_bytes for f in m.fragments for d in f.files),
        "columns": len(ds.schema),
        "versions": len(ds.versions()),
    }
    return ActionResult(req.dataset, ds.version, counters["rows"], counters=counters, schema=ds.schema)


def _cache_stats(catalog: Catalog, req: ActionRequest) -> ActionResult:
    stats = catalog.session.cache_stats()  # the server's session (build_server made it)
    counters: dict[str, int] = {}
    for name in ("metadata", "page", "decoded"):
        for key, value in dataclasses.asdict(stats[name]).items():
            counters[f"{name}_{key}"] = int(value)
    io = io_stats()
    counters["io_requests"] = int(io.requests)
    counters["io_bytes_read"] = int(io.bytes_read)
    counters |= _memory(catalog)
    return ActionResult(counters=counters)


def _memory(catalog: Catalog) -> dict[str, int]:
    """What holds this process's memory besides the caches: its resident size, Arrow's allocator,
    the C heap (live and kept free bytes, arenas: allocator slack shows there) and the registries a
    client's names fill (each bounded; docs/configuration.md lists them)."""
    pool = pa.default_memory_pool()
    out = {
        "memory_rss_bytes": resident_bytes(),
        "memory_arrow_bytes": int(pool.bytes_allocated()),
        "memory_arrow_peak_bytes": int(pool.max_memory() or 0),
        "memory_dataset_handles": catalog.handle_count,
        "memory_object_stores": catalog.session.store_count,
        "memory_open_files": len(DESCRIPTORS),
    }
    heap = heap_stats()
    if heap is not None:  # glibc: the C heap's live bytes, its kept free bytes and its arenas
        out |= {
            "memory_heap_bytes": heap.in_use,
            "memory_heap_free_bytes": heap.free,
            "memory_heap_arenas": heap.arenas,
        }
    return out


def resident_bytes() -> int:
    """This process's resident set size (from Linux's ``/proc``; 0 where there is none)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _health(catalog: Catalog, req: ActionRequest) -> ActionResult:
    return ActionResult(status="ok", datasets=tuple(catalog.names()))


ACTIONS: dict[str, ActionSpec] = {
    "create": ActionSpec(
        "Create an empty dataset: dataset, schema [, data_storage_version, if_exists]", True, _create
    ),
    "drop": ActionSpec("Delete a dataset and its files: dataset [, if_exists]", True, _drop),
    "delete": ActionSpec(
        "Delete rows matching a filter: dataset, filter_sql | filter_substrait", True, _delete
    ),
    "versions": ActionSpec("List versions: dataset", False, _versions),
    "tags": ActionSpec("List tags: dataset", False, _tags),
    "create_tag": ActionSpec("Tag a version: dataset, tag [, version (latest)]", True, _create_tag),
    "update_tag": ActionSpec("Move a tag: dataset, tag, version", True, _update_tag),
    "delete_tag": ActionSpec("Remove a tag: dataset, tag", True, _delete_tag),
    "checkout": ActionSpec(
        "Resolve a version or tag (schema, rows): dataset, version | tag", False, _checkout
    ),
    "restore": ActionSpec("Make an old version the latest again: dataset, version | tag", True, _restore),
    "add_columns": ActionSpec("Add columns from SQL expressions: dataset, transforms", True, _add_columns),
    "drop_columns": ActionSpec("Remove columns: dataset, columns", True, _drop_columns),
    "compact": ActionSpec(
        "Compact small fragments: dataset [, target_rows_per_fragment]", True, _compact, cancellable=True
    ),
    "cleanup": ActionSpec(
        "Remove old versions: dataset [, older_than_seconds, delete_unverified]", True, _cleanup
    ),
    "commit": ActionSpec(
        "Commit staged fragments in one transaction: dataset, mode, fragments [, schema, read_version]",
        True,
        _commit,
    ),
    "discard_staged": ActionSpec(
        "Delete the caller's staged, uncommitted data files: dataset, fragments", True, _discard, True
    ),
    "stats": ActionSpec("Dataset statistics: dataset [, version | tag]", False, _stats),
    "cache_stats": ActionSpec("Engine cache and I/O counters of this process", False, _cache_stats),
    "health": ActionSpec("Liveness: status and dataset names", False, _health),
}


def _no_checkpoint() -> None:
    return None


def run_action(
    catalog: Catalog,
    name: str,
    req: ActionRequest,
    caller: str = "",
    checkpoint: Callable[[], None] = _no_checkpoint,
) -> ActionResult:
    """Run action ``name`` for ``caller`` (the principal's name; ``""`` without authentication).

    Long actions (compaction) call ``checkpoint`` as they go and stop with what it raises: the
    server passes one that raises when the call's deadline has passed or its client has gone.
    """
    spec = ACTIONS.get(name)
    if spec is None:
        raise InvalidInputError(f"unknown action {name!r}; list_actions shows the available ones")
    if name not in ("cache_stats", "health"):
        catalog.uri(req.dataset)  # validates the name before anything else
    args: tuple[object, ...] = (catalog, req, caller) if spec.with_caller else (catalog, req)
    return spec.run(*args, checkpoint=checkpoint) if spec.cancellable else spec.run(*args)


def schema_of(result: ActionResult) -> pa.Schema | None:
    """The schema an action answered with (``None`` when it has none)."""
    return result.schema
