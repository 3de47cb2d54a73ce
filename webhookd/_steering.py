"""How a receiver's answer steers what follows an attempt, on top of the retry schedule (``_retry``); pure,
``now`` passed in.

Why: a receiver knows things the schedule does not. ``410 Gone`` says the endpoint is gone for good, so
retrying it for 32 hours only piles up work: it is disabled at once (with the same alert as the last
retry's failure; the event is kept and can be recovered after re-enabling). ``429``/``503`` with
``Retry-After`` (seconds or an HTTP date, RFC 9110 §10.2.3) ask for a pause: the next attempt waits that
long, but never less than the schedule's next step (a receiver cannot make us retry faster) and never more
than 24 hours (nor can it park a delivery for ever). Steering only moves the next attempt: it is still one
of the spec's six retries, none is added, and the last attempt's failure still gives up.
"""

from __future__ import annotations

import datetime as dt
import email.utils

from webhookd._retry import Action, Decision

GONE = 410
RETRY_AFTER_STATUSES = frozenset({429, 503})
MAX_RETRY_AFTER = dt.timedelta(hours=24)
GONE_REASON = "the endpoint answered 410 Gone"


def retry_after(value: str | None, now: dt.datetime) -> dt.timedelta | None:
    """The pause a ``Retry-After`` value asks for, or None when there is none or it is not valid."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return dt.timedelta(seconds=min(int(value), int(MAX_RETRY_AFTER.total_seconds())))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a date without a zone is read as such
        when = when.replace(tzinfo=dt.UTC)
    return max(dt.timedelta(0), when - now)


def steer(decision: Decision, status: int, headers: dict[str, str], now: dt.datetime) -> Decision:
    """``decision`` (the schedule's) as the receiver's ``status`` and response ``headers`` (lower-case
    names) change it."""
    if decision.action is Action.DONE:
        return decision
    if status == GONE:
        return Decision(Action.GIVE_UP, reason=GONE_REASON)
    if decision.action is not Action.RETRY or status not in RETRY_AFTER_STATUSES:
        return decision
    pause = retry_after(headers.get("retry-after"), now)
    if pause is None or decision.next_attempt_at is None:
        return decision
    wanted = min(now + pause, now + MAX_RETRY_AFTER)
    return Decision(Action.RETRY, max(decision.next_attempt_at, wanted))
