"""The Insights pages' figures, pure: usage rows (authsvc's QueryUsageCounts) turned into what the charts
and their tables show. No I/O, so each is table-tested (tests/unit/test_portal_insights_data.py).

Outcomes (the stacked chart's layers): a request is ``ok`` below 400; ``refused`` when the key was not let
through (401, 403); ``rate_limited`` (429); ``quota`` (402: the daily search allowance or credit);
``client_error`` any other 4xx; ``server_error`` 5xx. An error is any answer of 400 or more.

A search, for the allowance's burn-down, is a live request to a route of the shape the edge's route table
marks as a search (``GET /v1/<product>/search``) that was not refused (401, 402, 403, 429): the searches the
allowance counted. The day's total beside it is the allowance's own counter (GetUsage), exact.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Sequence

from svckit.usagecounts import BUCKETS, add_into, percentiles

OUTCOMES: tuple[tuple[str, str, str], ...] = (
    # (name, label, colour)
    ("ok", "OK (< 400)", "#2e7d32"),
    ("refused", "Refused key (401, 403)", "#b45309"),
    ("rate_limited", "Rate limited (429)", "#7c3aed"),
    ("quota", "Allowance or credit (402)", "#0e7490"),
    ("client_error", "Other 4xx", "#f59e0b"),
    ("server_error", "5xx", "#b42318"),
)
OUTCOME_NAMES = tuple(o[0] for o in OUTCOMES)
NOT_COUNTED_AS_SEARCH = frozenset({401, 402, 403, 429})
_SEARCH_ROUTE = re.compile(r"^GET /v1/[a-z0-9_-]+/search$")


def outcome_of(status: int) -> str:
    if status < 400:
        return "ok"
    if status in (401, 403):
        return "refused"
    if status == 429:
        return "rate_limited"
    if status == 402:
        return "quota"
    if status < 500:
        return "client_error"
    return "server_error"


def is_search(route: str, status: int) -> bool:
    return bool(_SEARCH_ROUTE.match(route)) and status not in NOT_COUNTED_AS_SEARCH


def split_route(route: str) -> tuple[str, str]:
    """("GET", "/v1/hotels/<id>") of a usage route "GET /v1/hotels/<id>"; ("", route) without a method."""
    method, sep, path = route.partition(" ")
    return (method, path) if sep and method.isupper() else ("", route)


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One usage row as the pages need it (the grouped dimensions; others empty)."""

    period: dt.datetime | None = None
    key_id: str = ""
    route: str = ""
    status: int = 0
    error_type: str = ""
    count: int = 0
    p50: int = 0
    p95: int = 0
    p99: int = 0
    buckets: tuple[int, ...] = ()  # the latency histogram (svckit.usagecounts), when read


def hours_back(now: dt.datetime, hours: int) -> list[dt.datetime]:
    """The starts of the last ``hours`` hours, the current one last."""
    top = now.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    return [top - dt.timedelta(hours=hours - 1 - i) for i in range(hours)]


def outcomes_by_hour(rows: Iterable[Row], hours: Sequence[dt.datetime]) -> list[list[int]]:
    """Per hour (in ``hours``' order), the count per outcome (in OUTCOMES' order)."""
    index = {h: i for i, h in enumerate(hours)}
    out = [[0] * len(OUTCOMES) for _ in hours]
    for r in rows:
        i = index.get(r.period) if r.period else None
        if i is not None:
            out[i][OUTCOME_NAMES.index(outcome_of(r.status))] += r.count
    return out


