"""webhookd's QueryDeliveryCounts: an account's delivery attempts per endpoint and outcome over a range,
from the hour or day counts (``webhookd._delivery_counts``). ``WebhookService`` inherits it."""

from __future__ import annotations

import datetime as dt

import grpc

from svckit.clock import Clock
from svckit.protos import timestamp as ts
from svckit.usagecounts import LATENCY_BOUNDS_MS, percentiles
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._delivery_counts import DAY, HOUR, RETENTION
from webhookd._errors import InvalidRequest
from webhookd._repository import Repository

# DeliveryCountGroup -> the period grouped by, seconds (0: the whole range).
GROUP_SECONDS = {
    pb.DELIVERY_COUNT_GROUP_UNSPECIFIED: 0,
    pb.DELIVERY_COUNT_GROUP_HOUR: HOUR,
    pb.DELIVERY_COUNT_GROUP_DAY: DAY,
}
# The longest range one query reads.
MAX_RANGE = dt.timedelta(days=731)


def grain_for(start: dt.datetime, end: dt.datetime, group: int, now: dt.datetime) -> int:
    """Pure: the grain (HOUR or DAY) answering [start, end) grouped by ``group`` (a
    DeliveryCountGroup): days when both ends are whole days and the grouping is not by hour, else hours;
    ValueError naming the parameter when the ends are not whole hours or the grain's rows are no longer
    kept for ``start``."""
    if end <= start:
        raise ValueError("to: must be after from")
    if end - start > MAX_RANGE:
        raise ValueError(f"to: a range of at most {MAX_RANGE.days} days")
    ends = (int(start.timestamp()), int(end.timestamp()))
    whole_days = start.timestamp() % DAY == 0 and end.timestamp() % DAY == 0
    if group != pb.DELIVERY_COUNT_GROUP_HOUR and whole_days:
        grain = DAY
    elif all(t % HOUR == 0 for t in ends) and start.timestamp() == ends[0] and end.timestamp() == ends[1]:
        grain = HOUR
    else:
        raise ValueError("from, to: on whole hours (UTC), whole days to group by day")
    if start < now - RETENTION[grain]:
        raise ValueError(
            f"from: {'hour' if grain == HOUR else 'day'} counts are kept {RETENTION[grain].days} days"
        )
    return grain


class DeliveryCountReads:
    repo: Repository
    clock: Clock

    async def QueryDeliveryCounts(
        self, request: pb.QueryDeliveryCountsRequest, context: grpc.aio.ServicerContext
    ) -> pb.QueryDeliveryCountsResponse:
        account_id, env = cv.scope(request)
        if not (request.HasField("from") and request.HasField("to")):
            raise InvalidRequest("from, to: required")
        start = getattr(request, "from").ToDatetime(dt.UTC)
        end = request.to.ToDatetime(dt.UTC)
        if request.group_by not in (
            pb.DELIVERY_COUNT_GROUP_UNSPECIFIED,
            pb.DELIVERY_COUNT_GROUP_HOUR,
            pb.DELIVERY_COUNT_GROUP_DAY,
        ):
            raise InvalidRequest("group_by: not a DeliveryCountGroup")
        try:
            grain = grain_for(start, end, request.group_by, self.clock.now())
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        endpoint_id = cv.identifier(request.endpoint_id, "endpoint_id") if request.endpoint_id else ""
        rows = await self.repo.query_delivery_counts(
            account_id,
            env,
            start,
            end,
            grain,
            GROUP_SECONDS[request.group_by],
            endpoint_id,
        )
        out = pb.QueryDeliveryCountsResponse(latency_bounds_ms=LATENCY_BOUNDS_MS)
        for r in rows:
            p50, p95, p99 = percentiles(r.buckets)
            count = out.counts.add(
                endpoint_id=r.endpoint_id,
                outcome=r.outcome,
                count=r.count,
                latency_buckets=r.buckets,
                latency_sum_ms=r.latency_sum_ms,
                p50_ms=p50,
                p95_ms=p95,
                p99_ms=p99,
            )
            if r.period >= 0:
                count.period_start.CopyFrom(ts(dt.datetime.fromtimestamp(r.period, dt.UTC)))
        return out
