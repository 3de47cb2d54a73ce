"""Usage counts in authsvc on SQLite and PostgreSQL: RecordUsageCounts adds minute cells into the minute,
hour and day rollups (a batch id applied again counts nothing), QueryUsageCounts sums one account's cells
grouped as asked and reads latency percentiles from the summed buckets, bad input is refused naming the
field, and the prune deletes what is past each rollup's retention."""

from __future__ import annotations

import datetime as dt

import grpc
import pytest

from authsvc._errors import Forbidden
from authsvc._service import AuthServicer
from authsvc._sql import SqlRepository
from authsvc._usage_rules import RETENTION, Grain, UsageCell, UsageQuery
from authsvc._watch import ChangeHub
from authsvc.testing import error_of, new_account, running_authsvc
from svckit.db import create_engine
from svckit.peers import portal_user_var
from svckit.portal_calls import PortalUser
from svckit.protos import timestamp as ts
from svckit.usagecounts import BUCKETS, LATENCY_BOUNDS_MS
from travel.auth.v1 import auth_pb2 as pb

# Today, 01:00 UTC or the last full hour before now when that is earlier: inside every rollup's retention.
NOW = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
DAY = NOW.replace(hour=0)
HOUR = NOW - dt.timedelta(hours=1) if NOW.hour else NOW


def hist(**at: int) -> list[int]:
    """A histogram with ``b<i>=n`` in bucket i."""
    out = [0] * BUCKETS
    for name, n in at.items():
        out[int(name[1:])] = n
    return out


def cell(
    acct: str,
    key: str,
    status: int,
    at: dt.datetime,
    count: int,
    buckets: list[int],
    *,
    route: str = "GET /v1/hotels/search",
    error_type: str = "",
    env: pb.Environment.ValueType = pb.ENVIRONMENT_SANDBOX,
) -> pb.UsageCount:
    return pb.UsageCount(
        account_id=acct,
        environment=env,
        key_id=key,
        route=route,
        status=status,
        error_type=error_type,
        period_start=ts(at),
        count=count,
        latency_buckets=buckets,
        latency_sum_ms=count * 3,
    )


def query(
    acct: str, *groups: pb.UsageGroup.ValueType, start: dt.datetime = DAY, **kw: object
) -> pb.QueryUsageCountsRequest:
    req = pb.QueryUsageCountsRequest(account_id=acct, group_by=list(groups), **kw)  # type: ignore[arg-type]
    getattr(req, "from").CopyFrom(ts(start))
    req.to.CopyFrom(ts(DAY + dt.timedelta(days=1)))
    return req


