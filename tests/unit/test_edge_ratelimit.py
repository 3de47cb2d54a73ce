"""The per-key token bucket, as a table of (bucket before, rate, now) -> (tokens after, wait)."""

from __future__ import annotations

import pytest

from edge.ratelimit import Bucket, RateLimiter, take

CASES = [
    # name, bucket before, rate/s, now, tokens after, wait
    ("a new key starts with a full burst (2 s worth)", None, 10.0, 5.0, 19.0, 0.0),
    ("a slow rate still allows one request", None, 0.2, 5.0, 0.0, 0.0),
    ("an empty bucket refuses and says how long to wait", Bucket(0.0, 5.0), 10.0, 5.0, 0.0, 0.1),
    ("a partial token is not enough", Bucket(0.5, 5.0), 2.0, 5.0, 0.5, 0.25),
    ("time refills at the rate", Bucket(0.0, 5.0), 10.0, 5.25, 1.5, 0.0),
    ("refill stops at the burst", Bucket(3.0, 0.0), 10.0, 1000.0, 19.0, 0.0),
    ("a clock going backwards refills nothing", Bucket(0.0, 5.0), 10.0, 4.0, 0.0, 0.1),
]


@pytest.mark.parametrize(
    ("name", "before", "rate", "now", "tokens", "wait"), CASES, ids=[c[0] for c in CASES]
)
def test_take(name: str, before: Bucket | None, rate: float, now: float, tokens: float, wait: float) -> None:
    after, waited = take(before, rate, now)
    assert after.tokens == pytest.approx(tokens)
    assert waited == pytest.approx(wait)
    assert after.updated == now


def test_limiter_is_per_key() -> None:
    limiter = RateLimiter(max_keys=2)
    assert [limiter.check("key_a", 1.0, 0.0) for _ in range(3)] == [0.0, 0.0, pytest.approx(1.0)]
    assert limiter.check("key_b", 1.0, 0.0) == 0.0  # another key has its own bucket
    assert limiter.check("key_a", 1.0, 1.0) == 0.0  # a second later one token is back
    limiter.check("key_c", 1.0, 1.0)  # over max_keys: the least recently used (key_b) is forgotten
    assert set(limiter._buckets) == {"key_a", "key_c"}
