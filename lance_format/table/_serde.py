"""Protobuf <-> dataclass conversion for manifests and transactions (the only protobuf user here)."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError, Message
from pyroaring import BitMap

from lance_format._proto import rowids_pb2, table_pb2, transaction_pb2
from lance_format.core.errors import CorruptFileError, InternalError
from lance_format.core.types import LanceSchema
from lance_format.file import field_from_pb, field_to_pb, map_to_dict
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
    DeletionFile,
    DeletionFileType,
    ExternalFile,
    IndexMetadata,
    Manifest,
    Merge,
    Operation,
    Overwrite,
    Project,
    ReserveFragments,
    Restore,
    Rewrite,
    RewriteGroup,
    RewrittenIndex,
    Transaction,
    UnknownOperation,
    Update,
    UpdateBases,
    UpdateConfig,
    UpdateMap,
    WriterVersion,
)

__all__ = [
    "decode_row_ids",
    "index_section_from_bytes",
    "index_section_to_bytes",
    "manifest_from_bytes",
    "manifest_to_bytes",
    "row_id_range_bytes",
    "row_ids_bytes",
    "transaction_from_bytes",
    "transaction_to_bytes",
    "version_run_bytes",
    "zonemap_details_from_bytes",
    "zonemap_details_to_bytes",
]


def _parse(msg: Message, data: bytes, path: str, what: str) -> None:
    try:
        msg.ParseFromString(bytes(data))
    except (DecodeError, RecursionError, ValueError) as e:
        raise CorruptFileError(path, f"cannot decode {what}: {e}") from None


# -- schema ---------------------------------------------------------------------------------------


def _schema_from_pb(fields: Sequence[object], metadata: dict[str, bytes], path: str) -> LanceSchema:
    # [:] copies a repeated field out in one C call (iterating a upb container goes item by item
    # and ends in a formatted IndexError); so below for the fields of data files and fragments.
    return LanceSchema.from_flat([field_from_pb(f) for f in fields[:]], metadata, path)  # type: ignore[arg-type]


def _schema_to_pb(schema: LanceSchema, out: object) -> None:
    out.extend(field_to_pb(f) for f in schema.walk())  # type: ignore[attr-defined]


# -- fragments ------------------------------------------------------------------------------------


def _data_file_to_pb(f: DataFile) -> table_pb2.DataFile:
    pb = table_pb2.DataFile(
        path=f.path,
        fields=list(f.fields),
        column_indices=list(f.column_indices),
        file_major_version=f.file_major_version,
        file_minor_version=f.file_minor_version,
        file_size_bytes=f.file_size_bytes,
    )
    if f.base_id is not None:
        pb.base_id = f.base_id
    return pb


def _data_file_from_pb(pb: table_pb2.DataFile) -> DataFile:
    return DataFile(
        path=pb.path,
        fields=tuple(pb.fields[:]),
        column_indices=tuple(pb.column_indices[:]),
        file_major_version=pb.file_major_version,
        file_minor_version=pb.file_minor_version,
        file_size_bytes=pb.file_size_bytes,
        base_id=pb.base_id if pb.HasField("base_id") else None,
    )


def _external(pb: table_pb2.ExternalFile) -> ExternalFile:
    return ExternalFile(pb.path, pb.offset, pb.size)


def _seq_from_pb(pb: table_pb2.DataFragment, oneof: str) -> bytes | ExternalFile | None:
    which = pb.WhichOneof(oneof)  # type: ignore[call-overload]
    if which is None:
        return None
    value = getattr(pb, which)
    return bytes(value) if which.startswith("inline") else _external(value)


def _seq_to_pb(pb: table_pb2.DataFragment, value: bytes | ExternalFile | None, name: str) -> None:
    if value is None:
        return
    if isinstance(value, bytes):
        setattr(pb, f"inline_{name}", value)
    else:
        ext = getattr(pb, f"external_{name}")
        ext.path, ext.offset, ext.size = value.path, value.offset, value.size


def _as_planned(frag: DataFragment) -> DataFragment:
    """A transaction's record of a new fragment whose rows get part of their ids at commit: its
    row ids and versions are the manifest's business (recorded there once assigned)."""
    if not frag.pending_row_ids:
        return frag
    return replace(
        frag, row_ids=None, created_at_versions=None, last_updated_at_versions=None, pending_row_ids=0
    )


