"""How long a background loop with nothing to do sleeps before it looks again (docs/architecture.md
"Idle CPU"): the writers in its own process wake it at once (an ``asyncio.Event``), so the look only
catches what no wake reached (another process's writes, a crashed process's leftovers) and backs off while
it keeps finding nothing."""

from __future__ import annotations


def idle_wait(empty: int, first: float, most: float) -> float:
    """Seconds to sleep after ``empty`` looks in a row found nothing: ``first`` after the first (and
    before any), doubling with each further empty look, never past ``most`` (a ``most`` at or below
    ``first`` keeps the plain ``first`` poll). Whatever finds work or wakes the loop resets ``empty`` to 0,
    so a busy loop still looks every ``first``: the backoff costs latency only to work no wake reached, and
    at most ``most``."""
    if most <= first or empty <= 1:
        return first
    # The exponent is bounded (2 ** 60 * first is past any ``most``): a long idle spell cannot overflow.
    return min(most, first * float(2 ** min(empty - 1, 60)))
