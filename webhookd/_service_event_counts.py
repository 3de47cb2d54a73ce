"""webhookd's CountEvents: an account's events of one kind per UTC day (the bookings side of look-to-book,
read by authsvc's traffic alerts and the portal's Insights). ``WebhookService`` inherits it."""

from __future__ import annotations

import datetime as dt

import grpc

from svckit.clock import Clock
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._errors import InvalidRequest
from webhookd._events import EVENT_KINDS
from webhookd._repository import Repository
from webhookd._service_events import EVENT_VISIBILITY


class EventCounts:
    repo: Repository
    clock: Clock

    async def CountEvents(
        self, request: pb.CountEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CountEventsResponse:
        account_id, env = cv.scope(request)
        if request.type not in EVENT_KINDS:
            raise InvalidRequest(f"type: not an event kind of the catalog: {request.type[:64]!r}")
        now = self.clock.now()
        since = cv.time_or_none(request, "since")
        until = cv.time_or_none(request, "until")  # None: up to now, the events of this instant included
        if since is None:
            raise InvalidRequest("since: required")
        if since < now - EVENT_VISIBILITY - dt.timedelta(days=1):
            raise InvalidRequest("since: at most 30 days back (events are kept that long)")
        if until is not None and until <= since:
            raise InvalidRequest("until: must be after since")
        days = await self.repo.count_events_by_day(account_id, env, request.type, since, until)
        return pb.CountEventsResponse(days=[pb.EventDayCount(day=d.isoformat(), count=n) for d, n in days])
