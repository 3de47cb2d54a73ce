"""AuthService's usage-count RPCs: RecordUsageCounts (an edge adds a batch of minute cells) and
QueryUsageCounts (the edge's GET /v1/usage, the portal, svcctl usage); and the hourly prune of rollup rows
past their retention (``UsagePrune``)."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import grpc

from authsvc import _validate as v
from authsvc._errors import Forbidden, InvalidRequest
from authsvc._metrics import USAGE_CELLS
from authsvc._periodic import Periodic
from authsvc._repository import Repository
from authsvc._service_base import ServicerBase
from authsvc._sql_usage_tables import MAX_BATCH_ID, MAX_ERROR_TYPE, MAX_ROUTE
from authsvc._usage_rules import (
    DIMENSIONS,
    MAX_CELLS,
    PRUNE_INTERVAL,
    RETENTION,
    Grain,
    Retention,
    UsageCell,
    UsageQuery,
    period_start,
    rollup_for,
)
from svckit.clock import Clock, SystemClock
from svckit.peers import portal_user_var
from svckit.protos import timestamp as ts
from svckit.prototables import AUTH_ENVIRONMENT
from svckit.usagecounts import BUCKETS, LATENCY_BOUNDS_MS, percentiles
from travel.auth.v1 import auth_pb2 as pb

log = logging.getLogger(__name__)

_APPLIED = USAGE_CELLS.labels("applied")
_INVALID = USAGE_CELLS.labels("invalid")
_DUPLICATE = USAGE_CELLS.labels("duplicate")

# UsageGroup -> a rollup column (DIMENSIONS) or a time grain.
GROUP_COLUMNS: dict[int, str] = {
    pb.USAGE_GROUP_KEY: "key_id",
    pb.USAGE_GROUP_ROUTE: "route",
    pb.USAGE_GROUP_STATUS: "status",
    pb.USAGE_GROUP_ERROR_TYPE: "error_type",
    pb.USAGE_GROUP_ENVIRONMENT: "environment",
}
GROUP_GRAINS: dict[int, Grain] = {
    pb.USAGE_GROUP_MINUTE: Grain.MINUTE,
    pb.USAGE_GROUP_HOUR: Grain.HOUR,
    pb.USAGE_GROUP_DAY: Grain.DAY,
}
GRAIN_GROUPS: dict[Grain, Any] = {grain: group for group, grain in GROUP_GRAINS.items()}


def _word(value: str, max_len: int, field: str) -> str:
    if len(value) > max_len or not (value.isascii() and value.isprintable()):
        raise InvalidRequest(f"{field}: printable ASCII, at most {max_len} characters")
    return value


def _environment_word(value: int) -> str:
    if value == pb.ENVIRONMENT_UNSPECIFIED:
        return ""
    try:
        return str(AUTH_ENVIRONMENT.word(value))
    except ValueError:
        raise InvalidRequest("environment: not an Environment") from None


def cell_of(c: pb.UsageCount) -> UsageCell:
    """A recorded cell from the edge's; InvalidRequest when a field is not one. The period is the start of
    the minute holding ``period_start``; the histogram must have BUCKETS elements adding up to the count."""
    if not c.HasField("period_start"):
        raise InvalidRequest("period_start: required")
    if c.count <= 0 or c.latency_sum_ms < 0:
        raise InvalidRequest("count: at least 1; latency_sum_ms: not negative")
    if len(c.latency_buckets) != BUCKETS or min(c.latency_buckets) < 0 or sum(c.latency_buckets) != c.count:
        raise InvalidRequest(f"latency_buckets: {BUCKETS} counts adding up to count")
    if not (c.status == 0 or 100 <= c.status <= 599):
        raise InvalidRequest("status: an HTTP status")
    return UsageCell(
        account_id=v.ident(c.account_id, "account_id", "acct") if c.account_id else "",
        environment=_environment_word(c.environment),
        key_id=v.ident(c.key_id, "key_id", "key") if c.key_id else "",
        route=_word(c.route, MAX_ROUTE, "route"),
        status=c.status,
        error_type=_word(c.error_type, MAX_ERROR_TYPE, "error_type"),
        period=period_start(c.period_start.seconds, Grain.MINUTE),
        count=c.count,
        latency_sum_ms=c.latency_sum_ms,
        buckets=tuple(c.latency_buckets),
    )


def row_pb(cell: UsageCell) -> pb.UsageRow:
    counts = pb.UsageCount(
        account_id=cell.account_id,
        environment=AUTH_ENVIRONMENT.pb(cell.environment) if cell.environment else pb.ENVIRONMENT_UNSPECIFIED,
        key_id=cell.key_id,
        route=cell.route,
        status=cell.status,
        error_type=cell.error_type,
        count=cell.count,
        latency_buckets=cell.buckets,
        latency_sum_ms=cell.latency_sum_ms,
    )
    if cell.period >= 0:
        counts.period_start.CopyFrom(ts(dt.datetime.fromtimestamp(cell.period, dt.UTC)))
    p50, p95, p99 = percentiles(cell.buckets)
    return pb.UsageRow(counts=counts, latency=pb.UsageLatency(p50_ms=p50, p95_ms=p95, p99_ms=p99))


def query_groups(groups: list[int]) -> tuple[list[str], Grain | None]:
    """The columns and the time grain of a query's group_by; InvalidRequest for an unknown group, one
    named twice or two time grains."""
    columns: list[str] = []
    grain: Grain | None = None
    for group in groups:
        if group in GROUP_COLUMNS:
            name = GROUP_COLUMNS[group]
            if name in columns:
                raise InvalidRequest("group_by: a dimension named twice")
            columns.append(name)
        elif group in GROUP_GRAINS:
            if grain is not None:
                raise InvalidRequest("group_by: at most one of minute, hour, day")
            grain = GROUP_GRAINS[group]
        else:
            raise InvalidRequest("group_by: not a UsageGroup")
    return [d for d in DIMENSIONS if d in columns], grain


class UsageCountRpcs(ServicerBase):
    async def RecordUsageCounts(
        self, request: pb.RecordUsageCountsRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordUsageCountsResponse:
        batch_id = _word(request.batch_id, MAX_BATCH_ID, "batch_id")
        if not batch_id:
            raise InvalidRequest("batch_id: required")
        if len(request.counts) > MAX_CELLS:
            raise InvalidRequest(f"counts: at most {MAX_CELLS} a call")
        cells: list[UsageCell] = []
        invalid = 0
        for raw in request.counts:
            try:
                cells.append(cell_of(raw))
            except InvalidRequest:
                invalid += 1
        if invalid:
            # A bad cell must not cost the batch's good ones; counted, never logged with its values.
            _INVALID.inc(invalid)
            log.warning("usage cells refused", extra={"count": invalid})
        applied, duplicate = await self.repo.record_usage_counts(batch_id, cells, self.clock.now())
        if duplicate:
            _DUPLICATE.inc(len(cells))
        else:
            _APPLIED.inc(applied)
        return pb.RecordUsageCountsResponse(applied=applied, duplicate=duplicate)

    async def QueryUsageCounts(
        self, request: pb.QueryUsageCountsRequest, context: grpc.aio.ServicerContext
    ) -> pb.QueryUsageCountsResponse:
        if request.anonymous:
            # The requests no key was proven for are no account's: operators only, never the portal's
            # user (whose calls name the session's account).
            if portal_user_var.get() is not None:
                raise Forbidden("anonymous: operators only")
            if request.account_id:
                raise InvalidRequest("account_id: empty with anonymous")
            account_id = ""
        else:
            account_id = v.ident(request.account_id, "account_id", "acct")
        if not (request.HasField("from") and request.HasField("to")):
            raise InvalidRequest("from, to: required")
        start = getattr(request, "from").ToDatetime(dt.UTC)
        end = request.to.ToDatetime(dt.UTC)
        columns, time_group = query_groups(list(request.group_by))
        try:
            grain = rollup_for(start, end, time_group, self.clock.now(), self.usage_retention)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        env = _environment_word(request.environment) or None
        key_id = v.ident(request.key_id, "key_id", "key") if request.key_id else ""
        cells = await self.repo.query_usage_counts(
            UsageQuery(
                account_id,
                env,
                start,
                end,
                grain,
                columns,
                time_group,
                key_id=key_id,
                status=request.status,
                must_exist=not request.anonymous,
            )
        )
        return pb.QueryUsageCountsResponse(
            rows=[row_pb(c) for c in cells],
            latency_bounds_ms=LATENCY_BOUNDS_MS,
            granularity=GRAIN_GROUPS[grain],
        )


class UsagePrune(Periodic):
    """Deletes rollup rows past their retention every ``interval`` seconds (and once at start)."""

    task_name = "usage-prune"
    failure = "usage-count prune failed; will retry"
    log = log

    def __init__(
        self,
        repo: Repository,
        clock: Clock | None = None,
        retention: Retention = RETENTION,
        interval: float = PRUNE_INTERVAL,
    ) -> None:
        super().__init__(interval)
        self.repo = repo
        self.clock: Clock = clock or SystemClock()
        self.retention = retention

    async def prune(self) -> int:
        removed = await self.repo.prune_usage_counts(self.clock.now(), self.retention)
        if removed:
            log.info("pruned usage-count rows", extra={"count": removed})
        return removed

    once = prune
