"""Anomaly alerts for partners: has an account's error rate or p95 latency over the last hour jumped
against its own 7-day baseline? One pure decision, no I/O; authsvc's housekeeping asks it for each
recently active account and sends ``account.anomaly`` and an e-mail when it says so.

The thresholds, stated once (here) and documented in docs/operations.md "Anomaly alerts":

  volume     the last hour had at least MIN_HOUR_REQUESTS requests, and the 7 days before it at least
             MIN_BASELINE_REQUESTS: a 1-of-2 error hour, or an account's first hour, says nothing.
  error_rate the hour's share of errors (any answer >= 400) is at least ERROR_RATE_FLOOR, at least
             ERROR_RATE_FACTOR times the baseline's share, and the hour had at least MIN_HOUR_ERRORS
             errors. The floor keeps a 0.1 % -> 0.4 % wobble quiet; the factor lets a normally noisy
             account (say 20 % 404s from a stale cache) be noisy.
  latency    the hour's p95 is at least LATENCY_FACTOR times the baseline's p95 and at least
             LATENCY_MIN_JUMP_MS more: 8 ms -> 20 ms is no news, 300 ms -> 900 ms is.

The baseline is the 7 days before the hour (the hour itself excluded, so a bad hour cannot lift its own
bar). Each kind alerts at most once an hour per account (``may_send``): a long incident sends one e-mail
an hour, not one per evaluation.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

MIN_HOUR_REQUESTS = 50
MIN_BASELINE_REQUESTS = 500
MIN_HOUR_ERRORS = 10
ERROR_RATE_FLOOR = 0.05
ERROR_RATE_FACTOR = 3.0
LATENCY_FACTOR = 2.0
LATENCY_MIN_JUMP_MS = 200.0
ALERT_EVERY = dt.timedelta(hours=1)


class AnomalyKind(enum.StrEnum):
    ERROR_RATE = "error_rate"
    LATENCY = "latency"


@dataclasses.dataclass(frozen=True, slots=True)
class Traffic:
    """An account's requests, errors and p95 latency over a span (the last hour, or the baseline)."""

    requests: int
    errors: int
    p95_ms: float

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Anomaly:
    kind: AnomalyKind
    observed: float  # the hour's error rate (0..1) or p95 (ms)
    baseline: float  # the same over the 7 days before


def anomalies(hour: Traffic, baseline: Traffic) -> list[Anomaly]:
    """The kinds whose last hour jumped against the baseline, in AnomalyKind's order."""
    if hour.requests < MIN_HOUR_REQUESTS or baseline.requests < MIN_BASELINE_REQUESTS:
        return []
    found: list[Anomaly] = []
    rate, base_rate = hour.error_rate, baseline.error_rate
    if hour.errors >= MIN_HOUR_ERRORS and rate >= ERROR_RATE_FLOOR and rate >= ERROR_RATE_FACTOR * base_rate:
        found.append(Anomaly(AnomalyKind.ERROR_RATE, rate, base_rate))
    if (
        hour.p95_ms >= LATENCY_FACTOR * baseline.p95_ms
        and hour.p95_ms - baseline.p95_ms >= LATENCY_MIN_JUMP_MS
    ):
        found.append(Anomaly(AnomalyKind.LATENCY, hour.p95_ms, baseline.p95_ms))
    return found


def may_send(last_sent: dt.datetime | None, now: dt.datetime) -> bool:
    """At most one alert an hour per account and kind."""
    return last_sent is None or now - last_sent >= ALERT_EVERY
