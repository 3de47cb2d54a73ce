"""Refusal pacing (svckit.pacing) at an edge process over real HTTP (issue 20: a flood of refusals was
answered as fast as the edge could, on the loop the partners use). Each address is bound as the client
socket's own loopback address, as the edge sees it. Past its burst a source's refusals are held (the edge's
metric counts them, and each takes at least half the delay); another address, and a partner whose key is
accepted, are answered at once; past the held places a refusal is answered at once on a closed
connection."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.edge_stack import hdrs, new_key
from tests.integration.test_edge_stream_webhooks import Stack, auth, running_stack  # noqa: F401 (auth)
from tests.support import scraped
from travel.auth.v1 import auth_pb2_grpc

# A source's burst of 3 refusals answered at once, refilling at 0.001 a second (nothing refills while
# the test runs; everyone's burst is GLOBAL_SHARE times 3); held 2 s, spread over 1 to 3 s.
DELAY, BURST = 2.0, 3
HELD = 4  # refusals held at once, at most
BAD_KEY = "svc_test_" + "a" * 32 + "xxxxxx"  # its checksum fails: refused 401 by the edge alone


def paced(stack: Stack, pace: str) -> float:
    return scraped(stack.edge.ports["metrics_port"], f'refusals_paced_total{{pace="{pace}"}}')


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    flags = ["--metrics-listen", "127.0.0.1:0", "--refusal-delay", str(DELAY), "--refusal-rate", "0.001",
             "--refusal-burst", str(BURST), "--refusals-held", str(HELD)]  # fmt: skip
    with running_stack(tmp_path_factory.mktemp("refusal_pacing"), [], flags) as up:
        yield up


def client(address: str, connections: int = 1) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    transport = httpx.AsyncHTTPTransport(local_address=address, limits=limits)
    return httpx.AsyncClient(transport=transport, timeout=30)


async def test_a_source_past_its_burst_has_its_refusals_held_and_no_one_else_does(
    stack: Stack, auth: auth_pb2_grpc.AuthServiceStub
) -> None:
    url = f"http://127.0.0.1:{stack.edge.ports['sandbox_port']}/v1/account"
    _, key = await new_key(auth, scopes=["account:read"])

    async with client("127.0.0.2") as flooder, client("127.0.0.3") as other, client("127.0.0.1") as partner:
        for _ in range(BURST):
            assert (await flooder.get(url, headers=hdrs(BAD_KEY))).status_code == 401
        assert paced(stack, "later") == 0
        started = time.monotonic()
        r = await flooder.get(url, headers=hdrs(BAD_KEY))
        held = time.monotonic() - started
        assert r.status_code == 401 and r.json()["error"]["type"] == "invalid_api_key"
        assert paced(stack, "later") == 1
        assert held >= DELAY / 2  # the hold's least (its spread is 0.5 to 1.5 of the delay)
        # A connection with no accepted key ends with its refusal (svckit.connlimits.close_after).
        assert r.headers.get("connection") == "close"

        # Another address has its own burst; a partner whose key is accepted is never paced, even
        # while the flooder's refusal is on its way (and held).
        flood = asyncio.ensure_future(flooder.get(url, headers=hdrs(BAD_KEY)))
        assert (await other.get(url, headers=hdrs(BAD_KEY))).status_code == 401
        for _ in range(5):
            assert (await partner.get(url, headers=hdrs(key.secret))).status_code == 200
        assert (await flood).status_code == 401
        assert paced(stack, "later") == 2  # the flooder's second held refusal, nobody else's


async def test_past_the_held_places_a_refusal_is_answered_at_once_and_its_connection_closed(
    stack: Stack,
) -> None:
    url = f"http://127.0.0.1:{stack.edge.ports['sandbox_port']}/v1/account"
    extra = 6
    n = BURST + HELD + extra
    closed_before = paced(stack, "close")
    async with client("127.0.0.4", connections=n) as flooder:
        got = await asyncio.gather(*(flooder.get(url, headers=hdrs(BAD_KEY)) for _ in range(n)))
    assert [r.status_code for r in got] == [401] * n
    assert paced(stack, "close") - closed_before == extra
