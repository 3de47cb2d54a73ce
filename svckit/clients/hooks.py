"""``HooksClient``: webhookd's WebhookService.

async with HooksClient("127.0.0.1:50052", tls) as hooks:
    event = (await hooks.publish_event(pb.PublishEventRequest(...))).event
"""

from __future__ import annotations

from svckit.clients.rpc import Client, Stream, Unary
from svckit.portal_calls import HOOK_READS
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
    update_endpoint = Unary(pb.UpdateEndpointRequest, pb.UpdateEndpointResponse)
    delete_endpoint = Unary(pb.DeleteEndpointRequest, pb.DeleteEndpointResponse)
    enable_endpoint = Unary(pb.EnableEndpointRequest, pb.EnableEndpointResponse)
    rotate_signing_secret = Unary(pb.RotateSigningSecretRequest, pb.RotateSigningSecretResponse)
    send_test_event = Unary(pb.SendTestEventRequest, pb.SendTestEventResponse)
    publish_event = Unary(
        pb.PublishEventRequest, pb.PublishEventResponse, retry_if=lambda r: bool(r.idempotency_key)
    )
    list_deliveries = Unary(pb.ListDeliveriesRequest, pb.ListDeliveriesResponse)
    list_attempts = Unary(pb.ListAttemptsRequest, pb.ListAttemptsResponse)
    get_attempt_stats = Unary(pb.GetAttemptStatsRequest, pb.GetAttemptStatsResponse)
    resend_attempt = Unary(pb.ResendAttemptRequest, pb.ResendAttemptResponse)
    recover_endpoint = Unary(pb.RecoverEndpointRequest, pb.RecoverEndpointResponse)
    stream_events = Stream(pb.StreamEventsRequest, pb.StreamEventsResponse)
    list_events = Unary(pb.ListEventsRequest, pb.ListEventsResponse)
    get_event = Unary(pb.GetEventRequest, pb.GetEventResponse)
    advance_sandbox_clock = Unary(pb.AdvanceSandboxClockRequest, pb.AdvanceSandboxClockResponse)
    list_signing_keys = Unary(pb.ListSigningKeysRequest, pb.ListSigningKeysResponse)
