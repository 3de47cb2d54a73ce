"""The WebhookService's calls of polling endpoints (docs/webhooks.md "Polling"): PollEndpoint, CommitPoll,
GetPollStatus. The rules are ``webhookd._polling``'s, the storage ``webhookd._polls``'."""

from __future__ import annotations

import logging
from typing import Any, Protocol, cast

import grpc
from google.protobuf import timestamp_pb2

from svckit.clock import Clock
from svckit.webhook_status import DestinationType, EndpointStatus
from travel.webhooks.v1 import webhooks_pb2 as pb
from webhookd._content import body_for
from webhookd._errors import Conflict, InvalidRequest, NotFound
from webhookd._polling import BadParameter, Verdict, is_cursor, poll_bounds
from webhookd._polls import PollStore
from webhookd._repository import EndpointRecord, Repository

log = logging.getLogger("webhookd.polling")


def _ts(when: Any) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(when)
    return ts


def is_polling(endpoint: EndpointRecord) -> bool:
    return endpoint.destination_type is DestinationType.POLLING


class HasPolls(Protocol):
    polls: PollStore  # ``_sql.SqlRepository``'s


class PollCalls:
    clock: Clock
    repo: Repository

    @property
    def polls(self) -> PollStore:
        return cast(HasPolls, self.repo).polls

    async def _endpoint(self, request: Any) -> EndpointRecord:
        raise NotImplementedError  # WebhookService's

    async def _polling_endpoint(self, request: Any) -> EndpointRecord:
        endpoint = await self._endpoint(request)
        if not is_polling(endpoint):  # its type does not allow it: conflict, as for a disabled one
            raise Conflict(
                f"endpoint_id: {endpoint.id} is not a polling endpoint (its type is "
                f"{endpoint.destination_type}); its events are pushed to it",
                metadata={"field": "endpoint_id"},
            )
        return endpoint

    async def PollEndpoint(
        self, request: pb.PollEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.PollEndpointResponse:
        try:
            bounds = poll_bounds(request.limit, request.lease_seconds)
        except BadParameter as bad:
            raise InvalidRequest(str(bad), metadata={"field": bad.field}) from None
        endpoint = await self._polling_endpoint(request)
        if endpoint.status != EndpointStatus.ENABLED:
            raise Conflict(
                "endpoint_id: the endpoint is disabled; enable it to poll again (its events are kept, held)"
            )
        batch = await self.polls.poll(endpoint, bounds, self.clock.now())
        out = pb.PollEndpointResponse(
            events=[
                pb.PolledEvent(delivery_id=i, envelope_json=body_for(endpoint, body).decode())
                for i, body in batch.items
            ],
            cursor=batch.cursor,
        )
        if batch.expires_at is not None:
            out.lease_expires_at.CopyFrom(_ts(batch.expires_at))
        if batch.items and log.isEnabledFor(logging.DEBUG):
            log.debug("batch leased", extra={"endpoint_id": endpoint.id, "events": len(batch.items)})
        return out

    async def CommitPoll(
        self, request: pb.CommitPollRequest, context: grpc.aio.ServicerContext
    ) -> pb.CommitPollResponse:
        cursor = request.cursor
        if not cursor:
            raise InvalidRequest(
                "cursor: required (the cursor a poll answered)", metadata={"field": "cursor"}
            )
        if not is_cursor(cursor):
            raise InvalidRequest(
                "cursor: not a cursor this API issued (pcur_ and 32 letters or digits, as a poll answers it)",
                metadata={"field": "cursor"},
            )
        endpoint = await self._polling_endpoint(request)
        done = await self.polls.commit(endpoint, cursor, self.clock.now())
        if done.verdict is Verdict.UNKNOWN:  # well formed, names no lease of this scope: not found
            raise NotFound(
                "cursor: no batch of this endpoint has this cursor (altered, made up, or a day past its "
                "lease)",
                metadata={"field": "cursor"},
            )
        if done.verdict is Verdict.FOREIGN:
            raise InvalidRequest(
                f"cursor: it was issued for the endpoint {done.endpoint_id}, not {endpoint.id}; "
                "commit it there",
                metadata={"field": "cursor"},
            )
        if done.verdict is Verdict.EXPIRED:
            expired = done.expires_at.isoformat().replace("+00:00", "Z") if done.expires_at else "?"
            raise Conflict(
                f"cursor: its lease ran out at {expired}, before this commit; its events are offered to the "
                "next poll again (deduplicate on the event id), so commit that batch instead",
                metadata={"field": "cursor"},
            )
        if done.verdict is Verdict.COMMIT:
            log.info(
                "batch committed",
                extra={"endpoint_id": endpoint.id, "committed": done.committed},
            )
        return pb.CommitPollResponse(committed_count=done.committed)

    async def GetPollStatus(
        self, request: pb.GetPollStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPollStatusResponse:
        endpoint = await self._polling_endpoint(request)
        status = await self.polls.status(endpoint.id, self.clock.now())
        out = pb.GetPollStatusResponse(
            pending_count=status.pending, leased_batches=status.leased_batches, leased_count=status.leased
        )
        if status.last_polled_at is not None:
            out.last_polled_at.CopyFrom(_ts(status.last_polled_at))
        return out
