"""Content filters and thin payloads on every destination type (``destination_targets.TARGETS``: an HTTPS
receiver, the real RabbitMQ, the real NATS JetStream): an endpoint with a filter and ``payload: thin``
takes only the matching events, thin, signed over the thin bytes it took; the other event is no
delivery of it."""

from __future__ import annotations

import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from svckit.thinevents import references
from tests.e2e.destination_targets import TARGETS, Target
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy, verify
from webhookd._server import Config, run_server

SCOPE: dict[str, Any] = {"account_id": "acct_destf", "environment": pb.ENVIRONMENT_LIVE}
KIND = "booking.confirmed"


@pytest.fixture(params=sorted(TARGETS))
async def target(request: pytest.FixtureRequest, tls: tuple[ssl.SSLContext, str]) -> AsyncIterator[Target]:
    made = TARGETS[request.param]()
    await made.open(tls)
    await made.accept(True)
    yield made
    await made.close()


async def test_a_filtered_thin_endpoint_of_every_type(
    sqlite_url: str, tls: tuple[ssl.SSLContext, str], target: Target
) -> None:
    config = Config(
        database=sqlite_url, listen="127.0.0.1:0", policy=Policy(allow_private=True), ca_bundle=tls[1]
    )
    app = await run_server(config, start_worker=False)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    try:
        stub = webhooks_pb2_grpc.WebhookServiceStub(channel)
        reg = await stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                **SCOPE,
                events=[KIND],
                filter_json='{"data": {"product": "hotels"}}',
                payload=pb.PAYLOAD_MODE_THIN,
                **target.registration(),
            )
        )
        published = {}
        for product in ("flights", "hotels"):
            request = pb.PublishEventRequest(**SCOPE, type=KIND, data=event_data(KIND, product=product))
            published[product] = await stub.PublishEvent(request)
        assert [published[p].delivery_count for p in ("flights", "hotels")] == [0, 1]
        assert await app.worker.run_once() == 1
        (got,) = await target.received()
        hotel = published["hotels"].event
        assert got.event_id == hotel.id
        body = json.loads(got.body)
        full = json.loads(hotel.envelope_json)
        assert body["data"] == {k: v for k, v in full["data"].items() if k in references(KIND)}
        assert "amount" in full["data"] and "amount" not in body["data"]
        verify(got.body, got.headers["x-service-signature"], reg.signing_secret, dt.datetime.now(dt.UTC))
    finally:
        await channel.close()
        await app.stop(0)
