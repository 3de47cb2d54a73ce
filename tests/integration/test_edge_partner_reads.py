# ruff: noqa: F811  (the fixtures imported from test_edge_stream_webhooks)
"""Issue 9 items 8 and 9 (the edge's part) and the events API, over real HTTP and WebSocket against real
authsvc, webhookd and edge processes (the stack of test_edge_stream_webhooks)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from urllib.parse import quote

import httpx

from tests.integration.edge_stack import assert_error, hdrs, new_key
from tests.integration.test_edge_stream_webhooks import (  # noqa: F401  (fixtures)
    Stack,
    auth,
    hooks,
    http,
    publish,
    recv_json,
    stack,
    ws,
)
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2_grpc


async def raw_request(port: int, head: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


async def test_421_has_its_reason_phrase(stack: Stack) -> None:
    answer = await raw_request(
        stack.edge.ports["sandbox_port"],
        b"GET /v1/account HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n",
    )
    assert answer.startswith(b"HTTP/1.1 421 Misdirected Request\r\n"), answer[:80]
    assert b'"misdirected_request"' in answer


async def test_head_is_get_without_a_body(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["account:read", "webhooks:read"])
    for path in ("/v1/account", "/v1/webhooks/endpoints", "/openapi.json"):
        got = await http.get(stack.sandbox + path, headers=hdrs(key.secret))
        head = await http.head(stack.sandbox + path, headers=hdrs(key.secret))
        assert head.status_code == got.status_code == 200, (path, head.status_code)
        assert head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert int(head.headers["content-length"]) > 0
    # Refusals are the GET's too: no key, no scope, unknown route.
    head = await http.head(stack.sandbox + "/v1/account", headers=hdrs(None))
    assert head.status_code == 401 and head.content == b""
    _, reader = await new_key(auth, scopes=["webhooks:read"])
    assert (await http.head(stack.sandbox + "/v1/account", headers=hdrs(reader.secret))).status_code == 403
    assert (await http.head(stack.sandbox + "/v1/nothing/here", headers=hdrs(key.secret))).status_code == 404


async def test_delete_customer_blames_the_path_parameter(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["account:write"])
    for ref in ("jane@example.com", "a b", "x" * 65):
        err = assert_error(
            await http.delete(stack.sandbox + "/v1/customers/" + quote(ref), headers=hdrs(key.secret)),
            400,
            "invalid_customer_ref",
        )
        assert "path parameter" in err["message"] and "X-Partner-Customer-Ref" not in err["message"], err


async def test_subscribe_with_an_unknown_since_is_the_error_only(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, hooks: webhooks_pb2_grpc.WebhookServiceStub
) -> None:
    account_id, key = await new_key(auth, scopes=["account:read"])
    first = await publish(hooks, account_id, "apikey.revoked")
    second = await publish(hooks, account_id, "search_quota.threshold")
    async with ws(stack, ["svc", key.secret]) as conn:
        await conn.send(json.dumps({"type": "subscribe", "since": "evt_doesnotexist"}))
        msg = await recv_json(conn)
        assert msg["type"] == "error" and msg["error"]["type"] == "not_found", msg
        # Nothing follows it but the answer to the next message.
        await conn.send(json.dumps({"type": "ping"}))
        assert (await recv_json(conn)) == {"type": "pong"}
        # A known event: subscribed, then what came after it.
        await conn.send(json.dumps({"type": "subscribe", "since": first.id}))
        assert (await recv_json(conn))["type"] == "subscribed"
        msg = await recv_json(conn)
        assert msg["type"] == "event" and msg["event"]["id"] == second.id, msg


async def test_subscribe_takes_since_null_as_no_position(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, hooks: webhooks_pb2_grpc.WebhookServiceStub
) -> None:
    """``subscribed`` says ``"since": null`` for "no position": a client may send back what it was told."""
    account_id, key = await new_key(auth, scopes=["account:read"])
    async with ws(stack, ["svc", key.secret]) as conn:
        await conn.send(json.dumps({"type": "subscribe", "events": ["apikey.*"], "since": None}))
        msg = await recv_json(conn)
        assert msg == {"type": "subscribed", "events": ["apikey.*"], "since": None}, msg
        event = await publish(hooks, account_id, "apikey.revoked")
        msg = await recv_json(conn)
        assert msg["type"] == "event" and msg["event"]["id"] == event.id, msg
        # Any other non-string is still refused.
        await conn.send(json.dumps({"type": "subscribe", "since": 7}))
        msg = await recv_json(conn)
        assert msg["type"] == "error" and "subscribe.since" in msg["error"]["message"], msg


async def test_events_read_back_filtered_by_scope_kind_and_time(
    stack: Stack,
    auth: auth_pb2_grpc.AuthServiceStub,
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    http: httpx.AsyncClient,
) -> None:
    account_id, key = await new_key(auth, scopes=["hotels:read", "account:read"])
    hotel = await publish(hooks, account_id, "booking.confirmed", "hotels")
    flight = await publish(hooks, account_id, "booking.confirmed", "flights")
    esim = await publish(hooks, account_id, "esim.provisioned")
    revoked = await publish(hooks, account_id, "apikey.revoked")
    base = stack.sandbox + "/v1/events"

    async def listed(query: str = "", secret: str = key.secret) -> list[str]:
        resp = await http.get(base + query, headers=hdrs(secret))
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["object"] == "list"
        return [e["id"] for e in body["data"]]

    # The key reads hotel bookings and account events; never the flight booking or the eSIM event.
    assert await listed() == [revoked.id, hotel.id]
    assert await listed("?type=booking.*") == [hotel.id]
    assert await listed("?type=booking.confirmed,apikey.revoked") == [revoked.id, hotel.id]
    assert await listed("?type=esim.provisioned") == []
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    assert await listed("?created[gte]=" + quote(future)) == []
    assert await listed("?created[lt]=" + quote(future)) == [revoked.id, hotel.id]
    # Pages: limit=1 walks them all, newest first.
    seen, token = [], ""
    while True:
        page = (await http.get(base + f"?limit=1&page_token={token}", headers=hdrs(key.secret))).json()
        seen += [e["id"] for e in page["data"]]
        token = page["nextPageToken"]
        if not token:
            break
    assert seen == [revoked.id, hotel.id]
    # One event: the envelope webhooks deliver; one of the account's it may not read: 403 naming the
    # scope; unknown or another account's: not found.
    got = await http.get(f"{base}/{hotel.id}", headers=hdrs(key.secret))
    assert got.status_code == 200 and got.json() == json.loads(hotel.envelope_json)
    for eid, scope in ((flight.id, "flights:read"), (esim.id, "esim:read")):
        refused = await http.get(f"{base}/{eid}", headers=hdrs(key.secret))
        assert_error(refused, 403, "missing_scope")
        assert scope in refused.json()["error"]["message"]
    for eid in ("evt_doesnotexist", "nope"):
        assert_error(await http.get(f"{base}/{eid}", headers=hdrs(key.secret)), 404, "not_found")
    _, stranger = await new_key(auth, scopes=["hotels:read", "account:read"])
    assert await listed(secret=stranger.secret) == []
    assert_error(await http.get(f"{base}/{hotel.id}", headers=hdrs(stranger.secret)), 404, "not_found")
    # A key that reads no events sees none; bad parameters are invalid_request.
    _, writer = await new_key(auth, scopes=["webhooks:write"], account_id=account_id)
    assert await listed(secret=writer.secret) == []
    for bad in ("?type=booking.exploded", "?created[gte]=yesterday", "?limit=0", "?page_token=zzz"):
        assert_error(await http.get(base + bad, headers=hdrs(key.secret)), 400, "invalid_request")
