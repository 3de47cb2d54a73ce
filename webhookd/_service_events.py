"""webhookd's event reads: the StreamEvents feed (the process's one tailer fans new events out to the
open streams, webhookd._stream_hub), ListEvents and GetEvent. ``WebhookService`` inherits them."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import AsyncIterator

import grpc

from svckit.clock import Clock
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._errors import InvalidRequest, NotFound
from webhookd._events import EVENT_KINDS, check_event_kinds
from webhookd._repository import EventFilter, Repository
from webhookd._stream_hub import EventHub, StreamFilter

__all__ = ["EVENT_VISIBILITY", "EventHub", "EventReads"]

# How far back ListEvents and GetEvent reach (spec: what a partner can look back on is 30 days).
EVENT_VISIBILITY = dt.timedelta(days=30)


class EventReads:
    repo: Repository
    clock: Clock
    hub: EventHub

    # Stream

    async def StreamEvents(
        self, request: pb.StreamEventsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.StreamEventsResponse]:
        account_id, env = cv.scope(request)
        types = check_event_kinds(request.types, "types") if request.types else list(EVENT_KINDS)
        if request.since_event_id:
            seq: int | None = await self.repo.event_seq(account_id, env, request.since_event_id)
            if seq is None:
                raise NotFound(
                    f"since_event_id: no event {request.since_event_id} in this account and environment"
                )
        else:
            seq = None  # from now on
        flt = StreamFilter(account_id, env, frozenset(types))
        async with contextlib.aclosing(self.hub.events(self.repo, flt, seq)) as events:
            async for event in events:
                yield pb.StreamEventsResponse(event=cv.event_pb(event))

    async def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEventsResponse:
        account_id, env = cv.scope(request)
        types = check_event_kinds(request.types, "types") if request.types else list(EVENT_KINDS)
        oldest = self.clock.now() - EVENT_VISIBILITY
        since = cv.time_or_none(request, "since")
        until = cv.time_or_none(request, "until")
        if since and until and until <= since:
            raise InvalidRequest("until: must be after since")
        undelivered_to = ""
        if request.undelivered_to:
            undelivered_to = cv.identifier(request.undelivered_to, "undelivered_to")
            if await self.repo.get_endpoint(account_id, env, undelivered_to) is None:
                raise NotFound(
                    f"undelivered_to: no endpoint {undelivered_to} in this account and environment"
                )
        flt = EventFilter(account_id, env, tuple(types), max(since or oldest, oldest), until, undelivered_to)
        size = cv.page_size(request.page_size)
        rows = await self.repo.list_events(flt, size + 1, cv.parse_page_token(request.page_token))
        token = cv.page_token(rows[size - 1].created_at, rows[size - 1].id) if len(rows) > size else ""
        return pb.ListEventsResponse(events=[cv.event_pb(e) for e in rows[:size]], next_page_token=token)

    async def GetEvent(
        self, request: pb.GetEventRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetEventResponse:
        account_id, env = cv.scope(request)
        event_id = cv.identifier(request.event_id, "event_id")
        event = await self.repo.get_event(account_id, env, event_id, self.clock.now() - EVENT_VISIBILITY)
        if event is None or event.type not in EVENT_KINDS:
            raise NotFound(
                f"event_id: no event {event_id} of the last 30 days in this account and environment"
            )
        return pb.GetEventResponse(event=cv.event_pb(event))
