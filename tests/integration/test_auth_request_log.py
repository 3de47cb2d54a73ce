"""The request log in authsvc on SQLite and PostgreSQL: RecordRequests / ListRequests over gRPC (filters,
lookup by id, paging, what is kept of a path), the daily bound per account, and the purge after 30 days."""

from __future__ import annotations

import datetime as dt

import grpc
import pytest
import sqlalchemy as sa

from authsvc._model import Account, Actor
from authsvc._requestlog import RETENTION, RequestFilter, RequestRecord
from authsvc._sql import SqlRepository
from authsvc._sql_tables import request_counts
from authsvc.testing import error_of, new_account, running_authsvc
from svckit.db import create_engine
from svckit.protos import timestamp as ts
from svckit.vocabulary import AccountMode, AccountStatus, Environment
from travel.auth.v1 import auth_pb2 as pb

NOW = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
# Records sent to a running authsvc are of the last hour: its purge (once at start, then hourly) deletes
# those older than the retention, and a fixed date falls out of it as the calendar moves on.
RECENT = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(hours=1)
ACTOR = Actor("alice@partner.example", "192.0.2.1")


def rec(
    n: int,
    account_id: str,
    *,
    status: int = 200,
    key_id: str = "key_a",
    env: pb.Environment.ValueType = pb.ENVIRONMENT_SANDBOX,
    at: dt.datetime = RECENT,
    path: str = "/v1/hotels/search",
    error_type: str = "",
) -> pb.RequestRecord:
    return pb.RequestRecord(
        request_id=f"req_{n:024x}",
        account_id=account_id,
        environment=env,
        key_id=key_id,
        key_hint="svc_test_...Ab12",
        method="GET",
        path=path,
        status=status,
        error_type=error_type,
        latency_ms=n,
        occurred_at=ts(at + dt.timedelta(seconds=n)),
    )


async def test_record_and_list_with_filters_and_pages(db_url: str) -> None:
    async with running_authsvc(db_url) as (_, stub):
        acct = (await new_account(stub)).id
        other = (await new_account(stub)).id
        records = [
            rec(1, acct),
            rec(2, acct, status=403, error_type="missing_scope", key_id="key_b"),
            rec(3, acct, status=503, error_type="service_unavailable"),
            rec(4, acct, env=pb.ENVIRONMENT_LIVE),
            rec(5, other),
            # A secret pasted into a path, a query string, a path past the bound: never kept as sent.
            rec(6, acct, path="/v1/x/svc_test_" + "A" * 40 + "?token=s3cret"),
            rec(7, acct, path="/v1/" + "p" * 500),
        ]
        got = await stub.RecordRequests(pb.RecordRequestsRequest(records=records))
        assert (got.recorded, got.dropped) == (7, 0)
        # The same batch again (a retry after a lost answer): nothing filed twice.
        again = await stub.RecordRequests(pb.RecordRequestsRequest(records=records[:2]))
        assert again.recorded == 0

        def ask(**kw: object) -> pb.ListRequestsRequest:
            return pb.ListRequestsRequest(account_id=acct, environment=pb.ENVIRONMENT_SANDBOX, **kw)  # type: ignore[arg-type]

        listed = (await stub.ListRequests(ask())).requests
        assert [r.latency_ms for r in listed] == [7, 6, 3, 2, 1]  # newest first, sandbox only, own account
        assert listed[3].error_type == "missing_scope" and listed[3].key_hint == "svc_test_...Ab12"
        assert listed[1].path.startswith("/v1/x/svc_test_[REDACTED]") and "?" not in listed[1].path
        assert "s3cret" not in str(listed) and "A" * 40 not in str(listed)
        assert len(listed[0].path) == 200

        both = (await stub.ListRequests(pb.ListRequestsRequest(account_id=acct))).requests
        assert len(both) == 6
        assert [r.status for r in (await stub.ListRequests(ask(status_class=4))).requests] == [403]
        assert [r.status for r in (await stub.ListRequests(ask(status_class=5))).requests] == [503]
        assert [r.status for r in (await stub.ListRequests(ask(status=403))).requests] == [403]
        assert [r.key_id for r in (await stub.ListRequests(ask(key_id="key_b"))).requests] == ["key_b"]
        by_id = (await stub.ListRequests(ask(request_id=records[1].request_id))).requests
        assert [r.request_id for r in by_id] == [records[1].request_id]
        # Another account's request id is not found under this account.
        assert (await stub.ListRequests(ask(request_id=records[4].request_id))).requests == []
        window = ask(since=ts(RECENT + dt.timedelta(seconds=2)), until=ts(RECENT + dt.timedelta(seconds=4)))
        assert [r.latency_ms for r in (await stub.ListRequests(window)).requests] == [3, 2]

        seen: list[int] = []
        token = ""
        while True:
            page = await stub.ListRequests(ask(page_size=2, page_token=token))
            seen += [r.latency_ms for r in page.requests]
            token = page.next_page_token
            if not token:
                break
        assert seen == [7, 6, 3, 2, 1]

        code, etype, _ = await error_of(stub.ListRequests(ask(status_class=9)))
        assert (code, etype) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request")
        _, etype, _ = await error_of(stub.ListRequests(ask(page_token="nope")))
        assert etype == "invalid_request"
        # A malformed record is dropped (counted), the batch's others filed.
        bad = pb.RequestRecord(request_id="nope", account_id=acct, status=200)
        mixed = await stub.RecordRequests(pb.RecordRequestsRequest(records=[bad, rec(8, acct)]))
        assert (mixed.recorded, mixed.dropped) == (1, 1)