async def test_record_group_and_read_percentiles(db_url: str) -> None:
    async with running_authsvc(db_url) as (_, stub):
        acct = (await new_account(stub)).id
        other = (await new_account(stub)).id
        minute = HOUR + dt.timedelta(minutes=7, seconds=31)  # stored under its minute
        cells = [
            cell(acct, "key_a", 200, minute, 90, hist(b0=90)),
            cell(acct, "key_a", 200, minute + dt.timedelta(minutes=1), 10, hist(b5=10)),
            cell(acct, "key_b", 403, minute, 4, hist(b1=4), error_type="missing_scope"),
            cell(acct, "key_b", 200, minute, 1, hist(b11=1), env=pb.ENVIRONMENT_LIVE),
            cell(other, "key_c", 200, minute, 7, hist(b0=7)),
        ]
        got = await stub.RecordUsageCounts(pb.RecordUsageCountsRequest(batch_id="edge-1:1", counts=cells))
        assert (got.applied, got.duplicate) == (5, False)
        # The same batch again (its answer was lost): counted once.
        again = await stub.RecordUsageCounts(pb.RecordUsageCountsRequest(batch_id="edge-1:1", counts=cells))
        assert (again.applied, again.duplicate) == (0, True)
        # Another batch adds into the same cells.
        await stub.RecordUsageCounts(
            pb.RecordUsageCountsRequest(
                batch_id="edge-2:1", counts=[cell(acct, "key_a", 200, minute, 5, hist(b0=5))]
            )
        )

        by_key = await stub.QueryUsageCounts(query(acct, pb.USAGE_GROUP_KEY, pb.USAGE_GROUP_STATUS))
        assert by_key.granularity == pb.USAGE_GROUP_DAY
        assert list(by_key.latency_bounds_ms) == list(LATENCY_BOUNDS_MS)
        rows = [(r.counts.key_id, r.counts.status, r.counts.count) for r in by_key.rows]
        assert rows == [("key_a", 200, 105), ("key_b", 200, 1), ("key_b", 403, 4)]
        a = by_key.rows[0]
        # 95 of 105 under 5 ms, 10 under 250 ms: p50 5, p95 250 (rank 100 is in bucket 5), p99 250.
        assert (a.latency.p50_ms, a.latency.p95_ms, a.latency.p99_ms) == (5, 250, 250)
        assert (
            a.counts.latency_sum_ms == 105 * 3
            and not a.counts.route
            and not a.counts.HasField("period_start")
        )

        hourly = await stub.QueryUsageCounts(
            query(acct, pb.USAGE_GROUP_HOUR, pb.USAGE_GROUP_ERROR_TYPE, environment=pb.ENVIRONMENT_SANDBOX)
        )
        assert hourly.granularity == pb.USAGE_GROUP_HOUR
        assert [
            (r.counts.period_start.ToDatetime(dt.UTC), r.counts.error_type, r.counts.count)
            for r in hourly.rows
        ] == [
            (HOUR, "", 105),
            (HOUR, "missing_scope", 4),
        ]
        per_minute = await stub.QueryUsageCounts(query(acct, pb.USAGE_GROUP_MINUTE, key_id="key_a"))
        assert per_minute.granularity == pb.USAGE_GROUP_MINUTE
        assert [r.counts.count for r in per_minute.rows] == [95, 10]
        totals = await stub.QueryUsageCounts(query(acct))
        assert [r.counts.count for r in totals.rows] == [110]
        only_403 = await stub.QueryUsageCounts(query(acct, pb.USAGE_GROUP_ROUTE, status=403))
        assert [(r.counts.route, r.counts.count) for r in only_403.rows] == [("GET /v1/hotels/search", 4)]


async def test_anonymous_cells_are_their_own(db_url: str) -> None:
    async with running_authsvc(db_url) as (_, stub):
        acct = (await new_account(stub)).id
        anon = cell("", "", 401, HOUR, 3, hist(b0=3), error_type="invalid_api_key", route="")
        await stub.RecordUsageCounts(pb.RecordUsageCountsRequest(batch_id="e:1", counts=[anon]))
        assert not (await stub.QueryUsageCounts(query(acct))).rows
        req = query("", pb.USAGE_GROUP_ERROR_TYPE)
        req.anonymous = True
        rows = (await stub.QueryUsageCounts(req)).rows
        assert [(r.counts.error_type, r.counts.count) for r in rows] == [("invalid_api_key", 3)]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"group_by": [pb.USAGE_GROUP_HOUR, pb.USAGE_GROUP_DAY]}, "group_by"),
        ({"account_id": "nope"}, "account_id"),
        ({"start": DAY + dt.timedelta(seconds=30)}, "from"),
        ({"start": DAY - dt.timedelta(days=3), "group_by": [pb.USAGE_GROUP_MINUTE]}, "from"),
    ],
)
async def test_bad_queries_name_the_field(db_url: str, change: dict[str, object], field: str) -> None:
    async with running_authsvc(db_url) as (_, stub):
        acct = (await new_account(stub)).id
        req = pb.QueryUsageCountsRequest(
            account_id=str(change.get("account_id", acct)),
            group_by=change.get("group_by", []),  # type: ignore[arg-type]
        )
        start = change.get("start", DAY)
        assert isinstance(start, dt.datetime)
        getattr(req, "from").CopyFrom(ts(start))
        req.to.CopyFrom(ts(DAY + dt.timedelta(days=1)))
        code, etype, message = await error_of(stub.QueryUsageCounts(req))
        assert (code, etype) == (grpc.StatusCode.INVALID_ARGUMENT, "invalid_request")
        assert message.startswith(field), message


