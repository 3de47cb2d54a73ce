"""The global budget of sign-in password checks: pure, callers pass monotonic seconds.

Every argon2id check of a sign-in costs 64 MiB and tens of milliseconds of several cores, and the portal's
throttles are per source (address, /64, /24): an attacker with many addresses passes each of them. So
every authsvc process also holds all sign-ins together to ``rate`` checks a second with a burst of
``burst`` (GCRA, one timestamp), whatever their source: past it a sign-in is refused at once (429
``rate_limited`` with Retry-After) before any hash or database work. Only sign-in is held to it, the one
password check an anonymous party can start; sessions, invitation acceptance and password changes (which
need a token or a session) and the partner API (no passwords at all) are not.
"""

from __future__ import annotations

import dataclasses

# Sign-in checks a second for the whole process, and how many at once: far above a portal's real sign-ins
# (7,200 an hour), a fraction of one core's argon2id.
SIGN_IN_RATE = 2.0
SIGN_IN_BURST = 30


@dataclasses.dataclass(frozen=True, slots=True)
class Spend:
    allowed: bool
    tat: float | None  # what to store after this check (unchanged when refused)
    retry_after: float  # seconds until a check would be allowed; 0 when allowed


def spend(tat: float | None, now: float, rate: float = SIGN_IN_RATE, burst: int = SIGN_IN_BURST) -> Spend:
    """One sign-in check at ``now`` against the stored theoretical arrival time ``tat`` (None: a full
    budget). A rate of 0 or less is no budget."""
    if rate <= 0:
        return Spend(True, tat, 0.0)
    period = 1.0 / rate
    new_tat = max(now, tat if tat is not None else now) + period
    tolerance = max(1, burst) * period
    if new_tat - now > tolerance:
        return Spend(False, tat, new_tat - now - tolerance)
    return Spend(True, new_tat, 0.0)