async def seeded(db_url: str) -> SqlRepository:
    repo = SqlRepository(create_engine(db_url))
    await repo.migrate()
    await repo.create_account(
        Account("acct_1", "P", AccountMode.A, AccountStatus.ACTIVE, (), 100, NOW, NOW), ACTOR
    )
    return repo


def record(n: int, at: dt.datetime, account_id: str = "acct_1") -> RequestRecord:
    return RequestRecord(
        f"req_{n:024x}",
        account_id,
        Environment.LIVE,
        "key_1",
        "svc_live_...abcd",
        "GET",
        "/v1/a",
        200,
        "",
        1,
        at,
    )


async def test_daily_bound_drops_and_counts_per_account(db_url: str) -> None:
    repo = await seeded(db_url)
    try:
        assert await repo.record_requests([record(n, NOW) for n in range(3)], bound=5) == (3, 0)
        # Two of the next four fit under the bound; another account has its own.
        batch = [record(n, NOW) for n in range(3, 7)] + [record(100, NOW, "acct_2")]
        assert await repo.record_requests(batch, bound=5) == (3, 2)
        assert await repo.record_requests([record(7, NOW)], bound=5) == (0, 1)
        # The next UTC day starts again.
        tomorrow = NOW + dt.timedelta(days=1)
        assert await repo.record_requests([record(8, tomorrow)], bound=5) == (1, 0)
        rows = await repo.list_requests("acct_1", Environment.LIVE, RequestFilter(), 100, None)
        assert len(rows) == 6
        async with repo.engine.connect() as conn:
            counts = dict(
                (r[0], r[1])
                for r in await conn.execute(
                    sa.select(request_counts.c.day, request_counts.c.offered).where(
                        request_counts.c.account_id == "acct_1"
                    )
                )
            )
        assert counts == {"2026-05-01": 8, "2026-05-02": 1}
    finally:
        await repo.engine.dispose()


