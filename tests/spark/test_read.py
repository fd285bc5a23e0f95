"""Reading through the ``lance`` data source with a real local Spark and a real server."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lance_format.dataset import write_dataset

pytestmark = pytest.mark.spark


def test_smoke_read(spark: Any, server: Any, uri: str, name: str) -> None:
    table = pa.table({"id": pa.array(range(100), pa.int64()), "s": [str(i) for i in range(100)]})
    write_dataset(table, str(server.root / name), max_rows_per_file=30)
    df = spark.read.format("lance").option("uri", uri).load(name)
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r.id for r in df.filter("id >= 90").collect()) == list(range(90, 100))
