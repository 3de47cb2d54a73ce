"""The client library checks an event against the catalog before sending (HooksClient.publish_event,
svckit.clients.hooks.event_error): a product team's unit test finds a bad event with no server, as
docs/product-services.md shows; a good one is sent (and here finds nobody listening)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from svckit import catalog
from svckit.clients import ClientError, HooksClient, PeerUnavailable
from svckit.clients.hooks import event_error
from svckit.protos import struct
from travel.webhooks.v1 import webhooks_pb2 as wpb


def publish(kind: str, data: dict[str, Any], state: str = "") -> wpb.PublishEventRequest:
    return wpb.PublishEventRequest(
        account_id="acct_1", environment=wpb.ENVIRONMENT_SANDBOX, type=kind, state=state, data=struct(data)
    )


@pytest.mark.parametrize(
    ("request_", "field", "detail"),
    [
        (
            publish("booking.cancelled", {"booking_id": "bk_1"}),
            "data.booking_id",
            "data.booking_id: not a field of booking.cancelled events; its fields are booking, product, "
            "offer, amount, currency, customerRef, cancelledBy",
        ),
        (
            publish("booking.confirmed", {**catalog.example("booking.confirmed"), "amount": "12"}),
            "data.amount",
            "data.amount: '12' is not of type 'integer'",
        ),
        (
            publish("esim.usage_threshold", catalog.example("esim.usage_threshold"), "usage_threshold"),
            "state",
            "state: 'usage_threshold' is not a state of esim.usage_threshold events (states: active)",
        ),
        (
            publish("booking.confirmed", {**catalog.example("booking.confirmed"), "customerRef": ""}),
            "data.customerRef",
            "data.customerRef: '' should be non-empty",
        ),
        (publish("webhook.test", catalog.example("webhook.test")), "type", "type: unknown event kind"),
    ],
)
async def test_a_bad_event_raises_locally(request_: wpb.PublishEventRequest, field: str, detail: str) -> None:
    error = event_error(request_)
    assert error is not None
    assert (error.type, error.field, error.code) == (
        "invalid_request",
        field,
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert error.detail.startswith(detail) and error.status == 400
    async with HooksClient("127.0.0.1:9", None, timeout=0.5) as hooks:  # nothing listens: nothing is sent
        with pytest.raises(ClientError) as refused:
            await hooks.publish_event(request_)
    assert not isinstance(refused.value, PeerUnavailable) and refused.value.detail == error.detail


@pytest.mark.parametrize("kind", catalog.EVENT_KINDS)
async def test_every_catalog_example_passes_and_is_sent(kind: str) -> None:
    request_ = publish(kind, catalog.example(kind))
    assert event_error(request_) is None
    async with HooksClient("127.0.0.1:9", None, timeout=0.2) as hooks:
        with pytest.raises(PeerUnavailable):  # it went to the wire
            await hooks.publish_event(request_)
