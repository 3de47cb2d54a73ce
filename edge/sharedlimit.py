"""Per-key rate limits in Redis (--redis / EDGE_REDIS), shared by every edge: edge.gcra's script.

One round trip per request, and fewer under load: the checks asked for while a loop iteration runs go out
together as one EVALSHA of the script over all their keys (up to ``MAX_BATCH``; the script is loaded once,
again only after Redis answers NOSCRIPT). One command per batch rather than a pipeline of one per request
is what makes the shared limit cheap: Redis and the client pay command overhead once per batch.

Rate limiting fails open, to the local bucket: when Redis cannot be reached or errors, the request is
decided by this edge's own bucket (edge.ratelimit), counted in ``edge_ratelimit_fallback_total``, and
Redis is tried again at most every ``RETRY_SECONDS``; the switch each way is logged once. Authentication
never fails open (edge.authcache) -- a limit is a courtesy to the system, a key is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from edge.config import EdgeConfig
from edge.gcra import SCRIPT, SCRIPT_SHA, US, limit_for
from edge.metrics import RATELIMIT_FALLBACK, RATELIMIT_REDIS_UP
from edge.ratelimit import RateLimiter

log = logging.getLogger(__name__)

# While Redis is down, how often a request tries it again (seconds).
RETRY_SECONDS = 1.0
# How often Redis is pinged while no request asks it (seconds): edge_ratelimit_redis_up follows it.
PING_SECONDS = 5.0
# Keys per script call at most (bounds how long Redis runs one call).
MAX_BATCH = 256
# How long Redis must have failed without an answer in between before it is reported down (seconds).
DOWN_AFTER = 1.0
Pending = tuple[str, int, int, "asyncio.Future[list[int]]"]


def reported_up(failing_since: float | None, now: float, reported: bool | None) -> bool | None:
    """What ``edge_ratelimit_redis_up`` says after an answer or a failure at ``now`` (None: not yet known).

    Each request falls back to the local bucket on its first failure (``check``); reporting Redis down is
    slower on purpose: one timed-out call (0.25 s) from a process starved of CPU -- an edge restarting
    its workers on a loaded host -- is not an outage, and the RedisDown alert must not be seen true for
    it. Down is reported once Redis has failed for ``DOWN_AFTER`` with no answer in between; up at its
    first answer."""
    if failing_since is None:
        return True
    if now - failing_since >= DOWN_AFTER:
        return False
    return reported


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
        self._pending: list[Pending] = []
        self._retry_at = 0.0  # monotonic; Redis is skipped before it
        self._up: bool | None = None
        self._failing_since: float | None = None  # the first failure since Redis last answered
        self._sending: set[asyncio.Task[None]] = set()
        self._pinging: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Ping Redis now (again until it answers or ``DOWN_AFTER`` has passed), so
        ``edge_ratelimit_redis_up`` says whether it answers from the start, not from the first
        rate-limited request; then every ``PING_SECONDS``, so it follows Redis while no request comes."""
        for _ in range(5):  # about DOWN_AFTER of tries: the last one decides
            if await self.ping() or self._up is not None:
                break
            await asyncio.sleep(DOWN_AFTER / 4)
        self._pinging = asyncio.ensure_future(self._ping_forever())

    async def ping(self) -> bool:
        try:
            await self.redis.ping()
        except Exception as exc:  # whatever Redis did: it is down for the limits
            self._down(time.monotonic(), exc)
            return False
        self._answered()
        return True

    async def _ping_forever(self) -> None:
        while True:
            # Sooner while a failure waits to be confirmed or refuted: down is then reported in about
            # DOWN_AFTER, not PING_SECONDS, when no request asks Redis.
            deciding = self._failing_since is not None and self._up is not False
            await asyncio.sleep(DOWN_AFTER if deciding else PING_SECONDS)
            await self.ping()

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
                self._answered()
                return 0.0 if allowed else retry_after / US
        RATELIMIT_FALLBACK.inc()
        return self.local.check(key_id, rate, now)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), MAX_BATCH):
            task = asyncio.ensure_future(self._send(pending[i : i + MAX_BATCH]))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _send(self, batch: list[Pending]) -> None:
        keys = [key for key, _p, _t, _f in batch]
        args: list[int | str] = [""]
        for _key, period, tolerance, _future in batch:
            args += (period, tolerance)
        try:
            try:
                flat = await self.redis.evalsha(SCRIPT_SHA, len(keys), *keys, *args)
            except NoScriptError:
                await self.redis.script_load(SCRIPT)
                flat = await self.redis.evalsha(SCRIPT_SHA, len(keys), *keys, *args)
        except Exception as exc:  # every waiter must hear of it
            for *_, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for i, (*_, future) in enumerate(batch):
            if not future.done():
                future.set_result(flat[3 * i : 3 * i + 3])

    def _answered(self) -> None:
        self._retry_at = 0.0
        self._failing_since = None
        self._state(True)

    def _down(self, now: float, exc: BaseException) -> None:
        self._retry_at = now + RETRY_SECONDS
        if self._failing_since is None:
            self._failing_since = now
        self._state(reported_up(self._failing_since, now, self._up), exc)

    def _state(self, up: bool | None, exc: BaseException | None = None) -> None:
        if up is None or up is self._up:
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
        if self._pinging is not None:
            self._pinging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinging
        await self.redis.aclose()
