"""What an endpoint may subscribe to, checked at registration and update against the account in a real
authsvc: a mode A account cannot subscribe to payment.* (mode B only) nor a mode B one to
ledger.low_balance, with a clear error and nothing stored; ``"*"`` subscribes to every kind, stored as
given so that kinds added later are included, and events of any kind reach it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from google.protobuf import field_mask_pb2

from authsvc.testing import ACTOR, running_authsvc
from svckit.errors import type_from_rpc_error
from tests.support import event_data
from travel.auth.v1 import auth_pb2
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, run_server

LIVE = pb.ENVIRONMENT_LIVE
URL = "https://127.0.0.1:9/hooks"


@pytest.fixture
async def hooks(
    sqlite_url: str,
) -> AsyncIterator[tuple[webhooks_pb2_grpc.WebhookServiceStub, dict[str, str]]]:
    async with running_authsvc(sqlite_url) as (auth_server, auth):
        accounts = {}
        for mode, pb_mode in (("A", auth_pb2.ACCOUNT_MODE_A), ("B", auth_pb2.ACCOUNT_MODE_B)):
            made = await auth.CreateAccount(
                auth_pb2.CreateAccountRequest(name=mode, mode=pb_mode, actor=ACTOR)
            )
            accounts[mode] = made.account.id
        wh = await run_server(
            Config(
                database=sqlite_url.replace(".db", "-wh.db"),
                listen="127.0.0.1:0",
                policy=Policy(allow_private=True),
                authsvc=f"127.0.0.1:{auth_server.port}",
            ),
            start_worker=False,
        )
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{wh.port}") as channel:
                yield webhooks_pb2_grpc.WebhookServiceStub(channel), accounts
        finally:
            await wh.stop(0)


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