def fragment_to_pb(frag: DataFragment) -> table_pb2.DataFragment:
    """The ``DataFragment`` message of a fragment."""
    if frag.pending_row_ids:
        raise InternalError(f"fragment {frag.id}: {frag.pending_row_ids} row ids were never assigned")
    pb = table_pb2.DataFragment(id=frag.id, physical_rows=frag.physical_rows)
    pb.files.extend(_data_file_to_pb(f) for f in frag.files)
    d = frag.deletion_file
    if d is not None:
        pb.deletion_file.file_type = int(d.file_type)  # type: ignore[assignment]
        pb.deletion_file.read_version = d.read_version
        pb.deletion_file.id = d.id
        pb.deletion_file.num_deleted_rows = d.num_deleted_rows
        if d.base_id is not None:
            pb.deletion_file.base_id = d.base_id
    _seq_to_pb(pb, frag.row_ids, "row_ids")
    _seq_to_pb(pb, frag.last_updated_at_versions, "last_updated_at_versions")
    _seq_to_pb(pb, frag.created_at_versions, "created_at_versions")
    return pb


def fragment_from_pb(pb: table_pb2.DataFragment, path: str) -> DataFragment:
    """A fragment from its ``DataFragment`` message."""
    if len(pb.overlays):
        raise CorruptFileError(path, f"fragment {pb.id} has data overlay files (unsupported feature)")
    deletion = None
    if pb.HasField("deletion_file"):
        d = pb.deletion_file
        deletion = DeletionFile(
            DeletionFileType(d.file_type),
            d.read_version,
            d.id,
            d.num_deleted_rows,
            d.base_id if d.HasField("base_id") else None,
        )
    return DataFragment(
        id=pb.id,
        files=tuple([_data_file_from_pb(f) for f in pb.files[:]]),
        physical_rows=pb.physical_rows,
        deletion_file=deletion,
        row_ids=_seq_from_pb(pb, "row_id_sequence"),
        last_updated_at_versions=_seq_from_pb(pb, "last_updated_at_version_sequence"),
        created_at_versions=_seq_from_pb(pb, "created_at_version_sequence"),
    )


# -- manifest -------------------------------------------------------------------------------------


def manifest_to_bytes(m: Manifest) -> bytes:
    """The serialized ``Manifest`` message (without the file container)."""
    pb = table_pb2.Manifest(version=m.version, version_aux_data=m.version_aux_data, tag=m.tag)
    _schema_to_pb(m.schema, pb.fields)
    pb.fragments.extend(fragment_to_pb(f) for f in m.fragments)
    pb.schema_metadata.update(m.schema.metadata)
    if m.index_section is not None:
        pb.index_section = m.index_section
    pb.timestamp.seconds, pb.timestamp.nanos = divmod(m.timestamp_ns, 1_000_000_000)
    pb.reader_feature_flags = m.reader_feature_flags
    pb.writer_feature_flags = m.writer_feature_flags
    if m.max_fragment_id is not None:
        pb.max_fragment_id = m.max_fragment_id
    pb.transaction_file = m.transaction_file
    if m.writer_version is not None:
        wv = m.writer_version
        pb.writer_version.library = wv.library
        pb.writer_version.version = wv.version
        if wv.prerelease is not None:
            pb.writer_version.prerelease = wv.prerelease
        if wv.build_metadata is not None:
            pb.writer_version.build_metadata = wv.build_metadata
    pb.next_row_id = m.next_row_id
    pb.data_format.file_format = m.data_format.file_format
    pb.data_format.version = m.data_format.version
    pb.config.update(m.config)
    pb.table_metadata.update(m.table_metadata)
    for b in m.base_paths:
        _base_path_to_pb(b, pb.base_paths.add())
    if m.branch is not None:
        pb.branch = m.branch
    if m.transaction_section is not None:
        pb.transaction_section = m.transaction_section
    return bytes(pb.SerializeToString())


