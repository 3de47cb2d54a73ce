"""A product upstream's answers through the edge, over real HTTP against real processes (no trace exporter
configured anywhere): its errors in the one error shape with the edge's request id and a docUrl that
resolves, the mapped type in the request log, and the traceparent the upstream receives (the partner's
trace continued)."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from svckit.tracing import parse_traceparent
from tests.integration.edge_stack import Stack, assert_error, auth, hdrs, http, new_key, stack  # noqa: F401 (the fixtures)
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

PARTNER_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def resolves(http: httpx.AsyncClient, stack: Stack, doc_url: str) -> None:
    """``doc_url`` is a page of this edge's /docs with the anchor it names."""
    url = urlsplit(doc_url)
    page = await http.get(stack.url() + url.path, headers={"Host": url.netloc})
    assert page.status_code == 200, page.text
    assert f'id="{url.fragment}"' in page.text, url.fragment


async def logged(auth: Any, account_id: str, rid: str) -> pb.RequestRecord:
    """The request log's record of ``rid`` (the edge files it within a second or so)."""
    deadline = time.monotonic() + 10
    while True:
        found = (
            await auth.ListRequests(pb.ListRequestsRequest(account_id=account_id, request_id=rid))
        ).requests
        if found:
            return found[0]  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"{rid} never reached the request log"
        await asyncio.sleep(0.1)


async def test_an_upstream_not_found_gets_our_request_id_doc_url_and_is_logged_with_its_type(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth)
    resp = await http.get(
        stack.url() + "/v1/hotels/bookings/bk_nope?status=404&error=not_found&message=no+booking+bk_nope",
        headers=hdrs(key.secret),
    )
    err = assert_error(resp, 404, "not_found")  # requestId equal to X-Request-Id, docUrl .../errors#not_found
    assert err["message"] == "no booking bk_nope"
    await resolves(http, stack, err["docUrl"])
    assert stack.sandbox_up.requests[-1].headers["x-request-id"] == err["requestId"]
    record = await logged(auth, account_id, err["requestId"])
    assert (record.status, record.error_type) == (404, "not_found")


async def test_errors_not_ours_are_upstream_error_and_a_5xx_is_a_502(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth, scopes=["hotels:read", "esim:read"])
    url = stack.url() + "/v1/esim/plans"
    # A type of the product's own: its 4xx status and message kept, the type ours.
    own = await http.get(url + "?status=409&error=plan_sold_out&message=sold+out", headers=hdrs(key.secret))
    assert assert_error(own, 409, "upstream_error")["message"] == "sold out"
    # A non-JSON 500 (a stack trace): 502, never its text.
    crashed = await http.get(url + "?status=500&text=Traceback+at+db.internal", headers=hdrs(key.secret))
    err = assert_error(crashed, 502, "upstream_error")
    assert "Traceback" not in crashed.text and "esim service" in err["message"]
    await resolves(http, stack, err["docUrl"])
    record = await logged(auth, account_id, err["requestId"])
    assert (record.status, record.error_type) == (502, "upstream_error")
    # A 402 of ours keeps its status and gets a docUrl.
    spent = await http.get(url + "?status=402&error=credit_exhausted", headers=hdrs(key.secret))
    assert_error(spent, 402, "credit_exhausted")
    # Retry-After of a 429 or 503 of ours is kept; a 429 without one gets 1.
    slow = await http.get(url + "?status=429&error=rate_limited&retry_after=7", headers=hdrs(key.secret))
    assert_error(slow, 429, "rate_limited")
    assert slow.headers["retry-after"] == "7"
    busy = await http.get(url + "?status=429&error=rate_limited", headers=hdrs(key.secret))
    assert busy.headers["retry-after"] == "1"
    down = await http.get(
        url + "?status=503&error=service_unavailable&retry_after=30", headers=hdrs(key.secret)
    )
    assert_error(down, 503, "service_unavailable")
    assert down.headers["retry-after"] == "30"
    # A success body is passed on untouched.
    ok = await http.get(url, headers=hdrs(key.secret))
    assert ok.status_code == 200 and ok.json()["upstream"] == "sandbox"
    assert (await logged(auth, account_id, ok.headers["x-request-id"])).error_type == ""


async def test_the_upstream_gets_a_traceparent_continuing_the_partners(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub, http: httpx.AsyncClient
) -> None:
    account_id, key = await new_key(auth)
    url = stack.url() + "/v1/hotels/bookings/bk_1"
    # None sent: the edge starts a trace of its own (no exporter is configured: no span, a traceparent).
    first = (await http.get(url, headers=hdrs(key.secret))).json()["traceparent"]
    second = (await http.get(url, headers=hdrs(key.secret))).json()["traceparent"]
    parsed = [parse_traceparent(first), parse_traceparent(second)]
    assert None not in parsed and parsed[0] != parsed[1]
    seen = stack.sandbox_up.requests[-1].headers
    assert seen["tracestate"] == f"svc={account_id}"
    # The partner's own: its trace id goes on, with a span id of the edge's; its tracestate is not passed.
    sent = hdrs(key.secret, traceparent=PARTNER_TRACE, tracestate="svc=acct_someone_else,vendor=x")
    continued = parse_traceparent((await http.get(url, headers=sent)).json()["traceparent"])
    assert continued is not None
    assert continued[0] == "4bf92f3577b34da6a3ce929d0e0e4736" and continued[1] != "00f067aa0ba902b7"
    assert stack.sandbox_up.requests[-1].headers["tracestate"] == f"svc={account_id}"
    # A malformed one is not followed: a new trace.
    junk = hdrs(key.secret, traceparent="00-" + "0" * 32 + "-00f067aa0ba902b7-01")
    fresh = parse_traceparent((await http.get(url, headers=junk)).json()["traceparent"])
    assert fresh is not None and fresh[0] != "0" * 32
