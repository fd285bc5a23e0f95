"""The catalogue's claims about pylance hold: what it returns, which encodings it picks, what it refuses.

These tests run pylance only. They keep ``cases.py`` honest (a case named ``long_strings`` really
exercises full-zip + FSST at 2.1) and flag behaviour changes when pylance is upgraded.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.interop.cases import ALL_VERSIONS, CASES, Case, case_versions
from tests.interop.compare import assert_tables_equal
from tests.interop.helpers import FileCache, pylance_reader, write_with_pylance

pytestmark = pytest.mark.interop

PAIRS = case_versions()
IDS = [f"{c.name}-{v}" for c, v in PAIRS]


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_pylance_returns_the_expected_table(case: Case, version: str, pylance_file: FileCache) -> None:
    reader = pylance_reader(pylance_file(case, version))
    assert_tables_equal(
        reader.read_all().to_table(), case.expected(), context=f"pylance {case.name} v{version}"
    )


@pytest.mark.parametrize(("case", "version"), PAIRS, ids=IDS)
def test_pylance_uses_the_named_encodings_and_pages(
    case: Case, version: str, pylance_file: FileCache
) -> None:
    meta = pylance_reader(pylance_file(case, version)).metadata()
    encodings = "\n".join(page.encoding for col in meta.columns for page in col.pages)
    for wanted in case.encodings.get(version, ()):
        assert wanted in encodings, f"{case.name} v{version}: pylance no longer writes {wanted}"
    if case.table().num_rows:
        assert max(len(col.pages) for col in meta.columns) >= case.min_pages
    expected_footer = {"2.0": (0, 3), "2.1": (2, 1), "2.2": (2, 2)}[version]
    assert (meta.major_version, meta.minor_version) == expected_footer


@pytest.mark.parametrize("case", [c for c in CASES if c.versions != ALL_VERSIONS], ids=str)
def test_pylance_refuses_the_versions_a_case_leaves_out(case: Case, tmp_path: Path) -> None:
    for version in set(ALL_VERSIONS) - set(case.versions):
        with pytest.raises(ValueError, match=r"struct validity|VariableWidth"):
            write_with_pylance(tmp_path / f"refused-{version}.lance", case, version)


def test_pylance_take_rows_needs_increasing_indices(pylance_file: FileCache) -> None:
    """Why ``helpers.pylance_take`` sorts: pylance's file API refuses unsorted or repeated indices."""
    reader = pylance_reader(pylance_file(CASES[0], "2.2"))
    with pytest.raises(ValueError, match="sorted"):
        reader.take_rows([5, 3])
    with pytest.raises(ValueError, match="strictly increasing"):
        reader.take_rows([3, 3])
    assert reader.take_rows([3, 5]).to_table().num_rows == 2


def test_expected_type_normalises_fixed_size_list_items() -> None:
    from tests.interop.cases import expected_type

    t = pa.list_(pa.field("emb", pa.float32(), nullable=False), 4)
    assert expected_type(t) == pa.list_(pa.field("item", pa.float32()), 4)
    nested = pa.struct([("v", pa.large_list(pa.field("x", t, nullable=False)))])
    assert expected_type(nested) == pa.struct([("v", pa.large_list(pa.field("x", expected_type(t), False)))])