def manifest_from_bytes(data: bytes, path: str) -> Manifest:
    """A :class:`Manifest` from the serialized message (``index_section_bytes`` left unset)."""
    pb = table_pb2.Manifest()
    _parse(pb, data, path, "manifest")
    schema = _schema_from_pb(pb.fields, map_to_dict(pb.schema_metadata), path)
    wv = None
    if pb.HasField("writer_version"):
        w = pb.writer_version
        wv = WriterVersion(
            w.library,
            w.version,
            w.prerelease if w.HasField("prerelease") else None,
            w.build_metadata if w.HasField("build_metadata") else None,
        )
    fmt = DataStorageFormat(pb.data_format.file_format or "lance", pb.data_format.version or "0.1")
    txn_pos: int | None = None
    if pb.HasField("transaction_section"):
        txn_pos = pb.transaction_section
    elif pb.HasField("transaction_section_deprecated"):
        txn_pos = pb.transaction_section_deprecated
    return Manifest(
        schema=schema,
        fragments=tuple([fragment_from_pb(f, path) for f in pb.fragments[:]]),
        version=pb.version,
        data_format=fmt,
        writer_version=wv,
        timestamp_ns=pb.timestamp.seconds * 1_000_000_000 + pb.timestamp.nanos,
        tag=pb.tag,
        reader_feature_flags=pb.reader_feature_flags,
        writer_feature_flags=pb.writer_feature_flags,
        max_fragment_id=pb.max_fragment_id if pb.HasField("max_fragment_id") else None,
        transaction_file=pb.transaction_file,
        next_row_id=pb.next_row_id,
        config=map_to_dict(pb.config),
        table_metadata=map_to_dict(pb.table_metadata),
        base_paths=tuple([_base_path_from_pb(b) for b in pb.base_paths[:]]),
        branch=pb.branch if pb.HasField("branch") else None,
        version_aux_data=pb.version_aux_data,
        index_section=pb.index_section if pb.HasField("index_section") else None,
        transaction_section=txn_pos,
    )


def _base_path_to_pb(b: BasePath, pb: table_pb2.BasePath) -> None:
    pb.id, pb.is_dataset_root, pb.path = b.id, b.is_dataset_root, b.path
    if b.name is not None:
        pb.name = b.name


def _base_path_from_pb(pb: table_pb2.BasePath) -> BasePath:
    return BasePath(pb.id, pb.name if pb.HasField("name") else None, pb.is_dataset_root, pb.path)


# -- transactions ---------------------------------------------------------------------------------


def _frags(pbs: Iterable[table_pb2.DataFragment], path: str) -> tuple[DataFragment, ...]:
    return tuple(fragment_from_pb(f, path) for f in pbs)


def _rewritten_index_to_pb(
    ri: RewrittenIndex, pb: transaction_pb2.Transaction.Rewrite.RewrittenIndex
) -> None:
    pb.old_id.uuid = uuidlib.UUID(ri.old_id).bytes
    pb.new_id.uuid = uuidlib.UUID(ri.new_id).bytes
    pb.new_index_details.type_url = ri.details_type_url
    pb.new_index_details.value = ri.details
    pb.new_index_version = ri.index_version
    for name, size in ri.files:
        pb.new_index_files.add(path=name, size_bytes=size)


def _rewritten_index_from_pb(
    pb: transaction_pb2.Transaction.Rewrite.RewrittenIndex, path: str
) -> RewrittenIndex:
    try:
        old, new = str(uuidlib.UUID(bytes=pb.old_id.uuid)), str(uuidlib.UUID(bytes=pb.new_id.uuid))
    except ValueError as e:
        raise CorruptFileError(path, f"rewritten index: bad uuid: {e}") from None
    return RewrittenIndex(
        old_id=old,
        new_id=new,
        details_type_url=pb.new_index_details.type_url,
        details=bytes(pb.new_index_details.value),
        index_version=pb.new_index_version,
        files=tuple((f.path, f.size_bytes) for f in pb.new_index_files),
    )


