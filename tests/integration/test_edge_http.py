"""The edge over real HTTP (httpx) against real authsvc and webhookd processes on loopback, with two
edge processes sharing one SQLite idempotency store, and recording product upstreams."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import duration_pb2

from edge.testing import LIVE_HOST, SANDBOX_HOST, Upstream, edge_args, write_route_table
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

ACTOR = pb.Actor(user="ops@partner.example")
ALL_SCOPES = [
    "account:read",
    "account:write",
    "hotels:read",
    "hotels:write",
    "webhooks:read",
    "webhooks:write",
]


@dataclass
class Stack:
    authsvc: ServiceProcess
    webhookd: ServiceProcess
    edge: ServiceProcess
    edge2: ServiceProcess
    live_up: Upstream
    sandbox_up: Upstream

    def url(self, env: str = "sandbox", which: int = 1) -> str:
        proc = self.edge if which == 1 else self.edge2
        return f"http://127.0.0.1:{proc.ports[f'{env}_port']}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("edge_http")
    live_up, sandbox_up = Upstream("live"), Upstream("sandbox")
    routes = write_route_table(tmp / "routes.json", live_up, sandbox_up)
    procs: list[ServiceProcess] = []
    try:
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"))
        procs.append(auth)
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"), "--allow-private-targets", "--allow-http"
        )
        procs.append(wh)
        db = f"sqlite+aiosqlite:///{tmp / 'edge.db'}"
        e1 = ServiceProcess(
            "edge", edge_args(auth.grpc_target, wh.grpc_target, db, routes, "--trusted-proxy", "127.0.0.1/32")
        ).start(tmp / "edge1.log")
        procs.append(e1)
        e2 = ServiceProcess("edge", edge_args(auth.grpc_target, wh.grpc_target, db, routes)).start(
            tmp / "edge2.log"
        )
        procs.append(e2)
        yield Stack(auth, wh, e1, e2, live_up, sandbox_up)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        live_up.close()
        sandbox_up.close()


@pytest.fixture
async def auth(stack: Stack) -> AsyncIterator[auth_pb2_grpc.AuthServiceStub]:
    async with grpc.aio.insecure_channel(stack.authsvc.grpc_target) as channel:
        yield auth_pb2_grpc.AuthServiceStub(channel)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10) as client:
        yield client


async def new_key(
    auth: auth_pb2_grpc.AuthServiceStub,
    env: str = "sandbox",
    scopes: list[str] | None = None,
    *,
    account_id: str = "",
    allowance: int = 0,
    sources: list[str] | None = None,
) -> tuple[str, pb.CreateKeyResponse]:
    if not account_id:
        account = await auth.CreateAccount(
            pb.CreateAccountRequest(
                name="Partner", mode=pb.ACCOUNT_MODE_A, daily_search_allowance=allowance, actor=ACTOR
            )
        )
        account_id = account.account.id
    key = await auth.CreateKey(
        pb.CreateKeyRequest(
            account_id=account_id,
            environment=pb.ENVIRONMENT_LIVE if env == "live" else pb.ENVIRONMENT_SANDBOX,
            name="checkout",
            scopes=ALL_SCOPES if scopes is None else scopes,
            allowed_sources=sources or [],
            actor=ACTOR,
        )
    )
    return account_id, key


def hdrs(secret: str | None, env: str = "sandbox", **extra: str) -> dict[str, str]:
    out = {"Host": SANDBOX_HOST if env == "sandbox" else LIVE_HOST}
    if secret is not None:
        out["Authorization"] = f"Svc {secret}"
    out.update({k.replace("_", "-"): v for k, v in extra.items()})
    return out


def assert_error(resp: httpx.Response, status: int, etype: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"type", "message", "requestId", "docUrl"}
    assert err["type"] == etype, err
    assert err["requestId"].startswith("req_")
    assert resp.headers["x-request-id"] == err["requestId"]
    assert err["docUrl"].endswith(f"/errors#{etype}")
    assert err["message"]
    return err  # type: ignore[no-any-return]


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
    slow = asyncio.ensure_future(http.post(slow_url, headers=h, content=b"{}"))
    # Wait until the first request holds the key (it reached the upstream), then repeat it elsewhere.
    deadline = time.monotonic() + 5
    while not any(r.query.get("sleep") for r in stack.sandbox_up.requests[-5:]):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    busy = await http.post(
        stack.url("sandbox", 2) + "/v1/hotels/bookings?sleep=1.5", headers=h, content=b"{}"
    )
    assert_error(busy, 409, "idempotency_key_in_use")
    assert (await slow).status_code == 200
    # A 5xx is not stored: the same key runs again.
    h5 = {**h, "Idempotency-Key": "fails-1"}
    failed = await http.post(stack.url() + "/v1/hotels/bookings?status=503", headers=h5, content=b"{}")
    assert failed.status_code == 503
    n = len(stack.sandbox_up.requests)
    failed_again = await http.post(stack.url() + "/v1/hotels/bookings?status=503", headers=h5, content=b"{}")
    assert failed_again.status_code == 503 and "idempotent-replayed" not in failed_again.headers
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


async def test_upstream_statuses_pass_through_and_a_down_upstream_is_503(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    _, key = await new_key(auth, scopes=["esim:read", "flights:read"])
    resp = await http.get(stack.url() + "/v1/esim/plans?status=502", headers=hdrs(key.secret))
    assert resp.status_code == 502 and resp.json()["upstream"] == "sandbox"
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


# -- issue "partners finish an integration without hitting a wall": docs that resolve, the catalog ----------
async def _resolve_doc_url(stack: Stack, http: httpx.AsyncClient, doc_url: str, env: str) -> str:
    """GET a docUrl on the edge that gave it (the URL names the Host sent, whose port is not the test
    edge's): 200 HTML under a strict CSP, and the fragment is an id of the page. The page's HTML."""
    from urllib.parse import urlsplit

    url = urlsplit(doc_url)
    host = SANDBOX_HOST if env == "sandbox" else LIVE_HOST
    assert (url.scheme, url.netloc, url.path) == ("http", host, "/docs/errors"), doc_url
    page = await http.get(stack.url(env) + url.path, headers={"Host": host})
    assert page.status_code == 200, page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "style-src 'self'" in csp and "script-src" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert f'id="{url.fragment}"' in page.text, url.fragment
    return page.text


@pytest.mark.parametrize("env", ["sandbox", "live"])
async def test_every_doc_url_resolves_on_the_edge_that_answered(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient, env: str
) -> None:
    """Real error answers' docUrls (through the error handler and through a POST's handler), each GET on
    the same edge; every other error type's anchor is on that page too, by the same slug rule."""
    from edge.docsite import slug
    from svckit.errors import ERROR_KINDS

    _, key = await new_key(auth, env, ["hotels:read", "webhooks:write"])
    base = stack.url(env)
    post = hdrs(key.secret, env, Idempotency_Key=f"k-{time.time_ns()}")
    answers = [
        (await http.get(base + "/v1/account", headers=hdrs(None, env)), 401, "missing_api_key"),
        (
            await http.get(base + "/v1/account", headers={**hdrs(None, env), "Authorization": "Svc garbage"}),
            401,
            "invalid_api_key",
        ),
        (await http.get(base + "/v1/account", headers=hdrs(key.secret, env)), 403, "missing_scope"),
        (await http.get(base + "/v1/nothing/here", headers=hdrs(key.secret, env)), 404, "not_found"),
        (
            await http.get(base + "/v1/events?type=bogus", headers=hdrs(key.secret, env)),
            400,
            "invalid_request",
        ),
        # Answered inside the idempotent POST path (the gate's own error response).
        (
            await http.post(base + "/v1/webhooks/endpoints", headers=post, json={"url": 5, "events": []}),
            400,
            "invalid_request",
        ),
        (
            await http.post(base + "/v1/webhooks/endpoints", headers=hdrs(key.secret, env), json={}),
            400,
            "missing_idempotency_key",
        ),
    ]
    page = ""
    for resp, status, etype in answers:
        err = assert_error(resp, status, etype)
        page = await _resolve_doc_url(stack, http, err["docUrl"], env)
    for etype in ERROR_KINDS:
        assert f'<h2 id="{slug(etype)}">{etype}</h2>' in page, etype


