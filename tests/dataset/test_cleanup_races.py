"""Cleanup racing a commit: a version committed while cleanup runs keeps every file it needs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lance_format
from lance_format.table import tags as tags_module


def test_a_restore_committed_during_cleanup_keeps_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = str(tmp_path / "t")
    lance_format.write_dataset(pa.table({"a": list(range(100))}), uri)
    lance_format.write_dataset(pa.table({"a": list(range(5))}), uri, mode="overwrite")
    ds = lance_format.dataset(uri)
    assert ds.version == 2
    real_list_tags = tags_module.list_tags
    restored: list[int] = []

    def list_tags_then_restore(store: Any) -> Any:
        # Another client restores version 1 after cleanup has read the versions it will keep.
        if not restored:
            old = lance_format.dataset(uri).checkout_version(1)
            old.restore()
            restored.append(lance_format.dataset(uri).version)
        return real_list_tags(store)

    monkeypatch.setattr(tags_module, "list_tags", list_tags_then_restore)
    ds.cleanup_old_versions(older_than=timedelta(0))
    assert restored == [3]
    latest = lance_format.dataset(uri)
    assert latest.version == 3
    assert latest.to_table().column("a").to_pylist() == list(range(100))