def _operation_to_pb(op: Operation, pb: transaction_pb2.Transaction) -> None:
    if isinstance(op, Append):
        pb.append.fragments.extend(fragment_to_pb(f) for f in op.fragments)
    elif isinstance(op, Delete):
        pb.delete.updated_fragments.extend(fragment_to_pb(f) for f in op.updated_fragments)
        pb.delete.deleted_fragment_ids.extend(op.deleted_fragment_ids)
        pb.delete.predicate = op.predicate
    elif isinstance(op, Overwrite):
        pb.overwrite.fragments.extend(fragment_to_pb(f) for f in op.fragments)
        _schema_to_pb(op.schema, pb.overwrite.schema)
        pb.overwrite.schema_metadata.update(op.schema.metadata)
        pb.overwrite.config_upsert_values.update(op.config_upsert_values)
        for b in op.initial_bases:
            _base_path_to_pb(b, pb.overwrite.initial_bases.add())
    elif isinstance(op, UpdateBases):
        for b in op.new_bases:
            _base_path_to_pb(b, pb.update_bases.new_bases.add())
    elif isinstance(op, Restore):
        pb.restore.version = op.version
    elif isinstance(op, Project):
        _schema_to_pb(op.schema, pb.project.schema)
    elif isinstance(op, Merge):
        pb.merge.fragments.extend(fragment_to_pb(f) for f in op.fragments)
        _schema_to_pb(op.schema, pb.merge.schema)
        pb.merge.schema_metadata.update(op.schema.metadata)
    elif isinstance(op, Rewrite):
        for g in op.groups:
            grp = pb.rewrite.groups.add()
            grp.old_fragments.extend(fragment_to_pb(f) for f in g.old_fragments)
            grp.new_fragments.extend(fragment_to_pb(f) for f in g.new_fragments)
        for ri in op.rewritten_indices:
            _rewritten_index_to_pb(ri, pb.rewrite.rewritten_indices.add())
    elif isinstance(op, Update):
        pb.update.removed_fragment_ids.extend(op.removed_fragment_ids)
        pb.update.updated_fragments.extend(fragment_to_pb(f) for f in op.updated_fragments)
        pb.update.new_fragments.extend(fragment_to_pb(_as_planned(f)) for f in op.new_fragments)
    elif isinstance(op, DataReplacement):
        for fid, new_file in op.replacements:
            group = pb.data_replacement.replacements.add()
            group.fragment_id = fid
            group.new_file.CopyFrom(_data_file_to_pb(new_file))
    elif isinstance(op, CreateIndex):
        pb.create_index.new_indices.extend(index_to_pb(i) for i in op.new_indices)
        pb.create_index.removed_indices.extend(index_to_pb(i) for i in op.removed_indices)
    elif isinstance(op, UpdateConfig):
        uc = pb.update_config
        maps = op.maps()
        if "config" in maps or not maps:
            _update_map_to_pb(UpdateMap(op.config_updates, op.config_replace), uc.config_updates)
        if op.table_metadata_updates is not None:
            _update_map_to_pb(op.table_metadata_updates, uc.table_metadata_updates)
        if op.schema_metadata_updates is not None:
            _update_map_to_pb(op.schema_metadata_updates, uc.schema_metadata_updates)
        for fid, m in op.field_metadata_updates.items():
            _update_map_to_pb(m, uc.field_metadata_updates[fid])
    elif isinstance(op, ReserveFragments):
        pb.reserve_fragments.num_fragments = op.num_fragments
    elif isinstance(op, Clone):
        cl = pb.clone
        cl.is_shallow = op.is_shallow
        cl.ref_version = op.ref_version
        cl.ref_path = op.ref_path
        if op.ref_name is not None:
            cl.ref_name = op.ref_name
        if op.branch_name is not None:
            cl.branch_name = op.branch_name
    else:
        raise CorruptFileError("<transaction>", f"cannot serialize operation {type(op).__name__}")


