"""Pure decisions of the events, delivery and sandbox clock pages: the payload as a reader sees it,
attempts newest first, which delivery of a listing is the page's, and the sandbox clock's choices and
notice. No I/O; the routes (portal.routes.events, portal.routes.deliveries) call webhookd."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence

from svckit.clients import ClientError
from svckit.durations import clock_advance
from travel.webhooks.v1 import webhooks_pb2 as wpb

# The kind of the events SendTestEvent makes: delivered like any other, never in the event log
# (webhookd's ListEvents and GetEvent answer only svckit.events.EVENT_KINDS).
TEST_EVENT_KIND = "webhook.test"
# What the sandbox clock form offers, as svc clock advance spells them.
CLOCK_CHOICES: tuple[str, ...] = ("1m", "5m", "30m", "2h", "6h", "24h")
# The pages the clock form is on, where its 303 goes back to.
CLOCK_PAGES: tuple[str, ...] = ("webhooks", "deliveries")


def pretty_json(text: str) -> str:
    """A JSON document indented for reading (keys in their order); anything else as it is."""
    if not text:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)


def newest_first(attempts: Iterable[wpb.Attempt]) -> list[wpb.Attempt]:
    """A delivery's attempts, the latest first: by when they were made, then by number (a resend made in
    the same instant as the attempt it repeats comes first)."""
    return sorted(
        attempts,
        key=lambda a: (a.attempted_at.seconds, a.attempted_at.nanos, a.attempt_number),
        reverse=True,
    )


def delivery_in(deliveries: Sequence[wpb.Delivery], delivery_id: str) -> wpb.Delivery | None:
    """The delivery ``delivery_id`` of a listing, or None."""
    return next((d for d in deliveries if d.id == delivery_id), None)


def has_event_page(kind: str) -> bool:
    """Whether an event of ``kind`` is in the event log (test events are not)."""
    return bool(kind) and kind != TEST_EVENT_KIND


def clock_span(choice: str) -> dt.timedelta:
    """One of ``CLOCK_CHOICES`` as a span; anything else is refused beside the form's field."""
    if choice not in CLOCK_CHOICES:
        raise ClientError("invalid_request", f"choose one of {', '.join(CLOCK_CHOICES)}", field="by")
    return clock_advance(choice)


def clock_back(env: str, page: str) -> str:
    """Where the clock form's 303 goes: the page it was on, the webhooks page when that is unknown."""
    return f"/{env}/{page if page in CLOCK_PAGES else CLOCK_PAGES[0]}"


def clock_notice(choice: str, due: int) -> str:
    """What the page says after an advance: ``Sandbox clock advanced by 2h: 3 deliveries due now``."""
    noun = "delivery" if due == 1 else "deliveries"
    return f"Sandbox clock advanced by {choice}: {due} {noun} due now"
