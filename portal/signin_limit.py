"""Sign-in attempts per source address, limited in this portal process before authsvc is asked.

One rule, GCRA (a token bucket kept as one timestamp, as the edge's key limits): a source address may
make BURST attempts at once, then one every PERIOD seconds; past that POST /signin answers 429 with
Retry-After at once, without calling authsvc (no password hash is computed). IPv6 addresses count by
their /64, the block one subscriber usually holds. authsvc's own throttles (failures per e-mail and
address, per address, per e-mail) still apply behind this, across every portal process; this one is
in-process only, and its memory is bounded (MAX_TRACKED addresses; an address whose bucket is full
again is forgotten, which is the same as never seen).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import time
from collections.abc import Callable

BURST = 10
PERIOD = 6.0  # seconds per attempt at the sustained rate (10 a minute)
MAX_TRACKED = 100_000


@dataclasses.dataclass(frozen=True, slots=True)
class Take:
    allowed: bool
    tat: float | None  # what to store after this attempt (unchanged when refused)
    retry_after: float  # seconds until an attempt would be allowed; 0 when allowed


def take(tat: float | None, now: float, period: float = PERIOD, burst: int = BURST) -> Take:
    """One attempt at ``now`` against the stored theoretical arrival time ``tat`` (None: a full
    bucket)."""
    base = now if tat is None or tat < now else tat
    new_tat = base + period
    ahead = new_tat - now
    tolerance = max(1, burst) * period
    if ahead > tolerance:
        return Take(False, tat, ahead - tolerance)
    return Take(True, new_tat, 0.0)


def source_key(address: str) -> str:
    """The bucket of an address: itself, or its /64 for IPv6; anything unparsable as given."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class SourceLimiter:
    def __init__(
        self,
        *,
        period: float = PERIOD,
        burst: int = BURST,
        max_tracked: int = MAX_TRACKED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.period, self.burst, self.max_tracked, self.clock = period, burst, max_tracked, clock
        self._tats: dict[str, float] = {}

    def attempt(self, address: str) -> float:
        """Count an attempt from ``address``: 0 when allowed, else the seconds to wait."""
        now = self.clock()
        key = source_key(address)
        got = take(self._tats.get(key), now, self.period, self.burst)
        if got.allowed and got.tat is not None:
            if key not in self._tats and len(self._tats) >= self.max_tracked:
                self._forget(now)
            self._tats[key] = got.tat
        return got.retry_after

    def _forget(self, now: float) -> None:
        self._tats = {k: t for k, t in self._tats.items() if t > now}
        if len(self._tats) >= self.max_tracked:  # all busy: start afresh rather than grow
            self._tats.clear()


_ATTRIBUTE = "signin_limiter"


def limiter_of(app_ctx: object) -> SourceLimiter:
    """The sign-in limiter of one portal app, kept on its ``app.ctx`` (made on first use)."""
    limiter = getattr(app_ctx, _ATTRIBUTE, None)
    if not isinstance(limiter, SourceLimiter):
        limiter = SourceLimiter()
        setattr(app_ctx, _ATTRIBUTE, limiter)
    return limiter