def _operation_from_pb(pb: transaction_pb2.Transaction, path: str) -> Operation:
    kind = pb.WhichOneof("operation")
    if kind == "append":
        return Append(_frags(pb.append.fragments, path))
    if kind == "delete":
        d = pb.delete
        return Delete(_frags(d.updated_fragments, path), tuple(d.deleted_fragment_ids), d.predicate)
    if kind == "overwrite":
        o = pb.overwrite
        schema = _schema_from_pb(o.schema, dict(o.schema_metadata), path)
        bases = tuple(_base_path_from_pb(b) for b in o.initial_bases)
        return Overwrite(_frags(o.fragments, path), schema, dict(o.config_upsert_values), bases)
    if kind == "update_bases":
        return UpdateBases(tuple(_base_path_from_pb(b) for b in pb.update_bases.new_bases))
    if kind == "restore":
        return Restore(pb.restore.version)
    if kind == "project":
        return Project(_schema_from_pb(pb.project.schema, {}, path))
    if kind == "merge":
        g = pb.merge
        return Merge(_frags(g.fragments, path), _schema_from_pb(g.schema, dict(g.schema_metadata), path))
    if kind == "rewrite":
        r = pb.rewrite
        groups = [
            RewriteGroup(_frags(x.old_fragments, path), _frags(x.new_fragments, path)) for x in r.groups
        ]
        if len(r.old_fragments) or len(r.new_fragments):
            groups.append(RewriteGroup(_frags(r.old_fragments, path), _frags(r.new_fragments, path)))
        return Rewrite(tuple(groups), tuple(_rewritten_index_from_pb(x, path) for x in r.rewritten_indices))
    if kind == "update":
        u = pb.update
        return Update(
            tuple(u.removed_fragment_ids), _frags(u.updated_fragments, path), _frags(u.new_fragments, path)
        )
    if kind == "update_config":
        c = pb.update_config
        updates: dict[str, str | None] = dict(c.upsert_values)
        updates.update(dict.fromkeys(c.delete_keys))
        config = _update_map_from_pb(c.config_updates)
        updates.update(config.updates)
        schema_meta = (
            _update_map_from_pb(c.schema_metadata_updates) if c.HasField("schema_metadata_updates") else None
        )
        if c.schema_metadata:  # the older form: upserts only
            older: dict[str, str | None] = dict(c.schema_metadata)
            schema_meta = UpdateMap(older | (schema_meta.updates if schema_meta else {}))
        fields = {int(fid): _update_map_from_pb(m) for fid, m in c.field_metadata_updates.items()}
        for fid, old in c.field_metadata.items():
            fields.setdefault(int(fid), UpdateMap(dict(old.metadata)))
        return UpdateConfig(
            updates,
            config.replace,
            _update_map_from_pb(c.table_metadata_updates) if c.HasField("table_metadata_updates") else None,
            schema_meta,
            fields,
        )
    if kind == "create_index":
        ci = pb.create_index
        return CreateIndex(
            tuple(index_from_pb(i, path) for i in ci.new_indices),
            tuple(index_from_pb(i, path) for i in ci.removed_indices),
        )
    if kind == "data_replacement":
        return DataReplacement(
            tuple((g.fragment_id, _data_file_from_pb(g.new_file)) for g in pb.data_replacement.replacements)
        )
    if kind == "reserve_fragments":
        return ReserveFragments(pb.reserve_fragments.num_fragments)
    if kind == "clone":
        cl = pb.clone
        return Clone(
            cl.is_shallow,
            cl.ref_name if cl.HasField("ref_name") else None,
            cl.ref_version,
            cl.ref_path,
            cl.branch_name if cl.HasField("branch_name") else None,
        )
    return UnknownOperation(kind or "none")