async def test_purge_deletes_records_past_the_retention(db_url: str) -> None:
    repo = await seeded(db_url)
    try:
        old, young = NOW - RETENTION - dt.timedelta(seconds=1), NOW - RETENTION + dt.timedelta(seconds=1)
        assert await repo.record_requests([record(1, old), record(2, young), record(3, NOW)]) == (3, 0)
        assert await repo.purge_requests(NOW - RETENTION) == 1
        rows = await repo.list_requests("acct_1", None, RequestFilter(), 100, None)
        assert [r.request_id for r in rows] == [f"req_{3:024x}", f"req_{2:024x}"]
        async with repo.engine.connect() as conn:
            days = sorted(r[0] for r in await conn.execute(sa.select(request_counts.c.day)))
        assert days == [young.date().isoformat(), NOW.date().isoformat()]
    finally:
        await repo.engine.dispose()


@pytest.mark.parametrize("status", [0, 99, 600])
async def test_a_record_with_no_status_is_refused(sqlite_url: str, status: int) -> None:
    async with running_authsvc(sqlite_url) as (_, stub):
        acct = (await new_account(stub)).id
        got = await stub.RecordRequests(pb.RecordRequestsRequest(records=[rec(1, acct, status=status)]))
        assert (got.recorded, got.dropped) == (0, 1)


async def test_filters_by_error_type_method_and_route_template(db_url: str) -> None:
    """What an Insights error cell links to: one error type on one route template, exactly; a page of
    matches is full even when paths the LIKE narrowing lets through fill the rows in between."""
    async with running_authsvc(db_url) as (_, stub):
        acct = (await new_account(stub)).id
        offer = "/v1/hotels/offers/{offer_id}"
        records = [
            rec(1, acct, status=403, error_type="missing_scope", path="/v1/hotels/offers/off_1"),
            rec(2, acct, status=404, error_type="not_found", path="/v1/hotels/offers/off_2"),
            rec(3, acct, status=403, error_type="missing_scope", path="/v1/hotels/search"),
            # Matches the LIKE pattern, not the template (two segments where it has one).
            *[
                rec(10 + i, acct, status=403, error_type="missing_scope", path=f"/v1/hotels/offers/o{i}/x")
                for i in range(5)
            ],
            rec(20, acct, status=403, error_type="missing_scope", path="/v1/hotels/offers/off_3"),
            # A path that only shares a prefix with the template.
            rec(21, acct, status=403, error_type="missing_scope", path="/v1/hotels/offersX/off_4"),
        ]
        await stub.RecordRequests(pb.RecordRequestsRequest(records=records))

        async def ids(**kw: object) -> tuple[list[int], str]:
            page = await stub.ListRequests(
                pb.ListRequestsRequest(account_id=acct, environment=pb.ENVIRONMENT_SANDBOX, **kw)  # type: ignore[arg-type]
            )
            return [r.latency_ms for r in page.requests], page.next_page_token

        assert (await ids(error_type="missing_scope", route=offer))[0] == [20, 1]
        assert (await ids(error_type="not_found", route=offer))[0] == [2]
        assert (await ids(route=offer))[0] == [20, 2, 1]
        assert (await ids(route=offer, method="POST"))[0] == []
        assert (await ids(route="/v1/hotels/search", method="GET"))[0] == [3]
        # Pages of one: the five non-matching rows between 20 and 2 never make a short or empty page.
        first, token = await ids(route=offer, page_size=1)
        second, token = await ids(route=offer, page_size=1, page_token=token)
        third, token = await ids(route=offer, page_size=1, page_token=token)
        assert (first, second, third) == ([20], [2], [1])
        assert (await ids(route=offer, page_size=1, page_token=token))[0] == [] if token else True
        for bad in (
            {"route": "v1/no-slash"},
            {"route": "/v1/{a}{b}"},
            {"method": "get"},
            {"error_type": "x y"},
        ):
            code, etype, _ = await error_of(
                stub.ListRequests(pb.ListRequestsRequest(account_id=acct, **bad))  # type: ignore[arg-type]
            )
            assert (code, etype) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request"), bad