async def test_a_bad_cell_costs_only_itself(db_url: str) -> None:
    async with running_authsvc(db_url) as (_, stub):
        acct = (await new_account(stub)).id
        good = cell(acct, "key_a", 200, HOUR, 2, hist(b0=2))
        wrong_sum = cell(acct, "key_a", 200, HOUR, 3, hist(b0=2))
        bad_key = cell(acct, "nokey", 200, HOUR, 1, hist(b0=1))
        got = await stub.RecordUsageCounts(
            pb.RecordUsageCountsRequest(batch_id="e:1", counts=[good, wrong_sum, bad_key])
        )
        assert got.applied == 1
        assert [r.counts.count for r in (await stub.QueryUsageCounts(query(acct))).rows] == [2]
        code, _, message = await error_of(stub.RecordUsageCounts(pb.RecordUsageCountsRequest(counts=[good])))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and message.startswith("batch_id")


async def test_prune_keeps_each_rollup_its_retention(db_url: str) -> None:
    engine = create_engine(db_url)
    repo = SqlRepository(engine)
    try:
        await repo.migrate()
        now = dt.datetime(2026, 6, 1, 12, 30, tzinfo=dt.UTC)

        def at(delta: dt.timedelta) -> UsageCell:
            t = int((now - delta).timestamp())
            return UsageCell(
                "acct_x", "live", "key_a", "GET /v1/x", 200, "", t - t % 60, 1, 1, (1,) + (0,) * (BUCKETS - 1)
            )

        old_minute = at(RETENTION.minute + dt.timedelta(hours=1))  # in the hour and day rollups only
        old_hour = at(RETENTION.hour + dt.timedelta(days=1))  # in the day rollup only
        old_day = at(RETENTION.day + dt.timedelta(days=2))  # gone
        fresh = at(dt.timedelta(minutes=5))
        for n, c in enumerate((old_minute, old_hour, old_day, fresh)):
            await repo.record_usage_counts(f"b:{n}", [c], now - dt.timedelta(days=800))
        await repo.record_usage_counts("recent", [], now)
        await repo.prune_usage_counts(now, RETENTION)

        async def periods(grain: Grain) -> int:
            cells = await repo.query_usage_counts(
                UsageQuery(
                    "acct_x",
                    None,
                    now - dt.timedelta(days=800),
                    now + dt.timedelta(days=1) - dt.timedelta(hours=12, minutes=30),
                    Grain.MINUTE
                    if grain is Grain.MINUTE
                    else Grain.HOUR
                    if grain is Grain.HOUR
                    else Grain.DAY,
                    [],
                    None,
                    must_exist=False,
                )
            )
            return sum(c.count for c in cells)

        assert await periods(Grain.MINUTE) == 1  # fresh
        assert await periods(Grain.HOUR) == 2  # fresh, old_minute
        assert await periods(Grain.DAY) == 3  # fresh, old_minute, old_hour
        # Old batch ids are gone (a retry that late would count again: documented), the recent one stays.
        again = await repo.record_usage_counts("b:0", [fresh], now)
        assert again == (1, False)
        assert await repo.record_usage_counts("recent", [fresh], now) == (0, True)
    finally:
        await engine.dispose()


async def test_a_portal_user_never_reads_the_anonymous_counts(sqlite_url: str) -> None:
    """The counts of requests no key was proven for are operators' only: a call made for a portal user
    (whose session names an account) is refused, whatever it names."""
    engine = create_engine(sqlite_url)
    repo = SqlRepository(engine)
    try:
        await repo.migrate()
        servicer = AuthServicer(repo, ChangeHub())
        req = query("")
        req.anonymous = True
        token = portal_user_var.set(PortalUser("acct_x", "usr_x", "a@partner.example", "owner", "ses_x"))
        try:
            with pytest.raises(Forbidden):
                await servicer.QueryUsageCounts(req, None)
        finally:
            portal_user_var.reset(token)
        assert not (await servicer.QueryUsageCounts(req, None)).rows
    finally:
        await engine.dispose()
