"""Applying transactions: the next manifest from the current one, and conflict rules between them."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from lance_format.core.errors import CommitConflictError, InvalidInputError, RetryableCommitConflictError
from lance_format.core.types import LanceSchema
from lance_format.table import _serde
from lance_format.table.flags import STABLE_ROW_IDS, compute_flags
from lance_format.table.model import (
    Append,
    BasePath,
    Clone,
    CreateIndex,
    DataFile,
    DataFragment,
    DataReplacement,
    DataStorageFormat,
    Delete,
    Manifest,
    Merge,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    Transaction,
    UnknownOperation,
    Update,
    UpdateBases,
    UpdateConfig,
    UpdateMap,
    WriterVersion,
)
from lance_format.table.rowids import (
    DEFAULT_ROW_VERSION,
    decode_row_ids,
    decode_row_versions,
    encode_row_ids,
    encode_row_versions,
)

__all__ = ["WRITER_VERSION", "assign_base_ids", "build_manifest", "check_conflict"]

WRITER_VERSION = WriterVersion("lance-flight", "0.1.0")


def _assign_ids(
    frags: tuple[DataFragment, ...],
    first_id: int,
    next_row_id: int | None,
    version: int,
    *,
    keep_given: bool = False,
) -> tuple[tuple[DataFragment, ...], int | None]:
    """Give new fragments ids (and stable row ids when ``next_row_id`` is not ``None``).

    With ``keep_given`` (an append, as pylance) a fragment that already has a non-zero id keeps it.
    """
    out = []
    nid = first_id
    for f in frags:
        if not (keep_given and f.id):
            f = replace(f, id=nid)
            nid += 1
        if next_row_id is not None and f.pending_row_ids:
            f, next_row_id = _fill_pending(f, next_row_id, version)
        elif next_row_id is not None and f.row_ids is None:
            n = f.physical_rows
            f = replace(
                f,
                row_ids=_serde.row_id_range_bytes(next_row_id, next_row_id + n),
                created_at_versions=_serde.version_run_bytes(n, version),
                last_updated_at_versions=_serde.version_run_bytes(n, version),
            )
            next_row_id += n
        out.append(f)
    return tuple(out), next_row_id


def _fill_pending(f: DataFragment, next_row_id: int, version: int) -> tuple[DataFragment, int]:
    """``f`` with fresh row ids for its ``pending_row_ids`` trailing rows (created by ``version``)
    after the planned ids of the rows before them, every row last updated by ``version``."""
    n, fresh = f.physical_rows, f.pending_row_ids
    if not isinstance(f.row_ids, bytes) or not isinstance(f.created_at_versions, bytes):
        raise InvalidInputError(f"fragment {f.id}: pending row ids need inline planned ones before them")
    known = decode_row_ids(f.row_ids, "<planned fragment>")
    born = decode_row_versions(f.created_at_versions, n - fresh, "<planned fragment>")
    ids = np.concatenate((known, np.arange(next_row_id, next_row_id + fresh, dtype=np.uint64)))
    created = np.concatenate((born, np.full(fresh, version, dtype=np.uint64)))
    f = replace(
        f,
        row_ids=encode_row_ids(ids),
        created_at_versions=encode_row_versions(created),
        last_updated_at_versions=_serde.version_run_bytes(n, version),
        pending_row_ids=0,
    )
    return f, next_row_id + fresh


def _mark_updated(frags: tuple[DataFragment, ...], version: int) -> tuple[DataFragment, ...]:
    """Rows an update rewrote (new fragments that kept their rows' stable ids) were last updated
    by ``version``, the one being committed; where the planner recorded no creation versions,
    the rows count as created by the first version, as pylance reports rows that have none."""
    out = []
    for f in frags:
        if f.last_updated_at_versions is None:
            n = f.physical_rows
            f = replace(
                f,
                last_updated_at_versions=_serde.version_run_bytes(n, version),
                created_at_versions=f.created_at_versions or _serde.version_run_bytes(n, DEFAULT_ROW_VERSION),
            )
        out.append(f)
    return tuple(out)


def _by_id(fragments: tuple[DataFragment, ...]) -> tuple[DataFragment, ...]:
    """``fragments`` in id order, as pylance orders them after an append (ids it was given may
    fall between existing ones); two fragments of one id are refused, as pylance does."""
    counts = Counter(f.id for f in fragments)
    if len(counts) != len(fragments):
        dup = next(i for i, n in counts.items() if n > 1)
        raise InvalidInputError(
            f"The commit would produce two fragments with id {dup}. Fragment ids must be unique."
        )
    return tuple(sorted(fragments, key=lambda f: f.id))


def _replace_files(fragments: tuple[DataFragment, ...], op: DataReplacement) -> tuple[DataFragment, ...]:
    """``fragments`` with ``op``'s files swapped in: each replaces the file holding exactly its
    fields, or joins a fragment where no file holds any of them (columns added as all-null)."""
    by_id = {f.id: f for f in fragments}
    for fid, new_file in op.replacements:
        frag = by_id.get(fid)
        if frag is None:
            raise InvalidInputError(f"DataReplacement: no fragment {fid}")
        by_id[fid] = replace(frag, files=_swap_file(frag, new_file))
    return tuple(by_id[f.id] for f in fragments)


def _swap_file(frag: DataFragment, new_file: DataFile) -> tuple[DataFile, ...]:
    wanted = set(new_file.fields)
    files = list(frag.files)
    for i, old in enumerate(files):
        if set(old.fields) == wanted:
            files[i] = new_file
            return tuple(files)
    if any(wanted & set(old.fields) for old in files):
        raise InvalidInputError(
            f"DataReplacement: fragment {frag.id} has no data file with exactly fields {sorted(wanted)}"
        )
    return (*files, new_file)


def _rewrite(fragments: tuple[DataFragment, ...], op: Rewrite, first_id: int) -> tuple[DataFragment, ...]:
    """The fragments no group rewrites, in order, then every group's new fragments, group by group.

    This is pylance's order (its compaction moves rewritten rows to the end of the table), and
    pylance's ``take`` by offset relies on it: with new fragments in the middle it drops or panics.
    A new fragment with an id other than 0 keeps it (pylance's rule): compaction names its new
    fragments by ids it reserved in a ``ReserveFragments`` commit before.
    """
    rewritten = {f.id for g in op.groups for f in g.old_fragments}
    out = [f for f in fragments if f.id not in rewritten]
    nid = first_id
    for group in op.groups:
        for new in group.new_fragments:
            if new.id == 0:
                new = replace(new, id=nid)
                nid += 1
            out.append(new)
    return tuple(out)


def _drop_unused_files(fragments: tuple[DataFragment, ...], schema: LanceSchema) -> tuple[DataFragment, ...]:
    """Fragments without the data files that hold none of ``schema``'s fields, as pylance's
    ``Project`` (``drop_columns``) leaves them: a file of only dropped columns is garbage."""
    live = {f.id for f in schema.walk()}
    out = []
    for frag in fragments:
        files = tuple(df for df in frag.files if live.intersection(df.fields))
        out.append(frag if len(files) == len(frag.files) else replace(frag, files=files))
    return tuple(out)


def build_manifest(
    base: Manifest | None,
    txn: Transaction,
    *,
    data_format: DataStorageFormat | None = None,
    stable_row_ids: bool = False,
    load_version: Callable[[int], Manifest] | None = None,
) -> Manifest:
    """The manifest of the version ``txn`` creates on top of ``base`` (``None`` for a new table)."""
    op = txn.operation
    version = (base.version if base else 0) + 1
    if base is None and not isinstance(op, Overwrite):
        raise InvalidInputError(f"{type(op).__name__} needs an existing dataset")
    stable = stable_row_ids if base is None else bool(base.reader_feature_flags & STABLE_ROW_IDS)
    next_row_id: int | None = (base.next_row_id if base else 0) if stable else None
    first_id = base.next_fragment_id() if base else 0
    if isinstance(op, Overwrite):
        frags, next_row_id = _assign_ids(op.fragments, first_id, next_row_id, version)
        config = dict(base.config) if base else {}
        config.update(op.config_upsert_values)
        new = Manifest(
            schema=op.schema,
            fragments=frags,
            version=version,
            data_format=data_format or (base.data_format if base else DataStorageFormat()),
            config=config,
            table_metadata=dict(base.table_metadata) if base else {},
            base_paths=assign_base_ids((), op.initial_bases)
            if op.initial_bases
            else (base.base_paths if base else ()),
            reader_feature_flags=STABLE_ROW_IDS if stable else 0,
        )
        index_bytes = None
    else:
        assert base is not None
        new = replace(base, version=version, tag="", index_section=None, transaction_section=None)
        index_bytes = base.index_section_bytes
        if isinstance(op, Append):
            frags, next_row_id = _assign_ids(op.fragments, first_id, next_row_id, version, keep_given=True)
            new = replace(new, fragments=_by_id(base.fragments + frags))
        elif isinstance(op, Delete):
            updated = {f.id: f for f in op.updated_fragments}
            gone = set(op.deleted_fragment_ids)
            kept = tuple(updated.get(f.id, f) for f in base.fragments if f.id not in gone)
            new = replace(new, fragments=kept)
        elif isinstance(op, Update):
            updated = {f.id: f for f in op.updated_fragments}
            gone = set(op.removed_fragment_ids)
            kept = tuple(updated.get(f.id, f) for f in base.fragments if f.id not in gone)
            frags, next_row_id = _assign_ids(op.new_fragments, first_id, next_row_id, version)
            if stable:
                frags = _mark_updated(frags, version)
            new = replace(new, fragments=kept + frags)
            index_bytes = _uncover_rewritten(base, new, index_bytes)
        elif isinstance(op, Restore):
            if load_version is None:
                raise InvalidInputError("restore needs a way to load the old version")
            old = load_version(op.version)
            new = replace(
                old,
                version=version,
                max_fragment_id=base.max_fragment_id,
                next_row_id=base.next_row_id,
                index_section=None,
                transaction_section=None,
                tag="",
            )
            index_bytes = old.index_section_bytes
        elif isinstance(op, Project):
            new = replace(new, schema=op.schema, fragments=_drop_unused_files(base.fragments, op.schema))
            index_bytes = _without_dropped_fields(index_bytes, op.schema)
        elif isinstance(op, Merge):
            new = replace(new, schema=op.schema, fragments=op.fragments)
            index_bytes = _uncover_rewritten(base, new, index_bytes)
        elif isinstance(op, Rewrite):
            new = replace(new, fragments=_rewrite(base.fragments, op, first_id))
            index_bytes = _remap_indices(index_bytes, op, stable)
        elif isinstance(op, CreateIndex):
            old_indices = (
                _serde.index_section_from_bytes(index_bytes, "<index section>") if index_bytes else ()
            )
            dropped = {i.uuid for i in op.removed_indices}
            kept_indices = [i for i in old_indices if i.uuid not in dropped]
            index_bytes = _serde.index_section_to_bytes([*kept_indices, *op.new_indices])
        elif isinstance(op, UpdateConfig):
            new = _apply_update_config(new, op)
        elif isinstance(op, UpdateBases):
            new = replace(new, base_paths=assign_base_ids(base.base_paths, op.new_bases))
        elif isinstance(op, DataReplacement):
            new = replace(new, fragments=_replace_files(base.fragments, op))
            index_bytes = _uncover_rewritten(base, new, index_bytes)
        elif isinstance(op, ReserveFragments):
            first_id += op.num_fragments  # the reserved ids count as used from now on
        else:
            raise InvalidInputError(f"cannot commit operation {type(op).__name__}")
    ids = [f.id for f in new.fragments]
    prev_max = base.max_fragment_id if base and base.max_fragment_id is not None else -1
    max_id = max([*ids, prev_max, first_id - 1])
    new = replace(
        new,
        version=version,
        timestamp_ns=time.time_ns(),
        writer_version=WRITER_VERSION,
        transaction_file=txn.file_name(),
        max_fragment_id=max_id if max_id >= 0 else 0,
        next_row_id=next_row_id if next_row_id is not None else 0,
        index_section_bytes=index_bytes,
    )
    reader, writer = compute_flags(new)
    return replace(new, reader_feature_flags=reader, writer_feature_flags=writer)


#: Index kinds that summarize each fragment's rows by position (zones of row offsets), which
#: neither row ids nor a remap can carry over to rewritten fragments.
FRAGMENT_ZONED_KINDS = frozenset({"ZoneMap", "BloomFilter"})


def _moved_coverage(covered: frozenset[int], op: Rewrite, add_new: bool, name: str) -> frozenset[int]:
    """``covered`` without each group's old fragments (and with its new ones if ``add_new``),
    for the groups it covers; a group only partly covered is refused (the planner never makes
    one: an index could not describe the merged fragment)."""
    out = set(covered)
    for g in op.groups:
        old = {f.id for f in g.old_fragments}
        if not old & covered:
            continue
        if not old <= covered:
            raise InvalidInputError(
                f"Rewrite merges fragments {sorted(old)} of which index {name!r} covers only "
                f"{sorted(old & covered)}"
            )
        out -= old
        if add_new:
            out |= {f.id for f in g.new_fragments}
    return frozenset(out)


def _remap_indices(index_bytes: bytes | None, op: Rewrite, stable: bool) -> bytes | None:
    """The index section after a Rewrite, as pylance 14.0.2 builds it.

    An index in ``op.rewritten_indices`` takes its new uuid, details, version and files, and
    covers the new fragments in place of the old. Without stable row ids that is all (an index
    not remapped, such as a zone map, keeps its coverage of fragments that no longer exist: its
    entries for them match no row). With stable row ids the other indices hold row ids, which a
    rewrite keeps: they cover the new fragments too; zone maps and bloom filters, which
    describe fragments by row position, only lose the old ones.
    """
    if not index_bytes:
        return index_bytes
    indices = _serde.index_section_from_bytes(index_bytes, "<index section>")
    rewritten = {ri.old_id: ri for ri in op.rewritten_indices}
    if len(rewritten) != len(op.rewritten_indices):
        raise InvalidInputError("Rewrite remaps one index twice")
    missing = set(rewritten) - {i.uuid for i in indices}
    if missing:
        raise InvalidInputError(f"Rewrite remaps indices {sorted(missing)} which do not exist")
    out = []
    for index in indices:
        ri = rewritten.get(index.uuid)
        if ri is not None:
            index = replace(
                index,
                uuid=ri.new_id,
                details_type_url=ri.details_type_url or index.details_type_url,
                details=ri.details if ri.details_type_url else index.details,
                index_version=ri.index_version,
                files=ri.files if ri.old_id != ri.new_id else index.files,
                fragment_ids=_moved_coverage(index.fragment_ids, op, True, index.name),
            )
        elif stable:
            zoned = index.kind in FRAGMENT_ZONED_KINDS
            index = replace(
                index, fragment_ids=_moved_coverage(index.fragment_ids, op, not zoned, index.name)
            )
        out.append(index)
    return _serde.index_section_to_bytes(out)


def _uncover_rewritten(base: Manifest, new: Manifest, index_bytes: bytes | None) -> bytes | None:
    """The index section with fragments whose indexed columns now come from other data files
    (rewritten in place: ``update_columns``, data replacement, a merge) taken out of each index's
    coverage: the index describes their old values, so scans must read those fragments."""
    if not index_bytes:
        return index_bytes
    old = {f.id: f for f in base.fragments}
    indices = _serde.index_section_from_bytes(index_bytes, "<index section>")
    changed = False
    out = []
    for index in indices:
        fields = set(index.fields)
        stale = set()
        for frag in new.fragments:
            before = old.get(frag.id)
            if before is None or frag.id not in index.fragment_ids or before.files == frag.files:
                continue
            files_then = [df for df in before.files if fields & set(df.fields)]
            files_now = [df for df in frag.files if fields & set(df.fields)]
            if files_then != files_now:
                stale.add(frag.id)
        if stale:
            index = replace(index, fragment_ids=index.fragment_ids - stale)
            changed = True
        out.append(index)
    return _serde.index_section_to_bytes(out) if changed else index_bytes


def assign_base_ids(current: tuple[BasePath, ...], added: tuple[BasePath, ...]) -> tuple[BasePath, ...]:
    """``current`` and ``added``, the added ones given ids after the largest in use where their id
    is 0; names and paths must stay unique."""
    out = list(current)
    next_id = max((b.id for b in current), default=0) + 1
    for b in added:
        if b.id == 0:
            b = replace(b, id=next_id)
        next_id = max(next_id, b.id + 1)
        for other in out:
            if other.id == b.id or (b.name is not None and other.name == b.name) or other.path == b.path:
                raise InvalidInputError(
                    f"base path {b.name or b.path!r} conflicts with {other.name or other.path!r}"
                )
        out.append(b)
    return tuple(out)


def _apply_update_config(new: Manifest, op: UpdateConfig) -> Manifest:
    """``new`` with the config, table, schema and field metadata changes of ``op``."""
    config = UpdateMap(op.config_updates, op.config_replace).apply(new.config)
    table_meta = new.table_metadata
    if op.table_metadata_updates is not None:
        table_meta = op.table_metadata_updates.apply(table_meta)
    schema = new.schema
    if op.schema_metadata_updates is not None or op.field_metadata_updates:
        meta = schema.metadata
        if op.schema_metadata_updates is not None:
            meta = _bytes_map(op.schema_metadata_updates.apply(_str_map(meta)))
        known = {f.id for f in schema.walk()}
        missing = set(op.field_metadata_updates) - known
        if missing:
            raise InvalidInputError(f"no fields with ids {sorted(missing)} in the schema")
        flat = [
            replace(f, metadata=_bytes_map(op.field_metadata_updates[f.id].apply(_str_map(f.metadata))))
            if f.id in op.field_metadata_updates
            else f
            for f in schema.flat()
        ]
        schema = LanceSchema.from_flat(flat, meta)
    return replace(new, config=config, table_metadata=table_meta, schema=schema)


def _str_map(m: dict[str, bytes]) -> dict[str, str]:
    return {k: v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for k, v in m.items()}


def _bytes_map(m: dict[str, str]) -> dict[str, bytes]:
    return {k: v.encode("utf-8", "surrogateescape") for k, v in m.items()}


def _touched(op: object) -> set[int] | None:
    """Fragment ids an operation rewrites (``None``: the whole table)."""
    if isinstance(op, Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, Rewrite):
        return {f.id for g in op.groups for f in g.old_fragments}
    if isinstance(op, Update):
        return {f.id for f in op.updated_fragments} | set(op.removed_fragment_ids)
    if isinstance(op, DataReplacement):
        return {fid for fid, _ in op.replacements}
    if isinstance(op, Append | UpdateConfig | CreateIndex | ReserveFragments | UpdateBases):
        return set()
    return None


def _index_moved(a: object, b: object) -> bool:
    """Whether Rewrite ``a`` moves rows an index of ``b`` describes: a new index (``b`` a
    CreateIndex) covering a fragment ``a`` rewrites holds addresses the rewrite did not remap, and
    two rewrites that remap one index would each replace it (pylance's rule, both directions);
    nor can a rewrite remap an index a concurrent commit replaced or dropped."""
    if not isinstance(a, Rewrite):
        return False
    old = {f.id for g in a.groups for f in g.old_fragments}
    if isinstance(b, CreateIndex):
        dropped = {i.uuid for i in b.removed_indices} & {r.old_id for r in a.rewritten_indices}
        return bool(dropped) or any(i.fragment_ids & old for i in b.new_indices)
    if isinstance(b, Rewrite):
        return bool({r.old_id for r in a.rewritten_indices} & {r.old_id for r in b.rewritten_indices})
    return False


def _maps_overlap(a: UpdateConfig, b: UpdateConfig) -> bool:
    """Whether two config/metadata updates change a key in common (a replace changes every key)."""
    theirs = b.maps()
    for name, mine in a.maps().items():
        other = theirs.get(name)
        if other is not None and (mine.replace or other.replace or set(mine.updates) & set(other.updates)):
            return True
    return False


def check_conflict(mine: Transaction, theirs: Transaction | None, version: int) -> None:
    """Raise if ``mine`` cannot be rebased over ``theirs`` (committed as ``version``).

    Overwrite and restore win over anything concurrent. Appends commute with everything that keeps
    the schema and the fragment set; deletes, updates and rewrites commute with operations that do
    not touch the same fragments; a rewrite and a new index over a fragment it moves do not (the
    index holds addresses the rewrite did not remap), nor do two rewrites that remap one index;
    config updates commute unless they set the same keys. Every other
    combination is a :class:`RetryableCommitConflictError`: planning again on the new latest version
    can succeed. An operation this implementation cannot read is a :class:`CommitConflictError`.
    """
    op = mine.operation
    if isinstance(op, Overwrite | Restore):
        return
    other = None if theirs is None else theirs.operation
    what = type(other).__name__ if other is not None else "an unknown transaction"
    if other is None or isinstance(other, UnknownOperation):
        raise CommitConflictError(
            f"{type(op).__name__} cannot be rebased over version {version} ({what}): "
            "its changes are unknown to this implementation"
        )
    retry = RetryableCommitConflictError(
        f"{type(op).__name__} conflicts with {what} committed concurrently as version {version}; retry"
    )
    if isinstance(other, Overwrite | Restore | Merge | Project | Clone):
        raise retry
    if isinstance(op, UpdateConfig):
        if isinstance(other, UpdateConfig) and _maps_overlap(op, other):
            raise retry
        return
    if isinstance(op, UpdateBases):  # two writers adding bases would both take the same ids
        if isinstance(other, UpdateBases):
            raise retry
        return
    if isinstance(op, Append):
        if _touched(other) is None:
            raise retry
        return
    # Two writers creating an index of the same name would both keep theirs.
    if (
        isinstance(op, CreateIndex)
        and isinstance(other, CreateIndex)
        and {i.name for i in op.new_indices} & {i.name for i in other.new_indices}
    ):
        raise retry
    if _index_moved(op, other) or _index_moved(other, op):
        raise retry
    mine_ids = _touched(op)
    theirs_ids = _touched(other)
    if mine_ids is None:  # schema changes (Project, Merge) only commute with metadata-only commits
        if not isinstance(other, UpdateConfig | CreateIndex | ReserveFragments | UpdateBases):
            raise retry
        return
    if theirs_ids is None:
        raise retry
    both = mine_ids & theirs_ids
    if both:
        raise RetryableCommitConflictError(
            f"{type(op).__name__} conflicts with {what} committed as version {version}: "
            f"both change fragments {sorted(both)}"
        )


def _without_dropped_fields(index_bytes: bytes | None, schema: LanceSchema) -> bytes | None:
    """The index section without indices on a field ``schema`` no longer has (``drop_columns``):
    pylance drops them with the column, and cannot read a version that keeps one ("Index
    referenced a field with id .. which did not exist in the schema")."""
    if not index_bytes:
        return index_bytes
    ids = {f.id for f in schema.walk()}
    indices = _serde.index_section_from_bytes(index_bytes, "<index section>")
    kept = [i for i in indices if all(fid in ids for fid in i.fields)]
    return _serde.index_section_to_bytes(kept) if len(kept) != len(indices) else index_bytes
