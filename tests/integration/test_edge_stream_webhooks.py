"""/v1/stream over a real WebSocket client (websockets) and webhook management over real HTTP, against
real authsvc and webhookd processes and an edge process on loopback."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
import websockets
from google.protobuf import duration_pb2
from websockets.asyncio.client import ClientConnection, connect

from edge.testing import SANDBOX_HOST, Upstream, edge_args
from tests.integration.edge_stack import ACTOR, assert_error, hdrs, new_key
from tests.support import ServiceProcess, close_code, event_data, free_port, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc


@dataclass
class Stack:
    authsvc: ServiceProcess
    webhookd: ServiceProcess
    edge: ServiceProcess
    receiver: Upstream

    @property
    def sandbox(self) -> str:
        return f"http://127.0.0.1:{self.edge.ports['sandbox_port']}"


@contextmanager
def running_stack(
    tmp: pathlib.Path, webhookd_flags: Sequence[str], edge_flags: Sequence[str]
) -> Iterator[Stack]:
    """authsvc, webhookd (with ``webhookd_flags``) and an edge (with ``edge_flags``) in ``tmp``, and a
    receiver (also tests/integration/test_edge_stream_limits.py's)."""
    receiver = Upstream("receiver")
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        wh = start_service("webhookd", tmp, sqlite_url(tmp, "w.db"), *webhookd_flags, "--poll-seconds", "0.2")
        procs.append(wh)
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, f"sqlite+aiosqlite:///{tmp / 'e.db'}", None, *edge_flags
            ),
        ).start(tmp / "edge.log")
        procs.append(edge)
        yield Stack(auth, wh, edge, receiver)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("edge_ws")
    with running_stack(
        tmp, ["--allow-private-targets", "--allow-http"], ["--stream-ping-seconds", "0.3"]
    ) as up:
        yield up


@pytest.fixture
async def auth(stack: Stack) -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    async with grpc.aio.insecure_channel(stack.authsvc.grpc_target) as channel:
        yield auth_pb2_grpc.AuthServiceStub(channel)


@pytest.fixture
async def hooks(stack: Stack) -> AsyncIterator[webhooks_pb2_grpc.WebhookServiceStub]:
    async with grpc.aio.insecure_channel(stack.webhookd.grpc_target) as channel:
        yield webhooks_pb2_grpc.WebhookServiceStub(channel)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


def ws(stack: Stack, protocols: list[str] | None, **kwargs: Any) -> Any:
    # The URI carries the Host the edge maps to the sandbox; host/port say where to really connect.
    return connect(
        f"ws://{SANDBOX_HOST}/v1/stream",
        subprotocols=protocols,  # type: ignore[arg-type]
        host="127.0.0.1",
        port=stack.edge.ports["sandbox_port"],
        open_timeout=5,
        **kwargs,
    )


async def recv_json(conn: ClientConnection, within: float = 5.0, skip_pings: bool = True) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        raw = await asyncio.wait_for(conn.recv(), max(deadline - time.monotonic(), 0.01))
        msg = json.loads(raw)
        if skip_pings and msg.get("type") == "ping":
            continue
        return msg  # type: ignore[no-any-return]


async def publish(
    hooks: webhooks_pb2_grpc.WebhookServiceStub, account_id: str, kind: str, product: str | None = None
) -> wpb.Event:
    data = event_data(kind, **({"product": product} if product else {}))
    resp: wpb.PublishEventResponse = await hooks.PublishEvent(
        wpb.PublishEventRequest(
            account_id=account_id, environment=wpb.ENVIRONMENT_SANDBOX, type=kind, data=data
        )
    )
    return resp.event


