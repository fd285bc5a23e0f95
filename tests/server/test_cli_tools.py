"""``lance-flight --version``, ``serve --help`` and ``lance-flight inspect`` (in-process ``main``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lance_format
from flight_server.cli import main

ROOT = Path(__file__).parents[2]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out.startswith(f"lance-flight {declared} (Python ")
    assert lance_format.__version__ == declared
    assert f"pyarrow {pa.__version__}" in out


def test_serve_help_shows_value_kinds_defaults_and_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "VALUE" not in out  # every flag says what it takes
    assert "--log-level {DEBUG,INFO,WARNING,ERROR,CRITICAL}" in out
    assert "--log-format {text,json}" in out
    assert "--port PORT" in out
    assert "--page-cache-bytes BYTES" in out
    assert "--root URI" in out
    flat = " ".join(out.split())
    assert "(default: 8815; env LANCE_FLIGHT_PORT)" in flat
    assert "(default: 1073741824 = 1 GiB; env LANCE_FLIGHT_PAGE_CACHE_BYTES)" in flat
    assert "(default: INFO; env LANCE_FLIGHT_LOG_LEVEL)" in flat


def _section(out: str, title: str) -> list[list[str]]:
    """The rows of one table of the inspect report, split on runs of two or more spaces."""
    (block,) = [b for b in out.split("\n\n") if b.splitlines()[0] == title]
    return [re.split(r"\s{2,}", line.strip()) for line in block.splitlines()[3:]]


def _inspect(uri: Path | str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["inspect", str(uri), *extra]) == 0
    return capsys.readouterr().out


def _data() -> pa.Table:
    return pa.table(
        {
            "id": pa.array(np.arange(3000), pa.int64()),
            "name": [f"n{i % 7}" for i in range(3000)],
            "vec": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(3000 * 4, np.float32)), 4),
        }
    )


def _check_report(out: str, rows: int, versions: int, fragments: int) -> None:
    dataset = dict(row[:2] for row in _section(out, "Dataset"))
    assert dataset["rows"] == f"{rows:,}"
    assert dataset["fragments"] == str(fragments)
    assert [r[0] for r in _section(out, "Versions")] == [str(v) for v in range(1, versions + 1)]
    schema = _section(out, "Schema")
    assert [r[0] for r in schema] == ["id", "name", "vec"]
    assert schema[2][1] == "fixed_size_list<item: float>[4]"
    assert len(_section(out, "Fragments")) == fragments
    columns = {r[0]: r for r in _section(out, "Columns (page encodings and sizes over all data files)")}
    assert {"id", "name"} <= set(columns)
    for row in columns.values():
        assert row[1] != "-"  # an encoding name
        assert int(row[2].replace(",", "")) >= 1  # pages
        assert row[3].endswith(("B", "KiB", "MiB"))


def test_inspect_a_dataset_we_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = tmp_path / "ours.lance"
    lance_format.write_dataset(_data(), str(uri), max_rows_per_file=1000)
    ds = lance_format.write_dataset(_data().slice(0, 10), str(uri), mode="append")
    ds.delete("id < 5")
    ds.tags.create("first", 1)
    out = _inspect(uri, capsys)
    _check_report(out, rows=3000, versions=3, fragments=4)  # 3010 written, 10 deleted
    assert _section(out, "Fragments")[0][:4] == ["0", "1,000", "5", "1"]
    deleted = [r[2] for r in _section(out, "Fragments")]
    assert deleted == ["5", "0", "0", "5"]
    assert _section(out, "Versions")[0][-1] == "first"
    assert _section(out, "Indexes") == [["(none)"]]
    # At an older version, by number or tag.
    older = dict(r[:2] for r in _section(_inspect(uri, capsys, "--version", "first"), "Dataset"))
    assert (older["rows"], older["version"]) == ("3,000", "1 (latest 3)")


@pytest.mark.interop
def test_inspect_a_dataset_pylance_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lance = pytest.importorskip("lance")
    uri = str(tmp_path / "theirs.lance")
    ds = lance.write_dataset(_data(), uri, max_rows_per_file=1500)
    ds.create_scalar_index("id", "BTREE")
    out = _inspect(uri, capsys)
    _check_report(out, rows=3000, versions=2, fragments=2)
    dataset = dict(row[:2] for row in _section(out, "Dataset"))
    assert dataset["file format"] == ds.data_storage_version
    (index,) = _section(out, "Indexes")
    assert index[0] == ds.describe_indices()[0].name == "id_idx"
    assert index[2] == "id"


def test_inspect_errors_exit_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "missing.lance")]) == 1
    err = capsys.readouterr().err
    assert "lance-flight inspect: error:" in err
    assert "Traceback" not in err
    assert main(["inspect"]) == 2
    assert main(["inspect", "x", "--storage-option", "novalue"]) == 2
