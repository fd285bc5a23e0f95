"""The byte-bounded caches: LRU by bytes, counters, resizing, the public stats call."""

from __future__ import annotations

import pytest

import lance_format.io as lio
from lance_format.core.errors import InvalidInputError
from lance_format.io.cache import (
    METADATA_CACHE,
    PAGE_CACHE,
    ByteCache,
    CacheStats,
    cache_stats,
    configure_caches,
)


def test_evicts_least_recently_used_by_bytes() -> None:
    c = ByteCache(100)
    c.put("a", "A", 40)
    c.put("b", "B", 40)
    assert c.get("a") == "A"  # a is now the most recent
    c.put("c", "C", 40)  # 120 > 100: b (least recent) goes
    assert c.get("b") is None
    assert c.get("a") == "A"
    assert c.get("c") == "C"
    s = c.counters()
    assert (s.hits, s.misses, s.evictions, s.entries, s.bytes, s.capacity) == (3, 1, 1, 2, 80, 100)
    assert s.hit_ratio == pytest.approx(0.75)


def test_value_larger_than_capacity_is_not_stored() -> None:
    c = ByteCache(10)
    c.put("big", b"x" * 11, 11)
    assert c.get("big") is None
    assert c.counters().evictions == 0


def test_zero_capacity_is_off_and_resize_keeps_what_fits() -> None:
    c = ByteCache(0)
    assert not c.enabled
    c.put("a", 1, 1)
    assert c.get("a") is None
    c.resize(50)
    c.put("a", 1, 20)
    c.put("b", 2, 20)
    c.resize(30)  # only the most recent entry fits
    assert c.get("a") is None
    assert c.get("b") == 2
    assert c.counters().evictions == 1
    assert c.counters().capacity == 30


def test_replacing_a_key_recharges_it() -> None:
    c = ByteCache(100)
    c.put("a", 1, 60)
    c.put("a", 2, 10)
    assert c.nbytes == 10
    assert c.get("a") == 2


def test_get_many_counts_each_lookup() -> None:
    c = ByteCache(100)
    c.put(1, "one", 1)
    assert c.get_many([1, 2, 1]) == ["one", None, "one"]
    s = c.counters()
    assert (s.hits, s.misses) == (2, 1)


def test_cache_stats_is_public_and_typed() -> None:
    stats = lio.cache_stats()
    assert isinstance(stats, CacheStats)
    assert stats.metadata.capacity == METADATA_CACHE.capacity
    assert stats.page.capacity == PAGE_CACHE.capacity


def test_configure_caches_validates_and_resizes() -> None:
    old_meta, old_page = METADATA_CACHE.capacity, PAGE_CACHE.capacity
    try:
        configure_caches(page_bytes=1 << 20)
        assert cache_stats().page.capacity == 1 << 20
        assert PAGE_CACHE.enabled
        with pytest.raises(InvalidInputError):
            configure_caches(metadata_bytes=-1)
        with pytest.raises(InvalidInputError):
            configure_caches(page_bytes="lots")  # type: ignore[arg-type]
    finally:
        configure_caches(metadata_bytes=old_meta, page_bytes=old_page)
    assert PAGE_CACHE.capacity == old_page


def test_bad_env_capacity_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from lance_format.core.config import env_setting

    monkeypatch.setenv("LANCE_FORMAT_PAGE_CACHE_BYTES", "ten")
    with pytest.raises(InvalidInputError, match="LANCE_FORMAT_PAGE_CACHE_BYTES"):
        env_setting("page_cache_bytes")
    monkeypatch.setenv("LANCE_FORMAT_PAGE_CACHE_BYTES", "-1")
    with pytest.raises(InvalidInputError, match=">= 0"):
        env_setting("page_cache_bytes")
    monkeypatch.setenv("LANCE_FORMAT_PAGE_CACHE_BYTES", "0")
    assert env_setting("page_cache_bytes") == 0
