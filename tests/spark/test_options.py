"""Data source options: parsing and errors that name the option (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from flight_server.spark.datasource import _pushdown
from flight_server.spark.options import (
    DEFAULT_BATCH_SIZE,
    parse_read_options,
    parse_write_options,
)
from lance_format.core.errors import InvalidInputError

pytestmark = pytest.mark.spark


def test_read_options() -> None:
    opts = parse_read_options(
        {
            "uri": "grpc://h:1",
            "path": "events",
            "version": "3",
            "columns": "a, b",
            "batch_size": "1000",
            "with_row_id": "TRUE",
            "token": "tok",
        }
    )
    assert opts.source.uri == "grpc://h:1"
    assert opts.source.dataset == "events"
    assert opts.source.token == "tok"
    assert (opts.version, opts.columns, opts.batch_size, opts.with_row_id) == (3, ("a", "b"), 1000, True)
    tagged = parse_read_options({"dataset": "e", "version": "stable"})
    assert tagged.version == "stable"
    assert tagged.batch_size == DEFAULT_BATCH_SIZE


def test_uri_and_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCE_FLIGHT_URI", "grpc+tls://env:2")
    monkeypatch.setenv("LANCE_FLIGHT_TOKEN", "secret")
    src = parse_read_options({"dataset": "e"}).source
    assert (src.uri, src.token) == ("grpc+tls://env:2", "secret")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "'dataset'"),
        ({"dataset": "e", "batch_size": "0"}, "'batch_size'"),
        ({"dataset": "e", "batch_size": "many"}, "'batch_size'"),
        ({"dataset": "e", "with_row_id": "maybe"}, "'with_row_id'"),
        ({"dataset": "e", "columns": " , "}, "'columns'"),
        ({"dataset": "e", "timeout": "-1"}, "'timeout'"),
        ({"dataset": "e", "tls_root_certs": "/no/such/ca.pem"}, "'tls_root_certs'"),
    ],
)
def test_bad_read_options_are_named(options: dict[str, str], match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        parse_read_options(options)


def test_tls_roots_from_text_or_file(tmp_path: Path) -> None:
    pem = "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
    assert parse_read_options({"dataset": "e", "tls_root_certs": pem}).source.tls_root_certs == pem.encode()
    (tmp_path / "ca.pem").write_text(pem)
    from_file = parse_read_options({"dataset": "e", "tls_root_certs": str(tmp_path / "ca.pem")})
    assert from_file.source.tls_root_certs == pem.encode()


def test_write_options() -> None:
    opts = parse_write_options(
        {"dataset": "e", "vector_columns": "emb:128, other", "max_rows_per_file": "10"}
    )
    assert opts.vector_columns == {"emb": 128, "other": None}
    assert opts.max_rows_per_file == 10
    with pytest.raises(InvalidInputError, match="vector_columns"):
        parse_write_options({"dataset": "e", "vector_columns": "emb:x"})


def test_pushdown_option() -> None:
    assert _pushdown("true") is True
    assert _pushdown("0") is False
    with pytest.raises(InvalidInputError, match="pushdown"):
        _pushdown("sometimes")
