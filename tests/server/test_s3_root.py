"""The service over an ``s3://`` root (SeaweedFS on loopback): the deployment's usual shape."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from flight_server.client import LanceFlightClient
from flight_server.service import LanceFlightService
from flight_server.settings import ServerSettings
from tests.s3_server import S3Server

pytestmark = pytest.mark.s3


def test_serves_datasets_on_an_s3_root(s3_server: S3Server, s3_uri: str) -> None:
    settings = ServerSettings(
        root=s3_uri, port=0, metrics_port=-1, storage_options=dict(s3_server.storage_options)
    )
    server = LanceFlightService(settings, location="grpc://127.0.0.1:0")
    client = LanceFlightClient(f"grpc://127.0.0.1:{server.port}", timeout=60)
    try:
        assert client.list_datasets() == []
        data = pa.table({"id": pa.array(np.arange(3000), pa.int64()), "s": [f"r{i}" for i in range(3000)]})
        assert client.write("alpha", data, mode="create", max_rows_per_file=1000) == 1
        assert client.write("beta", data.slice(0, 10), mode="create") == 1
        assert client.list_datasets() == ["alpha", "beta"]  # found by listing the bucket's folders
        assert client.scan("alpha").sort_by("id").equals(data)
        rows = [2999, 0, 1500]
        assert client.take("alpha", indices=rows).column("id").to_pylist() == rows
        assert client.delete("alpha", "id < 100") == 100
        assert client.scan("alpha").num_rows == 2900
        client.drop("beta")
        assert client.list_datasets() == ["alpha"]
        s3 = server.catalog._store()
        leftovers = [k for d in s3.list_dirs("beta") for k, _ in s3.list(f"beta/{d}")]
        assert leftovers == []  # every file of the dropped dataset is gone
        assert client.write("beta", data.slice(0, 5), mode="create") == 1  # the name is free again
        assert client.scan("beta").num_rows == 5
    finally:
        client.close()
        server.shutdown()