# -- handshake ------------------------------------------------------------------------------------------
async def test_handshake_selects_svc_and_never_echoes_the_key(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", key.secret]) as conn:
        assert conn.subprotocol == "svc"
        assert conn.response is not None
        assert key.secret not in str(conn.response.headers)
        assert conn.response.headers["X-Request-Id"].startswith("req_")
        assert (await recv_json(conn, skip_pings=False))["type"] == "ping"
        await conn.send(json.dumps({"type": "ping"}))
        assert (await recv_json(conn)) == {"type": "pong"}


@pytest.mark.parametrize(
    ("protocols", "selected"),
    [
        (None, None),  # the key in Authorization only, as a server client sends it: nothing selected
        (["svc"], "svc"),  # "svc" offered, the key in Authorization
        (["SVC"], "SVC"),
        (["Svc", "KEY"], "Svc"),  # the name in any case, answered as the client spelt it
        (["SVC", "KEY"], "SVC"),
    ],
)
async def test_handshake_with_authorization_or_any_case_of_svc(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, protocols: list[str] | None, selected: str | None
) -> None:
    """Issue 8 item 11: docs/edge.md promises Authorization works without a subprotocol, and the gate
    takes "svc" in any case: the handshake must agree with the gate (it used to answer 400)."""
    _, key = await new_key(auth, scopes=["account:read"])
    offered = [key.secret if p == "KEY" else p for p in protocols] if protocols else None
    async with ws(stack, offered, additional_headers={"Authorization": f"Svc {key.secret}"}) as conn:
        assert conn.subprotocol == selected
        assert conn.response is not None and key.secret not in str(conn.response.headers)
        assert (await recv_json(conn, skip_pings=False))["type"] == "ping"


@pytest.mark.parametrize(
    ("protocols", "status", "etype"),
    [
        (None, 401, "missing_api_key"),
        (["svc"], 401, "missing_api_key"),
        (["chat", "svc"], 400, "invalid_request"),
        (["svc", "svc_test_nonsense"], 401, "invalid_api_key"),
        (["svc", "svc_test_" + "Z" * 40], 401, "invalid_api_key"),
    ],
)
async def test_bad_handshakes_get_an_http_error_body(
    stack: Stack, protocols: list[str] | None, status: int, etype: str
) -> None:
    with pytest.raises(websockets.InvalidStatus) as info:
        async with ws(stack, protocols):
            pass
    resp = info.value.response
    assert resp.status_code == status
    body = json.loads(resp.body)
    assert body["error"]["type"] == etype
    assert resp.headers["X-Request-Id"] == body["error"]["requestId"]


async def test_plain_get_without_upgrade_is_invalid_request(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    assert_error(
        await http.get(stack.sandbox + "/v1/stream", headers=hdrs(key.secret)), 400, "invalid_request"
    )


async def test_live_key_on_sandbox_stream_is_environment_mismatch(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, "live", scopes=["account:read"])
    with pytest.raises(websockets.InvalidStatus) as info:
        async with ws(stack, ["svc", key.secret]):
            pass
    assert info.value.response.status_code == 401
    assert json.loads(info.value.response.body)["error"]["type"] == "environment_mismatch"


# -- closing on revocation and expiry ---------------------------------------------------------------------
async def test_revoked_key_stream_closes_with_4001_within_a_second(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    _, other = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", key.secret]) as conn, ws(stack, ["svc", other.secret]) as bystander:
        await recv_json(conn, skip_pings=False)  # open and served
        start = time.monotonic()
        await auth.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, reason="leaked", actor=ACTOR))
        code = await close_code(conn, 2.0)
        elapsed = time.monotonic() - start
        assert code == 4001
        assert elapsed < 1.0, elapsed
        # Another key's stream is untouched.
        assert (await recv_json(bystander, skip_pings=False))["type"] == "ping"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with ws(stack, ["svc", key.secret]):
            pass
    assert refused.value.response.status_code == 401


async def test_rotated_out_key_stream_closes_at_expiry(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", key.secret]) as conn:
        await recv_json(conn, skip_pings=False)
        rotated = await auth.RotateKey(
            pb.RotateKeyRequest(key_id=key.key.id, grace_period=duration_pb2.Duration(seconds=2), actor=ACTOR)
        )
        expires = rotated.old_key.expires_at.ToDatetime().timestamp()
        assert await close_code(conn, 5.0) == 4001
        # Closed at the expiry, not at the rotation (the old key works until then).
        assert expires - 0.3 <= time.time() < expires + 1.0


# -- events -------------------------------------------------------------------------------------------------
async def test_events_filtered_by_scope_and_resumable(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, hooks: webhooks_pb2_grpc.WebhookServiceStub
) -> None:
    account_id, hotels = await new_key(auth, scopes=["hotels:read"])
    _, admin = await new_key(auth, scopes=["account:read"], account_id=account_id)
    marker = await publish(hooks, account_id, "ledger.low_balance")
    async with ws(stack, ["svc", hotels.secret]) as h, ws(stack, ["svc", admin.secret]) as a:
        for conn in (h, a):
            await conn.send(json.dumps({"type": "subscribe", "events": [], "since": marker.id}))
            assert (await recv_json(conn))["type"] == "subscribed"
        flight = await publish(hooks, account_id, "booking.confirmed", "flights")
        hotel = await publish(hooks, account_id, "booking.confirmed", "hotels")
        ledger = await publish(hooks, account_id, "ledger.low_balance")
        got_h = await recv_json(h)
        assert got_h["type"] == "event" and got_h["event"]["id"] == hotel.id
        assert got_h["event"]["type"] == "booking.confirmed" and got_h["event"]["account"] == account_id
        got_a = await recv_json(a)
        assert got_a["event"]["id"] == ledger.id
        # Nothing else arrives for either (the flight booking is for neither; pings only).
        await a.send(json.dumps({"type": "ping"}))
        assert (await recv_json(a)) == {"type": "pong"}
        await h.send(json.dumps({"type": "ping"}))
        assert (await recv_json(h)) == {"type": "pong"}
    # Resume: a new connection with since=<the flight event> gets what followed, as the scopes allow.
    async with ws(stack, ["svc", admin.secret]) as again:
        await again.send(json.dumps({"type": "subscribe", "events": ["ledger.*"], "since": flight.id}))
        assert (await recv_json(again))["type"] == "subscribed"
        assert (await recv_json(again))["event"]["id"] == ledger.id


async def test_bad_client_messages_get_errors_and_keep_the_stream(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    _, key = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", key.secret]) as conn:
        for bad in ["not json", "[1]", json.dumps({"type": "dance"}),
                    json.dumps({"type": "subscribe", "events": "booking.confirmed"}),
                    json.dumps({"type": "subscribe", "events": ["booking.exploded"]}),
                    json.dumps({"type": "subscribe", "since": "nope"})]:  # fmt: skip
            await conn.send(bad)
            msg = await recv_json(conn)
            assert msg["type"] == "error" and msg["error"]["type"] == "invalid_request", msg
        await conn.send(json.dumps({"type": "subscribe", "since": "evt_doesnotexist"}))
        msg = await recv_json(conn)  # the error only, no "subscribed" first (issue 9 item 9)
        assert msg["type"] == "error" and msg["error"]["type"] == "not_found"
        await conn.send(json.dumps({"type": "ping"}))
        assert (await recv_json(conn)) == {"type": "pong"}


# -- webhook management ----------------------------------------------------------------------------------
async def test_webhook_endpoint_lifecycle(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    base = stack.sandbox + "/v1/webhooks"

    def post_h(idem: str) -> dict[str, str]:
        return hdrs(key.secret, Idempotency_Key=idem, Content_Type="application/json")

    hook_url = stack.receiver.url + "/hook"
    created = await http.post(
        base + "/endpoints", headers=post_h("c1"), json={"url": hook_url, "events": ["booking.confirmed"]}
    )
    assert created.status_code == 201, created.text
    ep = created.json()
    assert ep["id"].startswith("we_") and ep["secret"].startswith("whsec_") and ep["status"] == "enabled"
    assert ep["livemode"] is False
    # The request id travelled to webhookd as gRPC metadata and shows in its logs.
    rid = created.headers["x-request-id"]
    deadline = time.monotonic() + 5
    while f'"request_id": "{rid}"' not in stack.webhookd.logs():
        assert time.monotonic() < deadline, "webhookd never logged the edge's request id"
        await asyncio.sleep(0.05)
    replay = await http.post(
        base + "/endpoints", headers=post_h("c1"), json={"url": hook_url, "events": ["booking.confirmed"]}
    )
    assert replay.status_code == 201 and replay.json()["id"] == ep["id"]
    assert replay.headers["idempotent-replayed"] == "true"
    listed = await http.get(base + "/endpoints", headers=hdrs(key.secret))
    assert [e["id"] for e in listed.json()["data"]] == [ep["id"]]
    assert "secret" not in listed.json()["data"][0]
    got = await http.get(base + f"/endpoints/{ep['id']}", headers=hdrs(key.secret))
    assert got.json()["url"] == hook_url
    updated = await http.post(
        base + f"/endpoints/{ep['id']}",
        headers=post_h("u1"),
        json={"description": "main", "events": ["booking.*"]},
    )
    if updated.status_code == 400:  # webhookd may not take family patterns
        updated = await http.post(
            base + f"/endpoints/{ep['id']}",
            headers=post_h("u2"),
            json={"description": "main", "events": ["booking.confirmed", "booking.failed"]},
        )
    assert updated.status_code == 200, updated.text
    assert updated.json()["description"] == "main"
    # Send a test delivery; it reaches the receiver and shows in deliveries and attempts.
    sent = await http.post(base + f"/endpoints/{ep['id']}/test", headers=post_h("t1"))
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 10
    while not any(r.path == "/hook" for r in stack.receiver.requests):
        assert time.monotonic() < deadline, "the test delivery never arrived"
        await asyncio.sleep(0.05)
    assert any("x-service-signature" in r.headers for r in stack.receiver.requests)
    deliveries = await http.get(base + f"/deliveries?endpoint={ep['id']}", headers=hdrs(key.secret))
    assert deliveries.status_code == 200, deliveries.text
    attempts: dict[str, Any] = {}
    while not attempts.get("data"):
        assert time.monotonic() < deadline
        attempts = (await http.get(base + f"/attempts?endpoint={ep['id']}", headers=hdrs(key.secret))).json()
    att = attempts["data"][0]
    assert att["responseStatus"] == 200 and att["outcome"] == "succeeded"
    # The receiver's response headers as it sent them (names lower-cased), not the edge's own.
    assert att["responseHeaders"]["content-type"] == "application/json"
    assert att["responseHeaders"]["server"].startswith("BaseHTTP")
    resent = await http.post(base + f"/attempts/{att['id']}/resend", headers=post_h("r1"))
    assert resent.status_code == 202, resent.text
    rotated = await http.post(
        base + f"/endpoints/{ep['id']}/rotate_secret", headers=post_h("s1"), json={"overlapSeconds": 60}
    )
    assert rotated.status_code == 200 and rotated.json()["secret"] != ep["secret"]
    enabled = await http.post(base + f"/endpoints/{ep['id']}/enable", headers=post_h("e1"))
    assert enabled.status_code == 200 and enabled.json()["status"] == "enabled"
    # Another account cannot see it; a read-only key cannot change it.
    _, stranger = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    assert_error(
        await http.get(base + f"/endpoints/{ep['id']}", headers=hdrs(stranger.secret)), 404, "not_found"
    )
    _, reader = await new_key(auth, scopes=["webhooks:read"], account_id=account_id)
    assert (await http.get(base + f"/endpoints/{ep['id']}", headers=hdrs(reader.secret))).status_code == 200
    err = assert_error(
        await http.delete(base + f"/endpoints/{ep['id']}", headers=hdrs(reader.secret)), 403, "missing_scope"
    )
    assert "webhooks:write" in err["message"]
    deleted = await http.delete(base + f"/endpoints/{ep['id']}", headers=hdrs(key.secret))
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"object": "webhook_endpoint", "id": ep["id"], "deleted": True}
    assert_error(await http.get(base + f"/endpoints/{ep['id']}", headers=hdrs(key.secret)), 404, "not_found")


async def test_webhook_bad_input(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    base = stack.sandbox + "/v1/webhooks"
    h = hdrs(key.secret, Content_Type="application/json")
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("b1", {"events": ["booking.confirmed"]}, "url"),
        ("b2", {"url": "https://partner.example/hook"}, "events"),
        ("b3", {"url": 5, "events": ["booking.confirmed"]}, "url"),
        (
            "b4",
            {"url": "https://partner.example/hook", "events": ["booking.confirmed"], "colour": "red"},
            "colour",
        ),
        ("b5", {"url": "https://partner.example/hook", "events": ["no.such"]}, "no.such"),
    ]
    for idem, body, named in cases:
        err = assert_error(
            await http.post(base + "/endpoints", headers={**h, "Idempotency-Key": idem}, json=body),
            400,
            "invalid_request",
        )
        assert named in err["message"]
    assert_error(
        await http.get(base + "/endpoints?limit=0", headers=hdrs(key.secret)), 400, "invalid_request"
    )
    assert_error(
        await http.get(base + "/deliveries?status=weird", headers=hdrs(key.secret)), 400, "invalid_request"
    )
    assert_error(await http.get(base + "/endpoints/nope", headers=hdrs(key.secret)), 404, "not_found")
    assert_error(await http.get(base + "/endpoints/we_missing", headers=hdrs(key.secret)), 404, "not_found")
    listed = await http.get(base + "/endpoints", headers=hdrs(key.secret))
    assert listed.json()["data"] == []  # nothing was created


async def test_webhook_signature_scheme_and_signing_keys(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write", "account:read"])
    base = stack.sandbox + "/v1/webhooks"
    h = hdrs(key.secret, Content_Type="application/json")
    body = {"url": stack.receiver.url + "/hook", "events": ["booking.confirmed"]}
    bad = await http.post(
        base + "/endpoints", headers={**h, "Idempotency-Key": "s0"}, json={**body, "signatureScheme": "v2"}
    )
    assert "signatureScheme" in assert_error(bad, 400, "invalid_request")["message"]
    plain = await http.post(base + "/endpoints", headers={**h, "Idempotency-Key": "s1"}, json=body)
    assert plain.json()["signatureScheme"] == "stripe"
    std = await http.post(
        base + "/endpoints",
        headers={**h, "Idempotency-Key": "s2"},
        json={**body, "signatureScheme": "standard"},
    )
    assert std.status_code == 201, std.text
    ep = std.json()
    assert ep["signatureScheme"] == "standard"
    keys = (await http.get(base + f"/signing-keys?endpoint={ep['id']}", headers=hdrs(key.secret))).json()
    (only,) = keys["data"]
    assert only["object"] == "webhook_signing_key" and only["endpoint"] == ep["id"]
    assert only["publicKey"].startswith("whpk_") and only["expires"] is None
    every = (await http.get(base + "/signing-keys", headers=hdrs(key.secret))).json()["data"]
    assert {k["endpoint"] for k in every} == {ep["id"], plain.json()["id"]}
    assert "whsk_" not in json.dumps(every) and "whsec_" not in json.dumps(every)
    both = await http.post(
        base + f"/endpoints/{ep['id']}",
        headers={**h, "Idempotency-Key": "s3"},
        json={"signatureScheme": "both"},
    )
    assert both.status_code == 200 and both.json()["signatureScheme"] == "both"
    # Reconciliation: nothing missed yet; a dry-run recovery counts and changes nothing.
    missed = await http.get(stack.sandbox + f"/v1/events?undeliveredTo={ep['id']}", headers=hdrs(key.secret))
    assert missed.status_code == 200 and missed.json()["data"] == []
    assert_error(
        await http.get(stack.sandbox + "/v1/events?undeliveredTo=x", headers=hdrs(key.secret)),
        400,
        "invalid_request",
    )
    assert_error(
        await http.get(stack.sandbox + "/v1/events?undeliveredTo=we_nope", headers=hdrs(key.secret)),
        404,
        "not_found",
    )
    _, reader = await new_key(auth, scopes=["account:read"])
    assert_error(
        await http.get(stack.sandbox + f"/v1/events?undeliveredTo={ep['id']}", headers=hdrs(reader.secret)),
        403,
        "missing_scope",
    )
    dry = await http.post(
        base + f"/endpoints/{ep['id']}/recover",
        headers={**h, "Idempotency-Key": "s4"},
        json={"since": "2026-01-01T00:00:00Z", "dryRun": True},
    )
    assert dry.status_code == 200, dry.text
    assert dry.json() == {
        "object": "webhook_recovery",
        "endpointId": ep["id"],
        "recovered": 0,
        "dryRun": True,
    }


async def test_webhook_endpoint_ordering_field(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    """``ordering``: "none" (the default) or "perResource", on create, update and read; anything else is a
    400 naming the field; the same Idempotency-Key with another ordering is a 422, not a second endpoint."""
    _, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    base = stack.sandbox + "/v1/webhooks/endpoints"
    h = hdrs(key.secret, Content_Type="application/json")
    body = {"url": stack.receiver.url + "/hook", "events": ["booking.confirmed"]}
    for idem, bad in (("o0", "fifo"), ("o1", 2), ("o2", None), ("o3", "PerResource")):
        err = assert_error(
            await http.post(base, headers={**h, "Idempotency-Key": idem}, json={**body, "ordering": bad}),
            400,
            "invalid_request",
        )
        assert "ordering" in err["message"]
    plain = await http.post(base, headers={**h, "Idempotency-Key": "o4"}, json=body)
    assert plain.status_code == 201 and plain.json()["ordering"] == "none"
    ordered = await http.post(
        base, headers={**h, "Idempotency-Key": "o5"}, json={**body, "ordering": "perResource"}
    )
    assert ordered.status_code == 201, ordered.text
    ep = ordered.json()
    assert ep["ordering"] == "perResource"
    got = await http.get(base + f"/{ep['id']}", headers=hdrs(key.secret))
    assert got.json()["ordering"] == "perResource"
    assert_error(
        await http.post(base, headers={**h, "Idempotency-Key": "o5"}, json={**body, "ordering": "none"}),
        422,
        "idempotency_key_reused",
    )
    assert_error(
        await http.post(base + f"/{ep['id']}", headers={**h, "Idempotency-Key": "o6"}, json={"ordering": ""}),
        400,
        "invalid_request",
    )
    updated = await http.post(
        base + f"/{ep['id']}", headers={**h, "Idempotency-Key": "o7"}, json={"ordering": "none"}
    )
    assert updated.status_code == 200 and updated.json()["ordering"] == "none"
    assert updated.json()["signatureScheme"] == "stripe"  # only the field sent changed
    listed = (await http.get(base, headers=hdrs(key.secret))).json()["data"]
    assert sorted(e["ordering"] for e in listed) == ["none", "none"]


async def test_ws_example_script_prints_events_and_the_4001_close(
    stack: Stack,
    auth: auth_pb2_grpc.AuthServiceStub,
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    tmp_path: Any,
) -> None:
    import sys

    from tests.support import ROOT

    port = free_port()
    args = edge_args(
        stack.authsvc.grpc_target, stack.webhookd.grpc_target, f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"
    )
    args[args.index("--sandbox-listen") + 1] = f"127.0.0.1:{port}"
    edge = ServiceProcess("edge", [*args, "--sandbox-hosts", f"127.0.0.1:{port}"]).start(
        tmp_path / "edge.log"
    )
    account_id, key = await new_key(auth, scopes=["account:read"])
    marker = await publish(hooks, account_id, "ledger.low_balance")
    url = f"ws://127.0.0.1:{port}/v1/stream"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "scripts/ws_example.py", url, key.secret, "--since", marker.id,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stderr is not None
        event = await publish(hooks, account_id, "search_quota.threshold")
        while True:  # "subscribed" and pings come too
            try:
                line = await asyncio.wait_for(proc.stdout.readline(), 30)
            except TimeoutError:
                proc.kill()
                err = (await proc.stderr.read()).decode()
                raise AssertionError(
                    f"no event from ws_example; stderr: {err}\nedge: {edge.logs()[-3000:]}"
                ) from None
            msg = json.loads(line)
            if msg["type"] == "event":
                break
        assert msg["event"]["id"] == event.id
        await auth.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, actor=ACTOR))
        assert await asyncio.wait_for(proc.wait(), 10) == 2
        assert "closed: 4001" in (await proc.stderr.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        edge.terminate()


async def test_sigterm_closes_open_streams_with_1001_and_exits_cleanly(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, tmp_path: Any
) -> None:
    args = edge_args(
        stack.authsvc.grpc_target, stack.webhookd.grpc_target, f"sqlite+aiosqlite:///{tmp_path / 'e.db'}"
    )
    edge = ServiceProcess("edge", args).start(tmp_path / "edge.log")
    _, key = await new_key(auth, scopes=["account:read"])
    conn = await connect(
        f"ws://{SANDBOX_HOST}/v1/stream",
        subprotocols=["svc", key.secret],  # type: ignore[list-item]
        host="127.0.0.1",
        port=edge.ports["sandbox_port"],
    )
    try:
        code = await asyncio.to_thread(edge.terminate)
        assert code == 0
        assert await close_code(conn, 5) == 1001
    finally:
        await conn.close()
        edge.kill()
