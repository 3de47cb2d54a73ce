"""Exact counts of delivery attempts per endpoint and outcome, per hour and per day, with a latency
histogram (svckit.usagecounts): the rows one cycle's attempts add (``count_rows``), written by the same
transaction that writes the attempts (``webhookd._queue.record``: one more statement per cycle, never a
round trip per delivery), and the retention of each grain.

A manual resend is an attempt too and is counted the same way. Counts are never sampled and never
derived from the attempt log (which is kept 30 days, the sandbox's 7): they outlive it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, Final

from svckit.usagecounts import BUCKETS, bucket_of
from webhookd._repository import AttemptRecord

HOUR: Final = 3600
DAY: Final = 86400
GRAINS: Final = (HOUR, DAY)
# How long each grain is kept (hour rows 90 days, day rows 2 years), pruned by the housekeeping.
RETENTION: Final = {HOUR: dt.timedelta(days=90), DAY: dt.timedelta(days=730)}


def count_rows(attempts: Iterable[AttemptRecord]) -> list[tuple[Any, ...]]:
    """The ``count_attempts`` rows (``COUNT_COLUMNS`` order) that ``attempts`` add: one per account,
    environment, grain, period, endpoint and outcome, summed, in key order (two writers upsert the same
    rows in the same order)."""
    sums: dict[tuple[str, str, int, int, str, str], list[int]] = {}
    for a in attempts:
        at = int(a.attempted_at.timestamp())
        ms = max(0, round(a.latency_ms or 0))
        for grain in GRAINS:
            key = (a.account_id, a.environment, grain, at - at % grain, a.endpoint_id, a.outcome)
            total = sums.get(key)
            if total is None:
                total = sums[key] = [0] * (2 + BUCKETS)
            total[0] += 1
            total[1] += ms
            total[2 + bucket_of(ms)] += 1
    return [(*key, *sums[key]) for key in sorted(sums)]


def cutoffs(now: dt.datetime) -> list[tuple[int, int]]:
    """(grain, the period start before which its rows are pruned), per grain."""
    out = []
    for grain in GRAINS:
        edge = int((now - RETENTION[grain]).timestamp())
        out.append((grain, edge - edge % grain))
    return out
