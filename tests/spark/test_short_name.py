"""The data source's short name ``lance_flight`` (``lance`` only without the official connector)
and the loopback set-up of local sessions."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest

from flight_server.spark import session as session_module
from flight_server.spark.datasource import LanceDataSource, LanceLegacyNameDataSource
from lance_format.dataset import write_dataset


class _FakeSession:
    """Records what configure registers."""

    def __init__(self) -> None:
        self.registered: list[str] = []
        self.conf = self
        self.dataSource = self

    def set(self, key: str, value: str) -> None:
        pass

    def register(self, source: type) -> None:
        self.registered.append(source.name())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("official_connector", "names"),
    [
        (True, ["lance_flight"]),  # `lance` stays the official lance-spark connector's
        (False, ["lance_flight", "lance"]),
        (None, ["lance_flight"]),  # cannot tell (Spark Connect): never shadow it
    ],
)
def test_configure_registers_lance_only_without_the_official_connector(
    monkeypatch: pytest.MonkeyPatch, official_connector: bool | None, names: list[str]
) -> None:
    monkeypatch.setattr(session_module, "jvm_has_source", lambda spark, name: official_connector)
    fake = _FakeSession()
    session_module.configure(fake)  # type: ignore[arg-type]
    assert fake.registered == names
    assert LanceDataSource.name() == "lance_flight"
    assert LanceLegacyNameDataSource.name() == "lance"


@pytest.mark.spark
def test_both_names_read_on_a_session_without_the_connector(
    spark: Any, server: Any, uri: str, name: str
) -> None:
    assert session_module.jvm_has_source(spark, "parquet") is True
    assert session_module.jvm_has_source(spark, "lance") is False
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"  # no hostname warning from a local JVM
    write_dataset(pa.table({"id": pa.array(range(10), pa.int64())}), str(server.root / name))
    for short_name in ("lance_flight", "lance"):
        assert spark.read.format(short_name).option("uri", uri).load(name).count() == 10
