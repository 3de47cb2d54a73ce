"""Usage counts' latency histogram: the bucket bounds (stated here, once, for the edge, authsvc and
webhookd) and the percentiles read from a histogram.

A histogram is a list of counts, one more than the bounds: ``buckets[i]`` counts the latencies ``<=
LATENCY_BOUNDS_MS[i]`` and above the bound before it; the last element counts those above the last
bound. Fixed buckets add up: the histograms of many minutes, keys or edges are summed element by element,
and a percentile of the sum is exact to its bucket. That is why the rollups keep buckets and not
percentiles (a p95 of p95s means nothing).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

# Bucket upper bounds, milliseconds, ascending. Changing them changes what stored rollups mean: add a
# revision that moves the stored counts, never edit this alone.
LATENCY_BOUNDS_MS: Final = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# The same in seconds (the edge's clocks read seconds): bisect on them without converting each latency.
LATENCY_BOUNDS_S: Final = tuple(b / 1000 for b in LATENCY_BOUNDS_MS)
# Elements of a histogram.
BUCKETS: Final = len(LATENCY_BOUNDS_MS) + 1
# The percentiles every usage answer carries.
PERCENTILES: Final = (0.50, 0.95, 0.99)


def bucket_of(latency_ms: float) -> int:
    """The index of the bucket a latency (ms) is counted in."""
    return bisect_left(LATENCY_BOUNDS_MS, latency_ms)


def percentile(buckets: Sequence[int], q: float) -> int:
    """Pure: the ``q`` percentile (0 < q <= 1) of a histogram, in ms: the upper bound of the bucket holding
    the ``ceil(q * total)``-th latency; for the last (unbounded) bucket, the last bound (the histogram
    knows no more than "above it"). 0 for an empty histogram. A percentile read from buckets is never
    below the true one and at most one bucket above it."""
    if len(buckets) != BUCKETS:
        raise ValueError(f"a histogram has {BUCKETS} buckets, not {len(buckets)}")
    if not 0 < q <= 1:
        raise ValueError("q: in (0, 1]")
    total = sum(buckets)
    if total <= 0:
        return 0
    # The rank of the q-th latency, 1-based: ceil(q * total) in integers (q * total may be 94.99999...).
    rank = max(1, -(-round(q * 1_000_000) * total // 1_000_000))
    seen = 0
    for index, count in enumerate(buckets):
        seen += count
        if seen >= rank:
            return LATENCY_BOUNDS_MS[min(index, len(LATENCY_BOUNDS_MS) - 1)]
    return LATENCY_BOUNDS_MS[-1]  # unreachable: seen ends at total >= rank


def percentiles(buckets: Sequence[int]) -> tuple[int, int, int]:
    """p50, p95 and p99 of a histogram (``percentile``)."""
    p50, p95, p99 = (percentile(buckets, q) for q in PERCENTILES)
    return p50, p95, p99


def add_into(total: list[int], buckets: Sequence[int]) -> None:
    """Add ``buckets`` to ``total`` element by element (both BUCKETS long)."""
    if len(buckets) != BUCKETS or len(total) != BUCKETS:
        raise ValueError(f"a histogram has {BUCKETS} buckets")
    for index, count in enumerate(buckets):
        total[index] += count
