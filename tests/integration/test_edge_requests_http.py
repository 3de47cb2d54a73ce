"""Requests through the edge over real HTTP against real processes: bodies, idempotency across two
edge processes, product routes and their upstreams, customers, malformed HTTP and a too-large
body."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest

from tests.integration.edge_stack import Stack, assert_error, auth, hdrs, http, new_key, stack  # noqa: F401 (the fixtures)
from travel.auth.v1 import auth_pb2_grpc


# -- bodies --------------------------------------------------------------------------------------------------
async def test_bad_bodies_are_refused_and_change_nothing(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth)
    url = stack.url() + "/v1/hotels/bookings"
    base = hdrs(key.secret, Idempotency_Key="bad-bodies-1", X_Partner_Customer_Ref="cust-1")
    before = len(stack.sandbox_up.requests)
    big = b'{"x": "' + b"a" * (1024 * 1024) + b'"}'
    cases: list[tuple[dict[str, str], bytes, int, str]] = [
        ({**base, "Content-Type": "application/json"}, big, 413, "payload_too_large"),
        ({**base, "Content-Type": "text/plain"}, b'{"a": 1}', 415, "unsupported_media_type"),
        ({**base, "Content-Type": "application/json"}, b'{"a": ', 400, "invalid_request"),
        ({**base, "Content-Type": "application/json"}, b"[1, 2]", 400, "invalid_request"),
        ({**base, "Content-Type": "application/json"}, b"\xff\xfe", 400, "invalid_request"),
        ({k: v for k, v in base.items() if k != "Idempotency-Key"}, b"{}", 400, "missing_idempotency_key"),
        ({**base, "Idempotency-Key": "x" * 256}, b"{}", 400, "invalid_request"),
    ]
    for headers, body, status, etype in cases:
        assert_error(await http.post(url, headers=headers, content=body), status, etype)
    assert len(stack.sandbox_up.requests) == before  # nothing reached the product
    # The key was never claimed: the same key now works for a good request.
    ok = await http.post(
        url, headers={**base, "Content-Type": "application/json"}, content=b'{"offer": "o1"}'
    )
    assert ok.status_code == 200, ok.text
    assert len(stack.sandbox_up.requests) == before + 1


# -- idempotency -------------------------------------------------------------------------------------------
async def test_idempotent_replay_across_two_edge_processes(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth)
    h = hdrs(
        key.secret, Idempotency_Key="book-1", X_Partner_Customer_Ref="cust-9", Content_Type="application/json"
    )
    first = await http.post(
        stack.url("sandbox", 1) + "/v1/hotels/bookings", headers=h, content=b'{"offer": 1}'
    )
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    n = len(stack.sandbox_up.requests)
    again = await http.post(
        stack.url("sandbox", 2) + "/v1/hotels/bookings", headers=h, content=b'{"offer": 1}'
    )
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    assert len(stack.sandbox_up.requests) == n  # replayed, not re-sent
    other = await http.post(
        stack.url("sandbox", 2) + "/v1/hotels/bookings", headers=h, content=b'{"offer": 2}'
    )
    assert_error(other, 422, "idempotency_key_reused")
    # Keys are scoped to the account (and environment): another account may reuse the string.
    _, key2 = await new_key(auth)
    h2 = {**h, "Authorization": f"Svc {key2.secret}"}
    fresh = await http.post(
        stack.url("sandbox", 1) + "/v1/hotels/bookings", headers=h2, content=b'{"offer": 1}'
    )
    assert fresh.status_code == 200 and "idempotent-replayed" not in fresh.headers


async def test_idempotency_in_flight_and_5xx_not_stored(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth)
    h = hdrs(
        key.secret, Idempotency_Key="slow-1", X_Partner_Customer_Ref="cust-9", Content_Type="application/json"
    )
    slow_url = stack.url("sandbox", 1) + "/v1/hotels/bookings?sleep=1.5"
    before = len(stack.sandbox_up.requests)
    slow = asyncio.ensure_future(http.post(slow_url, headers=h, content=b"{}"))
    # Wait until the first request holds the key (it reached the upstream), then repeat it elsewhere.
    deadline = time.monotonic() + 5
    while not any(r.query.get("sleep") for r in stack.sandbox_up.requests[-5:]):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    # The repeat is held until the first ends (docs/edge.md "Idempotency"), then gets its answer: the
    # upstream sees one request. (A repeat still running after the hold is 409: test_edge_claim_takeover.)
    busy = await http.post(
        stack.url("sandbox", 2) + "/v1/hotels/bookings?sleep=1.5", headers=h, content=b"{}"
    )
    first = await slow
    assert first.status_code == 200 and "idempotent-replayed" not in first.headers
    assert busy.status_code == 200 and busy.headers["idempotent-replayed"] == "true"
    assert busy.content == first.content
    assert len(stack.sandbox_up.requests) == before + 1
    # A 5xx is not stored: the same key runs again.
    h5 = {**h, "Idempotency-Key": "fails-1"}
    failed = await http.post(stack.url() + "/v1/hotels/bookings?status=503", headers=h5, content=b"{}")
    assert_error(failed, 502, "upstream_error")  # an upstream 5xx not of ours (edge.upstreamerrors)
    n = len(stack.sandbox_up.requests)
    failed_again = await http.post(stack.url() + "/v1/hotels/bookings?status=503", headers=h5, content=b"{}")
    assert failed_again.status_code == 502 and "idempotent-replayed" not in failed_again.headers
    assert len(stack.sandbox_up.requests) == n + 1
    # A 4xx is stored and replayed.
    h4 = {**h, "Idempotency-Key": "conflict-1"}
    first = await http.post(stack.url() + "/v1/hotels/bookings?status=409", headers=h4, content=b"{}")
    replay = await http.post(stack.url() + "/v1/hotels/bookings?status=409", headers=h4, content=b"{}")
    assert first.status_code == replay.status_code == 409
    assert replay.headers["idempotent-replayed"] == "true"


# -- product routes ----------------------------------------------------------------------------------------
async def test_product_proxy_headers_and_environment_isolation(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth)
    live_before = len(stack.live_up.requests)
    resp = await http.get(
        stack.url() + "/v1/hotels/bookings/bk_1?x=1",
        headers=hdrs(key.secret, X_Partner_Customer_Ref="cust-7"),
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["upstream"] == "sandbox"
    assert body["path"] == "/v1/hotels/bookings/bk_1"
    assert body["accountId"] == account_id and body["keyId"] == key.key.id
    assert body["environment"] == "sandbox"
    assert body["travellerId"].startswith("trv_")
    seen = stack.sandbox_up.requests[-1]
    assert "authorization" not in seen.headers  # the key never leaves the edge
    assert seen.query == {"x": ["1"]}
    assert seen.headers["x-request-id"] == resp.headers["x-request-id"]
    # The same reference resolves to the same traveller.
    again = await http.get(
        stack.url() + "/v1/hotels/bookings/bk_2", headers=hdrs(key.secret, X_Partner_Customer_Ref="cust-7")
    )
    assert again.json()["travellerId"] == body["travellerId"]
    assert len(stack.live_up.requests) == live_before  # the sandbox never reached live
    # Scope and traveller rules.
    _, esim_only = await new_key(auth, scopes=["esim:read"])
    assert_error(
        await http.get(stack.url() + "/v1/hotels/search", headers=hdrs(esim_only.secret)),
        403,
        "missing_scope",
    )
    for ref in ("jane@example.com", "two words", "x" * 65):
        resp = await http.get(
            stack.url() + "/v1/hotels/bookings/bk_1", headers=hdrs(key.secret, X_Partner_Customer_Ref=ref)
        )
        assert_error(resp, 400, "invalid_customer_ref")
    no_ref = hdrs(key.secret, Idempotency_Key="noref", Content_Type="application/json")
    assert_error(
        await http.post(stack.url() + "/v1/hotels/bookings", headers=no_ref, content=b"{}"),
        400,
        "invalid_customer_ref",
    )


async def test_search_counts_on_live_keys_only_and_402_when_used_up(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, live = await new_key(auth, "live", ["hotels:read", "account:read"], allowance=2)
    _, test = await new_key(auth, "sandbox", ["hotels:read", "account:read"], account_id=account_id)
    for _ in range(3):
        resp = await http.get(stack.url("sandbox") + "/v1/hotels/search", headers=hdrs(test.secret))
        assert resp.status_code == 200 and resp.json()["upstream"] == "sandbox"
    live_before = len(stack.live_up.requests)
    for _ in range(2):
        resp = await http.get(stack.url("live") + "/v1/hotels/search", headers=hdrs(live.secret, "live"))
        assert resp.status_code == 200 and resp.json()["upstream"] == "live"
    assert_error(
        await http.get(stack.url("live") + "/v1/hotels/search", headers=hdrs(live.secret, "live")),
        402,
        "search_quota_exhausted",
    )
    assert len(stack.live_up.requests) == live_before + 2  # the refused search never reached the supplier
    usage = (await http.get(stack.url("live") + "/v1/account", headers=hdrs(live.secret, "live"))).json()[
        "usage"
    ]
    assert usage["searchesUsed"] == 2 and usage["remaining"] == 0
    # A test key of the same account sees the sandbox's own figures, never the live ones (issue 9 item 4).
    sandbox = (await http.get(stack.url("sandbox") + "/v1/account", headers=hdrs(test.secret))).json()[
        "usage"
    ]
    assert sandbox["searchesUsed"] == 0 and sandbox["remaining"] is None
    assert sandbox["dailySearchAllowance"] is None and sandbox["counted"] is False


async def test_upstream_errors_are_mapped_and_a_down_upstream_is_503(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["esim:read", "flights:read"])
    resp = await http.get(stack.url() + "/v1/esim/plans?status=502", headers=hdrs(key.secret))
    assert_error(
        resp, 502, "upstream_error"
    )  # its body is not passed on (tests/unit/test_edge_upstream_errors)
    assert "upstream" not in resp.json()["error"]
    assert_error(
        await http.get(stack.url() + "/v1/flights/search", headers=hdrs(key.secret)),
        503,
        "service_unavailable",
    )


# -- customers ---------------------------------------------------------------------------------------------
async def test_delete_customer(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth)
    made = await http.get(
        stack.url() + "/v1/hotels/bookings/bk_1", headers=hdrs(key.secret, X_Partner_Customer_Ref="cust-del")
    )
    traveller = made.json()["travellerId"]
    resp = await http.delete(stack.url() + "/v1/customers/cust-del", headers=hdrs(key.secret))
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"object": "customer", "ref": "cust-del", "travellerId": traveller, "deleted": True}
    assert_error(
        await http.delete(stack.url() + "/v1/customers/cust-del", headers=hdrs(key.secret)), 404, "not_found"
    )
    assert_error(
        await http.delete(stack.url() + "/v1/customers/jane@example.com", headers=hdrs(key.secret)),
        400,
        "invalid_customer_ref",
    )
    _, reader = await new_key(auth, scopes=["account:read"])
    err = assert_error(
        await http.delete(stack.url() + "/v1/customers/c1", headers=hdrs(reader.secret)), 403, "missing_scope"
    )
    assert "account:write" in err["message"]


GET_ACCOUNT = b"GET /v1/account HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n"


@pytest.mark.parametrize(
    ("raw", "status", "etype"),
    [
        (b"GARBAGE\r\n\r\n", 400, "invalid_request"),
        (GET_ACCOUNT + b"Bad Header\r\n\r\n", 400, "invalid_request"),
        (GET_ACCOUNT + b"Authorization: Svc \xff\xfe\r\n\r\n", 401, "invalid_api_key"),
        (
            b"POST /v1/webhooks/endpoints HTTP/1.1\r\nHost: 127.0.0.1:8081\r\nContent-Length: 2000000\r\n"
            b"\r\n",
            413,
            "payload_too_large",
        ),
    ],
)
async def test_malformed_http_gets_the_error_body(stack: Stack, raw: bytes, status: int, etype: str) -> None:
    import json

    reader, writer = await asyncio.open_connection("127.0.0.1", stack.edge.ports["sandbox_port"])
    try:
        writer.write(raw)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].split(" ")[1] == str(status)
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = json.loads(await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 5))
        assert body["error"]["type"] == etype
        assert headers["x-request-id"] == body["error"]["requestId"]
        assert "alt-svc" not in headers
    finally:
        writer.close()


async def test_too_large_body_still_being_sent_gets_the_413_not_a_reset(stack: Stack) -> None:
    """The edge answers 413 as soon as it sees the Content-Length, while the client is still sending;
    a lingering close keeps that answer readable instead of resetting the connection under it."""
    import json
    import socket

    size = 3 * 1024 * 1024
    head = (
        b"POST /v1/webhooks/endpoints HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % size
    )
    for _ in range(3):
        sock = socket.create_connection(("127.0.0.1", stack.edge.ports["sandbox_port"]), timeout=10)
        try:
            sock.sendall(head)
            chunk = b"a" * 65536
            with contextlib.suppress(OSError):  # the server may stop reading once it has answered
                for _ in range(size // len(chunk)):
                    sock.sendall(chunk)
            data = b""
            while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + 10:
                part = await asyncio.to_thread(sock.recv, 65536)
                if not part:
                    break
                data += part
            assert data.startswith(b"HTTP/1.1 413 "), data[:200]
            body = data[data.index(b"\r\n\r\n") + 4 :]
            while True:
                try:
                    json.loads(body)
                    break
                except ValueError:
                    part = await asyncio.to_thread(sock.recv, 65536)
                    assert part, body
                    body += part
            assert json.loads(body)["error"]["type"] == "payload_too_large"
        finally:
            sock.close()
