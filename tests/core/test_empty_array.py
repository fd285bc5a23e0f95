"""core.types.empty_array: empty arrays of any type, dictionaries (nested too) with empty dictionaries."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_format.core.types import empty_array

_DICT = pa.dictionary(pa.int8(), pa.large_string())


@pytest.mark.parametrize(
    "t",
    [
        pa.int64(),
        _DICT,
        pa.dictionary(pa.int16(), pa.string()),
        pa.struct([pa.field("a", pa.bool_(), nullable=False), pa.field("q", _DICT, nullable=False)]),
        pa.list_(_DICT),
        pa.large_list(pa.struct([("q", _DICT)])),
        pa.list_(_DICT, 3),
    ],
    ids=str,
)
def test_empty_arrays_have_the_type_and_no_null_dictionary_entry(t: pa.DataType) -> None:
    arr = empty_array(t)
    assert arr.type == t
    assert len(arr) == 0
    if pa.types.is_dictionary(t):
        assert len(arr.dictionary) == 0  # pa.nulls(0, t) would hold a null here
        # Two empty chunks concatenate and unify (a null in the dictionary would not).
        assert pa.chunked_array([arr, arr]).unify_dictionaries().length() == 0
