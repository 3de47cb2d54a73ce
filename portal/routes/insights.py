"""GET /<env>/insights/...: the Insights pages, what the account's traffic did, from authsvc's exact usage
counts (QueryUsageCounts), never a sample:

  /insights           requests per hour by outcome (stacked) and latency p50/p95/p99, the last 24 hours
  /insights/errors    errors by type x route, the last 7 days; each cell links to those requests in the log
  /insights/keys      per key: calls, error rate (7 days) and when it was last used
  /insights/searches  today's search allowance burn-down, and look-to-book (live) against the target
  /insights/webhooks  webhook delivery success rate and latency per endpoint

The figures are made by ``portal.insights_data`` (pure) and drawn by ``portal.insight_charts`` (SVG); each
chart has its numbers in a table below it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from urllib.parse import urlencode

from sanic import Blueprint
from sanic.response import HTTPResponse

from portal import charts as bars
from portal import insight_charts as charts
from portal import insights_data as data
from portal.context import PortalRequest, auth, hooks
from portal.web import env_of, need, render
from svckit import looktobook
from svckit.protos import timestamp
from svckit.prototables import AUTH_ENVIRONMENT, HOOKS_ENVIRONMENT
from travel.auth.v1 import auth_pb2 as apb
from travel.webhooks.v1 import webhooks_pb2 as wpb

bp = Blueprint("portal_insights")
G = apb.UsageGroup
DAYS = 7
HOURS = 24


async def usage_rows(
    request: PortalRequest,
    account_id: str,
    env: str,
    start: dt.datetime,
    end: dt.datetime,
    groups: list[G.ValueType],
) -> list[data.Row]:
    ask = apb.QueryUsageCountsRequest(
        account_id=account_id, environment=AUTH_ENVIRONMENT.pb(env), to=timestamp(end), group_by=groups
    )
    getattr(ask, "from").CopyFrom(timestamp(start))  # "from" is a Python keyword
    got = await auth(request).query_usage_counts(ask)
    return [
        data.Row(
            period=r.counts.period_start.ToDatetime(dt.UTC) if r.counts.HasField("period_start") else None,
            key_id=r.counts.key_id,
            route=r.counts.route,
            status=r.counts.status,
            error_type=r.counts.error_type,
            count=r.counts.count,
            p50=r.latency.p50_ms,
            p95=r.latency.p95_ms,
            p99=r.latency.p99_ms,
            buckets=tuple(r.counts.latency_buckets),
        )
        for r in got.rows
    ]


def week(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The last 7 UTC days, today included: [6 days ago 00:00, tomorrow 00:00)."""
    today = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - dt.timedelta(days=DAYS - 1), today + dt.timedelta(days=1)


@bp.get("/<env:str>/insights")
async def traffic(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "account.read")
    env = env_of(request)
    hours = data.hours_back(dt.datetime.now(dt.UTC), HOURS)
    end = hours[-1] + dt.timedelta(hours=1)
    account_id = viewer.user.account_id
    # One read of the hour rows: the latency per hour is the status rows' histograms summed.
    by_status = await usage_rows(
        request, account_id, env, hours[0], end, [G.USAGE_GROUP_HOUR, G.USAGE_GROUP_STATUS]
    )
    stacks = data.outcomes_by_hour(by_status, hours)
    labels = [h.strftime("%H:00") for h in hours]
    latency = data.latency_by_hour(by_status, hours)
    lat_rows = [(labels[i], latency.get(h)) for i, h in enumerate(hours)]
    series = [
        (name, colour, [getattr(r, attr) if r else None for _, r in lat_rows])
        for name, colour, attr in (
            ("p50", "#2e7d32", "p50"),
            ("p95", "#b45309", "p95"),
            ("p99", "#b42318", "p99"),
        )
    ]
    return render(
        request,
        "insights_traffic.html",
        page="traffic",
        outcomes=data.OUTCOMES,
        rows=list(zip(labels, stacks, strict=True)),
        total=sum(map(sum, stacks)),
        stacked=charts.stacked_bars(
            labels, stacks, data.OUTCOMES, f"Requests per hour by outcome, the last {HOURS} hours (UTC)"
        ),
        legend=charts.legend([(label, colour) for _, label, colour in data.OUTCOMES]),
        latency_chart=charts.lines(
            labels, series, f"Latency p50, p95 and p99 per hour, the last {HOURS} hours", unit=" ms"
        ),
        latency_legend=charts.legend([(name, colour) for name, colour, _ in series]),
        lat_rows=lat_rows,
        since=hours[0],
    )


