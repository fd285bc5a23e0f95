"""Protobuf -> dataclass conversion of 2.1/2.2 page layouts (the only protobuf user of ``v21``)."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from lance_format._proto import encodings_v2_1_pb2 as pb
from lance_format.core.errors import CorruptFileError, NotSupportedError
from lance_format.encodings.v21 import model as m

__all__ = ["PAGE_LAYOUT", "compressive_from_pb", "page_layout_from_raw"]

PAGE_LAYOUT = "lance.encodings21.PageLayout"
# Newer Lance has an identical package for 2.2; accept its name too.
_PAGE_LAYOUT_NAMES = frozenset({PAGE_LAYOUT, "lance.encodings22.PageLayout"})

# Real encodings nest a handful of levels; anything deeper is hostile input.
_MAX_DEPTH = 32

_SCHEMES = {
    pb.COMPRESSION_ALGORITHM_UNSPECIFIED: None,
    pb.COMPRESSION_ALGORITHM_LZ4: "lz4",
    pb.COMPRESSION_ALGORITHM_ZSTD: "zstd",
}


def _layers(values: object, path: str) -> tuple[m.RepDefLayer, ...]:
    out = []
    for v in values:  # type: ignore[attr-defined]
        try:
            out.append(m.RepDefLayer(int(v)))
        except ValueError:
            raise CorruptFileError(path, f"unknown rep/def layer {v}") from None
    return tuple(out)


def _buffer_compression(b: pb.BufferCompression, path: str) -> m.BufferCompression:
    if b.scheme not in _SCHEMES:
        raise NotSupportedError(f"{path}: buffer compression scheme {b.scheme} is not supported")
    return m.BufferCompression(_SCHEMES[b.scheme], b.level if b.HasField("level") else None)


def compressive_from_pb(e: pb.CompressiveEncoding, path: str, depth: int = 0) -> m.CompressiveEncoding:
    """Dataclass tree of a parsed ``CompressiveEncoding``."""
    if depth > _MAX_DEPTH:
        raise CorruptFileError(path, "compressive encoding nests too deeply")

    def sub(x: pb.CompressiveEncoding) -> m.CompressiveEncoding:
        return compressive_from_pb(x, path, depth + 1)

    def opt_buf(has: bool, b: pb.BufferCompression) -> m.BufferCompression | None:
        return _buffer_compression(b, path) if has else None

    kind = e.WhichOneof("compression")
    if kind == "flat":
        f = e.flat
        return m.Flat(f.bits_per_value, opt_buf(f.HasField("data"), f.data))
    if kind == "variable":
        v = e.variable
        if not v.HasField("offsets"):
            raise CorruptFileError(path, "variable encoding without offsets")
        return m.Variable(sub(v.offsets), opt_buf(v.HasField("values"), v.values))
    if kind == "constant":
        c = e.constant
        return m.Constant(c.value if c.HasField("value") else None)
    if kind == "range":
        r = e.range
        return m.RangeSequence(r.uncompressed_bits_per_value, r.start, r.step)
    if kind == "delta":
        d = e.delta
        return m.Delta(d.uncompressed_bits_per_value, d.base, sub(d.deltas))
    if kind == "out_of_line_bitpacking":
        o = e.out_of_line_bitpacking
        return m.OutOfLineBitpacking(o.uncompressed_bits_per_value, sub(o.values))
    if kind == "inline_bitpacking":
        ib = e.inline_bitpacking
        return m.InlineBitpacking(ib.uncompressed_bits_per_value, opt_buf(ib.HasField("values"), ib.values))
    if kind == "fsst":
        fs = e.fsst
        return m.Fsst(bytes(fs.symbol_table), sub(fs.values))
    if kind == "dictionary":
        di = e.dictionary
        return m.Dictionary(sub(di.indices), sub(di.items), di.num_dictionary_items)
    if kind == "rle":
        r2 = e.rle
        return m.Rle(sub(r2.values), sub(r2.run_lengths))
    if kind == "byte_stream_split":
        return m.ByteStreamSplit(sub(e.byte_stream_split.values))
    if kind == "general":
        g = e.general
        return m.General(_buffer_compression(g.compression, path), sub(g.values))
    if kind == "fixed_size_list":
        fl = e.fixed_size_list
        return m.FixedSizeList(fl.items_per_value, sub(fl.values), fl.has_validity)
    if kind == "packed_struct":
        ps = e.packed_struct
        return m.PackedStruct(tuple(ps.bits_per_value), sub(ps.values))
    if kind == "variable_packed_struct":
        fields = []
        for fe in e.variable_packed_struct.fields:
            which = fe.WhichOneof("layout")
            fields.append(
                m.VariablePackedField(
                    sub(fe.value) if fe.HasField("value") else None,
                    fe.bits_per_value if which == "bits_per_value" else None,
                    fe.bits_per_length if which == "bits_per_length" else None,
                )
            )
        return m.VariablePackedStruct(tuple(fields))
    if kind is None:
        raise CorruptFileError(path, "empty compressive encoding")
    raise NotSupportedError(f"{path}: the compressive encoding {kind!r} is not supported")


def _opt_ce(has: bool, e: pb.CompressiveEncoding, path: str, depth: int) -> m.CompressiveEncoding | None:
    return compressive_from_pb(e, path, depth + 1) if has else None


def page_layout_from_pb(p: pb.PageLayout, path: str, depth: int = 0) -> m.PageLayout:
    """Dataclass tree of a parsed ``PageLayout``."""
    if depth > 4:
        raise CorruptFileError(path, "page layout nests too deeply")
    kind = p.WhichOneof("layout")
    if kind == "mini_block_layout":
        mb = p.mini_block_layout
        if not mb.HasField("value_compression"):
            raise CorruptFileError(path, "mini-block layout without value compression")
        return m.MiniBlockLayout(
            rep_compression=_opt_ce(mb.HasField("rep_compression"), mb.rep_compression, path, depth),
            def_compression=_opt_ce(mb.HasField("def_compression"), mb.def_compression, path, depth),
            value_compression=compressive_from_pb(mb.value_compression, path, depth + 1),
            dictionary=_opt_ce(mb.HasField("dictionary"), mb.dictionary, path, depth),
            num_dictionary_items=mb.num_dictionary_items,
            layers=_layers(mb.layers, path),
            num_buffers=mb.num_buffers,
            repetition_index_depth=mb.repetition_index_depth,
            num_items=mb.num_items,
            has_large_chunk=mb.has_large_chunk,
        )
    if kind == "full_zip_layout":
        fz = p.full_zip_layout
        details = fz.WhichOneof("details")
        if details is None:
            raise CorruptFileError(path, "full-zip layout without bits_per_value or bits_per_offset")
        if not fz.HasField("value_compression"):
            raise CorruptFileError(path, "full-zip layout without value compression")
        return m.FullZipLayout(
            bits_rep=fz.bits_rep,
            bits_def=fz.bits_def,
            bits_per_value=fz.bits_per_value if details == "bits_per_value" else None,
            bits_per_offset=fz.bits_per_offset if details == "bits_per_offset" else None,
            num_items=fz.num_items,
            num_visible_items=fz.num_visible_items,
            value_compression=compressive_from_pb(fz.value_compression, path, depth + 1),
            layers=_layers(fz.layers, path),
        )
    if kind == "constant_layout":
        c = p.constant_layout
        return m.AllNullLayout(
            layers=_layers(c.layers, path),
            inline_value=c.inline_value if c.HasField("inline_value") else None,
            rep_compression=_opt_ce(c.HasField("rep_compression"), c.rep_compression, path, depth),
            def_compression=_opt_ce(c.HasField("def_compression"), c.def_compression, path, depth),
            num_rep_values=c.num_rep_values,
            num_def_values=c.num_def_values,
        )
    if kind == "blob_layout":
        b = p.blob_layout
        if not b.HasField("inner_layout"):
            raise CorruptFileError(path, "blob layout without an inner layout")
        return m.BlobLayout(page_layout_from_pb(b.inner_layout, path, depth + 1), _layers(b.layers, path))
    if kind is None:
        raise NotSupportedError(f"{path}: page layout of an unknown kind (newer Lance version?)")
    raise NotSupportedError(f"{path}: the page layout {kind!r} is not supported")


def page_layout_from_raw(raw: tuple[str, bytes], path: str) -> m.PageLayout:
    """Parse a serialized page encoding ``(message name, bytes)`` of a 2.1/2.2 page.

    Parameters
    ----------
    raw:
        ``("lance.encodings21.PageLayout", bytes)`` as unwrapped from the page's ``Any``.
    path:
        The file, for error messages.

    Returns
    -------
    PageLayout
        The layout as a dataclass tree.

    Raises
    ------
    NotSupportedError
        The encoding is another message or an unknown layout variant.
    CorruptFileError
        The bytes do not parse.
    """
    name, data = raw
    if name not in _PAGE_LAYOUT_NAMES:
        raise NotSupportedError(f"{path}: page encoding {name!r} is not a 2.1/2.2 page layout")
    msg = pb.PageLayout()
    try:
        msg.ParseFromString(bytes(data))
    except (DecodeError, RecursionError, ValueError) as e:
        raise CorruptFileError(path, f"page layout does not parse: {e}") from None
    return page_layout_from_pb(msg, path)
