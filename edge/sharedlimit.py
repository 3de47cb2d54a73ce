"""Per-key rate limits in Redis (--redis / EDGE_REDIS), shared by every edge: edge.gcra's script.

One round trip per request, and fewer under load: the checks asked for while a loop iteration runs go out
as one pipeline of EVALSHAs (the script is loaded once, again only after Redis answers NOSCRIPT).

Rate limiting fails open, to the local bucket: when Redis cannot be reached or errors, the request is
decided by this edge's own bucket (edge.ratelimit), counted in ``edge_ratelimit_fallback_total``, and
Redis is tried again at most every ``RETRY_SECONDS``; the switch each way is logged once. Authentication
never fails open (edge.authcache) -- a limit is a courtesy to the system, a key is not.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from edge.config import EdgeConfig
from edge.gcra import SCRIPT, SCRIPT_SHA, US, limit_for
from edge.metrics import RATELIMIT_FALLBACK, RATELIMIT_REDIS_UP
from edge.ratelimit import RateLimiter

log = logging.getLogger(__name__)

# While Redis is down, how often a request tries it again (seconds).
RETRY_SECONDS = 1.0


class SharedLimiter:
    def __init__(
        self,
        url: str,
        local: RateLimiter,
        prefix: str = EdgeConfig.redis_prefix,
        timeout: float = EdgeConfig.redis_timeout,
    ) -> None:
        self.redis = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
        )
        self.local = local
        self.prefix = prefix
        self._pending: list[tuple[str, int, int, asyncio.Future[list[int]]]] = []
        self._retry_at = 0.0  # monotonic; Redis is skipped before it
        self._up: bool | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def check(self, key_id: str, rate: float, now: float) -> float:
        """0.0 when the key's request may pass now, else the seconds to wait (Retry-After)."""
        if now >= self._retry_at:
            limit = limit_for(rate)
            future: asyncio.Future[list[int]] = asyncio.get_running_loop().create_future()
            self._pending.append((self.prefix + key_id, limit.period, limit.tolerance, future))
            if len(self._pending) == 1:
                asyncio.get_running_loop().call_soon(self._flush)
            try:
                allowed, retry_after, _remaining = await future
            except Exception as exc:  # whatever Redis did, the limit fails open
                self._down(now, exc)
            else:
                self._state(True)
                return 0.0 if allowed else retry_after / US
        RATELIMIT_FALLBACK.inc()
        return self.local.check(key_id, rate, now)

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.ensure_future(self._send(batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[tuple[str, int, int, asyncio.Future[list[int]]]]) -> None:
        results: list[Any]
        try:
            results = await self._evalsha(batch)
            if any(isinstance(r, NoScriptError) for r in results):
                await self.redis.script_load(SCRIPT)
                results = await self._evalsha(batch)
        except Exception as exc:  # every waiter must hear of it
            results = [exc] * len(batch)
        for (_key, _period, _tolerance, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result([int(x) for x in result])

    async def _evalsha(self, batch: list[tuple[str, int, int, asyncio.Future[list[int]]]]) -> list[Any]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for key, period, tolerance, _future in batch:
                pipe.evalsha(SCRIPT_SHA, 1, key, period, tolerance)
            return await pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]

    def _down(self, now: float, exc: BaseException) -> None:
        self._retry_at = now + RETRY_SECONDS
        self._state(False, exc)

    def _state(self, up: bool, exc: BaseException | None = None) -> None:
        if up is self._up:
            return
        self._up = up
        RATELIMIT_REDIS_UP.set(1 if up else 0)
        if up:
            log.info("rate limits shared in Redis")
        else:
            log.warning(
                "Redis unreachable: rate limits fall back to this edge's own buckets",
                extra={"error": f"{type(exc).__name__}: {exc}"[:200]},
            )

    async def aclose(self) -> None:
        await self.redis.aclose()
