"""The rules of the edge -> product upstream hop: who the hotels service believes (examples.hotels.identity),
which upstreams the edge may call under TLS (edge.upstream), the hotels service's Idempotency-Key store,
and tracing that costs nothing when off (svckit.tracing)."""

from __future__ import annotations

import asyncio
import json
import pathlib

import pytest

from edge.__main__ import build_parser, config_from
from edge.routetable import DEFAULT_ROUTES, RouteTable, RouteTableError
from edge.upstream import check_routes, plaintext_upstreams
from examples.hotels.bookings import Answer, Replayed, Store, booking_id
from examples.hotels.identity import Identity, Refusal, identify
from svckit.tls import Tls
from tests.support import tls_args
from tests.unit.test_imports import SERVICES, loaded_after, within

GOOD = {"x-account-id": "acct_1", "x-key-id": "key_1", "x-environment": "live"}
EDGE = frozenset({"edge"})


@pytest.mark.parametrize(
    ("peer", "headers", "tls", "expected"),
    [
        ("edge", GOOD, True, Identity("acct_1", "key_1", "live")),
        ("edge", {**GOOD, "x-traveller-id": "trv_9"}, True, Identity("acct_1", "key_1", "live", "trv_9")),
        # Another certificate of the same CA does not speak for partners, nor does a peer without one.
        ("product:hotels", GOOD, True, 403),
        ("portal", GOOD, True, 403),
        (None, GOOD, True, 403),
        # --insecure-dev: nobody to check, the headers are taken as sent.
        (None, GOOD, False, Identity("acct_1", "key_1", "live")),
        ("edge", {**GOOD, "x-account-id": ""}, True, 400),
        ("edge", {**GOOD, "x-account-id": "key_1"}, True, 400),
        ("edge", {**GOOD, "x-account-id": "acct_1\r\nx: y"}, True, 400),
        ("edge", {**GOOD, "x-environment": "staging"}, True, 400),
        ("edge", {**GOOD, "x-key-id": "acct_2"}, True, 400),
        ("edge", {**GOOD, "x-traveller-id": "cust-1"}, True, 400),
    ],
)
def test_identity_is_believed_from_the_edge_only(
    peer: str | None, headers: dict[str, str], tls: bool, expected: Identity | int
) -> None:
    got = identify(peer, headers, trusted=EDGE, tls=tls)
    if isinstance(expected, Identity):
        assert got == expected
    else:
        assert isinstance(got, Refusal) and got.status == expected


def _table(live: str, sandbox: str = "builtin") -> RouteTable:
    route = {"method": "GET", "path": "/v1/hotels/search", "scope": "hotels:read"}
    return RouteTable.from_json([{**route, "upstream": {"live": live, "sandbox": sandbox}}])


def test_plaintext_upstreams_are_refused_unless_insecure_dev() -> None:
    tls = Tls(b"ca", b"cert", b"key", "edge")
    assert plaintext_upstreams(_table("https://hotels.internal")) == []
    assert plaintext_upstreams(_table("http://hotels.internal", "http://sandbox.internal")) == [
        "GET /v1/hotels/search (live): http://hotels.internal",
        "GET /v1/hotels/search (sandbox): http://sandbox.internal",
    ]
    with pytest.raises(RouteTableError, match="plain http"):
        check_routes(_table("http://hotels.internal"), tls)
    check_routes(_table("http://hotels.internal"), None)  # --insecure-dev
    check_routes(RouteTable.from_json(DEFAULT_ROUTES), tls)  # the default table's placeholders are https


def test_the_edge_does_not_start_with_a_plaintext_upstream(tmp_path: pathlib.Path, pki: pathlib.Path) -> None:
    route = {"method": "GET", "path": "/v1/hotels/search", "scope": "hotels:read"}
    routes = tmp_path / "routes.json"
    routes.write_text(
        json.dumps([{**route, "upstream": {"live": "http://h.internal", "sandbox": "builtin"}}])
    )
    serve = ["serve", "--routes", str(routes), "--database", "sqlite+aiosqlite:///:memory:"]
    with pytest.raises(RouteTableError, match="plain http"):
        config_from(build_parser().parse_args([*serve, *tls_args(pki, "edge")]))
    assert config_from(build_parser().parse_args([*serve, "--insecure-dev"])).tls is None


async def test_the_idempotency_store_runs_a_key_once_per_body() -> None:
    store = Store()
    runs = 0

    async def run() -> Answer:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0)
        return Answer(201, {"n": runs})

    scope = ("acct_1", "live", "k1")
    first, second = await asyncio.gather(store.once(scope, b"{}", run), store.once(scope, b"{}", run))
    assert first == second == Answer(201, {"n": 1}) and runs == 1
    with pytest.raises(Replayed):
        await store.once(scope, b'{"offer": "x"}', run)
    # Another account's same key is another booking.
    assert (await store.once(("acct_2", "live", "k1"), b"{}", run)).body == {"n": 2}

    async def fails() -> Answer:
        raise RuntimeError("webhookd down")

    with pytest.raises(RuntimeError):
        await store.once(("acct_1", "live", "k2"), b"{}", fails)
    assert (await store.once(("acct_1", "live", "k2"), b"{}", run)).body == {"n": 3}  # a failure is retried
    assert booking_id("acct_1", "live", "k1") == booking_id("acct_1", "live", "k1")
    assert booking_id("acct_1", "live", "k1") != booking_id("acct_1", "sandbox", "k1")


def test_the_reference_service_imports_no_service_package() -> None:
    loaded = loaded_after("examples.hotels.__main__")
    assert within(loaded, (*SERVICES, "portal", "sqlalchemy", "opentelemetry")) == []
    assert {"svckit.clients", "svckit.tls", "examples.hotels.identity"} <= loaded