async def test_doc_url_of_a_misdirected_request_names_a_served_host_not_the_one_sent(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    resp = await http.get(stack.url() + "/v1/account", headers={"Host": "evil.example"})
    err = assert_error(resp, 421, "misdirected_request")
    assert err["docUrl"].startswith("http://localhost:8080/docs/errors#") and "evil" not in err["docUrl"]


async def test_doc_url_follows_an_explicit_docs_base(
    stack: Stack, http: httpx.AsyncClient, tmp_path: Any
) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'edge-docs.db'}"
    targets = (stack.authsvc.grpc_target, stack.webhookd.grpc_target)
    args = edge_args(*targets, db, None, "--docs-base", "https://docs.partner.example/api/")
    other = ServiceProcess("edge", args).start(tmp_path / "edge-docs.log")
    try:
        url = f"http://127.0.0.1:{other.ports['sandbox_port']}/v1/account"
        err = assert_error(await http.get(url, headers=hdrs(None)), 401, "missing_api_key")
        assert err["docUrl"] == "https://docs.partner.example/api/errors#missing_api_key"
    finally:
        other.terminate()


async def test_docs_index_pages_and_stylesheet_need_no_key(stack: Stack, http: httpx.AsyncClient) -> None:
    from edge.docsite import PAGES

    for env, host in (("sandbox", SANDBOX_HOST), ("live", LIVE_HOST)):
        index = await http.get(stack.url(env) + "/docs", headers={"Host": host, "Accept": "text/html"})
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        assert index.headers["x-request-id"].startswith("req_")
        for name in PAGES:
            assert f'href="/docs/{name}"' in index.text
            page = await http.get(stack.url(env) + f"/docs/{name}", headers={"Host": host})
            assert page.status_code == 200, name
            assert '<link rel="stylesheet" href="/docs/style.css">' in page.text
            assert "<script" not in page.text and " style=" not in page.text
        css = await http.get(stack.url(env) + "/docs/style.css", headers={"Host": host})
        assert css.status_code == 200 and css.headers["content-type"] == "text/css; charset=utf-8"
        assert "content-security-policy" in css.headers
    # Links between the pages are served paths.
    edge_page = (await http.get(stack.url() + "/docs/edge", headers={"Host": SANDBOX_HOST})).text
    assert 'href="/docs/errors"' in edge_page and 'href="errors.md"' not in edge_page
    assert_error(await http.get(stack.url() + "/docs/operations", headers=hdrs(None)), 404, "not_found")
    assert_error(await http.get(stack.url() + "/docs/nothing", headers=hdrs(None)), 404, "not_found")
    assert_error(
        await http.get(stack.url() + "/docs/errors", headers={"Host": "x.example"}),
        421,
        "misdirected_request",
    )
    head = await http.head(stack.url() + "/docs/errors", headers={"Host": SANDBOX_HOST})
    assert head.status_code == 200 and head.content == b""


