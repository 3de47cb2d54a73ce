"""edge.gcra's script on the real Redis at 127.0.0.1:6379 (the unit table, run by Redis), and
edge.sharedlimit: one limit across limiters, pipelined checks, and the fall back to the local bucket
while Redis is unreachable. Keys live under a prefix of each test's own."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from edge.gcra import SCRIPT, SCRIPT_SHA, Limit, limit_for
from edge.ratelimit import RateLimiter
from edge.sharedlimit import DOWN_AFTER, SharedLimiter
from tests.gcra_cases import CASES, IDS
from tests.support import REDIS_URL, free_port


@pytest.mark.parametrize(
    ("name", "tat", "now", "limit", "allowed", "after", "retry", "remaining"), CASES, ids=IDS
)
async def test_script_runs_the_gcra_table(
    redis_prefix: str,
    name: str,
    tat: int | None,
    now: int,
    limit: Limit,
    allowed: bool,
    after: int,
    retry: int,
    remaining: int,
) -> None:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        key = redis_prefix + "key_x"
        if tat is not None:
            await client.set(key, tat)
        got = await client.eval(SCRIPT, 1, key, now, limit.period, limit.tolerance)
        assert [int(x) for x in got] == [int(allowed), retry, remaining]
        stored = await client.get(key)
        assert (int(stored) if stored is not None else None) == after
        if allowed:  # the key lives as long as its tat is ahead of now, and no longer
            ttl = await client.pttl(key)
            assert 0 < ttl <= -(-(after - now) // 1000)
    finally:
        await client.aclose()


async def test_script_takes_many_keys_and_the_time_from_redis(redis_prefix: str) -> None:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        limit = limit_for(1.0)  # bursts of two
        # One call over several keys, a key repeated: its requests count in order.
        keys = [redis_prefix + "k", redis_prefix + "k", redis_prefix + "other", redis_prefix + "k"]
        args = [limit.period, limit.tolerance] * len(keys)
        answer = await client.eval(SCRIPT, len(keys), *keys, "", *args)
        triples = [answer[i : i + 3] for i in range(0, len(answer), 3)]
        assert [t[0] for t in triples] == [1, 1, 1, 0]
        assert 0 < triples[3][1] <= 1_000_000
        assert 0 < await client.pttl(redis_prefix + "k") <= 2_000
    finally:
        await client.aclose()


async def test_limiters_share_one_limit_in_batched_calls(redis_prefix: str) -> None:
    """Two limiters (two edges) on one key: 100/s allows a burst of 200 across both, however the
    requests are spread; the checks of one loop iteration go out as one script call."""
    # A generous timeout: a loaded test machine must not look like a Redis outage here.
    a = SharedLimiter(REDIS_URL, RateLimiter(), prefix=redis_prefix, timeout=5)
    b = SharedLimiter(REDIS_URL, RateLimiter(), prefix=redis_prefix, timeout=5)
    try:
        waits = await asyncio.gather(
            *(lim.check("key_shared", 100.0, 0.0) for _ in range(150) for lim in (a, b))
        )
        allowed = sum(w == 0.0 for w in waits)
        # 300 requests within the same few milliseconds: the burst (200), plus what refilled meanwhile.
        assert 200 <= allowed <= 205
        assert all(0 < w <= 0.011 for w in waits if w)
        assert await a.redis.script_exists(SCRIPT_SHA) == [True]
    finally:
        await a.aclose()
        await b.aclose()


def _fallbacks() -> float:
    return REGISTRY.get_sample_value("edge_ratelimit_fallback_total") or 0.0


async def test_unreachable_redis_falls_back_to_the_local_bucket(
    redis_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nobody listens on it
    limiter = SharedLimiter(f"redis://127.0.0.1:{port}/0", RateLimiter(), prefix=redis_prefix)
    before = _fallbacks()
    try:
        with caplog.at_level(logging.INFO, logger="edge.sharedlimit"):
            waits = [await limiter.check("key_down", 1.0, 10.0) for _ in range(3)]
            assert waits == [0.0, 0.0, pytest.approx(1.0)]  # the local bucket: bursts of two, then wait
            assert _fallbacks() - before == 3
            # One failure is not yet an outage (a starved process's timeout looks the same) ...
            assert not any(r.name == "edge.sharedlimit" for r in caplog.records)
            # ... Redis still failing DOWN_AFTER later is.
            assert await limiter.check("key_down", 1.0, 10.0 + DOWN_AFTER) == 0.0
            assert _fallbacks() - before == 4
            assert REGISTRY.get_sample_value("edge_ratelimit_redis_up") == 0
            # Redis comes back (the same limiter pointed at it): used again once the retry interval passed.
            await limiter.redis.aclose()
            limiter.redis = aioredis.Redis.from_url(REDIS_URL, socket_timeout=5)
            assert await limiter.check("key_up", 1.0, 11.5) == 0.0  # still within the interval: local
            assert _fallbacks() - before == 5
            assert await limiter.check("key_up", 1.0, 12.0) == 0.0
            assert await limiter.check("key_up", 1.0, 12.0) == 0.0
            assert await limiter.check("key_up", 1.0, 12.0) > 0
            assert _fallbacks() - before == 5  # decided in Redis
            assert REGISTRY.get_sample_value("edge_ratelimit_redis_up") == 1
        lines = [r.getMessage() for r in caplog.records if r.name == "edge.sharedlimit"]
        assert lines == [
            "Redis unreachable: rate limits fall back to this edge's own buckets",
            "rate limits shared in Redis",
        ]
    finally:
        await limiter.aclose()