def transaction_to_bytes(t: Transaction) -> bytes:
    """The serialized ``Transaction`` message (as stored in ``_transactions/`` and inline)."""
    pb = transaction_pb2.Transaction(read_version=t.read_version, uuid=t.uuid, tag=t.tag)
    pb.transaction_properties.update(t.properties)
    _operation_to_pb(t.operation, pb)
    return bytes(pb.SerializeToString())


def transaction_from_bytes(data: bytes, path: str) -> Transaction:
    """A :class:`Transaction` from its serialized message."""
    pb = transaction_pb2.Transaction()
    _parse(pb, data, path, "transaction")
    return Transaction(
        pb.read_version, pb.uuid, _operation_from_pb(pb, path), pb.tag, dict(pb.transaction_properties)
    )


# -- row ids ----------------------------------------------------------------------------------------


def row_id_range_bytes(start: int, end: int) -> bytes:
    """A ``RowIdSequence`` of one range ``[start, end)``."""
    seq = rowids_pb2.RowIdSequence()
    seg = seq.segments.add()
    seg.range.start = start
    seg.range.end = end
    return bytes(seq.SerializeToString())


def _offset_width(span: int) -> int:
    """Bytes per value of an ``EncodedU64Array`` whose values lie within ``span`` of its base."""
    return 2 if span < 1 << 16 else 4 if span < 1 << 32 else 8


def _encode_array(a: rowids_pb2.EncodedU64Array, values: npt.NDArray[np.uint64]) -> None:
    """``values`` as u16 / u32 offsets from their minimum when they fit, else plain u64."""
    base = int(values.min()) if len(values) else 0
    width = _offset_width(int(values.max()) - base if len(values) else 0)
    if width == 8:
        a.u64_array.values = values.astype("<u8").tobytes()
        return
    packed = a.u16_array if width == 2 else a.u32_array
    packed.base = base
    packed.offsets = (values - np.uint64(base)).astype(f"<u{width}").tobytes()


