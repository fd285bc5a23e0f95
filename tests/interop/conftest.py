"""Fixtures for the interop tests: files written by pylance (the oracle) and by us, built once per run.

pylance is a test-only dependency; without it the whole directory is skipped.
"""

from __future__ import annotations

import pytest

from tests.interop.helpers import FileCache, write_with_ours, write_with_pylance

pytest.importorskip("lance.file", reason="pylance (the test oracle) is not installed")


@pytest.fixture(scope="session")
def pylance_file(tmp_path_factory: pytest.TempPathFactory) -> FileCache:
    """``pylance_file(case, version)``: path of ``case`` written by pylance at ``version``."""
    return FileCache(tmp_path_factory.mktemp("pylance-written"), write_with_pylance)


@pytest.fixture(scope="session")
def our_file(tmp_path_factory: pytest.TempPathFactory) -> FileCache:
    """``our_file(case, version)``: path of ``case`` written by our writer at ``version``."""
    return FileCache(tmp_path_factory.mktemp("ours-written"), write_with_ours)
