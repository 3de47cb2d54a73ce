"""The sandbox's six forced-failure triggers (decisions.md "Sandbox"): one pure decision, no I/O.

A sandbox request may carry ``X-Sandbox-Trigger: <name>``. The gate asks ``decide`` only after
authentication, scope, allow list, rate limit and the idempotency claim, so a partner exercises exactly
the path production takes, and the triggered answer is stored under the Idempotency-Key like any other
(except 503, which is never stored). Rules, in order (the first that matches answers):

  1. no header (or an empty one)                       -> nothing happens
  2. the header on the live host                        -> 400 invalid_request (triggers never exist live)
  3. a name that is not one of the six                  -> 400 invalid_request naming the six
  4. a name on a route (or account mode) it does not
     apply to                                           -> 400 invalid_request saying where it applies
  5. rate_limited / service_unavailable                 -> that error (429 with Retry-After: 1, or 503)
  6. search_quota_exhausted / credit_exhausted          -> publish the warning event, then the 402
  7. booking_failed / payment_failed                    -> run the route (202); its lifecycle publishes
                                                           the failure events instead of the success ones
Nothing a trigger does is counted (search allowance) or charged (credit): the route's upstream never
runs for 1-6, and 7 only happens on the sandbox simulator.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from edge.environments import Environment
from svckit.events import TRIGGER_HEADER as HEADER
from svckit.events import TRIGGER_NAMES


class RouteKind(enum.StrEnum):
    SEARCH = "search"
    CREATE = "create"  # booking or order creation
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Trigger:
    name: str
    applies_to: frozenset[RouteKind]
    modes: frozenset[str]  # account modes ("A", "B") it applies to; empty: any
    where: str  # says where it applies, for the 400
    error_type: str = ""  # answer with this error instead of running the route
    warn_event: str = ""  # published before the error answer
    failure_events: tuple[str, ...] = ()  # published after the accepted answer, instead of success


_ANY = frozenset(RouteKind)
_CREATE = frozenset({RouteKind.CREATE})

TRIGGERS: dict[str, Trigger] = {
    t.name: t
    for t in (
        Trigger("rate_limited", _ANY, frozenset(), "any route", error_type="rate_limited"),
        Trigger("service_unavailable", _ANY, frozenset(), "any route", error_type="service_unavailable"),
        Trigger(
            "search_quota_exhausted",
            frozenset({RouteKind.SEARCH}),
            frozenset(),
            "search routes (e.g. GET /v1/hotels/search)",
            error_type="search_quota_exhausted",
            warn_event="search_quota.threshold",
        ),
        Trigger(
            "credit_exhausted",
            _CREATE,
            frozenset({"A"}),
            "booking and order creation of mode A accounts",
            error_type="credit_exhausted",
            warn_event="ledger.low_balance",
        ),
        Trigger(
            "booking_failed",
            _CREATE,
            frozenset(),
            "booking and order creation (e.g. POST /v1/hotels/bookings)",
            failure_events=("booking.failed",),
        ),
        Trigger(
            "payment_failed",
            _CREATE,
            frozenset({"B"}),
            "booking and order creation of mode B accounts",
            failure_events=("payment.failed", "booking.failed"),
        ),
    )
}
# The names are vocabulary shared with the partner's CLI (svckit.events); the table above says what each does.
NAMES = TRIGGER_NAMES

# Messages of the errors a trigger forces; they say that it was forced, so nobody hunts a real outage.
FORCED_MESSAGES = {
    "rate_limited": "Too many requests (forced by X-Sandbox-Trigger: rate_limited); retry after 1 s.",
    "service_unavailable": "The service is unavailable (forced by X-Sandbox-Trigger: service_unavailable); "
    "retry with the same Idempotency-Key.",
    "search_quota_exhausted": "The daily search allowance is used up "
    "(forced by X-Sandbox-Trigger: search_quota_exhausted).",
    "credit_exhausted": "The account's available credit is used up "
    "(forced by X-Sandbox-Trigger: credit_exhausted).",
}


@dataclass(frozen=True, slots=True)
class Decision:
    trigger: Trigger | None = None
    refusal: str = ""  # an invalid_request message: the header itself is refused

    @property
    def error_type(self) -> str:
        return "invalid_request" if self.refusal else (self.trigger.error_type if self.trigger else "")


NO_TRIGGER = Decision()


def decide(header: str | None, environment: Environment, kind: RouteKind, account_mode: str) -> Decision:
    if header is None or not header.strip():
        return NO_TRIGGER
    name = header.strip()
    if environment is Environment.LIVE:
        return Decision(
            refusal=f"{HEADER} is a sandbox feature: triggers never exist on the live host; "
            "send the request to the sandbox host with a test key"
        )
    trigger = TRIGGERS.get(name)
    if trigger is None:
        return Decision(refusal=f"{HEADER}: unknown trigger {name[:40]!r}; use one of {', '.join(NAMES)}")
    if kind not in trigger.applies_to or (trigger.modes and account_mode not in trigger.modes):
        return Decision(refusal=f"{HEADER}: {name} applies only to {trigger.where}")
    return Decision(trigger=trigger)
