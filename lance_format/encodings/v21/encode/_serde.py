"""Dataclass -> protobuf bytes for the 2.1/2.2 page layouts the encoder writes (write-side mirror
of :mod:`lance_format.encodings.v21._serde`)."""

from __future__ import annotations

from lance_format._proto import encodings_v2_1_pb2 as pb
from lance_format.encodings.v21 import model as m

__all__ = ["PAGE_LAYOUT", "page_layout_bytes"]

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
    if isinstance(e, m.Flat):
        out.flat.bits_per_value = e.bits_per_value
        if e.data is not None:
            _buffer(e.data, out.flat.data)
    elif isinstance(e, m.Variable):
        _ce(e.offsets, out.variable.offsets)
        if e.values is not None:
            _buffer(e.values, out.variable.values)
    elif isinstance(e, m.InlineBitpacking):
        out.inline_bitpacking.uncompressed_bits_per_value = e.uncompressed_bits_per_value
        if e.values is not None:
            _buffer(e.values, out.inline_bitpacking.values)
    elif isinstance(e, m.OutOfLineBitpacking):
        out.out_of_line_bitpacking.uncompressed_bits_per_value = e.uncompressed_bits_per_value
        _ce(e.values, out.out_of_line_bitpacking.values)
    elif isinstance(e, m.Fsst):
        out.fsst.symbol_table = e.symbol_table
        _ce(e.values, out.fsst.values)
    elif isinstance(e, m.General):
        _buffer(e.compression, out.general.compression)
        _ce(e.values, out.general.values)
    elif isinstance(e, m.FixedSizeList):
        out.fixed_size_list.items_per_value = e.items_per_value
        _ce(e.values, out.fixed_size_list.values)
        out.fixed_size_list.has_validity = e.has_validity
    elif isinstance(e, m.PackedStruct):
        out.packed_struct.bits_per_value.extend(e.bits_per_value)
        _ce(e.values, out.packed_struct.values)
    elif isinstance(e, m.Constant):
        out.constant.SetInParent()
        if e.value is not None:
            out.constant.value = e.value
    else:  # pragma: no cover - the encoder builds only the kinds above
        raise TypeError(f"cannot serialize {type(e).__name__}")


def _layout(p: m.PageLayout, out: pb.PageLayout) -> None:
    if isinstance(p, m.MiniBlockLayout):
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
    elif isinstance(p, m.FullZipLayout):
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
    elif isinstance(p, m.AllNullLayout):
        c = out.constant_layout
        c.SetInParent()
        c.layers.extend(pb.RepDefLayer.ValueType(int(x)) for x in p.layers)
        if p.inline_value is not None:
            c.inline_value = p.inline_value
    elif isinstance(p, m.BlobLayout):
        _layout(p.inner_layout, out.blob_layout.inner_layout)
        out.blob_layout.layers.extend(pb.RepDefLayer.ValueType(int(x)) for x in p.layers)
    else:  # pragma: no cover
        raise TypeError(f"cannot serialize {type(p).__name__}")


def page_layout_bytes(layout: m.PageLayout) -> tuple[str, bytes]:
    """``(message name, bytes)`` of a page layout, as the file writer wraps it in an ``Any``."""
    msg = pb.PageLayout()
    _layout(layout, msg)
    return PAGE_LAYOUT, bytes(msg.SerializeToString())
