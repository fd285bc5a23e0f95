"""The 2.1/2.2 encoder: Arrow arrays -> mini-block, full-zip and all-null pages.

``levels`` turns nested arrays into repetition/definition levels per leaf column, ``values``
extracts value bytes, ``miniblock`` / ``fullzip`` build the page buffers, ``bitpack`` packs
integers and levels the FastLanes way, ``_serde`` serializes layouts, ``field`` ties them up.
Compiled kernels: ``fsst`` (symbol training and coding), ``_dict`` (string dictionaries),
``_chunks`` (chunk cutting and layout).
"""

from lance_format.encodings.v21.encode.field import EncodeJob, encode_field, encode_jobs, has_blobs

__all__ = ["EncodeJob", "encode_field", "encode_jobs", "has_blobs", "warm_up_kernels"]


def warm_up_kernels() -> None:
    """Compile (or load from the kernel cache) the encode kernels of this package."""
    from lance_format.encodings.v21.encode import _chunks, _dict, _levels, bitpack, fsst, fullzip, values

    for module in (fsst, bitpack, _dict, _chunks, _levels, fullzip, values):
        module.warm_up()
