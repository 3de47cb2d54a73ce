"""The usage counts' pure rules: percentiles read from fixed buckets (svckit.usagecounts), and which
rollup answers a query (authsvc._usage_rules.rollup_for)."""

from __future__ import annotations

import datetime as dt

import pytest

from authsvc._usage_rules import Grain, Retention, cutoffs, rollup_for
from svckit.usagecounts import BUCKETS, LATENCY_BOUNDS_MS, bucket_of, percentile, percentiles


def hist(*pairs: tuple[int, int]) -> list[int]:
    out = [0] * BUCKETS
    for index, n in pairs:
        out[index] = n
    return out


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        # Nothing counted: 0 for all.
        (hist(), (0, 0, 0)),
        # One request in the first bucket: its bound.
        (hist((0, 1)), (5, 5, 5)),
        # 100 requests, 95 fast, 5 slow: p95 is the 95th (fast), p99 the 99th (slow).
        (hist((0, 95), (6, 5)), (5, 5, 500)),
        # 94 fast, 6 slow: the 95th is slow.
        (hist((0, 94), (6, 6)), (5, 500, 500)),
        # Half and half: the 50th is in the first bucket, the 51st would not be.
        (hist((1, 50), (3, 50)), (10, 50, 50)),
        # Past the last bound: the last bound (the histogram knows no more).
        (hist((BUCKETS - 1, 3)), (10000, 10000, 10000)),
        # 1000 requests: rank 990 for p99 (ceil(0.99 * 1000)) sits exactly at the end of bucket 2.
        (hist((2, 990), (7, 10)), (25, 25, 25)),
        # 1001 requests: rank ceil(990.99) = 991, in bucket 7.
        (hist((2, 990), (7, 11)), (25, 25, 1000)),
    ],
)
def test_percentiles_from_buckets(buckets: list[int], expected: tuple[int, int, int]) -> None:
    assert percentiles(buckets) == expected


def test_percentile_refuses_a_histogram_of_other_bounds() -> None:
    with pytest.raises(ValueError, match="buckets"):
        percentile([1, 2], 0.5)
    with pytest.raises(ValueError, match="q"):
        percentile(hist(), 0)


@pytest.mark.parametrize(
    ("ms", "index"), [(0, 0), (5, 0), (5.1, 1), (10, 1), (999, 7), (1000, 7), (10000, 10), (10001, 11)]
)
def test_bucket_of(ms: float, index: int) -> None:
    assert bucket_of(ms) == index
    assert index == len(LATENCY_BOUNDS_MS) or ms <= LATENCY_BOUNDS_MS[index]


NOW = dt.datetime(2026, 6, 10, 15, 42, 10, tzinfo=dt.UTC)
TODAY = dt.datetime(2026, 6, 10, tzinfo=dt.UTC)
D = dt.timedelta(days=1)
H = dt.timedelta(hours=1)
M = dt.timedelta(minutes=1)


@pytest.mark.parametrize(
    ("start", "end", "group", "expected"),
    [
        # Today, not grouped by time: the day rollup (one row per cell).
        (TODAY, TODAY + D, None, Grain.DAY),
        # Today by hour: hours.
        (TODAY, TODAY + D, Grain.HOUR, Grain.HOUR),
        # By day over 30 days: days.
        (TODAY - 30 * D, TODAY + D, Grain.DAY, Grain.DAY),
        # Hour-aligned ends, grouped by day: the hour rollup summed into days.
        (TODAY - 3 * D + 5 * H, TODAY, Grain.DAY, Grain.HOUR),
        # Minute-aligned, within 48 h: minutes.
        (NOW - 30 * M - dt.timedelta(seconds=10), NOW - dt.timedelta(seconds=10), None, Grain.MINUTE),
        # 100 days back by hour: hours are kept 90 days; refused (below).
        # 1 year by day: days.
        (TODAY - 365 * D, TODAY, Grain.DAY, Grain.DAY),
    ],
)
def test_rollup_for(start: dt.datetime, end: dt.datetime, group: Grain | None, expected: Grain) -> None:
    assert rollup_for(start, end, group, NOW) is expected


@pytest.mark.parametrize(
    ("start", "end", "group", "field"),
    [
        (TODAY, TODAY, None, "to"),  # empty range
        (TODAY - 800 * D, TODAY, None, "to"),  # longer than any rollup keeps
        (TODAY - 100 * D, TODAY, Grain.HOUR, "from"),  # hours are kept 90 days
        (TODAY - 3 * D + 5 * M, TODAY, None, "from"),  # minutes kept 48 h only
        (TODAY + dt.timedelta(seconds=1), TODAY + D, None, "from, to"),  # not on a minute
    ],
)
def test_rollup_for_refuses_naming_the_parameter(
    start: dt.datetime, end: dt.datetime, group: Grain | None, field: str
) -> None:
    with pytest.raises(ValueError, match=f"^{field}"):
        rollup_for(start, end, group, NOW)


def test_cutoffs_follow_the_retention() -> None:
    short = Retention(minute=2 * H, hour=2 * D, day=10 * D)
    got = cutoffs(NOW, short)
    assert got[Grain.MINUTE] == int((NOW - 2 * H).replace(second=0).timestamp())
    assert got[Grain.HOUR] == int((NOW - 2 * D).replace(minute=0, second=0).timestamp())
    assert got[Grain.DAY] == int((TODAY - 10 * D).timestamp())
