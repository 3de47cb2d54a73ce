"""Content filters and thin payloads through webhookd over real gRPC to a real HTTPS receiver: an endpoint
with a filter gets only the matching events (the others are no delivery: not counted, no attempt); a bad
filter is refused naming its path and changes nothing; a thin endpoint gets the thin envelope, signed as
sent."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import AsyncIterator

import grpc
import jsonschema
import pytest
from google.protobuf import field_mask_pb2

from svckit.signing import verify
from svckit.thinevents import thin_schema
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Receiver, trusted_receiver

ACCT = "acct_filt1"
LIVE = pb.ENVIRONMENT_LIVE
Stack = tuple[webhooks_pb2_grpc.WebhookServiceStub, Receiver]


@pytest.fixture
async def stack(tmp_path: pathlib.Path) -> AsyncIterator[Stack]:
    receiver, ca = trusted_receiver(tmp_path)
    config = Config(
        database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
        listen="127.0.0.1:0",
        policy=Policy(allow_private=True),
        ca_bundle=str(ca),
    )
    app: Webhookd = await run_server(config)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    yield webhooks_pb2_grpc.WebhookServiceStub(channel), receiver
    await channel.close()
    await app.stop(0)
    receiver.stop()


async def _register(
    stub: webhooks_pb2_grpc.WebhookServiceStub,
    url: str,
    filter_json: str = "",
    payload: pb.PayloadMode.ValueType = pb.PAYLOAD_MODE_UNSPECIFIED,
) -> pb.RegisterEndpointResponse:
    request = pb.RegisterEndpointRequest(
        account_id=ACCT,
        environment=LIVE,
        url=url,
        events=["booking.confirmed"],
        filter_json=filter_json,
        payload=payload,
    )
    made: pb.RegisterEndpointResponse = await stub.RegisterEndpoint(request)
    return made


async def _publish(
    stub: webhooks_pb2_grpc.WebhookServiceStub, product: str, booking: str
) -> pb.PublishEventResponse:
    data = event_data("booking.confirmed", product=product, booking=booking)
    request = pb.PublishEventRequest(account_id=ACCT, environment=LIVE, type="booking.confirmed", data=data)
    published: pb.PublishEventResponse = await stub.PublishEvent(request)
    return published


async def test_a_filtered_endpoint_gets_only_matching_events(stack: Stack) -> None:
    stub, receiver = stack
    flt = {"data": {"product": {"$in": ["hotels"]}, "booking": {"$startsWith": "bk_h"}}}
    filtered = await _register(stub, receiver.url("/filtered"), filter_json=json.dumps(flt))
    assert json.loads(filtered.endpoint.filter_json) == flt
    everything = await _register(stub, receiver.url("/all"))
    assert everything.endpoint.filter_json == ""

    hotel = await _publish(stub, "hotels", "bk_h1")
    flight = await _publish(stub, "flights", "bk_f1")
    other_hotel = await _publish(stub, "hotels", "bk_x1")
    # Only deliveries are counted: the filtered-out pairs are none.
    assert [hotel.delivery_count, flight.delivery_count, other_hotel.delivery_count] == [2, 1, 1]
    got = await receiver.wait_for(4)
    by_path: dict[str, list[str]] = {}
    for r in got:
        by_path.setdefault(r.path, []).append(json.loads(r.body)["id"])
    assert by_path["/filtered"] == [hotel.event.id]
    assert sorted(by_path["/all"]) == sorted([hotel.event.id, flight.event.id, other_hotel.event.id])

    # No delivery, so no attempt, for the filtered event.
    listed = await stub.ListDeliveries(
        pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE, event_id=flight.event.id)
    )
    assert [d.endpoint_id for d in listed.deliveries] == [everything.endpoint.id]
    # The receiver has the POST before the worker's next cycle commits its attempt: wait for the commit.
    deadline = time.monotonic() + 10
    while True:
        attempts = await stub.ListAttempts(
            pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, endpoint_id=filtered.endpoint.id)
        )
        if attempts.attempts or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert [a.event_id for a in attempts.attempts] == [hotel.event.id]


async def test_a_bad_filter_is_refused_naming_its_path_and_changes_nothing(stack: Stack) -> None:
    stub, receiver = stack
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _register(stub, receiver.url(), filter_json='{"data": {"amount": {"$regex": "^1"}}}')
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "filter.data.amount.$regex" in (caught.value.details() or "")
    assert "unknown operator $regex" in (caught.value.details() or "")
    listed = await stub.ListEndpoints(pb.ListEndpointsRequest(account_id=ACCT, environment=LIVE))
    assert list(listed.endpoints) == []

    made = await _register(stub, receiver.url(), filter_json='{"type": "booking.confirmed"}')
    before = made.endpoint.filter_updated_at.ToDatetime()
    mask = field_mask_pb2.FieldMask(paths=["filter_json"])
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UpdateEndpoint(
            pb.UpdateEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                endpoint_id=made.endpoint.id,
                update_mask=mask,
                filter_json='{"data": {"n": {"$gt": [1]}}}',
            )
        )
    assert "filter.data.n.$gt" in (caught.value.details() or "")
    got = await stub.GetEndpoint(
        pb.GetEndpointRequest(account_id=ACCT, environment=LIVE, endpoint_id=made.endpoint.id)
    )
    assert got.endpoint.filter_json == '{"type":"booking.confirmed"}'

    await asyncio.sleep(0.002)  # the next write's time is a later microsecond
    cleared = await stub.UpdateEndpoint(
        pb.UpdateEndpointRequest(
            account_id=ACCT, environment=LIVE, endpoint_id=made.endpoint.id, update_mask=mask, filter_json=""
        )
    )
    assert cleared.endpoint.filter_json == ""
    assert cleared.endpoint.filter_updated_at.ToDatetime() > before


async def test_a_thin_endpoint_gets_the_thin_envelope_signed_as_sent(stack: Stack) -> None:
    stub, receiver = stack
    thin = await _register(stub, receiver.url("/thin"), payload=pb.PAYLOAD_MODE_THIN)
    assert thin.endpoint.payload == pb.PAYLOAD_MODE_THIN
    full = await _register(stub, receiver.url("/full"))
    assert full.endpoint.payload == pb.PAYLOAD_MODE_FULL
    event = (await _publish(stub, "hotels", "bk_t1")).event
    got = {r.path: r for r in await receiver.wait_for(2)}

    body = json.loads(got["/thin"].body)
    jsonschema.validate(body, thin_schema("booking.confirmed"))
    assert body["id"] == event.id and body["type"] == "booking.confirmed"
    assert body["data"]["booking"] == "bk_t1" and body["data"]["product"] == "hotels"
    assert "amount" not in body["data"] and "customerRef" not in body["data"] and "state" not in body
    # The signature covers the bytes sent (the thin body), with the endpoint's secret.
    header = got["/thin"].headers["x-service-signature"]
    verify(got["/thin"].body, header, thin.signing_secret, time.time())

    assert got["/full"].body == event.envelope_json.encode()
    verify(got["/full"].body, got["/full"].headers["x-service-signature"], full.signing_secret, time.time())

    switched = await stub.UpdateEndpoint(
        pb.UpdateEndpointRequest(
            account_id=ACCT,
            environment=LIVE,
            endpoint_id=thin.endpoint.id,
            update_mask=field_mask_pb2.FieldMask(paths=["payload"]),
            payload=pb.PAYLOAD_MODE_FULL,
        )
    )
    assert switched.endpoint.payload == pb.PAYLOAD_MODE_FULL
