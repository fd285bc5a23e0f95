"""Lance file format 2.1/2.2: structural page layouts (mini-block, full-zip, all-null, blob).

``model`` holds the layouts as dataclasses and ``_serde`` parses them; ``compressive`` undoes the
compressive encodings on batches of buffers; ``miniblock``, ``fullzip`` and ``constant`` read the
selected rows of a page; ``repdef`` turns rep/def levels into offsets and validity; ``decode``
assembles fields.
"""

from lance_format.encodings.v21._serde import page_layout_from_raw
from lance_format.encodings.v21.decode import decode_field

__all__ = ["decode_field", "page_layout_from_raw"]
