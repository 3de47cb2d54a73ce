"""Sign-in attempts limited in this portal process before authsvc is asked: per source, per network
block, and all sources together.

One rule, GCRA (a token bucket kept as one timestamp, as the edge's key limits): a bucket allows BURST
attempts at once, then one every PERIOD seconds. An attempt takes one from each of three buckets:

- its **source**: the address, an IPv6 address by its /64 (the block one subscriber usually holds):
  10 at once, then 10 a minute;
- its **block**: the IPv4 /24 or IPv6 /48 around it, looser (a block may hold several tenants): 30 at
  once, then 30 a minute; an attacker spreading over a /24 or a /48 is held to it;
- **everyone**: every source together, 30 at once, then 2 a second; an attacker with addresses in many
  blocks is held to it. Past it only sign-in waits: sessions, the pages, and the partner API never
  pass through here.

Past any of them POST /signin answers 429 with Retry-After at once, without calling authsvc (no password
hash is computed). authsvc holds every portal's sign-ins to its own global budget of password checks
(authsvc._signin_budget) and its throttles (failures per e-mail and address, per address, per e-mail)
behind this; this one is in-process only, and its memory is bounded (MAX_TRACKED buckets per tier; a
bucket full again is forgotten, which is the same as never seen; with every bucket busy, the least
recently used makes room: svckit.untiltable).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

from svckit.gcra import take
from svckit.netblocks import buckets
from svckit.untiltable import until_table

BURST = 10
PERIOD = 6.0  # seconds per attempt at the sustained rate (10 a minute)
BLOCK_BURST = 30
BLOCK_PERIOD = 2.0  # 30 a minute from one /24 or /48
GLOBAL_BURST = 30
GLOBAL_PERIOD = 0.5  # 2 a second from everyone: authsvc's global sign-in budget
MAX_TRACKED = 100_000


class Tier(enum.StrEnum):
    SOURCE = "source"
    BLOCK = "block"
    GLOBAL = "global"


def attempt(
    tats: dict[Tier, float | None], now: float, limits: dict[Tier, tuple[float, int]]
) -> tuple[dict[Tier, float], float]:
    """One attempt against each tier's stored ``tat`` (period and burst in ``limits``): the tats to
    store and 0 when every tier has room, else nothing to store and the longest wait (all or nothing:
    a refused attempt takes from no tier)."""
    takes = {tier: take(tats.get(tier), now, *limits[tier]) for tier in limits}
    wait = max((t.retry_after for t in takes.values() if not t.allowed), default=0.0)
    if wait > 0:
        return {}, wait
    return {tier: t.tat for tier, t in takes.items() if t.tat is not None}, 0.0


class SourceLimiter:
    def __init__(
        self,
        *,
        period: float | None = None,
        burst: int | None = None,
        block_period: float | None = None,
        block_burst: int | None = None,
        global_period: float | None = None,
        global_burst: int | None = None,
        max_tracked: int = MAX_TRACKED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Each limit None: the module's (read now, so a test may change them)."""
        self.limits = {
            Tier.SOURCE: (PERIOD if period is None else period, BURST if burst is None else burst),
            Tier.BLOCK: (
                BLOCK_PERIOD if block_period is None else block_period,
                BLOCK_BURST if block_burst is None else block_burst,
            ),
            Tier.GLOBAL: (
                GLOBAL_PERIOD if global_period is None else global_period,
                GLOBAL_BURST if global_burst is None else global_burst,
            ),
        }
        self.max_tracked, self.clock = max_tracked, clock
        self._tats = {tier: until_table(max_tracked, clock) for tier in Tier}

    def attempt(self, address: str) -> float:
        """Count an attempt from ``address``: 0 when allowed, else the seconds to wait."""
        now = self.clock()
        names = self._names(address)
        stored, wait = attempt(self._stored(names), now, self.limits)
        for tier, tat in stored.items():
            self._tats[tier][names[tier]] = tat
        return wait

    def wait(self, address: str) -> float:
        """The seconds until an attempt from ``address`` would be allowed (0: now), counting nothing: a
        refusal known before the request is read any further (its form, its CSRF token)."""
        names = self._names(address)
        return attempt(self._stored(names), self.clock(), self.limits)[1]

    @staticmethod
    def _names(address: str) -> dict[Tier, str]:
        source, block = buckets(address)
        return {Tier.SOURCE: source, Tier.BLOCK: block, Tier.GLOBAL: ""}

    def _stored(self, names: dict[Tier, str]) -> dict[Tier, float | None]:
        return {tier: self._tats[tier].get(name) for tier, name in names.items()}


_ATTRIBUTE = "signin_limiter"


def limiter_of(app_ctx: object) -> SourceLimiter:
    """The sign-in limiter of one portal app, kept on its ``app.ctx`` (made on first use)."""
    limiter = getattr(app_ctx, _ATTRIBUTE, None)
    if not isinstance(limiter, SourceLimiter):
        limiter = SourceLimiter()
        setattr(app_ctx, _ATTRIBUTE, limiter)
    return limiter
