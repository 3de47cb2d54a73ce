"""Content filters and thin payloads over the partner API, against real authsvc, webhookd and edge
processes: an endpoint made with ``filter`` and ``payload: thin`` over HTTP gets only the matching
events, thin and signed as sent; GET /v1/events/{id} gives the whole event to a key that reads its kind
(403 missing_scope otherwise), and every such read is in the request log even when this edge files no
other success (``--request-log-successes 0``)."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import AsyncIterator, Iterator

import grpc
import httpx
import pytest

from svckit.signing import verify
from svckit.thinevents import references
from tests.integration.edge_stack import assert_error, hdrs, new_key
from tests.integration.test_edge_stream_webhooks import Stack, publish, running_stack
from travel.auth.v1 import auth_pb2 as apb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2 as wpb
from travel.webhooks.v1 import webhooks_pb2_grpc
from webhookd._endpoint_cap import MAX_ENDPOINTS


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp: pathlib.Path = tmp_path_factory.mktemp("edge_filters")
    with running_stack(
        tmp, ["--allow-private-targets", "--allow-http"], ["--request-log-successes", "0"]
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


async def test_filtered_thin_endpoint_and_the_full_event_read_back(
    stack: Stack,
    auth: auth_pb2_grpc.AuthServiceStub,
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    http: httpx.AsyncClient,
) -> None:
    account_id, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write", "hotels:read"])
    base = stack.sandbox + "/v1/webhooks/endpoints"
    post = hdrs(key.secret, Idempotency_Key="f1", Content_Type="application/json")
    hook_url = stack.receiver.url + "/thin-hotels"

    # A bad filter: 400 naming the operator's path, and no endpoint made.
    bad = {"url": hook_url, "events": ["booking.confirmed"], "filter": {"data": {"amount": {"$regex": "1"}}}}
    refused = await http.post(base, headers=post, json=bad)
    assert_error(refused, 400, "invalid_request")
    assert "filter.data.amount.$regex" in refused.json()["error"]["message"]
    assert (await http.get(base, headers=hdrs(key.secret))).json()["data"] == []

    flt = {"data": {"product": "hotels", "amount": {"$gte": 1}}}
    body = {"url": hook_url, "events": ["booking.confirmed"], "filter": flt, "payload": "thin"}
    created = await http.post(base, headers={**post, "Idempotency-Key": "f2"}, json=body)
    assert created.status_code == 201, created.text
    ep = created.json()
    assert (ep["filter"], ep["payload"]) == (flt, "thin")

    hotel = await publish(hooks, account_id, "booking.confirmed", "hotels")
    flight = await publish(hooks, account_id, "booking.confirmed", "flights")
    deadline = time.monotonic() + 15
    while not (got := [r for r in stack.receiver.requests if r.path == "/thin-hotels"]):
        assert time.monotonic() < deadline, "the hotel event never arrived"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # room for a wrong second delivery to show
    got = [r for r in stack.receiver.requests if r.path == "/thin-hotels"]
    assert len(got) == 1
    thin = json.loads(got[0].body)
    full = json.loads(hotel.envelope_json)
    assert thin["id"] == hotel.id and thin["type"] == "booking.confirmed"
    assert set(thin) == {"id", "type", "created", "livemode", "account", "data"}
    refs = references("booking.confirmed")
    assert thin["data"] == {k: v for k, v in full["data"].items() if k in refs}
    assert {"booking", "product"} <= set(thin["data"]) and "amount" not in thin["data"]
    verify(got[0].body, got[0].headers["x-service-signature"], ep["secret"], time.time())

    # The flight event was filtered: no delivery of it to this endpoint.
    listed = await http.get(
        stack.sandbox + f"/v1/webhooks/deliveries?event={flight.id}", headers=hdrs(key.secret)
    )
    assert listed.status_code == 200, listed.text
    assert listed.json()["data"] == []

    # The whole event, to a key that reads hotel bookings; 403 to one that does not.
    events = stack.sandbox + "/v1/events/"
    read = await http.get(events + hotel.id, headers=hdrs(key.secret))
    assert read.status_code == 200 and read.json() == full
    _, blind = await new_key(auth, scopes=["webhooks:read"], account_id=account_id)
    denied = await http.get(events + hotel.id, headers=hdrs(blind.secret))
    assert_error(denied, 403, "missing_scope")
    assert "hotels:read" in denied.json()["error"]["message"]
    # A plain success is not filed on this edge (--request-log-successes 0); both event reads are.
    assert (await http.get(base, headers=hdrs(key.secret))).status_code == 200

    wanted = {(read.headers["x-request-id"], 200), (denied.headers["x-request-id"], 403)}
    deadline = time.monotonic() + 15
    while True:
        logged = (await auth.ListRequests(apb.ListRequestsRequest(account_id=account_id))).requests
        found = {(r.request_id, r.status) for r in logged}
        if wanted <= found:
            break
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)
    paths = {r.path for r in logged if r.status == 200}
    assert paths == {f"/v1/events/{hotel.id}"}, paths


async def test_an_account_cannot_register_more_endpoints_than_the_cap(
    stack: Stack,
    auth: auth_pb2_grpc.AuthServiceStub,
    hooks: webhooks_pb2_grpc.WebhookServiceStub,
    http: httpx.AsyncClient,
) -> None:
    """The hostile input: an account registering endpoint after endpoint, each with a filter, so that every
    one of its publishes evaluates them all in the fan-out. The 17th (``MAX_ENDPOINTS`` + 1) is refused with
    409 naming the limit and nothing made; another environment, another account and a deletion make room."""
    account_id, key = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    base = stack.sandbox + "/v1/webhooks/endpoints"
    flt = {"$or": [{"data": {"amount": {"$gte": n}}} for n in range(50)]}

    def body(n: int) -> dict[str, object]:
        return {"url": f"{stack.receiver.url}/cap-{n}", "events": ["booking.confirmed"], "filter": flt}

    made = []
    for n in range(MAX_ENDPOINTS):
        resp = await http.post(base, headers=hdrs(key.secret, Idempotency_Key=f"cap{n}"), json=body(n))
        assert resp.status_code == 201, resp.text
        made.append(resp.json()["id"])
    over = await http.post(base, headers=hdrs(key.secret, Idempotency_Key="cap-over"), json=body(99))
    err = assert_error(over, 409, "conflict")
    assert f"the limit is {MAX_ENDPOINTS} per account and environment" in err["message"]
    listed = await http.get(base + "?limit=100", headers=hdrs(key.secret))
    assert sorted(e["id"] for e in listed.json()["data"]) == sorted(made)  # nothing made
    # A polling endpoint counts the same.
    polling = await http.post(
        base, headers=hdrs(key.secret, Idempotency_Key="cap-poll"), json={"type": "polling", "events": ["*"]}
    )
    assert_error(polling, 409, "conflict")

    # The account's live environment has its own count; another account is not touched.
    live = await hooks.RegisterEndpoint(
        wpb.RegisterEndpointRequest(
            account_id=account_id,
            environment=wpb.ENVIRONMENT_LIVE,
            url=f"{stack.receiver.url}/cap-live",
            events=["booking.confirmed"],
        )
    )
    assert live.endpoint.id
    _, other = await new_key(auth, scopes=["webhooks:read", "webhooks:write"])
    theirs = await http.post(base, headers=hdrs(other.secret, Idempotency_Key="cap0"), json=body(0))
    assert theirs.status_code == 201, theirs.text

    # A deleted endpoint no longer counts: one deletion, one more registration, then the cap again.
    gone = await http.delete(f"{base}/{made[0]}", headers=hdrs(key.secret))
    assert gone.status_code == 200, gone.text
    again = await http.post(base, headers=hdrs(key.secret, Idempotency_Key="cap-again"), json=body(98))
    assert again.status_code == 201, again.text
    full = await http.post(base, headers=hdrs(key.secret, Idempotency_Key="cap-full"), json=body(97))
    assert_error(full, 409, "conflict")
