"""The Insights pages' figures (portal.insights_data), by table: outcomes, searches, routes, the
per-hour stacks, the error matrix and the per-key calls."""

from __future__ import annotations

import datetime as dt

import pytest

from portal import insights_data as d
from portal.insights_data import Row
from svckit.usagecounts import BUCKETS, LATENCY_BOUNDS_MS, percentiles

OUTCOMES = [
    (200, "ok"),
    (201, "ok"),
    (304, "ok"),
    (400, "client_error"),
    (401, "refused"),
    (402, "quota"),
    (403, "refused"),
    (404, "client_error"),
    (409, "client_error"),
    (429, "rate_limited"),
    (500, "server_error"),
    (503, "server_error"),
]


@pytest.mark.parametrize(("status", "outcome"), OUTCOMES)
def test_outcome_of(status: int, outcome: str) -> None:
    assert d.outcome_of(status) == outcome
    assert outcome in d.OUTCOME_NAMES


SEARCHES = [
    ("GET /v1/hotels/search", 200, True),
    ("GET /v1/flights/search", 502, True),  # counted against the allowance, then the upstream failed
    ("GET /v1/hotels/search", 402, False),  # the allowance refused it
    ("GET /v1/hotels/search", 429, False),
    ("GET /v1/hotels/search", 401, False),
    ("POST /v1/hotels/search", 200, False),
    ("GET /v1/hotels/offers/{offer_id}", 200, False),
    ("GET /v1/hotels/search/x", 200, False),
]


@pytest.mark.parametrize(("route", "status", "search"), SEARCHES)
def test_is_search(route: str, status: int, search: bool) -> None:
    assert d.is_search(route, status) is search


@pytest.mark.parametrize(
    ("route", "parts"),
    [
        ("GET /v1/hotels/<id>", ("GET", "/v1/hotels/<id>")),
        ("/v1/hotels/<id>", ("", "/v1/hotels/<id>")),
        ("", ("", "")),
        ("get /x", ("", "get /x")),
    ],
)
def test_split_route(route: str, parts: tuple[str, str]) -> None:
    assert d.split_route(route) == parts


NOW = dt.datetime(2026, 6, 1, 12, 34, tzinfo=dt.UTC)
H = [dt.datetime(2026, 6, 1, h, tzinfo=dt.UTC) for h in (10, 11, 12)]


def test_hours_back_ends_with_the_current_hour() -> None:
    assert d.hours_back(NOW, 3) == H


def test_outcomes_by_hour_stacks_each_hour_and_ignores_others() -> None:
    rows = [
        Row(period=H[0], status=200, count=5),
        Row(period=H[0], status=403, count=2),
        Row(period=H[0], status=401, count=1),
        Row(period=H[2], status=503, count=4),
        Row(period=H[2], status=429, count=3),
        Row(period=H[0] - dt.timedelta(hours=1), status=200, count=99),  # outside the window
    ]
    assert d.outcomes_by_hour(rows, H) == [
        [5, 3, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0],
        [0, 0, 3, 0, 0, 4],
    ]


def test_error_matrix_orders_by_count_and_skips_successes() -> None:
    rows = [
        Row(route="GET /a", status=403, error_type="missing_scope", count=3),
        Row(route="GET /a", status=404, error_type="not_found", count=1),
        Row(route="GET /b", status=403, error_type="missing_scope", count=5),
        Row(route="GET /b", status=200, count=50),
        Row(route="", status=401, error_type="invalid_api_key", count=2),
        Row(route="GET /c", status=418, count=1),  # no error type: named by its status
    ]
    m = d.error_matrix(rows)
    assert m.routes == ["GET /b", "GET /a", "(no route)", "GET /c"]
    assert m.types == ["missing_scope", "invalid_api_key", "http_418", "not_found"]
    assert m.cells[("GET /a", "missing_scope")] == 3 and ("GET /b", "not_found") not in m.cells
    assert m.total() == 12


def test_key_stats_counts_calls_and_errors() -> None:
    rows = [
        Row(key_id="key_a", status=200, count=90),
        Row(key_id="key_a", status=500, count=10),
        Row(key_id="key_b", status=403, count=4),
        Row(key_id="", status=401, count=7),  # no key known: not a key's
    ]
    s = d.key_stats(rows)
    assert set(s) == {"key_a", "key_b"}
    assert (s["key_a"].calls, s["key_a"].errors, s["key_a"].error_rate) == (100, 10, 0.1)
    assert s["key_b"].error_rate == 1.0
    assert d.KeyStat("key_c", 0, 0).error_rate == 0.0


def test_searches_by_hour_is_cumulative() -> None:
    rows = [
        Row(period=H[0], route="GET /v1/hotels/search", status=200, count=3),
        Row(period=H[0], route="GET /v1/hotels/search", status=402, count=9),
        Row(period=H[2], route="GET /v1/flights/search", status=200, count=2),
        Row(period=H[1], route="GET /v1/hotels/offers/<id>", status=200, count=7),
    ]
    assert d.searches_by_hour(rows, H) == [3, 3, 5]


def test_latency_by_hour_sums_the_histograms_of_each_hour() -> None:
    fast, slow = [0] * BUCKETS, [0] * BUCKETS
    fast[1], slow[8] = 90, 10
    rows = [
        Row(period=H[0], status=200, count=90, buckets=tuple(fast)),
        Row(period=H[0], status=503, count=10, buckets=tuple(slow)),
        Row(period=H[2], status=200, count=90, buckets=tuple(fast)),
        Row(period=H[0] - dt.timedelta(hours=1), status=200, count=5, buckets=tuple(slow)),  # outside
    ]
    got = d.latency_by_hour(rows, H)
    assert set(got) == {H[0], H[2]}  # an hour without rows has no figures
    both = [a + b for a, b in zip(fast, slow, strict=True)]
    assert (got[H[0]].count, got[H[0]].p50, got[H[0]].p95, got[H[0]].p99) == (100, *percentiles(both))
    assert got[H[0]].p99 == LATENCY_BOUNDS_MS[8]  # the slow tenth sets p95 and p99
    assert got[H[0]].p50 == LATENCY_BOUNDS_MS[1]
    assert (got[H[2]].count, got[H[2]].p99) == (90, LATENCY_BOUNDS_MS[1])
