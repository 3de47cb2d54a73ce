"""GCRA as a table: (tat before, now, limit) -> allowed, tat after, retry_after, remaining. The Redis
script runs the same table in tests/integration/test_edge_sharedlimit.py."""

from __future__ import annotations

import pytest

from edge.gcra import Limit, gcra, limit_for
from edge.ratelimit import take
from tests.gcra_cases import CASES, IDS


@pytest.mark.parametrize(
    ("name", "tat", "now", "limit", "allowed", "after", "retry", "remaining"), CASES, ids=IDS
)
def test_gcra(
    name: str, tat: int | None, now: int, limit: Limit, allowed: bool, after: int, retry: int, remaining: int
) -> None:
    verdict = gcra(tat, now, limit)
    assert (verdict.allowed, verdict.tat, verdict.retry_after, verdict.remaining) == (
        allowed,
        after,
        retry,
        remaining,
    )


@pytest.mark.parametrize(
    ("rate", "period", "tolerance"),
    [
        (10.0, 100_000, 2_000_000),
        (100.0, 10_000, 2_000_000),
        (0.2, 5_000_000, 5_000_000),
        (3.0, 333_333, 2_000_000),
    ],
)
def test_limit_for(rate: float, period: int, tolerance: int) -> None:
    assert limit_for(rate) == Limit(period, tolerance)


@pytest.mark.parametrize("rate", [0.2, 0.7, 1.0, 3.0, 25.0, 100.0])
def test_gcra_allows_what_the_local_bucket_allows(rate: float) -> None:
    """Fed the same requests (a burst, then a steady stream at twice the rate), GCRA and the local token
    bucket allow as many (give or take the float rounding of the bucket at a token's edge): the shared
    limit is the per-process one, made shared."""
    limit, tat, bucket = limit_for(rate), None, None
    times = [0.0] * 300 + [i / (2 * rate) for i in range(1, 200)]
    by_gcra = by_bucket = 0
    for t in times:
        verdict = gcra(tat, round(t * 1_000_000), limit)
        tat = verdict.tat
        bucket, wait = take(bucket, rate, t)
        by_gcra += verdict.allowed
        by_bucket += wait == 0.0
    assert by_gcra == pytest.approx(max(1, 2 * rate) + 99, abs=1)
    assert abs(by_gcra - by_bucket) <= 1
