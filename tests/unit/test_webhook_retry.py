from __future__ import annotations

import datetime as dt

import pytest

from webhookd import MAX_ATTEMPTS, Action, Decision, Outcome, next_attempt

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
M = dt.timedelta(minutes=1)
H = dt.timedelta(hours=1)


@pytest.mark.parametrize(
    ("attempt", "outcome", "expected"),
    [
        (1, Outcome.SUCCEEDED, Decision(Action.DONE)),
        (7, Outcome.SUCCEEDED, Decision(Action.DONE)),
        (9, Outcome.SUCCEEDED, Decision(Action.DONE)),
        (1, Outcome.HTTP_ERROR, Decision(Action.RETRY, NOW + 1 * M)),
        (2, Outcome.TIMEOUT, Decision(Action.RETRY, NOW + 5 * M)),
        (3, Outcome.NETWORK_ERROR, Decision(Action.RETRY, NOW + 30 * M)),
        (4, Outcome.HTTP_ERROR, Decision(Action.RETRY, NOW + 2 * H)),
        (5, Outcome.HTTP_ERROR, Decision(Action.RETRY, NOW + 6 * H)),
        (6, Outcome.TIMEOUT, Decision(Action.RETRY, NOW + 24 * H)),
        (7, Outcome.HTTP_ERROR, Decision(Action.GIVE_UP)),
        (7, Outcome.NETWORK_ERROR, Decision(Action.GIVE_UP)),
        (8, Outcome.TIMEOUT, Decision(Action.GIVE_UP)),
    ],
)
def test_next_attempt_table(attempt: int, outcome: Outcome, expected: Decision) -> None:
    assert next_attempt(attempt, outcome, NOW) == expected


def test_whole_schedule_adds_up_and_has_seven_attempts() -> None:
    now, attempts = NOW, 1
    while (d := next_attempt(attempts, Outcome.HTTP_ERROR, now)).action is Action.RETRY:
        assert d.next_attempt_at is not None
        now, attempts = d.next_attempt_at, attempts + 1
    assert attempts == MAX_ATTEMPTS == 7
    assert now - NOW == 1 * M + 5 * M + 30 * M + 2 * H + 6 * H + 24 * H


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError):
        next_attempt(0, Outcome.HTTP_ERROR, NOW)
