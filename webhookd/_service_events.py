"""webhookd's event reads: the StreamEvents feed (woken by ``EventHub`` when this process stores an
event, polling for others), ListEvents and GetEvent. ``WebhookService`` inherits them."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator

import grpc

from svckit.clock import Clock
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._errors import InvalidRequest, NotFound
from webhookd._events import EVENT_KINDS, check_event_kinds
from webhookd._repository import EventFilter, Repository

STREAM_BATCH = 200
STREAM_POLL_SECONDS = 1.0
# How far back ListEvents and GetEvent reach (spec: what a partner can look back on is 30 days).
EVENT_VISIBILITY = dt.timedelta(days=30)


class EventHub:
    """Wakes StreamEvents readers when this process stores an event (others are found by polling)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    def waiter(self) -> asyncio.Event:
        return self._event


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
            seq = await self.repo.event_seq(account_id, env, request.since_event_id)
            if seq is None:
                raise NotFound(
                    f"since_event_id: no event {request.since_event_id} in this account and environment"
                )
        else:
            seq = await self.repo.max_event_seq()
        while True:
            waiter = self.hub.waiter()
            batch = await self.repo.events_after(account_id, env, seq, types, STREAM_BATCH)
            for event in batch:
                yield pb.StreamEventsResponse(event=cv.event_pb(event))
                seq = event.seq
            if len(batch) == STREAM_BATCH:
                continue
            try:
                async with asyncio.timeout(STREAM_POLL_SECONDS):
                    await waiter.wait()
            except TimeoutError:
                pass

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
