"""The anomaly rule, by table: volume floors, the error-rate and latency jumps against the account's own
baseline, and once an hour per account and kind."""

from __future__ import annotations

import datetime as dt

import pytest

from authsvc._anomaly_rules import (
    ALERT_EVERY,
    Anomaly,
    AnomalyKind,
    Traffic,
    anomalies,
    may_send,
)

E, L = AnomalyKind.ERROR_RATE, AnomalyKind.LATENCY
CALM = Traffic(requests=10_000, errors=100, p95_ms=120.0)  # 1 % errors, p95 120 ms
NOISY = Traffic(requests=10_000, errors=2_000, p95_ms=120.0)  # 20 % errors

CASES = [
    # (name, hour, baseline, kinds)
    ("quiet hour, calm baseline", Traffic(400, 4, 118.0), CALM, []),
    ("1 of 2 failed: too few requests", Traffic(2, 1, 100.0), CALM, []),
    ("49 requests all failing: under the volume floor", Traffic(49, 49, 100.0), CALM, []),
    ("50 requests, 10 errors (20 %): fires", Traffic(50, 10, 100.0), CALM, [E]),
    ("9 errors of 50 is too few errors", Traffic(50, 9, 100.0), CALM, []),
    ("no baseline yet (new account)", Traffic(1000, 900, 2000.0), Traffic(499, 0, 50.0), []),
    ("baseline just enough", Traffic(1000, 900, 100.0), Traffic(500, 0, 50.0), [E]),
    ("4.9 % is under the floor even from 0 %", Traffic(1000, 49, 100.0), Traffic(10_000, 0, 100.0), []),
    ("5 % from 0 %: fires", Traffic(1000, 50, 100.0), Traffic(10_000, 0, 100.0), [E]),
    ("5 % from 2 % is under three times", Traffic(1000, 50, 100.0), Traffic(10_000, 200, 100.0), []),
    ("6 % from 2 % is three times", Traffic(1000, 60, 100.0), Traffic(10_000, 200, 100.0), [E]),
    ("a noisy account stays noisy: 30 % from 20 %", Traffic(1000, 300, 120.0), NOISY, []),
    ("a noisy account jumps: 61 % from 20 %", Traffic(1000, 610, 120.0), NOISY, [E]),
    ("p95 doubled but only +8 ms", Traffic(1000, 0, 16.0), Traffic(10_000, 0, 8.0), []),
    ("p95 +300 ms but under double", Traffic(1000, 0, 900.0), Traffic(10_000, 0, 600.0), []),
    ("p95 120 -> 320 ms: double and +200", Traffic(1000, 0, 320.0), CALM, [L]),
    ("p95 120 -> 319 ms: +199 only", Traffic(1000, 0, 319.0), CALM, []),
    ("both at once, in order", Traffic(1000, 500, 2000.0), CALM, [E, L]),
    ("slow but under the volume floor", Traffic(20, 0, 5000.0), CALM, []),
]


@pytest.mark.parametrize(("name", "hour", "baseline", "kinds"), CASES, ids=[c[0] for c in CASES])
def test_anomalies(name: str, hour: Traffic, baseline: Traffic, kinds: list[AnomalyKind]) -> None:
    found = anomalies(hour, baseline)
    assert [a.kind for a in found] == kinds
    for a in found:
        if a.kind is E:
            assert a == Anomaly(E, hour.error_rate, baseline.error_rate)
        else:
            assert a == Anomaly(L, hour.p95_ms, baseline.p95_ms)


NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)

SEND = [
    ("never sent", None, True),
    ("sent a minute ago", NOW - dt.timedelta(minutes=1), False),
    ("sent 59 minutes ago", NOW - dt.timedelta(minutes=59, seconds=59), False),
    ("sent an hour ago", NOW - ALERT_EVERY, True),
    ("sent yesterday", NOW - dt.timedelta(days=1), True),
]


@pytest.mark.parametrize(("name", "last", "ok"), SEND, ids=[c[0] for c in SEND])
def test_once_an_hour(name: str, last: dt.datetime | None, ok: bool) -> None:
    assert may_send(last, NOW) is ok
