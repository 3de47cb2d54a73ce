"""The receiver's steering of the retry schedule (``webhookd._steering``), by table: 410, Retry-After in
seconds and as an HTTP date, clamped to [the schedule's next step, 24 h], never an extra attempt."""

from __future__ import annotations

import datetime as dt

import pytest

from svckit.vocabulary import AttemptOutcome
from webhookd._retry import MAX_ATTEMPTS, Action, Decision, next_attempt
from webhookd._steering import GONE_REASON, retry_after, steer

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)
ERR = AttemptOutcome.HTTP_ERROR
DATE_IN_2H = "Mon, 01 Jun 2026 14:00:00 GMT"
DATE_IN_30H = "Tue, 02 Jun 2026 18:00:00 GMT"
DATE_PAST = "Mon, 01 Jun 2026 11:00:00 GMT"


@pytest.mark.parametrize(
    ("attempt", "outcome", "status", "header", "action", "due"),
    [
        # 410: disabled at once, whatever the attempt.
        (1, ERR, 410, None, Action.GIVE_UP, None),
        (3, ERR, 410, "60", Action.GIVE_UP, None),
        # Retry-After in seconds: the pause asked, but never sooner than the schedule (1 min after #1).
        (1, ERR, 429, "600", Action.RETRY, 10 * MIN),
        (1, ERR, 503, "600", Action.RETRY, 10 * MIN),
        (1, ERR, 429, "5", Action.RETRY, MIN),
        (1, ERR, 429, "0", Action.RETRY, MIN),
        (5, ERR, 429, "60", Action.RETRY, 6 * HOUR),  # #5 fails: the schedule says 6 h
        # ... and never later than 24 h.
        (1, ERR, 429, "999999999", Action.RETRY, 24 * HOUR),
        # Retry-After as an HTTP date.
        (1, ERR, 503, DATE_IN_2H, Action.RETRY, 2 * HOUR),
        (1, ERR, 503, DATE_IN_30H, Action.RETRY, 24 * HOUR),
        (1, ERR, 503, DATE_PAST, Action.RETRY, MIN),
        # Not a valid value, or no header: the schedule.
        (1, ERR, 429, "soon", Action.RETRY, MIN),
        (1, ERR, 429, "-5", Action.RETRY, MIN),
        (2, ERR, 503, None, Action.RETRY, 5 * MIN),
        # Retry-After on another status is not a request to wait.
        (1, ERR, 500, "600", Action.RETRY, MIN),
        (1, ERR, 301, "600", Action.RETRY, MIN),
        # The last attempt failing gives up, Retry-After or not: no extra attempt.
        (MAX_ATTEMPTS, ERR, 429, "60", Action.GIVE_UP, None),
        # Success is success.
        (1, AttemptOutcome.SUCCEEDED, 200, "600", Action.DONE, None),
        # No response at all.
        (1, AttemptOutcome.TIMEOUT, 0, None, Action.RETRY, MIN),
    ],
)
def test_steering(
    attempt: int,
    outcome: AttemptOutcome,
    status: int,
    header: str | None,
    action: Action,
    due: dt.timedelta | None,
) -> None:
    headers = {"retry-after": header} if header is not None else {}
    decision = steer(next_attempt(attempt, outcome, NOW), status, headers, NOW)
    assert decision.action is action
    assert decision.next_attempt_at == (NOW + due if due is not None else None)
    if status == 410:
        assert decision.reason == GONE_REASON


def test_the_schedule_giving_up_keeps_its_own_reason() -> None:
    assert steer(Decision(Action.GIVE_UP), 500, {}, NOW).reason == ""


@pytest.mark.parametrize(
    ("value", "pause"),
    [
        ("120", dt.timedelta(seconds=120)),
        (" 7 ", dt.timedelta(seconds=7)),
        (DATE_IN_2H, 2 * HOUR),
        (DATE_PAST, dt.timedelta(0)),
        ("Mon, 01 Jun 2026 12:30:00", 30 * MIN),  # no zone: GMT
        ("", None),
        (None, None),
        ("1.5", None),
        ("tomorrow", None),
    ],
)
def test_retry_after_values(value: str | None, pause: dt.timedelta | None) -> None:
    assert retry_after(value, NOW) == pause
