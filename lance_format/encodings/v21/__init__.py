"""Lance file format 2.1/2.2: structural page layouts (mini-block, full-zip, all-null, blob).

``model`` holds the layouts as dataclasses and ``_serde`` parses them; ``codecs`` has one codec per
compressive encoding (a registry keyed by the message's dataclass) over the kernels of
``compressive`` (whole batches) and ``minitake`` (takes); ``readers`` has one page reader per layout
over ``miniblock`` (with ``miniblock_meta`` and ``miniblock_merge``), ``fullzip``, ``constant`` and
``blob``; ``repdef`` turns rep/def levels into offsets and validity; ``decode`` assembles fields.
"""

from lance_format.encodings.v21._serde import page_layout_from_raw
from lance_format.encodings.v21.decode import decode_field

__all__ = ["decode_field", "page_layout_from_raw", "warm_up_kernels"]


def warm_up_kernels() -> None:
    """Compile (or load from the kernel cache) the decode kernels of this package."""
    from lance_format.encodings.v21 import _bytes, _decode_kernels, _fsst, _meta_kernels, fastlanes

    for module in (_bytes, _decode_kernels, _fsst, _meta_kernels, fastlanes):
        module.warm_up()
