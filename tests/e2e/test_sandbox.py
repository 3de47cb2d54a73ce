"""The sandbox through real processes: authsvc, webhookd and an edge on the default route table (every
product route's sandbox upstream is the built-in simulator), a trustme HTTPS receiver, real HTTP and
WebSocket clients. The six triggers (status, error body, the events that follow, nothing counted), a
sample of each of the 14 kinds verified with webhookd.verify, the simulator's booking lifecycle, and
live keys and hosts reaching neither triggers nor the simulator."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

import grpc
import httpx
import pytest
from websockets.asyncio.client import connect

from edge.routetable import DEFAULT_ROUTES
from edge.testing import LIVE_HOST, SANDBOX_HOST, edge_args
from edge.triggers import NAMES as SIX
from svckit.events import EVENT_KINDS, SANDBOX_DATA_MAX_BYTES, mode_refusal
from svckit.scopes import ALL_SCOPES
from tests.support import ServiceProcess, sqlite_url, start_service
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from webhookd import verify
from webhookd.testing import Receiver, trusted_receiver

ACTOR = pb.Actor(user="ops@partner.example")
_keys = itertools.count()


@dataclass
class Partner:
    account_id: str
    secret: str
    live_secret: str
    hook_path: str
    signing_secret: str = ""


@dataclass
class Stack:
    edge: ServiceProcess
    receiver: Receiver
    partners: dict[str, Partner] = field(default_factory=dict)

    def url(self, env: str = "sandbox") -> str:
        return f"http://127.0.0.1:{self.edge.ports[f'{env}_port']}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("sandbox")
    receiver, ca_file = trusted_receiver(tmp)
    procs: list[ServiceProcess] = []
    # The default table, its live upstreams moved to a port held bound but never listening, so a live
    # call is refused by the kernel whatever else runs on this machine (the defaults are fixed ports).
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    live_upstream = f"http://127.0.0.1:{closed.getsockname()[1]}"
    routes = tmp / "routes.json"
    table = [{**r, "upstream": {**r["upstream"], "live": live_upstream}} for r in DEFAULT_ROUTES]
    routes.write_text(json.dumps({"routes": table}))
    try:
        wh = start_service(
            "webhookd", tmp, sqlite_url(tmp, "w.db"),
            "--allow-private-targets", "--ca-bundle", str(ca_file), "--poll-seconds", "0.1",
        )  # fmt: skip
        procs.append(wh)
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"), "--webhookd", wh.grpc_target)
        procs.append(auth)
        edge = ServiceProcess(
            "edge",
            edge_args(
                auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "edge.db"), routes,
                "--sandbox-confirm-seconds", "0.2", "--rate-limit-sandbox", "0",
            ),
        ).start(tmp / "edge.log")  # fmt: skip
        procs.append(edge)
        s = Stack(edge, receiver)
        asyncio.run(_partners(s, auth.grpc_target))
        yield s
    finally:
        for proc in reversed(procs):
            proc.terminate()
        receiver.stop()
        closed.close()


async def _partners(s: Stack, authsvc: str) -> None:
    async with grpc.aio.insecure_channel(authsvc) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        for mode, pb_mode in (("A", pb.ACCOUNT_MODE_A), ("B", pb.ACCOUNT_MODE_B)):
            account = (
                await stub.CreateAccount(pb.CreateAccountRequest(name=f"P{mode}", mode=pb_mode, actor=ACTOR))
            ).account
            keys = []
            for env in (pb.ENVIRONMENT_SANDBOX, pb.ENVIRONMENT_LIVE):
                created = await stub.CreateKey(
                    pb.CreateKeyRequest(
                        account_id=account.id, environment=env, name="k", scopes=list(ALL_SCOPES), actor=ACTOR
                    )
                )
                keys.append(created.secret)
            s.partners[mode] = Partner(account.id, keys[0], keys[1], f"/hook-{mode}")
    async with httpx.AsyncClient(base_url=s.url(), timeout=10) as http:
        for p in s.partners.values():
            created = await http.post(
                "/v1/webhooks/endpoints",
                headers=hdrs(p.secret, post=True),
                json={"url": s.receiver.url(p.hook_path), "events": list(EVENT_KINDS)},
            )
            assert created.status_code == 201, created.text
            p.signing_secret = created.json()["secret"]


def hdrs(secret: str, *, post: bool = False, live: bool = False, **extra: str) -> dict[str, str]:
    out = {
        "Host": LIVE_HOST if live else SANDBOX_HOST,
        "Authorization": f"Svc {secret}",
        "Accept": "application/json",
        "X-Partner-Customer-Ref": "cust-7",
    }
    if post:
        out["Idempotency-Key"] = f"k-{time.time_ns()}-{next(_keys)}"
    out.update({k.replace("_", "-"): v for k, v in extra.items()})
    return out


# A TypedDict, not dict[str, str]: mypy then knows ``hdrs(secret, **trigger(...))`` sets no post or live.
Trigger = TypedDict("Trigger", {"X-Sandbox-Trigger": str})


def trigger(name: str) -> Trigger:
    return {"X-Sandbox-Trigger": name}


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.url(), timeout=30) as client:
        yield client


def error_of(resp: httpx.Response, status: int, etype: str) -> str:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"type", "message", "requestId", "docUrl"}
    assert err["type"] == etype
    assert resp.headers["x-request-id"] == err["requestId"]
    return str(err["message"])


def delivered(stack: Stack, p: Partner) -> list[dict[str, Any]]:
    """Every delivery at the partner's endpoint so far, each signature verified."""
    out = []
    for r in stack.receiver.received():
        if r.path == p.hook_path:
            verify(r.body, r.headers["x-service-signature"], [p.signing_secret], time.time())
            out.append(json.loads(r.body))
    return out