async def test_event_types_answer_the_catalog(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    from jsonschema import Draft202012Validator, FormatChecker

    from svckit.catalog import TEST_KIND
    from svckit.events import EVENT_KINDS

    _, key = await new_key(auth, "sandbox", ["account:read"])
    _, other = await new_key(auth, "sandbox", ["hotels:read"])
    resp = await http.get(stack.url() + "/v1/event-types", headers=hdrs(key.secret))
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-request-id"].startswith("req_")
    body = resp.json()
    assert body["object"] == "list" and body["nextPageToken"] is None
    assert [t["kind"] for t in body["data"]] == [*EVENT_KINDS, TEST_KIND.kind]
    for entry in body["data"]:
        assert set(entry) == {
            "object", "kind", "description", "states", "mode", "subscribable", "schema", "example",
        }  # fmt: skip
        Draft202012Validator(entry["schema"], format_checker=FormatChecker()).validate(entry["example"])
    one = await http.get(stack.url() + "/v1/event-types/booking.confirmed", headers=hdrs(key.secret))
    assert one.status_code == 200 and one.json() == body["data"][0]
    confirmed = one.json()
    bad = {**confirmed["example"], "madeUp": 1}
    assert not Draft202012Validator(confirmed["schema"]).is_valid(bad)
    assert_error(
        await http.get(stack.url() + "/v1/event-types/booking.lost", headers=hdrs(key.secret)),
        404,
        "not_found",
    )
    assert_error(
        await http.get(stack.url() + "/v1/event-types", headers=hdrs(other.secret)), 403, "missing_scope"
    )
    assert_error(await http.get(stack.url() + "/v1/event-types", headers=hdrs(None)), 401, "missing_api_key")


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
