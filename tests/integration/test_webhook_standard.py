"""Standard Webhooks mode end to end: webhookd over real gRPC delivers to a real HTTPS receiver, and the
``standardwebhooks`` library verifies what arrives, before, during and after a secret rotation."""

from __future__ import annotations

import base64
import json
import pathlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import standardwebhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from google.protobuf import duration_pb2, field_mask_pb2

from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy, verify
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Received, Receiver, trusted_receiver

ACCT = "acct_std1"
LIVE = pb.ENVIRONMENT_LIVE


@pytest.fixture
async def stack(
    tmp_path: pathlib.Path,
) -> AsyncIterator[tuple[webhooks_pb2_grpc.WebhookServiceStub, Receiver]]:
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


async def _publish(stub: webhooks_pb2_grpc.WebhookServiceStub) -> Any:
    data = event_data("booking.confirmed")
    return await stub.PublishEvent(
        pb.PublishEventRequest(
            account_id=ACCT, environment=LIVE, type="booking.confirmed", state="confirmed", data=data
        )
    )


def _v1a_verified(got: Received, public_keys: list[str]) -> int:
    """How many of the delivery's v1a entries verify with one of ``public_keys`` (as a receiver would)."""
    content = f"{got.headers['webhook-id']}.{got.headers['webhook-timestamp']}.".encode() + got.body
    verified = 0
    for entry in got.headers["webhook-signature"].split(" "):
        version, _, sig = entry.partition(",")
        if version != "v1a":
            continue
        for pk in public_keys:
            key = Ed25519PublicKey.from_public_bytes(base64.b64decode(pk.removeprefix("whpk_")))
            try:
                key.verify(base64.b64decode(sig), content)
                verified += 1
            except InvalidSignature:
                pass
    return verified


async def test_standard_deliveries_verify_with_the_library_through_a_rotation(
    stack: tuple[webhooks_pb2_grpc.WebhookServiceStub, Receiver],
) -> None:
    stub, receiver = stack
    reg = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            account_id=ACCT,
            environment=LIVE,
            url=receiver.url(),
            events=["booking.confirmed"],
            signature_scheme=pb.SIGNATURE_SCHEME_STANDARD,
        )
    )
    assert reg.endpoint.signature_scheme == pb.SIGNATURE_SCHEME_STANDARD
    old = reg.signing_secret
    first = await _publish(stub)
    (got,) = await receiver.wait_for(1)
    assert "x-service-signature" not in got.headers
    assert got.headers["webhook-id"] == first.event.id
    assert standardwebhooks.Webhook(old).verify(got.body, got.headers)["id"] == first.event.id

    keys = (await stub.ListSigningKeys(pb.ListSigningKeysRequest(account_id=ACCT, environment=LIVE))).keys
    assert [(k.endpoint_id, k.HasField("expires_at")) for k in keys] == [(reg.endpoint.id, False)]
    assert _v1a_verified(got, [k.public_key for k in keys]) == 1

    rotated = await stub.RotateSigningSecret(
        pb.RotateSigningSecretRequest(
            account_id=ACCT,
            environment=LIVE,
            endpoint_id=reg.endpoint.id,
            overlap=duration_pb2.Duration(seconds=3600),
        )
    )
    new = rotated.signing_secret
    assert new != old
    await _publish(stub)
    got = (await receiver.wait_for(2))[1]
    assert len(got.headers["webhook-signature"].split(" ")) == 4  # v1 and v1a for each of two
    for secret in (new, old):  # a receiver that has not switched yet, and one that has
        standardwebhooks.Webhook(secret).verify(got.body, got.headers)
    # The asymmetric keys rotate with the secrets: both published during the overlap, each verifies.
    rotated_keys = (
        await stub.ListSigningKeys(
            pb.ListSigningKeysRequest(account_id=ACCT, environment=LIVE, endpoint_id=reg.endpoint.id)
        )
    ).keys
    assert [k.HasField("expires_at") for k in rotated_keys] == [False, True]
    assert rotated_keys[1].public_key == keys[0].public_key
    for k in rotated_keys:
        assert _v1a_verified(got, [k.public_key]) == 1

    updated = await stub.UpdateEndpoint(
        pb.UpdateEndpointRequest(
            account_id=ACCT,
            environment=LIVE,
            endpoint_id=reg.endpoint.id,
            update_mask=field_mask_pb2.FieldMask(paths=["signature_scheme"]),
            signature_scheme=pb.SIGNATURE_SCHEME_BOTH,
        )
    )
    assert updated.endpoint.signature_scheme == pb.SIGNATURE_SCHEME_BOTH
    third = await _publish(stub)
    got = (await receiver.wait_for(3))[2]
    standardwebhooks.Webhook(new).verify(got.body, got.headers)
    now = int(got.headers["webhook-timestamp"])
    assert verify(got.body, got.headers["x-service-signature"], new, now) == now
    assert json.loads(got.body)["id"] == third.event.id


async def test_default_scheme_is_the_specs_and_unknown_schemes_are_refused(
    stack: tuple[webhooks_pb2_grpc.WebhookServiceStub, Receiver],
) -> None:
    stub, receiver = stack
    reg = await stub.RegisterEndpoint(
        pb.RegisterEndpointRequest(
            account_id=ACCT, environment=LIVE, url=receiver.url(), events=["booking.confirmed"]
        )
    )
    assert reg.endpoint.signature_scheme == pb.SIGNATURE_SCHEME_STRIPE
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                url=receiver.url(),
                events=["booking.confirmed"],
                signature_scheme=99,  # type: ignore[arg-type]
            )
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