@bp.get("/<env:str>/insights/errors")
async def errors(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "account.read")
    env = env_of(request)
    start, end = week(dt.datetime.now(dt.UTC))
    rows = await usage_rows(
        request,
        viewer.user.account_id,
        env,
        start,
        end,
        [G.USAGE_GROUP_ROUTE, G.USAGE_GROUP_ERROR_TYPE, G.USAGE_GROUP_STATUS],
    )
    matrix = data.error_matrix(rows)
    window = {"since": start.strftime("%Y-%m-%dT%H:%M"), "until": end.strftime("%Y-%m-%dT%H:%M")}

    def link(route: str, etype: str) -> str:
        method, path = data.split_route(route)
        q: dict[str, str] = {"error_type": etype, **window}
        if path.startswith("/"):
            q["route"] = path
        if method:
            q["method"] = method
        return f"/{env}/requests?{urlencode(q)}"

    return render(
        request,
        "insights_errors.html",
        page="errors",
        matrix=matrix,
        link=link,
        peak=max(matrix.cells.values(), default=0),
        start=start,
        end=end,
    )


@bp.get("/<env:str>/insights/keys")
async def keys(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "account.read")
    env = env_of(request)
    start, end = week(dt.datetime.now(dt.UTC))
    account_id = viewer.user.account_id
    rows, listed = await asyncio.gather(
        usage_rows(request, account_id, env, start, end, [G.USAGE_GROUP_KEY, G.USAGE_GROUP_STATUS]),
        auth(request).list_keys(
            apb.ListKeysRequest(
                account_id=account_id,
                environment=AUTH_ENVIRONMENT.pb(env),
                include_revoked=True,
                page_size=200,
            )
        ),
    )
    stats = data.key_stats(rows)
    known = {k.id: k for k in listed.keys}
    ordered = sorted(
        set(stats) | {k.id for k in listed.keys if k.status == apb.KEY_STATUS_ACTIVE},
        key=lambda k: (-(stats[k].calls if k in stats else 0), k),
    )
    table = [(k, known.get(k), stats.get(k, data.KeyStat(k, 0, 0))) for k in ordered]
    return render(request, "insights_keys.html", page="keys", table=table, start=start)


async def _search_days(request: PortalRequest, account_id: str, days: list[dt.date]) -> list[int]:
    got = await asyncio.gather(
        *(
            auth(request).get_usage(apb.GetUsageRequest(account_id=account_id, date=d.isoformat()))
            for d in days
        )
    )
    return [int(g.usage.searches_used) for g in got]


async def _booking_days(request: PortalRequest, account_id: str, days: list[dt.date]) -> list[int]:
    start = dt.datetime.combine(days[0], dt.time(), dt.UTC)
    got = await hooks(request).count_events(
        wpb.CountEventsRequest(
            account_id=account_id,
            environment=HOOKS_ENVIRONMENT.pb("live"),
            type="booking.confirmed",
            since=timestamp(start),
        )
    )
    per = {d.day: int(d.count) for d in got.days}
    return [per.get(d.isoformat(), 0) for d in days]


