"""Per-key request rate limits (decisions.md: 429 ``rate_limited`` with Retry-After).

A token bucket per API key in each edge process: ``rate`` requests a second sustained, bursts of up to
``BURST_SECONDS`` of that. ``take`` is the whole decision, pure; ``RateLimiter`` keeps the buckets (the
least recently used are forgotten past ``max_keys``; a forgotten bucket was full or nearly so).
This is the embedded default: with several edge processes behind a load balancer a key gets the limit
from each of them, unless they share it in Redis (--redis; edge.gcra, edge.sharedlimit), which falls
back to these buckets while Redis is unreachable.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

BURST_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class Bucket:
    tokens: float
    updated: float


def take(bucket: Bucket | None, rate: float, now: float) -> tuple[Bucket, float]:
    """One request at ``now`` (seconds, monotonic): the bucket after it, and 0.0 when it may pass or the
    seconds until it could (the bucket is not charged for a refused request)."""
    burst = max(1.0, rate * BURST_SECONDS)
    tokens = burst if bucket is None else min(burst, bucket.tokens + max(0.0, now - bucket.updated) * rate)
    if tokens >= 1.0:
        return Bucket(tokens - 1.0, now), 0.0
    return Bucket(tokens, now), (1.0 - tokens) / rate


class RateLimiter:
    def __init__(self, max_keys: int = 100_000) -> None:
        self.max_keys = max_keys
        self._buckets: collections.OrderedDict[str, Bucket] = collections.OrderedDict()

    def check(self, key_id: str, rate: float, now: float) -> float:
        """0.0 when the key's request may pass now at ``rate`` (> 0) a second, else the seconds to wait."""
        buckets = self._buckets
        bucket, wait = take(buckets.get(key_id), rate, now)
        buckets[key_id] = bucket
        buckets.move_to_end(key_id)
        if len(buckets) > self.max_keys:
            buckets.popitem(last=False)
        return wait
