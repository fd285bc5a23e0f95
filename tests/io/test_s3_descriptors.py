"""Descriptors an S3 client holds: obstore's per-thread event loops (3 descriptors each) belong to
threads, not to datasets, so opening many datasets does not add any (``max_open_files`` bounds
local files only and is not what keeps them few)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import lance_format
from tests.s3_server import S3Server

pytestmark = pytest.mark.s3

#: Datasets the test opens after the first ones: descriptors held per dataset would show as many.
MORE_DATASETS = 10


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_opening_many_s3_datasets_holds_no_descriptors_per_dataset(s3_server: S3Server, s3_uri: str) -> None:
    session = lance_format.Session()
    uris = [f"{s3_uri}-{i}" for i in range(MORE_DATASETS + 2)]
    for uri in uris:
        lance_format.write_dataset(
            pa.table({"a": list(range(10))}), uri, storage_options=s3_server.storage_options, session=session
        )

    def read(uri: str) -> None:
        ds = lance_format.dataset(uri, storage_options=s3_server.storage_options, session=session)
        assert ds.to_table().num_rows == 10

    for uri in uris[:2]:  # warm: the session's threads, their loops and the client's connections
        read(uri)
    before = _open_descriptors()
    for uri in uris[2:]:
        read(uri)
    assert _open_descriptors() - before < MORE_DATASETS
    session.close()
