"""The portal's Insights pages in real headless Chromium (the system's /usr/bin/chromium) against real
authsvc, webhookd, edge and portal processes: traffic, errors, keys, searches and look-to-book, webhooks.
The usage counts are recorded the way an edge records them (RecordUsageCounts), the request log the way
it files refusals (RecordRequests), searches counted by ConsumeSearch, bookings published as
booking.confirmed events; the walk from an error cell ends on exactly the matching request-log entries.
Each page's screenshot is saved (PORTAL_SCREENSHOTS=docs/portal refreshes docs/portal/insights-*.png)."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import field_mask_pb2

from svckit.protos import timestamp as ts
from svckit.usagecounts import BUCKETS, bucket_of
from tests.e2e.portal_stack import CHROMIUM, Stack, chromium, join, running_stack, shot
from tests.support import event_data, free_port
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.auth.v1 import identity_pb2 as ipb
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="no system Chromium at /usr/bin/chromium")

LIVE = apb.ENVIRONMENT_LIVE
ACTOR = apb.Actor(user="ops:e2e")
OFFER = "GET /v1/hotels/offers/{offer_id}"  # as the edge names it (edge.usagecounts.route_name)
SEARCH = "GET /v1/hotels/search"
BOOK = "POST /v1/hotels/bookings"
PAST_SEARCHES = 3000  # on each of the 6 days before today
BOOKINGS = 10  # today
ALLOWANCE = 5000
TARGET = 1500


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("insights")) as started:
        yield started


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def cell(
    account_id: str,
    key_id: str,
    route: str,
    status: int,
    error_type: str,
    at: dt.datetime,
    count: int,
    ms: int,
) -> apb.UsageCount:
    buckets = [0] * BUCKETS
    buckets[bucket_of(ms)] = count
    return apb.UsageCount(
        account_id=account_id,
        environment=LIVE,
        key_id=key_id,
        route=route,
        status=status,
        error_type=error_type,
        period_start=ts(at),
        count=count,
        latency_buckets=buckets,
        latency_sum_ms=ms * count,
    )


def logged(account_id: str, key_id: str, n: int, path: str, status: int, etype: str, at: dt.datetime) -> Any:
    return apb.RequestRecord(
        request_id=f"req_{n:024x}",
        account_id=account_id,
        environment=LIVE,
        key_id=key_id,
        key_hint="svc_live_...Ab12",
        method=path.split(" ")[0],
        path=path.split(" ")[1],
        status=status,
        error_type=etype,
        latency_ms=30,
        occurred_at=ts(at),
    )


@pytest.fixture(scope="module")
def seeded(stack: Stack) -> dict[str, Any]:
    """A day of live traffic on two keys, refusals in the request log, searches and bookings."""
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    acct = stack.account_id
    with grpc.insecure_channel(stack.authsvc) as channel:
        auth = auth_pb2_grpc.AuthServiceStub(channel)
        auth.UpdateAccount(
            apb.UpdateAccountRequest(
                account_id=acct,
                update_mask=field_mask_pb2.FieldMask(paths=["look_to_book_target", "daily_search_allowance"]),
                look_to_book_target=TARGET,
                daily_search_allowance=ALLOWANCE,
                actor=ACTOR,
            )
        )
        keys = [
            auth.CreateKey(
                apb.CreateKeyRequest(
                    account_id=acct, environment=LIVE, name=name, scopes=["hotels:read"], actor=ACTOR
                )
            ).key.id
            for name in ("booking engine", "price checker")
        ]
        cells: list[apb.UsageCount] = []
        for h in range(24):
            at = now - dt.timedelta(hours=23 - h)
            cells += [
                cell(acct, keys[0], SEARCH, 200, "", at, 40 + h, 120),
                cell(acct, keys[0], BOOK, 201, "", at, 2, 700),
                cell(acct, keys[1], OFFER, 200, "", at, 20, 45 if h < 20 else 900),
                cell(acct, keys[1], SEARCH, 429, "rate_limited", at, 1 + h % 3, 3),
            ]
        # The refusals the walk follows: 3 missing_scope on the offer route, 2 on search, 1 not_found.
        errors = [
            (OFFER, "GET /v1/hotels/offers/off_1", 403, "missing_scope"),
            (OFFER, "GET /v1/hotels/offers/off_2", 403, "missing_scope"),
            (OFFER, "GET /v1/hotels/offers/off_3", 403, "missing_scope"),
            (SEARCH, "GET /v1/hotels/search", 403, "missing_scope"),
            (SEARCH, "GET /v1/hotels/search", 403, "missing_scope"),
            (OFFER, "GET /v1/hotels/offers/off_9", 404, "not_found"),
            (BOOK, "POST /v1/hotels/bookings", 503, "service_unavailable"),
        ]
        records = []
        for n, (route, path, status, etype) in enumerate(errors, start=1):
            at = now - dt.timedelta(minutes=30 + n)
            cells.append(cell(acct, keys[1], route, status, etype, at, 1, 30))
            records.append(logged(acct, keys[1], n, path, status, etype, at))
        got = auth.RecordUsageCounts(apb.RecordUsageCountsRequest(batch_id="e2e-insights-1", counts=cells))
        assert got.applied == len(cells)
        assert auth.RecordRequests(apb.RecordRequestsRequest(records=records)).recorded == len(records)
        # Today's searches (those the allowance let through) counted by the allowance too, as the edge does.
        today = sum(
            c.count
            for c in cells
            if c.route == SEARCH
            and c.status == 200
            and c.period_start.ToDatetime(dt.UTC).date() == now.date()
        )
        for chunk in range(0, today, 1000):  # at most 1,000 a call
            auth.ConsumeSearch(
                apb.ConsumeSearchRequest(
                    account_id=acct, environment=LIVE, key_id=keys[0], count=min(1000, today - chunk)
                )
            )
    # The six days before today: their allowance counters, as ConsumeSearch left them on those days.
    with sqlite3.connect(stack.tmp / "authsvc.db") as db:
        for back in range(1, 7):
            day = (now.date() - dt.timedelta(days=back)).isoformat()
            db.execute(
                "INSERT INTO auth_search_usage (account_id, day, used, threshold_sent) VALUES (?, ?, ?, 0)",
                (acct, day, PAST_SEARCHES),
            )
    with grpc.insecure_channel(stack.webhookd) as channel:
        hooks = webhooks_pb2_grpc.WebhookServiceStub(channel)
        # Two endpoints: one answers 2xx, one cannot be reached (nothing listens on its port).
        endpoints = [
            hooks.RegisterEndpoint(
                wpb.RegisterEndpointRequest(
                    account_id=acct, environment=wpb.ENVIRONMENT_LIVE, url=url, events=["booking.confirmed"]
                )
            ).endpoint.id
            for url in (stack.receiver.url(), f"https://127.0.0.1:{free_port()}/hooks")
        ]
        for n in range(BOOKINGS):
            hooks.PublishEvent(
                wpb.PublishEventRequest(
                    account_id=acct,
                    environment=wpb.ENVIRONMENT_LIVE,
                    type="booking.confirmed",
                    data=event_data("booking.confirmed", booking=f"bk_e2e_{n}"),
                )
            )
        # Every booking reached the answering endpoint; the other was tried (its circuit breaker then holds
        # the rest back).
        week_ago = ts(now.replace(minute=0) - dt.timedelta(days=1))
        deadline = time.monotonic() + 30
        while True:
            ask = wpb.QueryDeliveryCountsRequest(account_id=acct, environment=wpb.ENVIRONMENT_LIVE)
            getattr(ask, "from").CopyFrom(week_ago)
            ask.to.CopyFrom(ts(now.replace(minute=0) + dt.timedelta(hours=2)))
            got_counts = hooks.QueryDeliveryCounts(ask).counts
            per = {e: sum(c.count for c in got_counts if c.endpoint_id == e) for e in endpoints}
            if (per[endpoints[0]] >= BOOKINGS and per[endpoints[1]] >= 1) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    return {"keys": keys, "cells": cells, "records": records, "today": today, "endpoints": endpoints}


def test_insights_pages_and_the_walk_from_an_error_cell_to_its_requests(
    browser: Any, stack: Stack, seeded: dict[str, Any]
) -> None:
    context, page = join(browser, stack, "insights@acme.example", ipb.USER_ROLE_ADMIN)
    try:
        cells: list[apb.UsageCount] = seeded["cells"]
        # Traffic: every counted request, stacked by outcome, with the numbers behind the chart.
        page.goto(f"{stack.portal}/live/insights")
        assert page.locator("svg[role=img][aria-label^='Requests per hour by outcome']").count() == 1
        total = sum(c.count for c in cells)
        assert f"{total:,} requests" in page.text_content("main")
        assert page.locator("svg[aria-label^='Latency p50, p95 and p99']").count() == 1
        # The last hour's p95: 20 of its offers took 900 ms (bucket "up to 1000 ms").
        last = page.locator("[data-testid=latency] tbody tr").last.locator("td").all_text_contents()
        assert last[2] == "1000 ms"
        shot(page, "insights-traffic")

        # Errors: type x route; the offer route's missing_scope cell holds its 3.
        page.goto(f"{stack.portal}/live/insights/errors")
        target = page.locator(f"a[data-testid=error-cell][data-route='{OFFER}'][data-type='missing_scope']")
        assert target.text_content() == "3"
        shot(page, "insights-errors")
        target.click()
        page.wait_for_url(re.compile(r"/live/requests\?"))
        listed = page.locator("tr[data-request-id]")
        want = {r.request_id for r in seeded["records"][:3]}
        assert {listed.nth(i).get_attribute("data-request-id") for i in range(listed.count())} == want
        assert page.input_value("input[name=error_type]") == "missing_scope"
        assert page.input_value("input[name=route]") == "/v1/hotels/offers/{offer_id}"
        shot(page, "insights-error-requests")

        # Keys: calls and error rate per key, by name.
        page.goto(f"{stack.portal}/live/insights/keys")
        for key_id in seeded["keys"]:
            calls = sum(c.count for c in cells if c.key_id == key_id)
            row = page.locator(f"tr[data-key-id='{key_id}']")
            assert f"{calls:,}" in row.text_content()
        shot(page, "insights-keys")

        # Searches: today's burn-down and look-to-book past the target.
        page.goto(f"{stack.portal}/live/insights/searches")
        today = seeded["today"]
        searches = 6 * PAST_SEARCHES + today
        assert page.text_content("[data-testid=ratio]") == f"{searches / BOOKINGS:,.0f}:1"
        assert page.text_content("[data-testid=target]") == f"{TARGET:,}:1"
        assert page.text_content("[data-testid=ltb-state]") == "past the target"
        burn = page.text_content("[data-testid=burn-down]")
        assert f"{today:,} of {ALLOWANCE:,} searches used today" in burn
        rows = page.locator("[data-testid=burn-down] tbody tr")
        assert rows.last.locator("td").all_text_contents() == [f"{today:,}", f"{ALLOWANCE - today:,}"]
        shot(page, "insights-searches")

        # Webhooks: the answering endpoint succeeded every time, the unreachable one never.
        page.goto(f"{stack.portal}/live/insights/webhooks")
        ok, down = seeded["endpoints"]
        ok_cells = page.locator(f"tr[data-endpoint-id='{ok}'] td").all_text_contents()
        down_cells = page.locator(f"tr[data-endpoint-id='{down}'] td").all_text_contents()
        assert ok_cells[1:4] == [f"{BOOKINGS:,}", f"{BOOKINGS:,}", "100.0 %"]
        attempts, *failed = (int(down_cells[i].replace(",", "")) for i in (1, 4, 5, 6))
        assert down_cells[2:4] == ["0", "0.0 %"] and attempts >= 1 and sum(failed) == attempts
        assert page.locator("svg[aria-label='webhook delivery success rate']").count() == 1
        shot(page, "insights-webhooks")
    finally:
        context.close()
