"""API keys at the edge over real HTTP against real authsvc and webhookd processes: GET /v1/account,
refusals, allow lists, read-only accounts, revocation and rotation reaching both edges, a key's
rate limit, and the request log."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from google.protobuf import duration_pb2

from edge.testing import SANDBOX_HOST, edge_args
from tests.integration.edge_stack import ACTOR, Stack, assert_error, auth, hdrs, http, new_key, stack  # noqa: F401 (the fixtures)
from tests.support import ServiceProcess
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc


# -- GET /v1/account ------------------------------------------------------------------------------------
@pytest.mark.parametrize("env", ["sandbox", "live"])
async def test_account_reports_key_scopes_environment_and_usage(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient, env: str
) -> None:
    account_id, key = await new_key(auth, env, ["account:read", "hotels:read"], allowance=50)
    resp = await http.get(stack.url(env) + "/v1/account", headers=hdrs(key.secret, env))
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-request-id"].startswith("req_")
    assert "deprecation" not in resp.headers
    body = resp.json()
    assert body["id"] == account_id
    assert body["mode"] == "A" and body["status"] == "active"
    assert body["environment"] == env and body["livemode"] is (env == "live")
    assert body["key"]["id"] == key.key.id
    assert sorted(body["key"]["scopes"]) == ["account:read", "hotels:read"]
    assert body["usage"]["dailySearchAllowance"] == (50 if env == "live" else None)
    assert body["usage"]["searchesUsed"] == 0
    assert body["usage"]["counted"] is (env == "live")
    assert key.secret not in resp.text


# -- refusals -------------------------------------------------------------------------------------------
async def test_refusals_have_the_error_body_type_and_status(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, "sandbox", ["hotels:read"])
    _, live = await new_key(auth, "live", ["account:read"])
    url = stack.url("sandbox") + "/v1/account"
    cases: list[tuple[dict[str, str], int, str]] = [
        (hdrs(None), 401, "missing_api_key"),
        ({"Host": SANDBOX_HOST, "Authorization": f"Basic {key.secret}"}, 401, "invalid_api_key"),
        ({"Host": SANDBOX_HOST, "Authorization": "Svc svc_test_" + "x" * 40}, 401, "invalid_api_key"),
        ({"Host": SANDBOX_HOST, "Authorization": "Svc garbage"}, 401, "invalid_api_key"),
        ({"Host": "evil.example", "Authorization": f"Svc {key.secret}"}, 421, "misdirected_request"),
        (hdrs(live.secret, "sandbox"), 401, "environment_mismatch"),
        (hdrs(key.secret, "sandbox", Accept="text/html"), 406, "not_acceptable"),
        (hdrs(key.secret), 403, "missing_scope"),
    ]
    for headers, status, etype in cases:
        err = assert_error(await http.get(url, headers=headers), status, etype)
        assert key.secret not in err["message"] and live.secret not in err["message"]
        if etype == "missing_scope":
            assert "account:read" in err["message"]
    # A live key on the live host works; a test key there is a mismatch.
    assert (
        await http.get(stack.url("live") + "/v1/account", headers=hdrs(live.secret, "live"))
    ).status_code == 200
    assert_error(
        await http.get(stack.url("live") + "/v1/account", headers=hdrs(key.secret, "live")),
        401,
        "environment_mismatch",
    )
    assert_error(await http.get(stack.url() + "/v1/nothing/here", headers=hdrs(key.secret)), 404, "not_found")
    assert_error(await http.get(stack.url() + "/elsewhere", headers=hdrs(key.secret)), 404, "not_found")
    assert_error(
        await http.get(stack.url() + "/elsewhere", headers={"Host": "x.example"}), 421, "misdirected_request"
    )


async def test_allow_list_uses_source_address_behind_trusted_proxy(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, "sandbox", ["account:read"], sources=["203.0.113.0/24"])
    url1 = stack.url("sandbox", 1) + "/v1/account"  # trusts 127.0.0.1 as a proxy
    url2 = stack.url("sandbox", 2) + "/v1/account"  # trusts nobody
    assert_error(await http.get(url1, headers=hdrs(key.secret)), 403, "ip_not_allowed")
    ok = await http.get(url1, headers=hdrs(key.secret, X_Forwarded_For="198.51.100.1, 203.0.113.9"))
    assert ok.status_code == 200, ok.text
    assert_error(
        await http.get(url1, headers=hdrs(key.secret, X_Forwarded_For="203.0.113.9, 198.51.100.1")),
        403,
        "ip_not_allowed",
    )
    assert_error(
        await http.get(url2, headers=hdrs(key.secret, X_Forwarded_For="203.0.113.9")), 403, "ip_not_allowed"
    )
    assert_error(
        await http.get(url1, headers=hdrs(key.secret, X_Forwarded_For="nonsense")), 400, "invalid_request"
    )


async def test_allow_list_reads_every_forwarded_for_line(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    """Issue 8 item 2: a client's own X-Forwarded-For line, then the trusted proxy's (HAProxy's
    ``forwardfor`` adds a line): the source is the right-most entry over both lines, not the first."""
    _, key = await new_key(auth, "sandbox", ["account:read"], sources=["10.0.0.0/8"])
    url = stack.url("sandbox", 1) + "/v1/account"  # trusts 127.0.0.1 as a proxy
    base = list(hdrs(key.secret).items())
    spoofed = [*base, ("X-Forwarded-For", "10.1.2.3"), ("X-Forwarded-For", "8.8.8.8")]
    assert_error(await http.get(url, headers=spoofed), 403, "ip_not_allowed")
    honest = [*base, ("X-Forwarded-For", "8.8.8.8"), ("X-Forwarded-For", "10.1.2.3")]
    ok = await http.get(url, headers=honest)
    assert ok.status_code == 200, ok.text


async def test_read_only_account_refuses_writes(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth)
    await auth.SetAccountStatus(
        pb.SetAccountStatusRequest(account_id=account_id, status=pb.ACCOUNT_STATUS_READ_ONLY, actor=ACTOR)
    )
    assert (await http.get(stack.url() + "/v1/account", headers=hdrs(key.secret))).json()[
        "status"
    ] == "read_only"
    # Business writes are refused: a booking never reaches the supplier.
    before = len(stack.sandbox_up.requests)
    booking = hdrs(key.secret, Idempotency_Key="ro-1", X_Partner_Customer_Ref="trav-1")
    resp = await http.post(stack.url() + "/v1/hotels/bookings", headers=booking, json={"offer": "o1"})
    assert_error(resp, 403, "account_read_only")
    assert len(stack.sandbox_up.requests) == before
    # A traveller's record can still be deleted (here: none exists) and webhooks still managed.
    resp = await http.delete(stack.url() + "/v1/customers/cust_1", headers=hdrs(key.secret))
    assert_error(resp, 404, "not_found")
    hook = hdrs(key.secret, Idempotency_Key="ro-2")
    resp = await http.post(
        stack.url() + "/v1/webhooks/endpoints",
        headers=hook,
        json={"url": "http://127.0.0.1:9/hook", "events": ["settlement.payment_failed"]},
    )
    assert resp.status_code == 201, resp.text


# -- revocation and rotation ---------------------------------------------------------------------------------
async def poll_status(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], status: int, within: float
) -> float:
    start = time.monotonic()
    while True:
        resp = await http.get(url, headers=headers)
        elapsed = time.monotonic() - start
        if resp.status_code == status:
            return elapsed
        assert elapsed < within, f"still {resp.status_code} after {elapsed:.2f}s"
        await asyncio.sleep(0.01)


async def test_revoked_key_is_refused_by_both_edges_within_a_second(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, "sandbox", ["account:read"])
    urls = [stack.url("sandbox", 1) + "/v1/account", stack.url("sandbox", 2) + "/v1/account"]
    for url in urls:  # both edges now hold a cached ALLOW
        for _ in range(3):
            assert (await http.get(url, headers=hdrs(key.secret))).status_code == 200
    await auth.RevokeKey(pb.RevokeKeyRequest(key_id=key.key.id, reason="leaked", actor=ACTOR))
    for url in urls:
        await poll_status(http, url, hdrs(key.secret), 401, within=1.0)
        assert_error(await http.get(url, headers=hdrs(key.secret)), 401, "invalid_api_key")


async def test_scope_change_takes_effect_at_once(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    from google.protobuf import field_mask_pb2

    _, key = await new_key(auth, "sandbox", ["account:read"])
    url = stack.url() + "/v1/account"
    assert (await http.get(url, headers=hdrs(key.secret))).status_code == 200
    await auth.UpdateKey(
        pb.UpdateKeyRequest(
            key_id=key.key.id,
            update_mask=field_mask_pb2.FieldMask(paths=["scopes"]),
            scopes=["hotels:read"],
            actor=ACTOR,
        )
    )
    await poll_status(http, url, hdrs(key.secret), 403, within=1.0)


async def test_rotated_out_key_works_with_deprecation_and_sunset(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, "sandbox", ["account:read"])
    url = stack.url() + "/v1/account"
    assert "sunset" not in (await http.get(url, headers=hdrs(key.secret))).headers
    rotated = await auth.RotateKey(
        pb.RotateKeyRequest(key_id=key.key.id, grace_period=duration_pb2.Duration(seconds=3600), actor=ACTOR)
    )
    expires = rotated.old_key.expires_at.ToDatetime()
    # The cached answer is dropped when the ROTATED watch message arrives (well within a second).
    deadline = time.monotonic() + 1.0
    while "sunset" not in (resp := await http.get(url, headers=hdrs(key.secret))).headers:
        assert resp.status_code == 200
        assert time.monotonic() < deadline, "the rotation never reached the edge"
        await asyncio.sleep(0.01)
    assert resp.status_code == 200
    assert resp.json()["key"]["status"] == "expiring"
    # Deprecation: when it was rotated (the successor's creation), not its expiry (issue 9 item 9).
    assert rotated.old_key.rotated_at.seconds == rotated.new_key.created_at.seconds
    assert resp.headers["deprecation"] == f"@{rotated.old_key.rotated_at.seconds}"
    assert rotated.old_key.rotated_at.seconds < rotated.old_key.expires_at.seconds
    assert resp.headers["sunset"] == expires.strftime("%a, %d %b %Y %H:%M:%S GMT")
    # Also on refusals the old key gets.
    refused = await http.delete(stack.url() + "/v1/customers/x", headers=hdrs(key.secret))
    assert refused.status_code == 403 and "sunset" in refused.headers
    new = await http.get(url, headers=hdrs(rotated.secret))
    assert new.status_code == 200 and "sunset" not in new.headers and "deprecation" not in new.headers


async def test_a_key_over_its_rate_gets_429_with_retry_after_and_other_keys_do_not(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient, tmp_path: Any
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'edge-limited.db'}"
    targets = (stack.authsvc.grpc_target, stack.webhookd.grpc_target)
    args = edge_args(*targets, db, None, "--rate-limit-sandbox", "2")
    limited = ServiceProcess("edge", args).start(tmp_path / "edge-limited.log")
    try:
        url = f"http://127.0.0.1:{limited.ports['sandbox_port']}/v1/account"
        _, busy = await new_key(auth)
        _, calm = await new_key(auth)
        codes = [(await http.get(url, headers=hdrs(busy.secret))).status_code for _ in range(4)]
        assert codes == [200] * 4  # a burst of two seconds' worth at 2/s
        refused = await http.get(url, headers=hdrs(busy.secret))
        err = assert_error(refused, 429, "rate_limited")
        assert refused.headers["retry-after"] == "1"
        assert busy.secret not in err["message"] and "retry after 1 s" in err["message"]
        assert (await http.get(url, headers=hdrs(calm.secret))).status_code == 200  # its own bucket
        await asyncio.sleep(0.6)  # one token back at 2/s
        assert (await http.get(url, headers=hdrs(busy.secret))).status_code == 200
    finally:
        limited.terminate()


# -- the request log ------------------------------------------------------------------------------------
async def logged(
    auth: auth_pb2_grpc.AuthServiceStub, account_id: str, request_id: str, wait: float = 5.0
) -> list[pb.RequestRecord]:
    """The request log's record of ``request_id`` as ListRequests finds it (the edge flushes every second)."""
    deadline = time.monotonic() + wait
    while True:
        found = list(
            (
                await auth.ListRequests(pb.ListRequestsRequest(account_id=account_id, request_id=request_id))
            ).requests
        )
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_a_request_id_from_an_error_is_found_in_the_request_log(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth, "sandbox", ["hotels:read"])
    headers = hdrs(key.secret, X_Partner_Customer_Ref="cust-private-77", X_Custom="header-value-99")
    refused = await http.get(stack.url() + "/v1/account?token=query-secret", headers=headers)
    err = assert_error(refused, 403, "missing_scope")
    rid = refused.headers["x-request-id"]
    assert err["requestId"] == rid
    ok = await http.get(stack.url(which=2) + "/v1/hotels/search?city=Paris", headers=hdrs(key.secret))
    assert ok.status_code == 200

    (record,) = await logged(auth, account_id, rid)
    assert record.request_id == rid
    assert (record.method, record.path, record.status, record.error_type) == (
        "GET",
        "/v1/account",
        403,
        "missing_scope",
    )
    assert record.environment == pb.ENVIRONMENT_SANDBOX
    assert record.key_id == key.key.id and record.key_hint == key.key.hint
    assert record.latency_ms >= 0 and record.HasField("occurred_at")
    stored = str(record)
    for never in (key.secret, key.secret[-8:], "query-secret", "cust-private-77", "header-value-99", "Svc "):
        assert never not in stored
    # The other edge process files its requests too; a success has no error type.
    (success,) = await logged(auth, account_id, ok.headers["x-request-id"])
    assert (success.path, success.status, success.error_type) == ("/v1/hotels/search", 200, "")
    # Filters: by status class and by key.
    errors = await auth.ListRequests(
        pb.ListRequestsRequest(account_id=account_id, environment=pb.ENVIRONMENT_SANDBOX, status_class=4)
    )
    assert [r.request_id for r in errors.requests] == [rid]
    by_key = await auth.ListRequests(pb.ListRequestsRequest(account_id=account_id, key_id=key.key.id))
    assert {r.request_id for r in by_key.requests} == {rid, ok.headers["x-request-id"]}


async def test_a_request_with_no_valid_key_is_not_recorded(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth, "sandbox", ["account:read"])
    unknown = await http.get(stack.url() + "/v1/account", headers=hdrs("svc_test_" + "x" * 40))
    assert_error(unknown, 401, "invalid_api_key")
    known = await http.get(stack.url() + "/v1/account", headers=hdrs(key.secret))
    assert known.status_code == 200
    assert await logged(auth, account_id, known.headers["x-request-id"])
    listed = await auth.ListRequests(pb.ListRequestsRequest(account_id=account_id))
    assert [r.request_id for r in listed.requests] == [known.headers["x-request-id"]]
