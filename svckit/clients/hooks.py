"""``HooksClient``: webhookd's WebhookService.

async with HooksClient("127.0.0.1:50052", tls) as hooks:
    event = (await hooks.publish_event(pb.PublishEventRequest(...))).event

``publish_event`` checks the event against the event catalog before sending (svckit.eventcheck: its kind,
its state, its ``data`` by the kind's JSON Schema), exactly as webhookd will: a bad event raises the
``ClientError`` webhookd would answer (``invalid_request``, INVALID_ARGUMENT, ``field`` naming the field)
without a call, so a product team's own unit tests find it with no server running.
"""

from __future__ import annotations

import grpc
from google.protobuf import timestamp_pb2

from svckit.clients.errors import ClientError
from svckit.clients.rpc import Client, Metadata, Stream, Unary
from svckit.eventcheck import event_problem
from svckit.portal_calls import HOOK_READS
from svckit.protos import struct_to_dict
from travel.webhooks.v1 import webhooks_pb2 as pb

WEBHOOK_SERVICE = "travel.webhooks.v1.WebhookService"
# Reads only: every change (a publish, a registration, a resend) could be made twice by a retry. A publish
# with an idempotency key is the exception, retried by the client itself (publish_event's retry_if): webhookd
# answers a repeated key with the first event.
RETRIED_METHODS = HOOK_READS


class HooksClient(Client):
    SERVER = "webhookd"
    RETRIED = {WEBHOOK_SERVICE: RETRIED_METHODS}

    register_endpoint = Unary(pb.RegisterEndpointRequest, pb.RegisterEndpointResponse)
    get_endpoint = Unary(pb.GetEndpointRequest, pb.GetEndpointResponse)
    list_endpoints = Unary(pb.ListEndpointsRequest, pb.ListEndpointsResponse)
    send_certification_probes = Unary(pb.SendCertificationProbesRequest, pb.SendCertificationProbesResponse)
    update_endpoint = Unary(pb.UpdateEndpointRequest, pb.UpdateEndpointResponse)
    delete_endpoint = Unary(pb.DeleteEndpointRequest, pb.DeleteEndpointResponse)
    enable_endpoint = Unary(pb.EnableEndpointRequest, pb.EnableEndpointResponse)
    rotate_signing_secret = Unary(pb.RotateSigningSecretRequest, pb.RotateSigningSecretResponse)
    send_test_event = Unary(pb.SendTestEventRequest, pb.SendTestEventResponse)
    _publish_event = Unary(
        pb.PublishEventRequest, pb.PublishEventResponse, retry_if=lambda r: bool(r.idempotency_key)
    )
    list_deliveries = Unary(pb.ListDeliveriesRequest, pb.ListDeliveriesResponse)
    list_attempts = Unary(pb.ListAttemptsRequest, pb.ListAttemptsResponse)
    get_attempt_stats = Unary(pb.GetAttemptStatsRequest, pb.GetAttemptStatsResponse)
    count_events = Unary(pb.CountEventsRequest, pb.CountEventsResponse)
    resend_attempt = Unary(pb.ResendAttemptRequest, pb.ResendAttemptResponse)
    recover_endpoint = Unary(pb.RecoverEndpointRequest, pb.RecoverEndpointResponse)
    stream_events = Stream(pb.StreamEventsRequest, pb.StreamEventsResponse)
    list_events = Unary(pb.ListEventsRequest, pb.ListEventsResponse)
    get_event = Unary(pb.GetEventRequest, pb.GetEventResponse)
    advance_sandbox_clock = Unary(pb.AdvanceSandboxClockRequest, pb.AdvanceSandboxClockResponse)
    list_signing_keys = Unary(pb.ListSigningKeysRequest, pb.ListSigningKeysResponse)
    # Never retried by the client: a poll leases a batch (a retry would lease a second one); a commit is
    # idempotent, and its caller may retry it with the same cursor.
    poll_endpoint = Unary(pb.PollEndpointRequest, pb.PollEndpointResponse)
    commit_poll = Unary(pb.CommitPollRequest, pb.CommitPollResponse)
    get_poll_status = Unary(pb.GetPollStatusRequest, pb.GetPollStatusResponse)
    query_delivery_counts = Unary(pb.QueryDeliveryCountsRequest, pb.QueryDeliveryCountsResponse)

    async def publish_event(
        self,
        request: pb.PublishEventRequest,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (the gRPC deadline, as every method's)
        wait_for_ready: bool | None = None,
        metadata: Metadata | None = None,
        retry: bool = True,
    ) -> pb.PublishEventResponse:
        """PublishEvent, once the event passed the catalog's check (``event_error``); ``retry=False``:
        one attempt, even with an idempotency key (the caller retries on its own schedule)."""
        error = event_error(request)
        if error is not None:
            raise error
        return await self._publish_event(
            request, timeout=timeout, wait_for_ready=wait_for_ready, metadata=metadata, retry=retry
        )


def event_error(request: pb.PublishEventRequest) -> ClientError | None:
    """The error webhookd would answer ``request``'s event with for not being an event of the catalog (an
    unknown kind, a state not of the kind, ``data`` its schema refuses), or None."""
    problem = event_problem(request.type, request.state, struct_to_dict(request.data))
    if problem is None:
        return None
    return ClientError(
        "invalid_request",
        problem.message,
        field=problem.field,
        code=grpc.StatusCode.INVALID_ARGUMENT,
        detail=str(problem),
    )


async def sandbox_webhook_facts(
    hooks: HooksClient, account_id: str, since: timestamp_pb2.Timestamp
) -> tuple[list[str], list[tuple[str, str, int]]]:
    """What a certification run's checks need of webhookd: the kinds the account's sandbox endpoints
    name (wildcards left out), sorted, and each sandbox delivery made since ``since`` as (delivery id,
    kind, 200 when it succeeded else 0). authsvc reads them at a run's finish, svcctl for an operator's."""
    sandbox = pb.ENVIRONMENT_SANDBOX
    kinds: set[str] = set()
    token = ""
    while True:
        page = await hooks.list_endpoints(
            pb.ListEndpointsRequest(account_id=account_id, environment=sandbox, page_token=token)
        )
        kinds.update(k for e in page.endpoints for k in e.events if not k.endswith("*"))
        token = page.next_page_token
        if not token:
            break
    deliveries: list[tuple[str, str, int]] = []
    while True:
        listed = await hooks.list_deliveries(
            pb.ListDeliveriesRequest(
                account_id=account_id, environment=sandbox, since=since, page_token=token
            )
        )
        succeeded = pb.DELIVERY_STATUS_SUCCEEDED
        deliveries += [(d.id, d.event_type, 200 if d.status == succeeded else 0) for d in listed.deliveries]
        token = listed.next_page_token
        if not token:
            break
    return sorted(kinds), deliveries
