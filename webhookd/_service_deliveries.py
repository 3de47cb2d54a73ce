"""The delivery log's reads of WebhookService: deliveries, attempts and their counts, each filtered to one
account and environment (a mixin, as ``EventReads`` is for events)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import grpc

from svckit.prototables import ATTEMPT_OUTCOME, DELIVERY_STATUS
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd import _convert as cv
from webhookd._errors import InvalidRequest
from webhookd._events import EVENT_KINDS, TEST_EVENT_KIND
from webhookd._repository import DeliveryFilter, Repository


class DeliveryReads:
    repo: Repository

    def _filter(self, request: Any, account_id: str, env: str, **extra: str) -> DeliveryFilter:
        since = cv.time_or_none(request, "since")
        until = cv.time_or_none(request, "until")
        if since and until and until <= since:
            raise InvalidRequest("until: must be after since")
        return DeliveryFilter(
            account_id=account_id,
            environment=env,
            endpoint_id=request.endpoint_id,
            event_id=request.event_id,
            since=since,
            until=until,
            **extra,
        )

    async def ListDeliveries(
        self, request: pb.ListDeliveriesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListDeliveriesResponse:
        account_id, env = cv.scope(request)
        status = ""
        if request.status:
            status = DELIVERY_STATUS.get(request.status)
            if not status:
                raise InvalidRequest("status: unknown delivery status")
        if request.event_type and request.event_type not in (*EVENT_KINDS, TEST_EVENT_KIND):
            raise InvalidRequest(
                f"event_type: unknown event kind {request.event_type[:64]!r}; "
                f"known kinds: {', '.join((*EVENT_KINDS, TEST_EVENT_KIND))}"
            )
        flt = self._filter(
            request,
            account_id,
            env,
            status=status,
            event_type=request.event_type,
            delivery_id=request.delivery_id,
        )
        size = cv.page_size(request.page_size)
        rows = await self.repo.list_deliveries(flt, size + 1, cv.parse_page_token(request.page_token))
        token = cv.page_token(rows[size - 1].created_at, rows[size - 1].id) if len(rows) > size else ""
        return pb.ListDeliveriesResponse(
            deliveries=[cv.delivery_pb(d) for d in rows[:size]], next_page_token=token
        )

    async def ListAttempts(
        self, request: pb.ListAttemptsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAttemptsResponse:
        account_id, env = cv.scope(request)
        outcome = ""
        if request.outcome:
            outcome = ATTEMPT_OUTCOME.get(request.outcome)
            if not outcome:
                raise InvalidRequest("outcome: unknown attempt outcome")
        flt = self._filter(request, account_id, env, delivery_id=request.delivery_id)
        size = cv.page_size(request.page_size)
        rows = await self.repo.list_attempts(flt, outcome, size + 1, cv.parse_page_token(request.page_token))
        token = cv.page_token(rows[size - 1].attempted_at, rows[size - 1].id) if len(rows) > size else ""
        return pb.ListAttemptsResponse(
            attempts=[cv.attempt_pb(a) for a in rows[:size]], next_page_token=token
        )

    async def GetAttemptStats(
        self, request: pb.GetAttemptStatsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetAttemptStatsResponse:
        account_id, env = cv.scope(request)
        if not request.HasField("since"):
            raise InvalidRequest("since: required")
        since = request.since.ToDatetime(dt.UTC)
        recent = request.recent_since.ToDatetime(dt.UTC) if request.HasField("recent_since") else None
        if recent is not None and recent < since:
            raise InvalidRequest("recent_since: must not be before since")
        total, ok, recent_total, recent_ok = await self.repo.attempt_stats(account_id, env, since, recent)
        return pb.GetAttemptStatsResponse(
            attempts=total, succeeded=ok, recent_attempts=recent_total, recent_succeeded=recent_ok
        )
