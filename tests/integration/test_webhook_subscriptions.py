"""What an endpoint may subscribe to, checked at registration and update against the account in a real
authsvc: a mode A account cannot subscribe to payment.* (mode B only) nor a mode B one to
ledger.low_balance, with a clear error and nothing stored; ``"*"`` subscribes to every kind, stored as
given so that kinds added later are included, and events of any kind reach it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import field_mask_pb2

from svckit.errors import type_from_rpc_error
from tests.integration.test_webhook_event_modes import accounts_of_both_modes
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc

LIVE = pb.ENVIRONMENT_LIVE
URL = "https://127.0.0.1:9/hooks"


@pytest.fixture
async def hooks(
    sqlite_url: str,
) -> AsyncIterator[tuple[webhooks_pb2_grpc.WebhookServiceStub, dict[str, str]]]:
    async with accounts_of_both_modes(sqlite_url) as (_wh, stub, accounts):
        yield stub, accounts


async def register(
    stub: webhooks_pb2_grpc.WebhookServiceStub, account_id: str, events: list[str]
) -> pb.Endpoint:
    resp = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(account_id=account_id, environment=LIVE, url=URL, events=events)
    )
    return resp.endpoint  # type: ignore[no-any-return]


async def refused(stub: webhooks_pb2_grpc.WebhookServiceStub, account_id: str, events: list[str]) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await register(stub, account_id, events)
    etype, message = type_from_rpc_error(info.value)
    assert etype == "invalid_request", message
    return message


async def test_mode_only_kinds_are_refused_at_registration_and_update(
    hooks: tuple[webhooks_pb2_grpc.WebhookServiceStub, dict[str, str]],
) -> None:
    stub, accounts = hooks
    message = await refused(stub, accounts["A"], ["booking.confirmed", "payment.succeeded"])
    assert "payment.succeeded" in message and "mode B" in message and "mode A" in message
    assert "ledger.low_balance" in await refused(stub, accounts["B"], ["ledger.low_balance"])
    for mode in ("A", "B"):
        listed = await stub.ListEndpoints(
            pb.ListEndpointsRequest(account_id=accounts[mode], environment=LIVE)
        )
        assert list(listed.endpoints) == []  # nothing stored
    # Each mode's own kinds are fine.
    assert list((await register(stub, accounts["B"], ["payment.failed"])).events) == ["payment.failed"]
    ep = await register(stub, accounts["A"], ["ledger.low_balance"])
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.UpdateEndpoint(
            pb.UpdateEndpointRequest(
                account_id=accounts["A"], environment=LIVE, endpoint_id=ep.id,
                update_mask=field_mask_pb2.FieldMask(paths=["events"]), events=["payment.refunded"],
            )
        )  # fmt: skip
    assert "payment.refunded" in type_from_rpc_error(info.value)[1]
    got = await stub.GetEndpoint(
        pb.GetEndpointRequest(account_id=accounts["A"], environment=LIVE, endpoint_id=ep.id)
    )
    assert list(got.endpoint.events) == ["ledger.low_balance"]


async def test_star_subscribes_to_every_kind(
    hooks: tuple[webhooks_pb2_grpc.WebhookServiceStub, dict[str, str]],
) -> None:
    stub, accounts = hooks
    ep = await register(stub, accounts["B"], ["*"])
    assert list(ep.events) == ["*"]  # stored as given: kinds added later are included
    for kind in ("booking.confirmed", "payment.succeeded", "esim.provisioned", "apikey.revoked"):
        published = await stub.PublishEvent(
            pb.PublishEventRequest(
                account_id=accounts["B"], environment=LIVE, type=kind, data=event_data(kind)
            )
        )
        assert published.delivery_count == 1, kind
    message = await refused(stub, accounts["B"], ["*", "booking.confirmed"])
    assert '"*"' in message
    assert "known kinds" in await refused(stub, accounts["B"], ["booking.*"])
