"""The look-to-book rule, by table: when the 7-day ratio has passed the account's target, and how often
the alert goes out."""

from __future__ import annotations

import datetime as dt

import pytest

from svckit.looktobook import REALERT_AFTER, Day, Window, exceeded, ratio_text, should_alert, window

D = dt.date(2026, 6, 1)

CASES = [
    # (name, window, target, exceeded)
    ("no target: never judged", Window(10_000_000, 0), 0, False),
    ("no traffic", Window(0, 0), 1500, False),
    ("exactly at the target", Window(15_000, 10), 1500, False),
    ("one search past it", Window(15_001, 10), 1500, True),
    ("well under", Window(9_000, 10), 1500, False),
    ("no booking, fewer searches than the target", Window(1_500, 0), 1500, False),
    ("no booking, more searches than the target", Window(1_501, 0), 1500, True),
    ("one booking counts like none", Window(1_501, 1), 1500, True),
    ("bookings without searches", Window(0, 5), 1, False),
    ("target 1: one search per booking", Window(6, 5), 1, True),
]


@pytest.mark.parametrize(("name", "w", "target", "out"), CASES, ids=[c[0] for c in CASES])
def test_exceeded(name: str, w: Window, target: int, out: bool) -> None:
    assert exceeded(w, target) is out


NOW = dt.datetime(2026, 6, 8, 9, 0, tzinfo=dt.UTC)
PAST = Window(30_000, 2)

ALERTS = [
    ("past, never alerted", PAST, None, True),
    ("past, alerted a day ago", PAST, NOW - dt.timedelta(days=1), False),
    ("past, alerted just under a week ago", PAST, NOW - REALERT_AFTER + dt.timedelta(seconds=1), False),
    ("past, alerted a week ago", PAST, NOW - REALERT_AFTER, True),
    ("under, never alerted", Window(100, 2), None, False),
]


@pytest.mark.parametrize(("name", "w", "last", "out"), ALERTS, ids=[c[0] for c in ALERTS])
def test_should_alert(name: str, w: Window, last: dt.datetime | None, out: bool) -> None:
    assert should_alert(w, 1500, last, NOW) is out


def test_window_sums_days_and_ratios() -> None:
    days = [Day(D, 3000, 2), Day(D + dt.timedelta(days=1), 500, 0), Day(D + dt.timedelta(days=2), 0, 0)]
    w = window(days)
    assert w == Window(3500, 2)
    assert w.ratio == 1750.0
    assert [d.ratio for d in days] == [1500.0, None, None]
    assert ratio_text(w.ratio) == "1,750:1"
    assert ratio_text(None) == "no bookings"
