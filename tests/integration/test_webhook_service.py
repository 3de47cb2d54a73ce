"""webhookd over real gRPC, delivering to a real HTTPS receiver on loopback (trustme CA), on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
import trustme
from google.protobuf import duration_pb2, field_mask_pb2, timestamp_pb2

from svckit import catalog
from svckit.errors import type_from_rpc_error
from tests.support import event_data
from travel.webhooks.v1 import webhooks_pb2 as pb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd import Policy, verify
from webhookd._server import Config, Webhookd, run_server
from webhookd.testing import Receiver

LIVE, SANDBOX = pb.ENVIRONMENT_LIVE, pb.ENVIRONMENT_SANDBOX
ACCT = "acct_test1"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, str]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return server_ctx, str(path)


@pytest.fixture
def receiver(tls: tuple[ssl.SSLContext, str]) -> Iterator[Receiver]:
    r = Receiver(tls[0]).start()
    yield r
    r.stop()


class Client:
    def __init__(self, app: Webhookd) -> None:
        self.app = app
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        self.stub = webhooks_pb2_grpc.WebhookServiceStub(self.channel)

    async def register(
        self,
        url: str,
        events: list[str] | None = None,
        env: pb.Environment.ValueType = LIVE,
        acct: str = ACCT,
    ) -> Any:
        return await self.stub.RegisterEndpoint(
            pb.RegisterEndpointRequest(
                account_id=acct, environment=env, url=url, events=events or ["booking.confirmed"]
            )
        )

    async def publish(
        self,
        kind: str = "booking.confirmed",
        env: pb.Environment.ValueType = LIVE,
        acct: str = ACCT,
        **kw: Any,
    ) -> Any:
        data = event_data(kind, **kw.pop("data", {}))  # the kind's example, ``data`` over it
        return await self.stub.PublishEvent(
            pb.PublishEventRequest(account_id=acct, environment=env, type=kind, data=data, **kw)
        )

    async def error(self, call: Any) -> tuple[str, str]:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call
        return type_from_rpc_error(info.value)


async def _app(db_url: str, ca: str, policy: Policy, **kw: Any) -> Webhookd:
    return await run_server(Config(database=db_url, listen="127.0.0.1:0", policy=policy, ca_bundle=ca), **kw)


@pytest.fixture
async def client(db_url: str, tls: tuple[ssl.SSLContext, str]) -> AsyncIterator[Client]:
    app = await _app(db_url, tls[1], Policy(allow_private=True))
    c = Client(app)
    yield c
    await c.channel.close()
    await app.stop(0)


@pytest.fixture
async def strict(db_url: str, tls: tuple[ssl.SSLContext, str]) -> AsyncIterator[Client]:
    """Production policy: https only, no private targets."""
    app = await _app(db_url, tls[1], Policy(), start_worker=False)
    c = Client(app)
    yield c
    await c.channel.close()
    await app.stop(0)


async def test_publish_delivers_signed_exact_envelope(client: Client, receiver: Receiver) -> None:
    reg = await client.register(receiver.url(), ["booking.confirmed", "apikey.revoked"])
    secret = reg.signing_secret
    assert secret.startswith("whsec_") and reg.endpoint.id.startswith("we_")
    assert reg.endpoint.status == pb.ENDPOINT_STATUS_ENABLED
    pub = await client.publish(data={"booking": "bk_9", "amount": 12})
    assert pub.delivery_count == 1 and pub.event.id.startswith("evt_")
    (got,) = await receiver.wait_for(1)
    assert got.method == "POST" and got.path == "/hook"
    assert got.body == pub.event.envelope_json.encode()
    body = json.loads(got.body)
    assert body == {
        "id": pub.event.id,
        "type": "booking.confirmed",
        "created": body["created"],
        "livemode": True,
        "account": ACCT,
        "state": "confirmed",
        "data": {**catalog.example("booking.confirmed"), "booking": "bk_9", "amount": 12},
    }
    assert dt.datetime.fromisoformat(body["created"].replace("Z", "+00:00")).tzinfo is not None
    assert b'"amount":12' in got.body and b"12.0" not in got.body  # an integer stays an integer on the wire
    assert got.headers["content-type"] == "application/json"
    assert got.headers["x-service-event-id"] == pub.event.id
    assert "svc-webhooks" in got.headers["user-agent"].lower()
    verify(got.body, got.headers["x-service-signature"], [secret], dt.datetime.now(dt.UTC))
    # An event kind the endpoint did not subscribe to creates no delivery.
    assert (await client.publish("payment.failed")).delivery_count == 0

    async def settled() -> Any:
        for _ in range(200):
            ds = await client.stub.ListDeliveries(pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE))
            if ds.deliveries and ds.deliveries[0].status == pb.DELIVERY_STATUS_SUCCEEDED:
                return ds
            await asyncio.sleep(0.02)
        raise AssertionError("delivery never recorded as succeeded")

    ds = await settled()
    assert [d.event_id for d in ds.deliveries] == [pub.event.id]
    assert ds.deliveries[0].attempt_count == 1
    atts = await client.stub.ListAttempts(pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE))
    (att,) = atts.attempts
    assert att.id.startswith("att_") and att.attempt_number == 1
    assert (
        att.outcome == pb.ATTEMPT_OUTCOME_SUCCEEDED
        and att.response_status == 200
        and att.response_body == "ok"
    )
    assert att.request_headers["X-Service-Event-Id"] == pub.event.id and not att.manual
    assert dict(att.response_headers) == {"content-type": "text/plain", "content-length": "2"}
    assert att.latency.ToTimedelta() > dt.timedelta(0)
    # Keep-alive: one delivery after another reuses the connection instead of opening one per request.
    before = receiver.connections
    for i in range(10):
        await client.publish()
        await receiver.wait_for(2 + i)
    assert receiver.connections - before <= 1


async def test_bad_input_is_refused_and_changes_nothing(strict: Client, receiver: Receiver) -> None:
    stub = strict.stub
    good = "https://93.184.216.34/hook"
    cases = [
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT, environment=LIVE, url="http://93.184.216.34/h", events=["booking.confirmed"]
            ),
            "invalid_request",
            "url",
        ),
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT, environment=LIVE, url=receiver.url(), events=["booking.confirmed"]
            ),
            "invalid_request",
            "loopback",
        ),
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                url=receiver.url(host="localhost"),
                events=["booking.confirmed"],
            ),
            "invalid_request",
            "url",
        ),
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                url="https://169.254.169.254/",
                events=["booking.confirmed"],
            ),
            "invalid_request",
            "metadata",
        ),
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                url="https://[::ffff:10.0.0.1]/",
                events=["booking.confirmed"],
            ),
            "invalid_request",
            "url",
        ),
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT, environment=LIVE, url=good, events=["booking.exploded"]
            ),
            "invalid_request",
            "events",
        ),
        (
            pb.RegisterEndpointRequest(account_id=ACCT, environment=LIVE, url=good, events=[]),
            "invalid_request",
            "events",
        ),
        (
            pb.RegisterEndpointRequest(account_id=ACCT, url=good, events=["booking.confirmed"]),
            "invalid_request",
            "environment",
        ),
        (
            pb.RegisterEndpointRequest(environment=LIVE, url=good, events=["booking.confirmed"]),
            "invalid_request",
            "account_id",
        ),
        (
            pb.RegisterEndpointRequest(
                account_id=ACCT,
                environment=LIVE,
                url=good,
                events=["booking.confirmed"],
                description="x" * 5000,
            ),
            "invalid_request",
            "description",
        ),
    ]
    for request, kind, word in cases:
        error_type, message = await strict.error(stub.RegisterEndpoint(request))
        assert error_type == kind, (request, message)
        assert word in message, message
    big = event_data("booking.confirmed", customerRef="x" * (300 * 1024))
    publish_cases = [
        (
            pb.PublishEventRequest(account_id=ACCT, environment=LIVE, type="booking.exploded", state="x"),
            "invalid_request",
            "type",
        ),
        (
            pb.PublishEventRequest(account_id=ACCT, environment=LIVE, type="webhook.test", state="x"),
            "invalid_request",
            "type",
        ),
        (
            pb.PublishEventRequest(account_id=ACCT, environment=LIVE, type="booking.confirmed", data=big),
            "payload_too_large",
            "data",
        ),
        (pb.PublishEventRequest(account_id=ACCT, type="booking.confirmed"), "invalid_request", "environment"),
        (
            pb.PublishEventRequest(
                account_id=ACCT,
                environment=LIVE,
                type="booking.confirmed",
                data=event_data("booking.confirmed"),
                idempotency_key="k" * 300,
            ),
            "invalid_request",
            "idempotency_key",
        ),
        # Not an event of its kind (the catalog): its state, its fields.
        (
            pb.PublishEventRequest(
                account_id=ACCT,
                environment=LIVE,
                type="booking.confirmed",
                state="weird",
                data=event_data("booking.confirmed"),
            ),
            "invalid_request",
            "state: 'weird' is not a state of booking.confirmed events",
        ),
        (
            pb.PublishEventRequest(
                account_id=ACCT,
                environment=LIVE,
                type="booking.confirmed",
                data=event_data("booking.confirmed", booking_id="bk_x"),
            ),
            "invalid_request",
            "data.booking_id: not a field of booking.confirmed events",
        ),
        (
            pb.PublishEventRequest(
                account_id=ACCT,
                environment=LIVE,
                type="booking.confirmed",
                data=event_data("booking.confirmed", amount="12"),
            ),
            "invalid_request",
            "data.amount: '12' is not of type 'integer'",
        ),
    ]
    for publish_request, kind, word in publish_cases:
        error_type, message = await strict.error(stub.PublishEvent(publish_request))
        assert (error_type, word in message) == (kind, True), message
    assert not (
        await stub.ListEndpoints(pb.ListEndpointsRequest(account_id=ACCT, environment=LIVE))
    ).endpoints
    assert await strict.app.repo.max_event_seq() == 0
    assert not (
        await stub.ListDeliveries(pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE))
    ).deliveries


async def test_unknown_and_foreign_ids_are_not_found_and_change_nothing(
    client: Client, receiver: Receiver
) -> None:
    stub = client.stub
    ep = (await client.register(receiver.url())).endpoint
    await client.publish()
    (await receiver.wait_for(1))
    await asyncio.sleep(0.1)
    atts = (await stub.ListAttempts(pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE))).attempts
    for acct, env, eid in [("acct_other", LIVE, ep.id), (ACCT, SANDBOX, ep.id), (ACCT, LIVE, "we_nope")]:
        scope = {"account_id": acct, "environment": env, "endpoint_id": eid}
        calls = [
            stub.GetEndpoint(pb.GetEndpointRequest(**scope)),
            stub.UpdateEndpoint(
                pb.UpdateEndpointRequest(
                    **scope, update_mask=field_mask_pb2.FieldMask(paths=["description"]), description="hacked"
                )
            ),
            stub.DeleteEndpoint(pb.DeleteEndpointRequest(**scope)),
            stub.EnableEndpoint(pb.EnableEndpointRequest(**scope)),
            stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope)),
            stub.SendTestEvent(pb.SendTestEventRequest(**scope)),
            stub.RecoverEndpoint(pb.RecoverEndpointRequest(**scope)),
        ]
        for call in calls:
            error_type, message = await client.error(call)
            assert error_type == "not_found" and "endpoint_id" in message
        error_type, _ = await client.error(
            stub.ResendAttempt(
                pb.ResendAttemptRequest(account_id=acct, environment=env, attempt_id="att_nope")
            )
        )
        assert error_type == "not_found"
    if atts:
        error_type, _ = await client.error(
            stub.ResendAttempt(
                pb.ResendAttemptRequest(account_id="acct_other", environment=LIVE, attempt_id=atts[0].id)
            )
        )
        assert error_type == "not_found"
    stream = stub.StreamEvents(
        pb.StreamEventsRequest(account_id="acct_other", environment=LIVE, since_event_id="evt_nope")
    )
    error_type, _ = await client.error(stream.read())
    after = await stub.GetEndpoint(
        pb.GetEndpointRequest(account_id=ACCT, environment=LIVE, endpoint_id=ep.id)
    )
    assert after.endpoint == ep
    assert receiver.count == 1


async def test_update_list_delete(client: Client, receiver: Receiver) -> None:
    stub = client.stub
    ids = [(await client.register(receiver.url(f"/h{i}"))).endpoint.id for i in range(5)]
    await client.register(receiver.url(), env=SANDBOX)
    seen: list[str] = []
    token = ""
    while True:
        page = await stub.ListEndpoints(
            pb.ListEndpointsRequest(account_id=ACCT, environment=LIVE, page_size=2, page_token=token)
        )
        assert len(page.endpoints) <= 2
        seen += [e.id for e in page.endpoints]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    scope = {"account_id": ACCT, "environment": LIVE, "endpoint_id": ids[0]}
    upd = await stub.UpdateEndpoint(
        pb.UpdateEndpointRequest(
            **scope,
            update_mask=field_mask_pb2.FieldMask(paths=["events", "description"]),
            events=["payment.failed"],
            description="payments",
        )
    )
    assert list(upd.endpoint.events) == ["payment.failed"] and upd.endpoint.description == "payments"
    update_cases: list[tuple[list[str], dict[str, Any], str]] = [
        (["url"], {"url": "http://x.test/"}, "url"),
        (["events"], {"events": []}, "events"),
        (["secret"], {}, "update_mask"),
        ([], {}, "update_mask"),
    ]
    for mask, kw, word in update_cases:
        error_type, message = await client.error(
            stub.UpdateEndpoint(
                pb.UpdateEndpointRequest(**scope, update_mask=field_mask_pb2.FieldMask(paths=mask), **kw)
            )
        )
        assert error_type == "invalid_request" and word in message
    assert (await stub.GetEndpoint(pb.GetEndpointRequest(**scope))).endpoint == upd.endpoint
    await stub.DeleteEndpoint(pb.DeleteEndpointRequest(**scope))
    assert (await client.error(stub.GetEndpoint(pb.GetEndpointRequest(**scope))))[0] == "not_found"
    assert (await client.publish("payment.failed")).delivery_count == 0


async def test_rotation_signs_with_both_secrets_during_overlap(client: Client, receiver: Receiver) -> None:
    stub = client.stub
    reg = await client.register(receiver.url())
    scope = {"account_id": ACCT, "environment": LIVE, "endpoint_id": reg.endpoint.id}
    for bad in (duration_pb2.Duration(seconds=-1), duration_pb2.Duration(seconds=8 * 86400)):
        error_type, message = await client.error(
            stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope, overlap=bad))
        )
        assert error_type == "invalid_request" and "overlap" in message
    rot = await stub.RotateSigningSecret(pb.RotateSigningSecretRequest(**scope))
    new = rot.signing_secret
    assert new != reg.signing_secret and new.startswith("whsec_")
    expires = rot.endpoint.previous_secret_expires_at.ToDatetime(dt.UTC)
    assert abs((expires - dt.datetime.now(dt.UTC)) - dt.timedelta(hours=24)) < dt.timedelta(minutes=1)
    await client.publish()
    (got,) = await receiver.wait_for(1)
    header = got.headers["x-service-signature"]
    assert header.count("v1=") == 2
    now = dt.datetime.now(dt.UTC)
    verify(got.body, header, new, now)
    verify(got.body, header, reg.signing_secret, now)
    # Overlap 0: only the newest secret signs from now on.
    rot2 = await stub.RotateSigningSecret(
        pb.RotateSigningSecretRequest(**scope, overlap=duration_pb2.Duration(seconds=0))
    )
    assert not rot2.endpoint.HasField("previous_secret_expires_at")
    await client.publish()
    got2 = (await receiver.wait_for(2))[1]
    assert got2.headers["x-service-signature"].count("v1=") == 1
    verify(got2.body, got2.headers["x-service-signature"], rot2.signing_secret, dt.datetime.now(dt.UTC))


async def test_idempotent_publish_and_fan_out(client: Client, receiver: Receiver) -> None:
    await client.register(receiver.url("/a"), ["booking.confirmed"])
    await client.register(receiver.url("/b"), ["booking.confirmed", "booking.failed"])
    await client.register(receiver.url("/c"), ["booking.confirmed"], env=SANDBOX)
    await client.register(receiver.url("/d"), ["booking.confirmed"], acct="acct_other")
    first = await client.publish(idempotency_key="outbox-1")
    again = await client.publish(idempotency_key="outbox-1")
    assert first.event.id == again.event.id and first.delivery_count == again.delivery_count == 2
    got = await receiver.wait_for(2)
    await asyncio.sleep(0.2)
    assert receiver.count == 2 and sorted(r.path for r in got) == ["/a", "/b"]
    # The same key in another environment is another event.
    other = await client.publish(env=SANDBOX, idempotency_key="outbox-1")
    assert other.event.id != first.event.id and json.loads(other.event.envelope_json)["livemode"] is False


async def test_stream_events_replays_after_id_then_live(client: Client) -> None:
    stub = client.stub
    first = await client.publish("booking.confirmed")
    second = await client.publish("payment.failed")
    await client.publish("booking.confirmed", env=SANDBOX)
    await client.publish("booking.confirmed", acct="acct_other")
    stream = stub.StreamEvents(
        pb.StreamEventsRequest(account_id=ACCT, environment=LIVE, since_event_id=first.event.id)
    )
    msg = await asyncio.wait_for(stream.read(), 5)
    assert msg.event.id == second.event.id and msg.event.type == "payment.failed"
    third = await client.publish("apikey.revoked")
    msg = await asyncio.wait_for(stream.read(), 5)
    assert msg.event.id == third.event.id and msg.event.envelope_json == third.event.envelope_json
    stream.cancel()
    typed = stub.StreamEvents(
        pb.StreamEventsRequest(
            account_id=ACCT, environment=LIVE, types=["apikey.revoked"], since_event_id=first.event.id
        )
    )
    assert (await asyncio.wait_for(typed.read(), 5)).event.id == third.event.id
    typed.cancel()
    bad = stub.StreamEvents(pb.StreamEventsRequest(account_id=ACCT, environment=LIVE, types=["nope.nope"]))
    assert (await client.error(bad.read()))[0] == "invalid_request"


async def test_test_event_and_manual_resend(client: Client, receiver: Receiver) -> None:
    stub = client.stub
    reg = await client.register(receiver.url())
    scope = {"account_id": ACCT, "environment": LIVE, "endpoint_id": reg.endpoint.id}
    sent = await stub.SendTestEvent(pb.SendTestEventRequest(**scope))
    assert sent.event.type == "webhook.test" and sent.delivery.endpoint_id == reg.endpoint.id
    (got,) = await receiver.wait_for(1)
    assert json.loads(got.body)["id"] == sent.event.id
    verify(got.body, got.headers["x-service-signature"], reg.signing_secret, dt.datetime.now(dt.UTC))
    for _ in range(100):
        atts = await stub.ListAttempts(
            pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, delivery_id=sent.delivery.id)
        )
        if atts.attempts:
            break
        await asyncio.sleep(0.02)
    resent = await stub.ResendAttempt(
        pb.ResendAttemptRequest(account_id=ACCT, environment=LIVE, attempt_id=atts.attempts[0].id)
    )
    assert resent.delivery.attempt_count == 2 and resent.delivery.status == pb.DELIVERY_STATUS_SUCCEEDED
    both = await receiver.wait_for(2)
    assert both[1].body == both[0].body
    atts = await stub.ListAttempts(
        pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE, delivery_id=sent.delivery.id)
    )
    assert [a.manual for a in atts.attempts] == [True, False]
    assert [a.attempt_number for a in atts.attempts] == [2, 1]


async def test_dns_rebinding_is_refused_at_delivery(
    db_url: str, tls: tuple[ssl.SSLContext, str], receiver: Receiver, tmp_path: pathlib.Path
) -> None:
    """The name resolved to a public address at registration and to loopback at delivery."""
    answers = {"hooks.partner.test": ["93.184.216.34"]}

    async def resolver(host: str, port: int) -> list[str]:
        return answers[host]

    app = await _app(db_url, tls[1], Policy(), resolver=resolver)
    c = Client(app)
    try:
        url = f"https://hooks.partner.test:{receiver.port}/hook"
        await c.register(url)
        answers["hooks.partner.test"] = ["127.0.0.1"]
        await c.publish()
        for _ in range(200):
            atts = await c.stub.ListAttempts(pb.ListAttemptsRequest(account_id=ACCT, environment=LIVE))
            if atts.attempts:
                break
            await asyncio.sleep(0.02)
        (att,) = atts.attempts
        assert att.outcome == pb.ATTEMPT_OUTCOME_NETWORK_ERROR and "loopback" in att.error
        assert receiver.count == 0
    finally:
        await c.channel.close()
        await app.stop(0)


async def test_attempt_stats_count_attempts_and_successes(client: Client, receiver: Receiver) -> None:
    await client.register(receiver.url())
    await client.publish()
    await client.publish()
    await receiver.wait_for(2)
    receiver.responder = lambda _r: 500
    await client.publish()
    await receiver.wait_for(3)
    stub = client.stub
    since = timestamp_pb2.Timestamp()
    since.FromDatetime(dt.datetime.now(dt.UTC) - dt.timedelta(hours=1))
    for _ in range(200):
        stats = await stub.GetAttemptStats(
            pb.GetAttemptStatsRequest(account_id=ACCT, environment=LIVE, since=since)
        )
        if stats.attempts == 3:
            break
        await asyncio.sleep(0.02)
    assert (stats.attempts, stats.succeeded) == (3, 2)
    assert (stats.recent_attempts, stats.recent_succeeded) == (0, 0)  # no recent_since asked
    # A shorter window counted in the same call: all three are recent; none since a minute ahead.
    recent = timestamp_pb2.Timestamp()
    recent.FromDatetime(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5))
    both = await stub.GetAttemptStats(
        pb.GetAttemptStatsRequest(account_id=ACCT, environment=LIVE, since=since, recent_since=recent)
    )
    assert (both.attempts, both.succeeded, both.recent_attempts, both.recent_succeeded) == (3, 2, 3, 2)
    ahead = timestamp_pb2.Timestamp()
    ahead.FromDatetime(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1))
    none_recent = await stub.GetAttemptStats(
        pb.GetAttemptStatsRequest(account_id=ACCT, environment=LIVE, since=since, recent_since=ahead)
    )
    assert (none_recent.attempts, none_recent.recent_attempts, none_recent.recent_succeeded) == (3, 0, 0)
    before_since = timestamp_pb2.Timestamp()
    before_since.FromDatetime(dt.datetime.now(dt.UTC) - dt.timedelta(hours=2))
    etype, message = await client.error(
        stub.GetAttemptStats(
            pb.GetAttemptStatsRequest(
                account_id=ACCT, environment=LIVE, since=since, recent_since=before_since
            )
        )
    )
    assert etype == "invalid_request" and message.startswith("recent_since:")
    later = timestamp_pb2.Timestamp()
    later.FromDatetime(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1))
    future = await stub.GetAttemptStats(
        pb.GetAttemptStatsRequest(account_id=ACCT, environment=LIVE, since=later)
    )
    assert (future.attempts, future.succeeded) == (0, 0)
    other = await stub.GetAttemptStats(
        pb.GetAttemptStatsRequest(account_id=ACCT, environment=pb.ENVIRONMENT_SANDBOX, since=since)
    )
    assert other.attempts == 0
    assert (
        await client.error(stub.GetAttemptStats(pb.GetAttemptStatsRequest(account_id=ACCT, environment=LIVE)))
    )[0] == "invalid_request"


async def test_list_deliveries_filters_by_event_type_before_paging(
    client: Client, receiver: Receiver
) -> None:
    await client.register(receiver.url(), ["booking.confirmed", "booking.cancelled"])
    kinds = ["booking.confirmed", "booking.cancelled", "booking.confirmed", "booking.confirmed"] * 3
    published = [await client.publish(kind) for kind in kinds]
    await client.publish("booking.cancelled", env=SANDBOX)  # no endpoint there: no delivery
    cancelled = {p.event.id for p, kind in zip(published, kinds, strict=True) if kind == "booking.cancelled"}
    stub = client.stub
    seen: list[str] = []
    pages = 0
    token = ""
    while True:
        page = await stub.ListDeliveries(
            pb.ListDeliveriesRequest(
                account_id=ACCT,
                environment=LIVE,
                event_type="booking.cancelled",
                page_size=2,
                page_token=token,
            )
        )
        pages += 1
        assert {d.event_type for d in page.deliveries} == {"booking.cancelled"}
        assert len(page.deliveries) == 2 or not page.next_page_token  # full pages of matches only
        seen += [d.event_id for d in page.deliveries]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(cancelled) and pages == 2
    everything = await stub.ListDeliveries(pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE))
    assert len(everything.deliveries) == len(kinds)
    none = await stub.ListDeliveries(
        pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE, event_type="webhook.test")
    )
    assert list(none.deliveries) == []
    etype, message = await client.error(
        stub.ListDeliveries(
            pb.ListDeliveriesRequest(account_id=ACCT, environment=LIVE, event_type="booking.x")
        )
    )
    assert etype == "invalid_request" and message.startswith("event_type: unknown event kind")
