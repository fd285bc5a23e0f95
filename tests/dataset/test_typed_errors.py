"""Bad input to the engine raises our typed errors, never a bare built-in (issue 14).

The Flight server answers only typed errors as INVALID_ARGUMENT / NOT_FOUND; a bare ``ValueError``
is a bug there (INTERNAL), so every refusal of user input must be typed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.core.errors import InvalidInputError, LanceError, NotFoundError

Call = Callable[[Any], object]

CASES: dict[str, tuple[Call, type[LanceError]]] = {
    "take strings": (lambda ds: ds.take(["a"]), InvalidInputError),
    "take negative": (lambda ds: ds.take([-1]), InvalidInputError),
    "limit string": (lambda ds: ds.to_table(limit="5"), InvalidInputError),
    "limit 2**63": (lambda ds: ds.to_table(limit=2**63), InvalidInputError),
    "offset 2**64": (lambda ds: ds.to_table(offset=2**64), InvalidInputError),
    "columns ints": (lambda ds: ds.to_table(columns=[1]), InvalidInputError),
    "filter int": (lambda ds: ds.to_table(filter=5), InvalidInputError),
    "checkout missing": (lambda ds: ds.checkout_version(99), NotFoundError),
    "tag reference missing tag": (lambda ds: ds.tags.create("x", "y"), NotFoundError),
    "tag version float": (lambda ds: ds.tags.create("x", 1.5), InvalidInputError),
    "tag version missing": (lambda ds: ds.tags.create("x", 2**70), InvalidInputError),
    "tag name too long": (lambda ds: ds.tags.create("t" * 201, 1), InvalidInputError),
    "tag name path": (lambda ds: ds.tags.create("../x", 1), InvalidInputError),
    "get long tag": (lambda ds: ds.tags.get_version("t" * 300), InvalidInputError),
    "cleanup inf": (lambda ds: ds.cleanup_old_versions(float("inf")), InvalidInputError),
    "cleanup string": (lambda ds: ds.cleanup_old_versions("x"), InvalidInputError),
    "compact negative": (lambda ds: ds.compact_files(-5), InvalidInputError),
    "take_rows negative": (lambda ds: ds.take_rows([-1]), InvalidInputError),
}


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = str(tmp_path_factory.mktemp("typed") / "t")
    return lance_format.write_dataset(
        pa.table({"a": list(range(10)), "s": [str(i) for i in range(10)]}), path
    )


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_typed_errors(ds: Any, case: str) -> None:
    call, kind = CASES[case]
    with pytest.raises(LanceError) as info:
        call(ds)
    assert isinstance(info.value, kind), info.value
