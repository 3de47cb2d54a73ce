"""Per-key rate limits shared by every edge: GCRA (the generic cell rate algorithm, as redis-cell and
Stripe's limiter use) in one atomic Redis script.

GCRA keeps one number per key, the theoretical arrival time (``tat``) of the next request if requests came
exactly at the rate. A request is allowed when, after adding its ``period`` (1/rate), the ``tat`` is no
further ahead of now than ``tolerance`` (the burst: ``BURST_SECONDS`` worth of requests, at least one);
an allowed request stores the new ``tat``, a refused one changes nothing and waits until it would fit.
That is the edge's local token bucket (edge.ratelimit) expressed as one timestamp: the same rate and
burst, and one read-modify-write that Redis runs atomically, so N edges share a key's limit exactly.

Times are integer microseconds so Python and Lua (both IEEE doubles, exact below 2**53) compute the
same numbers. ``gcra`` is the whole decision, pure; ``SCRIPT`` is the same arithmetic in Lua, applied to
each of its keys in turn (an edge sends the checks of one event-loop turn as one call). The script takes
the time from Redis (one clock for every edge) unless the caller passes ``now`` (tests). A key's TTL is
how far its ``tat`` is ahead of now: after that it is equivalent to an absent key, so Redis holds nothing
stale.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from edge.ratelimit import BURST_SECONDS

US = 1_000_000


@dataclass(frozen=True, slots=True)
class Limit:
    period: int  # microseconds per request at the rate
    tolerance: int  # how far ahead of now the tat may run: the burst, at least one period


def limit_for(rate: float) -> Limit:
    """The GCRA parameters of ``rate`` requests a second (> 0)."""
    period = max(1, round(US / rate))
    return Limit(period, max(period, round(BURST_SECONDS * US)))


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    tat: int | None  # stored after the request (unchanged when refused)
    retry_after: int  # microseconds until the request would be allowed; 0 when allowed
    remaining: int  # further requests allowed right now


def gcra(tat: int | None, now: int, limit: Limit) -> Verdict:
    """One request at ``now`` (µs) against the stored ``tat`` (None: no key, i.e. a full burst)."""
    base = now if tat is None or tat < now else tat
    new_tat = base + limit.period
    ahead = new_tat - now
    if ahead > limit.tolerance:
        return Verdict(False, tat, ahead - limit.tolerance, 0)
    return Verdict(True, new_tat, 0, (limit.tolerance - ahead) // limit.period)


# KEYS: the keys' tats, one per request (a key may repeat: its requests count in order); ARGV: now in µs
# or "" (Redis TIME), then period and tolerance per key. Returns allowed, retry_after, remaining per key.
SCRIPT = """
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local out = {}
for i, key in ipairs(KEYS) do
  local period = tonumber(ARGV[2 * i])
  local tolerance = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key))
  local base = now
  if tat and tat >= now then base = tat end
  local new_tat = base + period
  local ahead = new_tat - now
  if ahead > tolerance then
    out[#out + 1] = 0
    out[#out + 1] = ahead - tolerance
    out[#out + 1] = 0
  else
    redis.call('SET', key, string.format('%d', new_tat), 'PX', math.ceil(ahead / 1000))
    out[#out + 1] = 1
    out[#out + 1] = 0
    out[#out + 1] = math.floor((tolerance - ahead) / period)
  end
end
return out
"""
SCRIPT_SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
