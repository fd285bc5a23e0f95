"""Protobuf -> dataclass conversion of 2.1/2.2 page layouts (the only protobuf user of ``v21``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


#: Layers by number: a dict lookup, not an enum call (~1.5 us each; every page layout has some).
_LAYER_OF = {int(layer): layer for layer in m.RepDefLayer}


def _layers(values: Sequence[int], path: str) -> tuple[m.RepDefLayer, ...]:
    out = []
    for v in values[:]:  # [:]: one C call, not a upb iteration ending in an IndexError
        layer = _LAYER_OF.get(v)
        if layer is None:
            raise CorruptFileError(path, f"unknown rep/def layer {v}")
        out.append(layer)
    return tuple(out)


def _buffer_compression(b: pb.BufferCompression, path: str) -> m.BufferCompression:
    if b.scheme not in _SCHEMES:
        raise NotSupportedError(f"{path}: buffer compression scheme {b.scheme} is not supported")
    return m.BufferCompression(_SCHEMES[b.scheme], b.level if b.HasField("level") else None)


def _opt_buf(has: bool, b: pb.BufferCompression, path: str) -> m.BufferCompression | None:
    return _buffer_compression(b, path) if has else None


#: Parses a child encoding (one level deeper).
_Sub = Callable[[pb.CompressiveEncoding], m.CompressiveEncoding]


def _flat_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    f = e.flat
    return m.Flat(f.bits_per_value, _opt_buf(f.HasField("data"), f.data, path))


def _variable_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    v = e.variable
    if not v.HasField("offsets"):
        raise CorruptFileError(path, "variable encoding without offsets")
    return m.Variable(sub(v.offsets), _opt_buf(v.HasField("values"), v.values, path))


def _constant_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    c = e.constant
    return m.Constant(c.value if c.HasField("value") else None)


def _range_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    r = e.range
    return m.RangeSequence(r.uncompressed_bits_per_value, r.start, r.step)


def _delta_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    d = e.delta
    return m.Delta(d.uncompressed_bits_per_value, d.base, sub(d.deltas))


def _out_of_line_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    o = e.out_of_line_bitpacking
    return m.OutOfLineBitpacking(o.uncompressed_bits_per_value, sub(o.values))


def _inline_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    ib = e.inline_bitpacking
    return m.InlineBitpacking(
        ib.uncompressed_bits_per_value, _opt_buf(ib.HasField("values"), ib.values, path)
    )


def _fsst_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    fs = e.fsst
    return m.Fsst(bytes(fs.symbol_table), sub(fs.values))


def _dictionary_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    di = e.dictionary
    return m.Dictionary(sub(di.indices), sub(di.items), di.num_dictionary_items)


def _rle_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    return m.Rle(sub(e.rle.values), sub(e.rle.run_lengths))


def _byte_stream_split_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    return m.ByteStreamSplit(sub(e.byte_stream_split.values))


def _general_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    g = e.general
    return m.General(_buffer_compression(g.compression, path), sub(g.values))


def _fixed_size_list_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    fl = e.fixed_size_list
    return m.FixedSizeList(fl.items_per_value, sub(fl.values), fl.has_validity)


def _packed_struct_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
    ps = e.packed_struct
    return m.PackedStruct(tuple(ps.bits_per_value), sub(ps.values))


def _variable_packed_struct_from_pb(e: pb.CompressiveEncoding, sub: _Sub, path: str) -> m.CompressiveEncoding:
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


#: The parser of every case of the ``CompressiveEncoding`` oneof, by case name.
_COMPRESSIVE_PARSERS: dict[str, Callable[[pb.CompressiveEncoding, _Sub, str], m.CompressiveEncoding]] = {
    "flat": _flat_from_pb,
    "variable": _variable_from_pb,
    "constant": _constant_from_pb,
    "range": _range_from_pb,
    "delta": _delta_from_pb,
    "out_of_line_bitpacking": _out_of_line_from_pb,
    "inline_bitpacking": _inline_from_pb,
    "fsst": _fsst_from_pb,
    "dictionary": _dictionary_from_pb,
    "rle": _rle_from_pb,
    "byte_stream_split": _byte_stream_split_from_pb,
    "general": _general_from_pb,
    "fixed_size_list": _fixed_size_list_from_pb,
    "packed_struct": _packed_struct_from_pb,
    "variable_packed_struct": _variable_packed_struct_from_pb,
}


def compressive_from_pb(e: pb.CompressiveEncoding, path: str, depth: int = 0) -> m.CompressiveEncoding:
    """Dataclass tree of a parsed ``CompressiveEncoding``."""
    if depth > _MAX_DEPTH:
        raise CorruptFileError(path, "compressive encoding nests too deeply")

    def sub(x: pb.CompressiveEncoding) -> m.CompressiveEncoding:
        return compressive_from_pb(x, path, depth + 1)

    kind = e.WhichOneof("compression")
    if kind is None:
        raise CorruptFileError(path, "empty compressive encoding")
    parse = _COMPRESSIVE_PARSERS.get(kind)
    if parse is None:
        raise NotSupportedError(f"{path}: the compressive encoding {kind!r} is not supported")
    return parse(e, sub, path)


def _opt_ce(has: bool, e: pb.CompressiveEncoding, path: str, depth: int) -> m.CompressiveEncoding | None:
    return compressive_from_pb(e, path, depth + 1) if has else None


def _mini_block_from_pb(p: pb.PageLayout, path: str, depth: int) -> m.PageLayout:
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


def _full_zip_from_pb(p: pb.PageLayout, path: str, depth: int) -> m.PageLayout:
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


def _constant_layout_from_pb(p: pb.PageLayout, path: str, depth: int) -> m.PageLayout:
    c = p.constant_layout
    return m.AllNullLayout(
        layers=_layers(c.layers, path),
        inline_value=c.inline_value if c.HasField("inline_value") else None,
        rep_compression=_opt_ce(c.HasField("rep_compression"), c.rep_compression, path, depth),
        def_compression=_opt_ce(c.HasField("def_compression"), c.def_compression, path, depth),
        num_rep_values=c.num_rep_values,
        num_def_values=c.num_def_values,
    )


def _blob_from_pb(p: pb.PageLayout, path: str, depth: int) -> m.PageLayout:
    b = p.blob_layout
    if not b.HasField("inner_layout"):
        raise CorruptFileError(path, "blob layout without an inner layout")
    return m.BlobLayout(page_layout_from_pb(b.inner_layout, path, depth + 1), _layers(b.layers, path))


#: The parser of every case of the ``PageLayout`` oneof, by case name.
_LAYOUT_PARSERS: dict[str, Callable[[pb.PageLayout, str, int], m.PageLayout]] = {
    "mini_block_layout": _mini_block_from_pb,
    "full_zip_layout": _full_zip_from_pb,
    "constant_layout": _constant_layout_from_pb,
    "blob_layout": _blob_from_pb,
}


def page_layout_from_pb(p: pb.PageLayout, path: str, depth: int = 0) -> m.PageLayout:
    """Dataclass tree of a parsed ``PageLayout``."""
    if depth > 4:
        raise CorruptFileError(path, "page layout nests too deeply")
    kind = p.WhichOneof("layout")
    if kind is None:
        raise NotSupportedError(f"{path}: page layout of an unknown kind (newer Lance version?)")
    parse = _LAYOUT_PARSERS.get(kind)
    if parse is None:
        raise NotSupportedError(f"{path}: the page layout {kind!r} is not supported")
    return parse(p, path, depth)


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
