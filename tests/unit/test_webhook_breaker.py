"""The per-endpoint circuit breaker (``webhookd._breaker``), by table: each state, each outcome."""

from __future__ import annotations

import datetime as dt

import pytest

from svckit.vocabulary import AttemptOutcome as O
from webhookd._breaker import CLOSED, Breaker, Breakers, Settings, State, Verdict, admit, record

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)
SET = Settings(threshold=3, interval=30 * S)


@pytest.mark.parametrize(
    ("before", "at", "verdict", "after", "until"),
    [
        (CLOSED, NOW, Verdict.SEND, CLOSED, None),
        (Breaker(State.CLOSED, 2), NOW, Verdict.SEND, Breaker(State.CLOSED, 2), None),
        # Open: wait for the probe time, then one probe (and the next is due an interval on).
        (
            Breaker(State.OPEN, 3, NOW + 10 * S),
            NOW,
            Verdict.WAIT,
            Breaker(State.OPEN, 3, NOW + 10 * S),
            NOW + 10 * S,
        ),
        (Breaker(State.OPEN, 3, NOW), NOW, Verdict.PROBE, Breaker(State.PROBING, 3, NOW + 30 * S), None),
        # A probe is out: the others wait for its outcome.
        (
            Breaker(State.PROBING, 3, NOW + 30 * S),
            NOW,
            Verdict.WAIT,
            Breaker(State.PROBING, 3, NOW + 30 * S),
            NOW + 30 * S,
        ),
        # The probe never reported (its worker task died): another probe.
        (Breaker(State.PROBING, 3, NOW), NOW, Verdict.PROBE, Breaker(State.PROBING, 3, NOW + 30 * S), None),
    ],
)
def test_admit(
    before: Breaker, at: dt.datetime, verdict: Verdict, after: Breaker, until: dt.datetime | None
) -> None:
    gate = admit(before, at, SET)
    assert (gate.verdict, gate.breaker, gate.until) == (verdict, after, until)


@pytest.mark.parametrize(
    ("before", "outcome", "after"),
    [
        # Closed: unanswered sends count up to the threshold, then it opens.
        (CLOSED, O.TIMEOUT, Breaker(State.CLOSED, 1)),
        (Breaker(State.CLOSED, 1), O.NETWORK_ERROR, Breaker(State.CLOSED, 2)),
        (Breaker(State.CLOSED, 2), O.TIMEOUT, Breaker(State.OPEN, 3, NOW + 30 * S)),
        # Any HTTP response resets the count: only consecutive failures open it.
        (Breaker(State.CLOSED, 2), O.HTTP_ERROR, CLOSED),
        (Breaker(State.CLOSED, 2), O.SUCCEEDED, CLOSED),
        # The probe: answered closes, unanswered opens again for an interval.
        (Breaker(State.PROBING, 3, NOW + 30 * S), O.SUCCEEDED, CLOSED),
        (Breaker(State.PROBING, 3, NOW + 30 * S), O.HTTP_ERROR, CLOSED),
        (Breaker(State.PROBING, 3, NOW + 30 * S), O.TIMEOUT, Breaker(State.OPEN, 4, NOW + 30 * S)),
        # A send that started before it opened: failing keeps the probe time, answering closes.
        (Breaker(State.OPEN, 3, NOW + 5 * S), O.NETWORK_ERROR, Breaker(State.OPEN, 4, NOW + 5 * S)),
        (Breaker(State.OPEN, 3, NOW + 5 * S), O.SUCCEEDED, CLOSED),
    ],
)
def test_record(before: Breaker, outcome: O, after: Breaker) -> None:
    assert record(before, outcome, NOW, SET) == after


def test_breakers_keep_only_endpoints_with_a_state() -> None:
    b = Breakers(SET)
    assert not b.tracked("we_1")
    b.record("we_2", O.TIMEOUT, NOW)  # one failure: tracked, still closed, never skipped
    for _ in range(3):
        b.record("we_1", O.TIMEOUT, NOW)
    assert b.state("we_1").state is State.OPEN and b.tracked("we_1")
    assert b.waiting(NOW) == {"we_1"}  # claims leave its deliveries in the table
    assert b.admit("we_1", NOW).verdict is Verdict.WAIT
    assert b.waiting(NOW + 30 * S) == set()  # probe time: claimed again
    assert b.admit("we_1", NOW + 30 * S).verdict is Verdict.PROBE
    assert b.admit("we_1", NOW + 30 * S).verdict is Verdict.WAIT  # one probe at a time
    assert b.waiting(NOW + 30 * S) == {"we_1"}
    b.record("we_1", O.SUCCEEDED, NOW + 31 * S)
    assert not b.tracked("we_1") and b.admit("we_1", NOW + 31 * S).verdict is Verdict.SEND
    assert b.waiting(NOW + 31 * S) == set()
