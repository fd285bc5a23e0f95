"""Dataclass -> protobuf bytes for the 2.1/2.2 page layouts the encoder writes (write-side mirror
of :mod:`lance_format.encodings.v21._serde`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from lance_format._proto import encodings_v2_1_pb2 as pb
from lance_format.encodings.v21 import model as m

__all__ = ["PAGE_LAYOUT", "page_layout_bytes", "writers"]

#: pylance 14 labels both 2.1 and 2.2 pages with this message name.
PAGE_LAYOUT = "lance.encodings21.PageLayout"

_SCHEMES = {
    None: pb.COMPRESSION_ALGORITHM_UNSPECIFIED,
    "lz4": pb.COMPRESSION_ALGORITHM_LZ4,
    "zstd": pb.COMPRESSION_ALGORITHM_ZSTD,
}


def _buffer(b: m.BufferCompression, out: pb.BufferCompression) -> None:
    out.scheme = _SCHEMES[b.scheme]
    if b.level is not None:
        out.level = b.level


def _ce(e: m.CompressiveEncoding, out: pb.CompressiveEncoding) -> None:
    writer = _CE_WRITERS.get(type(e))
    if writer is None:  # pragma: no cover - every kind of the union has a writer
        raise TypeError(f"cannot serialize {type(e).__name__}")
    writer(e, out)


def _flat(e: m.Flat, out: pb.CompressiveEncoding) -> None:
    out.flat.bits_per_value = e.bits_per_value
    if e.data is not None:
        _buffer(e.data, out.flat.data)


def _variable(e: m.Variable, out: pb.CompressiveEncoding) -> None:
    _ce(e.offsets, out.variable.offsets)
    if e.values is not None:
        _buffer(e.values, out.variable.values)


def _inline_bitpacking(e: m.InlineBitpacking, out: pb.CompressiveEncoding) -> None:
    out.inline_bitpacking.uncompressed_bits_per_value = e.uncompressed_bits_per_value
    if e.values is not None:
        _buffer(e.values, out.inline_bitpacking.values)


def _out_of_line_bitpacking(e: m.OutOfLineBitpacking, out: pb.CompressiveEncoding) -> None:
    out.out_of_line_bitpacking.uncompressed_bits_per_value = e.uncompressed_bits_per_value
    _ce(e.values, out.out_of_line_bitpacking.values)


def _fsst(e: m.Fsst, out: pb.CompressiveEncoding) -> None:
    out.fsst.symbol_table = e.symbol_table
    _ce(e.values, out.fsst.values)


def _general(e: m.General, out: pb.CompressiveEncoding) -> None:
    _buffer(e.compression, out.general.compression)
    _ce(e.values, out.general.values)


def _fixed_size_list(e: m.FixedSizeList, out: pb.CompressiveEncoding) -> None:
    out.fixed_size_list.items_per_value = e.items_per_value
    _ce(e.values, out.fixed_size_list.values)
    out.fixed_size_list.has_validity = e.has_validity


def _packed_struct(e: m.PackedStruct, out: pb.CompressiveEncoding) -> None:
    out.packed_struct.bits_per_value.extend(e.bits_per_value)
    _ce(e.values, out.packed_struct.values)


def _constant(e: m.Constant, out: pb.CompressiveEncoding) -> None:
    out.constant.SetInParent()
    if e.value is not None:
        out.constant.value = e.value


def _range(e: m.RangeSequence, out: pb.CompressiveEncoding) -> None:
    out.range.uncompressed_bits_per_value = e.uncompressed_bits_per_value
    out.range.start = e.start
    out.range.step = e.step


def _delta(e: m.Delta, out: pb.CompressiveEncoding) -> None:
    out.delta.uncompressed_bits_per_value = e.uncompressed_bits_per_value
    out.delta.base = e.base
    _ce(e.deltas, out.delta.deltas)


def _dictionary(e: m.Dictionary, out: pb.CompressiveEncoding) -> None:
    _ce(e.indices, out.dictionary.indices)
    _ce(e.items, out.dictionary.items)
    out.dictionary.num_dictionary_items = e.num_dictionary_items


def _rle(e: m.Rle, out: pb.CompressiveEncoding) -> None:
    _ce(e.values, out.rle.values)
    _ce(e.run_lengths, out.rle.run_lengths)


def _byte_stream_split(e: m.ByteStreamSplit, out: pb.CompressiveEncoding) -> None:
    _ce(e.values, out.byte_stream_split.values)


def _variable_packed_struct(e: m.VariablePackedStruct, out: pb.CompressiveEncoding) -> None:
    out.variable_packed_struct.SetInParent()
    for f in e.fields:
        fe = out.variable_packed_struct.fields.add()
        if f.value is not None:
            _ce(f.value, fe.value)
        if f.bits_per_value is not None:
            fe.bits_per_value = f.bits_per_value
        elif f.bits_per_length is not None:
            fe.bits_per_length = f.bits_per_length


#: The protobuf writer of every compressive-encoding dataclass.
_CE_WRITERS: dict[type[Any], Callable[[Any, pb.CompressiveEncoding], None]] = {
    m.Flat: _flat,
    m.Variable: _variable,
    m.InlineBitpacking: _inline_bitpacking,
    m.OutOfLineBitpacking: _out_of_line_bitpacking,
    m.Fsst: _fsst,
    m.General: _general,
    m.FixedSizeList: _fixed_size_list,
    m.PackedStruct: _packed_struct,
    m.Constant: _constant,
    m.RangeSequence: _range,
    m.Delta: _delta,
    m.Dictionary: _dictionary,
    m.Rle: _rle,
    m.ByteStreamSplit: _byte_stream_split,
    m.VariablePackedStruct: _variable_packed_struct,
}


def _layout(p: m.PageLayout, out: pb.PageLayout) -> None:
    writer = _LAYOUT_WRITERS.get(type(p))
    if writer is None:  # pragma: no cover - every kind of the union has a writer
        raise TypeError(f"cannot serialize {type(p).__name__}")
    writer(p, out)


def _mini_block(p: m.MiniBlockLayout, out: pb.PageLayout) -> None:
    mb = out.mini_block_layout
    if p.rep_compression is not None:
        _ce(p.rep_compression, mb.rep_compression)
    if p.def_compression is not None:
        _ce(p.def_compression, mb.def_compression)
    _ce(p.value_compression, mb.value_compression)
    if p.dictionary is not None:
        _ce(p.dictionary, mb.dictionary)
        mb.num_dictionary_items = p.num_dictionary_items
    mb.layers.extend(pb.RepDefLayer.ValueType(int(x)) for x in p.layers)
    mb.num_buffers = p.num_buffers
    mb.repetition_index_depth = p.repetition_index_depth
    mb.num_items = p.num_items
    mb.has_large_chunk = p.has_large_chunk


def _full_zip(p: m.FullZipLayout, out: pb.PageLayout) -> None:
    fz = out.full_zip_layout
    fz.bits_rep = p.bits_rep
    fz.bits_def = p.bits_def
    if p.bits_per_value is not None:
        fz.bits_per_value = p.bits_per_value
    else:
        assert p.bits_per_offset is not None
        fz.bits_per_offset = p.bits_per_offset
    fz.num_items = p.num_items
    fz.num_visible_items = p.num_visible_items
    _ce(p.value_compression, fz.value_compression)
    fz.layers.extend(pb.RepDefLayer.ValueType(int(x)) for x in p.layers)


def _all_null(p: m.AllNullLayout, out: pb.PageLayout) -> None:
    c = out.constant_layout
    c.SetInParent()
    c.layers.extend(pb.RepDefLayer.ValueType(int(x)) for x in p.layers)
    if p.inline_value is not None:
        c.inline_value = p.inline_value


def _blob(p: m.BlobLayout, out: pb.PageLayout) -> None:
    _layout(p.inner_layout, out.blob_layout.inner_layout)
    out.blob_layout.layers.extend(pb.RepDefLayer.ValueType(int(x)) for x in p.layers)


#: The protobuf writer of every page-layout dataclass.
_LAYOUT_WRITERS: dict[type[Any], Callable[[Any, pb.PageLayout], None]] = {
    m.MiniBlockLayout: _mini_block,
    m.FullZipLayout: _full_zip,
    m.AllNullLayout: _all_null,
    m.BlobLayout: _blob,
}


def writers() -> tuple[Mapping[type[Any], object], Mapping[type[Any], object]]:
    """The protobuf writers of the compressive encodings and of the page layouts (read-only)."""
    return MappingProxyType(_CE_WRITERS), MappingProxyType(_LAYOUT_WRITERS)


def page_layout_bytes(layout: m.PageLayout) -> tuple[str, bytes]:
    """``(message name, bytes)`` of a page layout, as the file writer wraps it in an ``Any``."""
    try:
        return _known_layout_bytes(layout)
    except TypeError:  # a layout holding something unhashable: serialized every time
        return _page_layout_bytes(layout)


#: Layouts serialized lately: pages of one shape (equal row counts and encodings, as the pages
#: of one writer or the files of one dataset mostly are) repeat a layout, and building the
#: protobuf message costs more than encoding a small page. Equal layouts serialize alike.
_KNOWN_LAYOUTS = 256


@functools.lru_cache(maxsize=_KNOWN_LAYOUTS)
def _known_layout_bytes(layout: m.PageLayout) -> tuple[str, bytes]:
    return _page_layout_bytes(layout)


def _page_layout_bytes(layout: m.PageLayout) -> tuple[str, bytes]:
    msg = pb.PageLayout()
    _layout(layout, msg)
    return PAGE_LAYOUT, bytes(msg.SerializeToString())
