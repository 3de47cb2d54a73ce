"""Which event kinds an endpoint subscribes to, as checked at registration and update; pure.

Why: a partner should learn at registration, not by silence later, that a subscription cannot work. Rules,
in order:
  1. ``["*"]`` subscribes to every kind the account receives, now and later (Stripe's
     ``enabled_events: ["*"]``): stored as given, so a kind added to the catalog later is included;
     ``*`` with other kinds is refused (it already means all of them).
  2. otherwise every kind must be in the catalog (unknown, or none at all: refused, naming the known
     kinds), kept once each in the order given (``webhookd._events.check_event_kinds``);
  3. a kind that exists for the other commercial mode only (``payment.*`` for mode B accounts,
     ``ledger.low_balance`` for mode A: ``svckit.events.mode_refusal``) is refused, naming the mode: no
     such event is ever published for the account. An unknown mode (no authsvc) refuses nothing.
``receives`` is the one match of an event's kind against a stored subscription (the fan-out's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from svckit.events import MODE_ONLY, mode_refusal
from webhookd._errors import InvalidRequest
from webhookd._events import check_event_kinds

EVERY = "*"


def needs_mode(kinds: Iterable[str]) -> bool:
    """Does checking ``kinds`` need the account's commercial mode (one of them is mode-only)?"""
    return any(k in MODE_ONLY for k in kinds)


def subscription(kinds: Sequence[str], mode: str = "", field: str = "events") -> list[str]:
    """The subscription to store for the requested ``kinds`` of an account of ``mode`` ("A", "B", or ""
    unknown); InvalidRequest when it cannot be one."""
    if EVERY in kinds:
        if any(k != EVERY for k in kinds):
            raise InvalidRequest(f'{field}: "*" means every kind; send it alone, or list the kinds')
        return [EVERY]
    checked = check_event_kinds(kinds, field)
    for kind in checked:
        refusal = mode_refusal(kind, mode)
        if refusal:
            raise InvalidRequest(f"{field}: {refusal.removeprefix('type: ')}; no such event is ever sent")
    return checked


def receives(subscribed: Sequence[str], kind: str) -> bool:
    """Is an event of ``kind`` delivered to an endpoint subscribed to ``subscribed``?"""
    return EVERY in subscribed or kind in subscribed
