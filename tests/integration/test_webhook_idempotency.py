"""webhookd deduplicates endpoint registrations and rotations on the caller's idempotency key (the edge
passes the partner's Idempotency-Key down, so a re-execution after an edge crash finds the first result),
and refuses secret-shaped text in free-text fields. Real gRPC, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from google.protobuf import field_mask_pb2

from tests.integration import test_webhook_service as service
from tests.integration.test_webhook_service import ACCT, LIVE, SANDBOX, Client
from travel.webhooks.v1 import webhooks_pb2 as pb

# webhookd on SQLite and PostgreSQL, as the service tests run it.
wh = service.client
tls = service.tls

URL = "https://127.0.0.1:9/hook"
KEY = "svc_live_" + "a1B2c3D4" * 4 + "Zz9Yy8"
SECRET = "whsec_" + "QUJD" * 11


def _register(
    idem: str, url: str = URL, env: pb.Environment.ValueType = LIVE, acct: str = ACCT
) -> pb.RegisterEndpointRequest:
    return pb.RegisterEndpointRequest(
        account_id=acct, environment=env, url=url, events=["booking.confirmed"], idempotency_key=idem
    )


async def _count(wh: Client, env: pb.Environment.ValueType = LIVE, acct: str = ACCT) -> int:
    listed = await wh.stub.ListEndpoints(pb.ListEndpointsRequest(account_id=acct, environment=env))
    return len(listed.endpoints)


async def test_the_same_key_registering_twice_yields_one_endpoint(wh: Client) -> None:
    stub = wh.stub
    first = await stub.RegisterEndpoint(_register("reg-1"))
    again = await stub.RegisterEndpoint(_register("reg-1"))
    assert again.endpoint.id == first.endpoint.id and again.signing_secret == first.signing_secret
    assert await _count(wh) == 1
    # Concurrent retries with one key still make one endpoint.
    raced = await asyncio.gather(*(stub.RegisterEndpoint(_register("reg-2")) for _ in range(5)))
    assert len({r.endpoint.id for r in raced}) == 1 and len({r.signing_secret for r in raced}) == 1
    assert await _count(wh) == 2
    # Scoped to account and environment; no key: a new endpoint every time.
    other_env = await stub.RegisterEndpoint(_register("reg-1", env=SANDBOX))
    other_acct = await stub.RegisterEndpoint(_register("reg-1", acct="acct_other"))
    assert len({first.endpoint.id, other_env.endpoint.id, other_acct.endpoint.id}) == 3
    await stub.RegisterEndpoint(_register(""))
    await stub.RegisterEndpoint(_register(""))
    assert await _count(wh) == 4


async def test_the_same_key_with_another_request_is_refused(wh: Client) -> None:
    await wh.stub.RegisterEndpoint(_register("reg-x"))
    etype, message = await wh.error(wh.stub.RegisterEndpoint(_register("reg-x", url=URL + "2")))
    assert etype == "idempotency_key_reused" and "idempotency_key" in message
    assert await _count(wh) == 1


async def test_a_replayed_registration_answers_with_the_current_secret(wh: Client) -> None:
    first = await wh.stub.RegisterEndpoint(_register("reg-r"))
    scope = {"account_id": ACCT, "environment": LIVE, "endpoint_id": first.endpoint.id}
    rotated = await wh.stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope))
    again = await wh.stub.RegisterEndpoint(_register("reg-r"))
    assert again.endpoint.id == first.endpoint.id and again.signing_secret == rotated.signing_secret
    await wh.stub.DeleteEndpoint(pb.DeleteEndpointRequest(**scope))
    etype, _ = await wh.error(wh.stub.RegisterEndpoint(_register("reg-r")))
    assert etype == "conflict" and await _count(wh) == 0


async def test_the_same_key_rotating_twice_rotates_once(wh: Client) -> None:
    reg = await wh.stub.RegisterEndpoint(_register(""))
    scope = {"account_id": ACCT, "environment": LIVE, "endpoint_id": reg.endpoint.id}
    first = await wh.stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope, idempotency_key="rot-1"))
    again = await wh.stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope, idempotency_key="rot-1"))
    assert again.signing_secret == first.signing_secret != reg.signing_secret
    # A second rotation would have ended the registration secret's overlap; one rotation keeps it.
    assert again.endpoint.HasField("previous_secret_expires_at")
    other = await wh.stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope, idempotency_key="rot-2"))
    assert other.signing_secret not in (first.signing_secret, reg.signing_secret)


async def test_secret_shaped_text_is_refused_in_descriptions_and_urls(wh: Client) -> None:
    for description in (f"prod hook, key {KEY}", f"secret {SECRET}", "tab\there"):
        request = _register("")
        request.description = description
        etype, message = await wh.error(wh.stub.RegisterEndpoint(request))
        assert etype == "invalid_request" and message.startswith("description:"), message
        assert KEY not in message and SECRET not in message
    for url in (URL + "?k=" + KEY, URL + "\x00x", URL + "\x7f"):
        etype, message = await wh.error(wh.stub.RegisterEndpoint(_register("", url=url)))
        assert etype == "invalid_request" and message.startswith("url:") and KEY not in message
    reg = await wh.stub.RegisterEndpoint(_register(""))
    etype, _ = await wh.error(
        wh.stub.UpdateEndpoint(
            pb.UpdateEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                endpoint_id=reg.endpoint.id,
                update_mask=field_mask_pb2.FieldMask(paths=["description"]),
                description=f"see {KEY}",
            )
        )
    )
    assert etype == "invalid_request" and await _count(wh) == 1
