"""Every delivery carries a W3C ``traceparent`` with no trace exporter configured: webhookd over real gRPC
delivers to a real HTTPS receiver; an event continues the trace of the call that published it only when
that trace is bound to the event's own account (svckit.tracing, docs/webhooks.md "Traces")."""

from __future__ import annotations

import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import jsonschema
import pytest
from google.protobuf import struct_pb2

from svckit import tracing
from svckit.eventkinds import schema
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Receiver, trusted_receiver

LIVE = pb.ENVIRONMENT_LIVE
PARTNER_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARTNER = f"00-{PARTNER_TRACE_ID}-00f067aa0ba902b7-01"


@pytest.fixture
async def stack(
    tmp_path: pathlib.Path,
) -> AsyncIterator[tuple[webhooks_pb2_grpc.WebhookServiceStub, Receiver]]:
    assert tracing.tracer is None  # no exporter: spans off
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


async def publish(
    stub: webhooks_pb2_grpc.WebhookServiceStub, account: str, booking: str, trace_account: str = ""
) -> str:
    """Publish a booking.confirmed for ``account`` as a product service would while handling a request of
    ``trace_account``'s (the metadata the client interceptor adds inside the request's trace); its id."""
    fields: dict[str, Any] = {
        "booking": booking,
        "product": "hotels",
        "offer": "off_hotels_1",
        "amount": 18900,
        "currency": "EUR",
        "supplierReference": "HTL-1",
        "hold": "hold_1",
    }
    jsonschema.validate(fields, schema("booking.confirmed"))
    data = struct_pb2.Struct()
    data.update(fields)
    metadata = (
        ((tracing.TRACEPARENT, PARTNER), (tracing.TRACESTATE, f"svc={trace_account}"))
        if trace_account
        else ()
    )
    resp = await stub.PublishEvent(
        pb.PublishEventRequest(account_id=account, environment=LIVE, type="booking.confirmed", data=data),
        metadata=metadata,
    )
    return str(resp.event.id)


async def test_every_delivery_has_a_traceparent_and_only_its_own_accounts_trace(
    stack: tuple[webhooks_pb2_grpc.WebhookServiceStub, Receiver],
) -> None:
    stub, receiver = stack
    for account in ("acct_tp_a", "acct_tp_b"):
        await stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                account_id=account,
                environment=LIVE,
                url=receiver.url(f"/{account}"),
                events=["booking.confirmed"],
            )
        )
    mine = await publish(stub, "acct_tp_a", "bk_1", trace_account="acct_tp_a")
    # Published within account a's trace, but for account b: b never sees a's trace id.
    theirs = await publish(stub, "acct_tp_b", "bk_2", trace_account="acct_tp_a")
    untraced = await publish(stub, "acct_tp_a", "bk_3")  # no trace at all (a portal act, a batch job)
    got = await receiver.wait_for(3)
    trace_of = {}
    for request in got:
        event = json.loads(request.body)["id"]
        parsed = tracing.parse_traceparent(request.headers.get("traceparent"))
        assert parsed is not None, request.headers
        assert "tracestate" not in request.headers  # ours stays inside
        trace_of[event] = parsed
    assert trace_of[mine][0] == PARTNER_TRACE_ID
    assert trace_of[mine][1] != "00f067aa0ba902b7"  # a span id of the delivery's own
    assert trace_of[theirs][0] != PARTNER_TRACE_ID
    assert trace_of[untraced][0] != PARTNER_TRACE_ID
    assert len({trace_of[theirs][0], trace_of[untraced][0]}) == 2
