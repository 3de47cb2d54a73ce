"""When an endpoint's health is announced to its account (the operational events of the catalog); pure.

Why: the alert e-mail comes when an endpoint is already disabled, 32 hours into its trouble. A partner's
other systems can watch earlier: ``endpoint.failing`` when a delivery has spent half its six retries
(its 4th attempt failed: ``thresholdPercent`` 50) and again when only the last is left (its 6th failed:
90, the last warning before disabling, as 90 % of six retries rounds down to five); ``endpoint.disabled``
and ``delivery.exhausted`` when it gives up; ``endpoint.recovered`` at its next 2xx. An endpoint announces
each level once (the stored ``failing_level`` only rises, 100 once disabled) until it recovers, so a
backlog failing together sends one event per level, not one per delivery. None is delivered to the
endpoint it is about: a failing endpoint would not get it, and it would feed its own failures.
"""

from __future__ import annotations

from webhookd._retry import RETRY_DELAYS

RETRIES = len(RETRY_DELAYS)
LEVELS = (50, 90)
DISABLED_LEVEL = 100


def attempts_for(percent: int) -> int:
    """The failed attempts at which a delivery reaches ``percent`` of the road to disabling."""
    return 1 + percent * RETRIES // 100


def failing_level(attempts_failed: int) -> int:
    """The highest level a delivery with ``attempts_failed`` failed attempts in its schedule has reached
    (0: none). Giving up is not a level: it is ``endpoint.disabled``."""
    if attempts_failed > RETRIES:
        return 0
    reached = [p for p in LEVELS if attempts_failed >= attempts_for(p)]
    return max(reached, default=0)


def recovered(stored_level: int, succeeded: bool) -> bool:
    """A 2xx to an endpoint that had announced a level (or been disabled) is announced as recovered."""
    return succeeded and stored_level > 0
