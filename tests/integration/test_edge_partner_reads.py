# ruff: noqa: F811  (the fixtures imported from test_edge_stream_webhooks)
"""Issue 9 items 8 and 9 (the edge's part) and the events API, over real HTTP and WebSocket against real
authsvc, webhookd and edge processes (the stack of test_edge_stream_webhooks)."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import httpx

from tests.integration.test_edge_http import assert_error, hdrs, new_key
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
