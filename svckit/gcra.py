"""GCRA (the generic cell rate algorithm): a token bucket kept as one timestamp, the theoretical arrival
time (``tat``) of the next attempt had attempts come exactly at the rate. An attempt is allowed when,
after adding its ``period`` (1/rate), the ``tat`` is no further ahead of now than ``burst`` periods; an
allowed attempt stores the new ``tat``, a refused one changes nothing. Seconds as floats; the edge's
per-key limits use the same rule in integer microseconds to share it with Redis (edge.gcra).
Used by the portal's sign-in limits and by refusal pacing (svckit.pacing)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Take:
    allowed: bool
    tat: float | None  # what to store after this attempt (unchanged when refused)
    retry_after: float  # seconds until an attempt would be allowed; 0 when allowed


def take(tat: float | None, now: float, period: float, burst: int) -> Take:
    """One attempt at ``now`` against the stored theoretical arrival time ``tat`` (None: a full
    bucket), ``period`` seconds per attempt, ``burst`` attempts at once (at least one)."""
    base = now if tat is None or tat < now else tat
    new_tat = base + period
    ahead = new_tat - now
    tolerance = max(1, burst) * period
    if ahead > tolerance:
        return Take(False, tat, ahead - tolerance)
    return Take(True, new_tat, 0.0)