@bp.get("/<env:str>/insights/searches")
async def searches(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "account.read")
    env_of(request)
    now = dt.datetime.now(dt.UTC)
    account_id = viewer.user.account_id
    today = now.date()
    days = [today - dt.timedelta(days=DAYS - 1 - i) for i in range(DAYS)]
    hours = [dt.datetime.combine(today, dt.time(h), dt.UTC) for h in range(24)]
    account, searched, booked, rows = await asyncio.gather(
        auth(request).get_account(apb.GetAccountRequest(account_id=account_id)),
        _search_days(request, account_id, days),
        _booking_days(request, account_id, days),
        usage_rows(
            request,
            account_id,
            "live",
            hours[0],
            hours[-1] + dt.timedelta(hours=1),
            [G.USAGE_GROUP_HOUR, G.USAGE_GROUP_ROUTE, G.USAGE_GROUP_STATUS],
        ),
    )
    allowance = int(account.account.daily_search_allowance)
    target = int(account.account.look_to_book_target)
    cumulative = data.searches_by_hour(rows, hours)
    # Burn-down: what is left of the allowance at the end of each hour so far.
    shown: list[float | None] = [
        float(max(allowance - v, 0)) if h <= now else None for v, h in zip(cumulative, hours, strict=True)
    ]
    day_rows = [looktobook.Day(d, s, b) for d, s, b in zip(days, searched, booked, strict=True)]
    window = looktobook.window(day_rows)
    return render(
        request,
        "insights_searches.html",
        page="searches",
        burn=charts.lines(
            [h.strftime("%H:00") for h in hours],
            [("searches left", "#3451b2", shown)],
            f"Searches left of today's allowance of {allowance:,}, hour by hour (UTC)",
            limit=float(allowance),
        ),
        used_today=searched[-1],
        allowance=allowance,
        hourly=[(h, c) for h, c in zip(hours, cumulative, strict=True) if h <= now],
        ratio_chart=charts.ratio_gauge(
            window.ratio,
            target,
            f"Look-to-book over 7 days: {looktobook.ratio_text(window.ratio)}"
            + (f", target {target:,}:1" if target else ", no target"),
        ),
        day_rows=day_rows,
        window=window,
        target=target,
        exceeded=looktobook.exceeded(window, target),
        ratio_text=looktobook.ratio_text,
    )


WEBHOOK_OUTCOMES = ("succeeded", "http_error", "timeout", "network_error")


@bp.get("/<env:str>/insights/webhooks")
async def webhooks(request: PortalRequest, env: str) -> HTTPResponse:
    viewer = need(request, "webhooks.read")
    env = env_of(request)
    start, end = week(dt.datetime.now(dt.UTC))
    account_id = viewer.user.account_id
    ask = wpb.QueryDeliveryCountsRequest(
        account_id=account_id, environment=HOOKS_ENVIRONMENT.pb(env), to=timestamp(end)
    )
    getattr(ask, "from").CopyFrom(timestamp(start))
    counts, listed = await asyncio.gather(
        hooks(request).query_delivery_counts(ask),
        hooks(request).list_endpoints(
            wpb.ListEndpointsRequest(
                account_id=account_id, environment=HOOKS_ENVIRONMENT.pb(env), page_size=100
            )
        ),
    )
    stats = data.endpoint_stats((c.endpoint_id, c.outcome, c.count, c.latency_buckets) for c in counts.counts)
    urls = {e.id: e.url for e in listed.endpoints}
    ids = sorted(set(stats) | set(urls), key=lambda e: (-(stats[e].attempts if e in stats else 0), e))
    table: list[tuple[str, str, data.EndpointStat | None]] = [(e, urls.get(e, ""), stats.get(e)) for e in ids]
    rates = bars.success_rates(
        [
            (f"#{i + 1}", s.succeeded if s else 0, s.attempts if s else 0)
            for i, (_e, _u, s) in enumerate(table)
        ]
    )
    return render(
        request,
        "insights_webhooks.html",
        page="webhooks",
        table=table,
        rates=rates,
        start=start,
        outcomes=WEBHOOK_OUTCOMES,
    )