def latency_by_hour(rows: Iterable[Row], hours: Sequence[dt.datetime]) -> dict[dt.datetime, Row]:
    """Per hour of ``hours`` that has rows, its count and latency p50/p95/p99, from rows grouped by hour
    and anything finer (the traffic page's hour x status rows): the histograms summed, then read, which
    is what authsvc answers for rows grouped by hour alone, so one read serves both charts."""
    wanted = set(hours)
    totals: dict[dt.datetime, list[int]] = {}
    counts: dict[dt.datetime, int] = {}
    for r in rows:
        if r.period in wanted and r.period is not None:
            add_into(totals.setdefault(r.period, [0] * BUCKETS), r.buckets)
            counts[r.period] = counts.get(r.period, 0) + r.count
    out = {}
    for hour, total in totals.items():
        p50, p95, p99 = percentiles(total)
        out[hour] = Row(period=hour, count=counts[hour], p50=p50, p95=p95, p99=p99, buckets=tuple(total))
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class ErrorMatrix:
    routes: list[str]  # most errors first
    types: list[str]  # most errors first
    cells: dict[tuple[str, str], int]  # (route, type) -> count

    def total(self) -> int:
        return sum(self.cells.values())


def error_matrix(rows: Iterable[Row]) -> ErrorMatrix:
    """Errors (status >= 400, with an error type) grouped by route x error type."""
    cells: dict[tuple[str, str], int] = {}
    for r in rows:
        if r.status >= 400 or r.error_type:
            key = (r.route or "(no route)", r.error_type or f"http_{r.status}")
            cells[key] = cells.get(key, 0) + r.count
    by_route: dict[str, int] = {}
    by_type: dict[str, int] = {}
    for (route, etype), n in cells.items():
        by_route[route] = by_route.get(route, 0) + n
        by_type[etype] = by_type.get(etype, 0) + n
    return ErrorMatrix(_by_count(by_route), _by_count(by_type), cells)


def _by_count(counts: dict[str, int]) -> list[str]:
    return sorted(counts, key=lambda k: (-counts[k], k))


@dataclasses.dataclass(frozen=True, slots=True)
class KeyStat:
    key_id: str
    calls: int
    errors: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


def key_stats(rows: Iterable[Row]) -> dict[str, KeyStat]:
    """Calls and errors per key (rows grouped by key and status)."""
    calls: dict[str, int] = {}
    errors: dict[str, int] = {}
    for r in rows:
        if not r.key_id:
            continue
        calls[r.key_id] = calls.get(r.key_id, 0) + r.count
        if r.status >= 400:
            errors[r.key_id] = errors.get(r.key_id, 0) + r.count
    return {k: KeyStat(k, n, errors.get(k, 0)) for k, n in calls.items()}


@dataclasses.dataclass(frozen=True, slots=True)
class EndpointStat:
    endpoint_id: str
    attempts: int
    succeeded: int
    by_outcome: dict[str, int]
    p50: int
    p95: int
    p99: int

    @property
    def success_rate(self) -> float:
        return self.succeeded / self.attempts if self.attempts else 0.0


def endpoint_stats(counts: Iterable[tuple[str, str, int, Sequence[int]]]) -> dict[str, EndpointStat]:
    """Per endpoint, from (endpoint, outcome, count, latency histogram) rows: attempts, successes, the count
    per outcome and the percentiles of all its attempts (histograms summed: svckit.usagecounts)."""
    totals: dict[str, list[int]] = {}
    outcomes: dict[str, dict[str, int]] = {}
    for endpoint_id, outcome, count, buckets in counts:
        add_into(totals.setdefault(endpoint_id, [0] * BUCKETS), buckets)
        per = outcomes.setdefault(endpoint_id, {})
        per[outcome] = per.get(outcome, 0) + count
    out = {}
    for endpoint_id, per in outcomes.items():
        p50, p95, p99 = percentiles(totals[endpoint_id])
        out[endpoint_id] = EndpointStat(
            endpoint_id, sum(per.values()), per.get("succeeded", 0), per, p50, p95, p99
        )
    return out


def searches_by_hour(rows: Iterable[Row], hours: Sequence[dt.datetime]) -> list[int]:
    """Cumulative searches at the end of each hour (rows grouped by hour, route and status)."""
    index = {h: i for i, h in enumerate(hours)}
    per = [0] * len(hours)
    for r in rows:
        i = index.get(r.period) if r.period else None
        if i is not None and is_search(r.route, r.status):
            per[i] += r.count
    out, total = [], 0
    for n in per:
        total += n
        out.append(total)
    return out
