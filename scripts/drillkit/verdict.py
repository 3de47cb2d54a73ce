"""The drill's judgements, pure: what a re-sent event was, which answers fail the run, what a body must not
show. A drill run is only worth its exit status if these are right, so each has its table of cases
(tests/unit/test_drill_verdict.py)."""

from __future__ import annotations

import itertools
import re

AFTER_A_LEASE = "after a lease"
NOT_AFTER_A_LEASE = "not after a lease"
# A re-send this fraction of the lease after the previous send is one the lease ran out for (the lease is
# counted from the claim, a little before the send).
LEASE_SHARE = 0.8

# What no answer to a partner may contain: the service's internals.
LEAKS = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+"
    r"|\b(SELECT|INSERT INTO|UPDATE|DELETE FROM)\b"
    r"|/(?:home|root|opt|usr|work|tmp)/[\w./-]+\.py|\b(sqlalchemy|asyncpg|psycopg|aioredis|redis\.exceptions"
    r"|ConnectionRefusedError|OperationalError)\b"
)


def duplicate_kind(times: list[float], lease: float) -> str:
    """An event received at ``times`` (more than once): after a lease only if every re-send came at least
    LEASE_SHARE of the lease after the send before it; one sooner is a duplicate the contract does not
    explain (at-least-once re-sends wait for the lease)."""
    ordered = sorted(times)
    gaps = [b - a for a, b in itertools.pairwise(ordered)]
    return AFTER_A_LEASE if min(gaps) >= LEASE_SHARE * lease else NOT_AFTER_A_LEASE


def leak_in(text: str) -> str:
    """The first internal detail ``text`` shows, else ""."""
    m = LEAKS.search(text)
    return m.group(0) if m else ""


def is_500(status: str, first_error: str) -> bool:
    """A call that got a 500 on either try (the retry's answer or the first try's): always a defect, unlike a
    503 with Retry-After, which is the documented answer during an outage."""
    return status == "500" or first_error.startswith("500 ")


def failures(counts: dict[str, int]) -> dict[str, int]:
    """The counts that fail the run (every one of them must be 0): the named ones that are not."""
    failing = (
        "lost events",
        "lost revocations",
        "500s",
        "bodies showing internals",
        "bad signatures",
        "revoked keys still accepted",
        "alert mismatches",
    )
    return {k: counts.get(k, 0) for k in failing if counts.get(k, 0)}