async def wait_event(stack: Stack, p: Partner, kind: str, **data: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        for ev in delivered(stack, p):
            if ev["type"] == kind and all(ev["data"].get(k) == v for k, v in data.items()):
                return ev
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no {kind} {data} delivered; got {[e['type'] for e in delivered(stack, p)]}"
            )
        await asyncio.sleep(0.05)


def kinds_about(stack: Stack, p: Partner, subject: str) -> list[str]:
    return [
        e["type"]
        for e in sorted(delivered(stack, p), key=lambda e: e["created"])
        if subject in (e["data"].get("booking"), e["data"].get("order"))
    ]


async def searches_used(http: httpx.AsyncClient, p: Partner) -> int:
    resp = await http.get("/v1/account", headers=hdrs(p.secret))
    assert resp.status_code == 200, resp.text
    return int(resp.json()["usage"]["searchesUsed"])


async def test_trigger_refusals_come_after_the_production_checks(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    a, b = stack.partners["A"], stack.partners["B"]
    msg = error_of(
        await http.get("/v1/account", headers=hdrs(a.secret, **trigger("nope"))), 400, "invalid_request"
    )
    assert all(name in msg for name in SIX)
    msg = error_of(
        await http.get("/v1/hotels/search", headers=hdrs(a.secret, **trigger("booking_failed"))),
        400,
        "invalid_request",
    )
    assert "booking and order creation" in msg
    msg = error_of(
        await http.post(
            "/v1/hotels/bookings", headers=hdrs(b.secret, post=True, **trigger("credit_exhausted"))
        ),
        400,
        "invalid_request",
    )
    assert "mode A" in msg
    # Authentication first: no key, then a wrong key, are refused as usual.
    no_key = {"Host": SANDBOX_HOST, "X-Sandbox-Trigger": "rate_limited"}
    error_of(await http.get("/v1/account", headers=no_key), 401, "missing_api_key")
    error_of(
        await http.get("/v1/account", headers=hdrs(a.live_secret, **trigger("rate_limited"))),
        401,
        "environment_mismatch",
    )
    # Idempotency before the trigger: a POST without a key is refused for that.
    no_idem = hdrs(a.secret, **trigger("booking_failed"))
    error_of(await http.post("/v1/hotels/bookings", headers=no_idem), 400, "missing_idempotency_key")


async def test_rate_limited_and_service_unavailable(stack: Stack, http: httpx.AsyncClient) -> None:
    a = stack.partners["A"]
    before = len(delivered(stack, a))
    h = hdrs(a.secret, post=True, **trigger("rate_limited"))
    first = await http.post("/v1/hotels/bookings", headers=h, json={"offer": "off_hotels_2"})
    assert "forced" in error_of(first, 429, "rate_limited")
    assert first.headers["retry-after"] == "1"
    again = await http.post("/v1/hotels/bookings", headers=h, json={"offer": "off_hotels_2"})
    assert again.status_code == 429 and again.headers["idempotent-replayed"] == "true"
    assert again.headers["retry-after"] == "1"
    assert again.json() == first.json()
    # The trigger is part of what the request means: the same key without it is another request.
    untriggered = {k: v for k, v in h.items() if k != "X-Sandbox-Trigger"}
    reused = await http.post("/v1/hotels/bookings", headers=untriggered, json={"offer": "off_hotels_2"})
    error_of(reused, 422, "idempotency_key_reused")

    error_of(await http.get("/v1/account", headers=hdrs(a.secret, **trigger("service_unavailable"))), 503,
             "service_unavailable")  # fmt: skip
    h = hdrs(a.secret, post=True, **trigger("service_unavailable"))
    error_of(await http.post("/v1/hotels/bookings", headers=h, json={}), 503, "service_unavailable")
    await asyncio.sleep(1)  # the simulator's outcome would have been published and delivered by now
    assert len(delivered(stack, a)) == before  # nothing followed the forced errors
    del h["X-Sandbox-Trigger"]
    retried = await http.post("/v1/hotels/bookings", headers=h, json={})
    assert retried.status_code == 202, retried.text  # nothing was stored under the key: the retry ran
    assert "idempotent-replayed" not in retried.headers
    await wait_event(stack, a, "booking.confirmed", booking=retried.json()["id"])


async def test_search_quota_exhausted(stack: Stack, http: httpx.AsyncClient) -> None:
    a = stack.partners["A"]
    before = await searches_used(http, a)
    resp = await http.get("/v1/flights/search", headers=hdrs(a.secret, **trigger("search_quota_exhausted")))
    error_of(resp, 402, "search_quota_exhausted")
    ev = await wait_event(stack, a, "search_quota.threshold")
    assert ev["state"] == "threshold_reached" and ev["livemode"] is False
    assert ev["data"]["remaining"] < ev["data"]["dailySearchAllowance"]
    assert await searches_used(http, a) == before == 0


async def test_credit_exhausted(stack: Stack, http: httpx.AsyncClient) -> None:
    a = stack.partners["A"]
    h = hdrs(a.secret, post=True, **trigger("credit_exhausted"))
    error_of(
        await http.post("/v1/esim/orders", headers=h, json={"plan": "plan_eu_5gb"}), 402, "credit_exhausted"
    )
    ev = await wait_event(stack, a, "ledger.low_balance")
    assert ev["data"]["amount"] < ev["data"]["warningLevel"] and ev["data"]["currency"] == "EUR"
    replay = await http.post("/v1/esim/orders", headers=h, json={"plan": "plan_eu_5gb"})
    assert replay.status_code == 402 and replay.headers["idempotent-replayed"] == "true"


async def test_booking_failed(stack: Stack, http: httpx.AsyncClient) -> None:
    a = stack.partners["A"]
    h = hdrs(a.secret, post=True, **trigger("booking_failed"))
    resp = await http.post("/v1/hotels/bookings", headers=h, json={"offer": "off_hotels_3"})
    assert resp.status_code == 202, resp.text
    booking = resp.json()
    assert booking["state"] == "pending" and booking["customerRef"] == "cust-7"
    ev = await wait_event(stack, a, "booking.failed", booking=booking["id"])
    assert ev["state"] == "failed"
    assert ev["data"]["holdReleased"] is True and ev["data"]["amount"] == booking["amount"]
    await asyncio.sleep(0.5)
    assert kinds_about(stack, a, booking["id"]) == ["booking.failed"]
    got = await http.get(f"/v1/hotels/bookings/{booking['id']}", headers=hdrs(a.secret))
    assert got.json()["state"] == "failed"


async def test_payment_failed(stack: Stack, http: httpx.AsyncClient) -> None:
    b = stack.partners["B"]
    h = hdrs(b.secret, post=True, **trigger("payment_failed"))
    resp = await http.post("/v1/flights/bookings", headers=h, json={"offer": "off_flights_1"})
    assert resp.status_code == 202, resp.text
    bid = resp.json()["id"]
    await wait_event(stack, b, "booking.failed", booking=bid)
    await wait_event(stack, b, "payment.failed", booking=bid)  # either may arrive first (unordered endpoint)
    await asyncio.sleep(0.5)  # and nothing else comes
    assert kinds_about(stack, b, bid) == ["payment.failed", "booking.failed"]
    # Mode A has no traveller payments.
    a = stack.partners["A"]
    h = hdrs(a.secret, post=True, **trigger("payment_failed"))
    assert "mode B" in error_of(await http.post("/v1/flights/bookings", headers=h), 400, "invalid_request")


async def test_a_sample_of_each_kind_reaches_the_endpoint_signed(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    a, b = stack.partners["A"], stack.partners["B"]
    # ledger.low_balance is about a mode A account's credit: refused for B (events follow the mode).
    low = await http.post(
        "/v1/sandbox/events", headers=hdrs(b.secret, post=True), json={"type": "ledger.low_balance"}
    )
    assert "mode A" in error_of(low, 400, "invalid_request")
    sent: dict[str, tuple[Partner, str]] = {}
    for kind in EVENT_KINDS:
        p = b if not mode_refusal(kind, "B") else a
        body: dict[str, Any] = {"type": kind}
        if kind == "booking.cancelled":
            body["data"] = {"customerRef": "my-own-ref"}
        resp = await http.post("/v1/sandbox/events", headers=hdrs(p.secret, post=True), json=body)
        assert resp.status_code == 202, resp.text
        assert resp.json()["event"]["type"] == kind and resp.json()["deliveryCount"] == 1
        sent[kind] = (p, resp.json()["event"]["id"])
    assert {p.account_id for p, _ in sent.values()} == {a.account_id, b.account_id}
    for kind, (p, eid) in sent.items():
        deadline = time.monotonic() + 30
        while not any(e["id"] == eid for e in delivered(stack, p)):  # each one signed and verified
            assert time.monotonic() < deadline, f"sample {kind} not delivered"
            await asyncio.sleep(0.05)
        ev = next(e for e in delivered(stack, p) if e["id"] == eid)
        assert ev["type"] == kind and ev["livemode"] is False and ev["account"] == p.account_id
        assert ev["state"]
        if kind.split(".")[0] in ("booking", "payment"):
            assert {"booking", "product", "amount", "currency", "customerRef"} <= set(ev["data"])
            assert isinstance(ev["data"]["amount"], int)
        if kind.startswith("esim."):
            assert {"order", "product", "plan", "customerRef"} <= set(ev["data"])
        if kind == "booking.cancelled":
            assert ev["data"]["customerRef"] == "my-own-ref"
    bad = await http.post(
        "/v1/sandbox/events", headers=hdrs(b.secret, post=True), json={"type": "booking.lost"}
    )
    assert "booking.confirmed" in error_of(bad, 400, "invalid_request")


async def test_simulator_booking_lifecycle(stack: Stack, http: httpx.AsyncClient) -> None:
    a, b = stack.partners["A"], stack.partners["B"]
    search = await http.get("/v1/hotels/search?city=LIS", headers=hdrs(a.secret))
    assert search.status_code == 200, search.text
    offers = search.json()["data"]
    assert [o["id"] for o in offers] == ["off_hotels_1", "off_hotels_2", "off_hotels_3"]
    offer = await http.get("/v1/hotels/offers/off_hotels_2", headers=hdrs(a.secret))
    assert offer.json() == offers[1]
    async with connect(
        f"ws://{SANDBOX_HOST}/v1/stream",
        subprotocols=["svc", a.secret],  # type: ignore[list-item]
        host="127.0.0.1",
        port=stack.edge.ports["sandbox_port"],
        open_timeout=5,
    ) as ws:
        await ws.send(json.dumps({"type": "subscribe", "events": ["booking.*"]}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "subscribed"
        created = await http.post(
            "/v1/hotels/bookings", headers=hdrs(a.secret, post=True), json={"offer": "off_hotels_2"}
        )
        assert created.status_code == 202, created.text
        bk = created.json()
        assert bk["state"] == "pending" and bk["amount"] == offers[1]["amount"]
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if frame["type"] == "event" and frame["event"]["data"].get("booking") == bk["id"]:
                break
        assert frame["event"]["type"] == "booking.confirmed" and frame["event"]["state"] == "confirmed"
    hook = await wait_event(stack, a, "booking.confirmed", booking=bk["id"])
    assert hook["id"] == frame["event"]["id"] and hook["data"]["customerRef"] == "cust-7"
    got = await http.get(f"/v1/hotels/bookings/{bk['id']}", headers=hdrs(a.secret))
    assert got.json()["state"] == "confirmed"
    modified = await http.post(
        f"/v1/hotels/bookings/{bk['id']}/modify", headers=hdrs(a.secret, post=True), json={"guests": 3}
    )
    assert modified.status_code == 200, modified.text
    ev = await wait_event(stack, a, "booking.modified", booking=bk["id"])
    assert ev["data"]["changes"] == {"guests": 3}
    cancelled = await http.post(f"/v1/hotels/bookings/{bk['id']}/cancel", headers=hdrs(a.secret, post=True))
    assert cancelled.json()["state"] == "cancelled"
    await wait_event(stack, a, "booking.cancelled", booking=bk["id"])
    again = await http.post(f"/v1/hotels/bookings/{bk['id']}/cancel", headers=hdrs(a.secret, post=True))
    error_of(again, 409, "conflict")
    assert kinds_about(stack, a, bk["id"]) == ["booking.confirmed", "booking.modified", "booking.cancelled"]

    order = await http.post(
        "/v1/esim/orders", headers=hdrs(a.secret, post=True), json={"plan": "plan_eu_20gb"}
    )
    assert order.status_code == 202, order.text
    ev = await wait_event(stack, a, "esim.provisioned", order=order.json()["id"])
    assert ev["data"]["activationCode"].startswith("LPA:1$")
    usage = await http.get(f"/v1/esim/orders/{order.json()['id']}/usage", headers=hdrs(a.secret))
    assert usage.json()["limitBytes"] == 20 * 1024**3

    paid = await http.post("/v1/flights/bookings", headers=hdrs(b.secret, post=True), json={})
    assert paid.status_code == 202, paid.text
    await wait_event(stack, b, "booking.confirmed", booking=paid.json()["id"])
    # Two deliveries to an unordered endpoint may arrive in either order: wait for both, then check the
    # events' own order (created).
    await wait_event(stack, b, "payment.succeeded", booking=paid.json()["id"])
    assert kinds_about(stack, b, paid.json()["id"]) == ["payment.succeeded", "booking.confirmed"]
    assert await searches_used(http, a) == 0


async def test_live_reaches_neither_triggers_nor_simulator(stack: Stack, http: httpx.AsyncClient) -> None:
    a = stack.partners["A"]
    live = stack.url("live")
    resp = await http.get(
        f"{live}/v1/account", headers=hdrs(a.live_secret, live=True, **trigger("rate_limited"))
    )
    assert "live host" in error_of(resp, 400, "invalid_request")
    resp = await http.post(
        f"{live}/v1/hotels/bookings",
        headers=hdrs(a.live_secret, live=True, post=True, **trigger("booking_failed")),
        json={},
    )
    error_of(resp, 400, "invalid_request")
    resp = await http.post(
        f"{live}/v1/sandbox/events",
        headers=hdrs(a.live_secret, live=True, post=True),
        json={"type": "apikey.revoked"},
    )
    error_of(resp, 404, "not_found")
    # The live upstream (a closed port here) is asked, never the simulator.
    resp = await http.get(f"{live}/v1/hotels/offers/off_hotels_1", headers=hdrs(a.live_secret, live=True))
    error_of(resp, 503, "service_unavailable")
    # A test key on the live host is refused before any trigger.
    resp = await http.get(f"{live}/v1/account", headers=hdrs(a.secret, live=True, **trigger("rate_limited")))
    error_of(resp, 401, "environment_mismatch")


# -- issue "partners finish an integration without hitting a wall" item 5: samples follow the catalog ------
@pytest.mark.parametrize(
    ("kind", "data", "names"),
    [
        # A field no live booking.confirmed ever has (accepted and delivered before).
        ("booking.confirmed", {"madeUp": 1}, "data.madeUp"),
        # An eSIM order's field on a booking event: not a field of that kind either.
        ("booking.confirmed", {"order": "ord_test_1"}, "data.order"),
        # A known field with a value its schema refuses.
        ("booking.cancelled", {"amount": -5}, "data.amount"),
        ("booking.cancelled", {"cancelledBy": "nobody"}, "data.cancelledBy"),
        ("search_quota.threshold", {"date": "14 March"}, "data.date"),
        # Both subjects (a booking and an eSIM order) on a kind that allows either but not both.
        ("booking.failed", {"order": "ord_test_1"}, "order"),
    ],
)
async def test_sample_data_outside_the_kinds_schema_is_refused(
    stack: Stack, http: httpx.AsyncClient, kind: str, data: dict[str, Any], names: str
) -> None:
    a = stack.partners["A"]
    before = len(delivered(stack, a))
    resp = await http.post(
        "/v1/sandbox/events", headers=hdrs(a.secret, post=True), json={"type": kind, "data": data}
    )
    message = error_of(resp, 400, "invalid_request")
    assert names in message, message
    assert kind in message, message
    await asyncio.sleep(0.3)
    assert len(delivered(stack, a)) == before  # nothing published


async def test_sample_data_within_the_schema_is_merged(stack: Stack, http: httpx.AsyncClient) -> None:
    a = stack.partners["A"]
    data = {"booking": "bk_test_mine01", "amount": 1234, "customerRef": "mine"}
    resp = await http.post(
        "/v1/sandbox/events",
        headers=hdrs(a.secret, post=True),
        json={"type": "booking.cancelled", "data": data},
    )
    assert resp.status_code == 202, resp.text
    ev = await wait_event(stack, a, "booking.cancelled", booking="bk_test_mine01")
    assert {k: ev["data"][k] for k in data} == data


async def test_sample_data_over_the_sandbox_cap_is_413_and_stores_nothing(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    """Reproduction (issue "webhook delivery beyond every anchor"): 240 KB of ``data`` per sample filled the
    disk. Over ``SANDBOX_DATA_MAX_BYTES`` it is 413 payload_too_large (the edge's body limit, 1 MiB, is the
    outer one) and nothing is published; just under it is accepted."""
    a = stack.partners["A"]
    before = len(delivered(stack, a))
    resp = await http.post(
        "/v1/sandbox/events",
        headers=hdrs(a.secret, post=True),
        json={"type": "booking.cancelled", "data": {"customerRef": "x" * 240_000}},
    )
    message = error_of(resp, 413, "payload_too_large")
    assert str(SANDBOX_DATA_MAX_BYTES) in message, message
    await asyncio.sleep(0.3)
    assert len(delivered(stack, a)) == before  # nothing published
