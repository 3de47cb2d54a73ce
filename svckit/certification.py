"""Certification runs' shared vocabulary (no I/O): the faults the edge injects and their published
schedule, the header marking a partner's probe GETs, and the kinds of probe delivery webhookd sends.
authsvc's checks (authsvc._certify_rules) read them; docs/sandbox.md "Go live" publishes them.
"""

from __future__ import annotations

import datetime as dt
import enum

# The header a partner sets on a GET it sends only to probe the sandbox (a health check): such a request
# is never given a fault and is not a "next request" after a 429.
PROBE_HEADER = "X-Certification-Probe"
# Every FAULT_EVERY-th POST of the run's key is answered a fault instead of reaching the product,
# the faults taken in FAULT_CYCLE's order.
FAULT_EVERY = 7
# Seconds a fault's 429 asks the client to wait (Retry-After).
FAULT_RETRY_AFTER = 2
# An injected 401 is a spell, as a revoked key would be: for this long every POST of the key is answered
# 401 (so that a client retrying a 401 in a loop is seen doing it).
UNAUTHORIZED_SPAN = dt.timedelta(seconds=10)


class Fault(enum.StrEnum):
    RATE_LIMITED = "rate_limited"  # 429 with Retry-After
    UNAVAILABLE = "service_unavailable"  # 503
    TIMEOUT = "gateway_timeout"  # 504, as a timed-out upstream answers
    UNAUTHORIZED = "unauthorized"  # 401 invalid_api_key, for UNAUTHORIZED_SPAN


FAULT_CYCLE: tuple[Fault, ...] = (Fault.UNAVAILABLE, Fault.RATE_LIMITED, Fault.TIMEOUT, Fault.UNAUTHORIZED)
FAULT_STATUS = {Fault.RATE_LIMITED: 429, Fault.UNAVAILABLE: 503, Fault.TIMEOUT: 504, Fault.UNAUTHORIZED: 401}


def fault_for(nth_post: int, every: int = FAULT_EVERY) -> Fault | None:
    """The fault the run's ``nth_post``-th POST (1-based, counted over the run) is answered, if any:
    every ``every``-th, in FAULT_CYCLE's order (7 -> 503, 14 -> 429, 21 -> 504, 28 -> 401, 35 -> 503...)."""
    if every <= 0 or nth_post <= 0 or nth_post % every:
        return None
    return FAULT_CYCLE[(nth_post // every - 1) % len(FAULT_CYCLE)]


def claim_fault(
    nth_post: int, every: int, now: dt.datetime, spell_until: dt.datetime | None
) -> tuple[Fault | None, dt.datetime | None]:
    """(the fault of this POST, the 401 spell's end after it): inside a spell every POST is a 401; else
    the schedule's, and a scheduled 401 starts a spell of UNAUTHORIZED_SPAN."""
    if spell_until is not None and now < spell_until:
        return Fault.UNAUTHORIZED, spell_until
    fault = fault_for(nth_post, every)
    if fault is Fault.UNAUTHORIZED:
        return fault, now + UNAUTHORIZED_SPAN
    return fault, spell_until


class ProbeKind(enum.StrEnum):
    VALID = "valid"
    WRONG_SIGNATURE = "wrong_signature"
    STALE_TIMESTAMP = "stale_timestamp"
    DUPLICATE = "duplicate"  # the second delivery of an event id already delivered


# How old a stale probe's timestamp is: twice the receivers' documented five-minute tolerance.
STALE_AGE = dt.timedelta(minutes=10)
