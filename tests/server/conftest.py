"""Fixtures shared by the server tests (the service fixtures live in service_fixtures.py)."""

from collections.abc import Iterator

import pytest

from lance_format.dataset.session import Session
from lance_format.io.cache import DECODED_CACHE, METADATA_CACHE, PAGE_CACHE, configure_caches
from tests.server.service_fixtures import recorder, served

__all__ = ["recorder", "restore_engine_caches", "served"]

# Sizes before any server test ran (module-scoped fixtures may start servers before a test does).
_SIZES = (METADATA_CACHE.capacity, PAGE_CACHE.capacity, DECODED_CACHE.capacity)


@pytest.fixture(autouse=True)
def restore_engine_caches() -> Iterator[None]:
    """Put the process-wide engine cache sizes back after each test.

    ``build_server`` sizes them from the server settings (a 1 GiB page cache and a 512 MiB
    decoded-block cache by default), as a
    serving process should; left on, it would change request counts in later engine tests.
    """
    yield
    configure_caches(*_SIZES)
    Session.for_process()  # the gate and pools build_server sized, back to the environment's
    Session.reset_default()  # build_server made the server's session the default