def row_ids_bytes(ids: npt.NDArray[np.uint64]) -> bytes:
    """A ``RowIdSequence`` of arbitrary ids in one segment of the smallest kind, as pylance picks:
    a range when contiguous; for increasing ids a range with holes, a range with a bitmap (bit i,
    least significant first, says whether ``start + i`` is present) or a sorted array; otherwise
    an array."""
    ids = np.asarray(ids, dtype=np.uint64)
    n = len(ids)
    seq = rowids_pb2.RowIdSequence()
    seg = seq.segments.add()
    if n == 0 or not bool((ids[1:] > ids[:-1]).all()):
        _encode_array(seg.array, ids)
        return bytes(seq.SerializeToString())
    start, end = int(ids[0]), int(ids[-1]) + 1
    span = end - start
    if span == n:
        return row_id_range_bytes(start, end)
    width = _offset_width(span - 1)
    sizes = {"holes": (span - n) * width, "bitmap": -(-span // 8), "sorted": n * width}
    kind = min(sizes, key=lambda k: sizes[k])
    if kind == "sorted":
        _encode_array(seg.sorted_array, ids)
    elif kind == "holes":
        present = np.zeros(span, dtype=bool)
        present[(ids - np.uint64(start)).astype(np.int64)] = True
        seg.range_with_holes.start, seg.range_with_holes.end = start, end
        _encode_array(
            seg.range_with_holes.holes, np.flatnonzero(~present).astype(np.uint64) + np.uint64(start)
        )
    else:
        present = np.zeros(span, dtype=bool)
        present[(ids - np.uint64(start)).astype(np.int64)] = True
        seg.range_with_bitmap.start, seg.range_with_bitmap.end = start, end
        seg.range_with_bitmap.bitmap = np.packbits(present, bitorder="little").tobytes()
    return bytes(seq.SerializeToString())


def version_run_bytes(num_rows: int, version: int) -> bytes:
    """A ``RowDatasetVersionSequence``: every one of ``num_rows`` rows at ``version``."""
    seq = rowids_pb2.RowDatasetVersionSequence()
    run = seq.runs.add(version=version)
    run.span.range.start = 0
    run.span.range.end = num_rows
    return bytes(seq.SerializeToString())


def _decode_array(a: rowids_pb2.EncodedU64Array) -> npt.NDArray[np.uint64]:
    kind = a.WhichOneof("array")
    if kind == "u16_array":
        return np.frombuffer(a.u16_array.offsets, "<u2").astype(np.uint64) + np.uint64(a.u16_array.base)
    if kind == "u32_array":
        return np.frombuffer(a.u32_array.offsets, "<u4").astype(np.uint64) + np.uint64(a.u32_array.base)
    if kind == "u64_array":
        return np.frombuffer(a.u64_array.values, "<u8").astype(np.uint64)
    return np.zeros(0, np.uint64)


def _segment_values(seg: rowids_pb2.U64Segment) -> npt.NDArray[np.uint64]:
    """The values of one ``U64Segment`` (row ids, or the offsets a version run spans)."""
    kind = seg.WhichOneof("segment")
    if kind == "range":
        return np.arange(seg.range.start, seg.range.end, dtype=np.uint64)
    if kind == "range_with_holes":
        r = seg.range_with_holes
        ids = np.arange(r.start, r.end, dtype=np.uint64)
        return np.setdiff1d(ids, _decode_array(r.holes), assume_unique=True)
    if kind == "range_with_bitmap":
        b = seg.range_with_bitmap
        ids = np.arange(b.start, b.end, dtype=np.uint64)
        # Bit i of the range is bit (i % 8) of byte i // 8, least significant bit first.
        packed = np.frombuffer(b.bitmap, np.uint8)
        bits = np.unpackbits(packed, bitorder="little")[: len(ids)].astype(bool)
        picked: npt.NDArray[np.uint64] = ids[bits]
        return picked
    if kind == "sorted_array":
        return _decode_array(seg.sorted_array)
    if kind == "array":
        return _decode_array(seg.array)
    return np.zeros(0, np.uint64)


def decode_row_ids(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The row ids of a serialized ``RowIdSequence``, in row order."""
    seq = rowids_pb2.RowIdSequence()
    _parse(seq, data, path, "row id sequence")
    parts = [_segment_values(seg) for seg in seq.segments]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def decode_row_versions(data: bytes, path: str) -> npt.NDArray[np.uint64]:
    """The version of every row of a serialized ``RowDatasetVersionSequence``, in row order.

    Each run covers as many rows as its span holds values, following the previous run: pylance
    writes a compacted fragment's runs with the spans of the rows' old fragments (offsets there,
    deleted rows left out), so only the counts place a run.
    """
    seq = rowids_pb2.RowDatasetVersionSequence()
    _parse(seq, data, path, "row version sequence")
    counts = np.array([len(_segment_values(run.span)) for run in seq.runs], dtype=np.int64)
    versions = np.array([run.version for run in seq.runs], dtype=np.uint64)
    out: npt.NDArray[np.uint64] = np.repeat(versions, counts)
    return out


def row_versions_bytes(versions: npt.NDArray[np.uint64]) -> bytes:
    """A ``RowDatasetVersionSequence`` of per-row ``versions``: one run per stretch of rows at one
    version, spanning those rows' offsets (as pylance writes a fragment's own runs)."""
    seq = rowids_pb2.RowDatasetVersionSequence()
    v = np.asarray(versions, dtype=np.uint64)
    if len(v):
        starts = np.flatnonzero(np.concatenate(([True], v[1:] != v[:-1])))
        ends = np.append(starts[1:], len(v))
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            run = seq.runs.add(version=int(v[a]))
            run.span.range.start = a
            run.span.range.end = b
    return bytes(seq.SerializeToString())


# -- indices ----------------------------------------------------------------------------------------


def index_to_pb(i: IndexMetadata) -> table_pb2.IndexMetadata:
    """An ``IndexMetadata`` message (the fragment bitmap as a portable Roaring bitmap)."""
    pb = table_pb2.IndexMetadata(
        name=i.name, dataset_version=i.dataset_version, fragment_bitmap=BitMap(i.fragment_ids).serialize()
    )
    pb.uuid.uuid = uuidlib.UUID(i.uuid).bytes
    pb.fields.extend(i.fields)
    if i.details_type_url:
        pb.index_details.type_url = i.details_type_url
        pb.index_details.value = i.details
    if i.index_version is not None:
        pb.index_version = i.index_version
    if i.created_at_ms is not None:
        pb.created_at = i.created_at_ms
    if i.base_id is not None:
        pb.base_id = i.base_id
    for name, size in i.files:
        pb.files.add(path=name, size_bytes=size)
    return pb


def index_from_pb(pb: table_pb2.IndexMetadata, path: str) -> IndexMetadata:
    """An :class:`IndexMetadata` from its message."""
    try:
        ident = str(uuidlib.UUID(bytes=pb.uuid.uuid))
        frags = frozenset(BitMap.deserialize(pb.fragment_bitmap)) if pb.fragment_bitmap else frozenset()
    except (ValueError, OverflowError) as e:
        raise CorruptFileError(path, f"index {pb.name!r}: bad uuid or fragment bitmap: {e}") from None
    return IndexMetadata(
        uuid=ident,
        name=pb.name,
        fields=tuple(pb.fields),
        dataset_version=pb.dataset_version,
        fragment_ids=frags,
        details_type_url=pb.index_details.type_url if pb.HasField("index_details") else "",
        details=bytes(pb.index_details.value) if pb.HasField("index_details") else b"",
        index_version=pb.index_version if pb.HasField("index_version") else None,
        created_at_ms=pb.created_at if pb.HasField("created_at") else None,
        base_id=pb.base_id if pb.HasField("base_id") else None,
        files=tuple((f.path, f.size_bytes) for f in pb.files),
    )


def index_section_from_bytes(data: bytes, path: str) -> tuple[IndexMetadata, ...]:
    """The indices of a serialized ``IndexSection``."""
    pb = table_pb2.IndexSection()
    _parse(pb, data, path, "index section")
    return tuple(index_from_pb(i, path) for i in pb.indices)


def index_section_to_bytes(indices: Iterable[IndexMetadata]) -> bytes:
    """A serialized ``IndexSection`` of ``indices``."""
    pb = table_pb2.IndexSection()
    pb.indices.extend(index_to_pb(i) for i in indices)
    return bytes(pb.SerializeToString())


def zonemap_details_to_bytes(rows_per_zone: int) -> bytes:
    """``ZoneMapIndexDetails`` of a zone map written here (no seeds, no null bitmap)."""
    pb = table_pb2.ZoneMapIndexDetails(rows_per_zone=rows_per_zone, use_seeds=False, has_null_bitmap=False)
    return bytes(pb.SerializeToString())


def zonemap_details_from_bytes(data: bytes, path: str) -> int | None:
    """``rows_per_zone`` of serialized ``ZoneMapIndexDetails`` (``None`` when absent)."""
    pb = table_pb2.ZoneMapIndexDetails()
    _parse(pb, data, path, "zone map details")
    return pb.rows_per_zone if pb.HasField("rows_per_zone") else None


def _update_map_to_pb(m: UpdateMap, pb: transaction_pb2.Transaction.UpdateMap) -> None:
    pb.SetInParent()  # present even when empty: an empty replace still clears the map
    pb.replace = m.replace
    for k, v in m.updates.items():
        entry = pb.update_entries.add(key=k)
        if v is not None:
            entry.value = v


def _update_map_from_pb(pb: transaction_pb2.Transaction.UpdateMap) -> UpdateMap:
    return UpdateMap({e.key: e.value if e.HasField("value") else None for e in pb.update_entries}, pb.replace)
