"""Latency histograms (HdrHistogram) that travel between processes and merge exactly.

Each client thread records into its own histogram; a process merges its threads' histograms and
sends the encoded result to the coordinator, which merges the processes'. Merging HDR histograms
is exact (counts per bucket add), so percentiles of the merged histogram are the percentiles of
all samples, to the histogram's precision, unlike averaging per-process percentiles.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

__all__ = [
    "HIGHEST_US",
    "LOWEST_US",
    "PERCENTILES",
    "SIGNIFICANT_FIGURES",
    "LatencyHistogram",
    "percentile_key",
]

#: Values are whole microseconds: a warm in-process take is tens of microseconds.
LOWEST_US = 1
#: One hour: a stalled request's lower-bound latency (see the generator's unsent requests) must still fit.
HIGHEST_US = 3_600_000_000
#: Three significant digits: 0.1% relative error, the usual HDR setting, small encoded size.
SIGNIFICANT_FIGURES = 3
#: The percentiles every report shows (max is reported separately).
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
#: Points per halving of the remaining tail in percentile curves: smooth plots, a few dozen points.
CURVE_TICKS_PER_HALF = 4


def percentile_key(q: float) -> str:
    """``p50_ms``, ``p99_9_ms``: the report's field name of percentile ``q``."""
    text = f"{q:g}".replace(".", "_")
    return f"p{text}_ms"


class LatencyHistogram:
    """Latencies in seconds, kept as an HDR histogram of microseconds.

    Parameters
    ----------
    hist:
        An existing histogram to wrap (a fresh one when omitted).
    """

    def __init__(self, hist: HdrHistogram | None = None) -> None:
        self._h = hist if hist is not None else HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)

    def record(self, seconds: float) -> None:
        """Record one latency (clamped into the trackable range rather than dropped)."""
        us = int(seconds * 1e6)
        self._h.record_value(min(max(us, LOWEST_US), HIGHEST_US))

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts to this histogram."""
        if other.count:
            self._h.add(other._h)

    @classmethod
    def merged(cls, hists: Iterable[LatencyHistogram]) -> LatencyHistogram:
        """One histogram holding the samples of all of ``hists``."""
        out = cls()
        for h in hists:
            out.merge(h)
        return out

    @property
    def count(self) -> int:
        """Number of recorded latencies."""
        return int(self._h.get_total_count())

    def percentile_ms(self, q: float) -> float:
        """The latency at percentile ``q`` (0-100), in milliseconds; NaN when empty."""
        if not self.count:
            return float("nan")
        return float(self._h.get_value_at_percentile(q)) / 1e3

    def max_ms(self) -> float:
        """The largest latency recorded (to the histogram's precision), in milliseconds."""
        return float(self._h.get_max_value()) / 1e3 if self.count else float("nan")

    def mean_ms(self) -> float:
        """Mean latency in milliseconds."""
        return float(self._h.get_mean_value()) / 1e3 if self.count else float("nan")

    def summary(self) -> dict[str, float]:
        """``p50_ms``, ``p90_ms``, ``p99_ms``, ``p99_9_ms``, ``max_ms`` and ``mean_ms``."""
        out = {percentile_key(q): self.percentile_ms(q) for q in PERCENTILES}
        out["max_ms"] = self.max_ms()
        out["mean_ms"] = self.mean_ms()
        return out

    def curve(self) -> list[tuple[float, float]]:
        """``(percentile, ms)`` points of the whole distribution, denser towards the tail."""
        if not self.count:
            return []
        points: list[tuple[float, float]] = []
        it: Any = self._h.get_percentile_iterator(CURVE_TICKS_PER_HALF)
        for item in it:
            pct = float(item.percentile_level_iterated_to)
            ms = float(item.value_iterated_to) / 1e3
            if pct >= 100.0:
                break
            points.append((pct, ms))
        points.append((100.0, self.max_ms()))
        return points

    def encode(self) -> str:
        """The compressed, base64 form (HdrHistogram's standard encoding) for another process."""
        if not self.count:
            return ""
        data = self._h.encode()
        return data.decode("ascii") if isinstance(data, bytes) else str(data)

    @classmethod
    def decode(cls, text: str) -> LatencyHistogram:
        """The histogram :meth:`encode` wrote (an empty one for ``""``)."""
        if not text:
            return cls()
        return cls(HdrHistogram.decode(text.encode("ascii")))
