"""Made-up keys (valid checksum) from 200 source addresses at once, over real HTTP to an edge process
(issue 20: a per-address budget alone is bypassed by an attacker with many addresses). Each address is
bound as the client socket's own loopback address (127.x.y.z), as the edge sees it. Only the edge's
global budget of unknown keys reaches authsvc (its Authorize answers counted from its metrics), the rest
are 429 with Retry-After; a partner whose key was allowed before still has a new key's first use served,
and a cached key is untouched."""

from __future__ import annotations

import asyncio
import pathlib
from collections import Counter
from collections.abc import Iterator

import grpc
import httpx
import pytest

from edge.testing import SANDBOX_HOST, edge_args
from svckit.apikeys import checksum
from svckit.ids import random_base62
from tests.integration.edge_stack import new_key
from tests.support import ServiceProcess, scraped, sqlite_url, start_service
from travel.auth.v1 import auth_pb2_grpc

# Per source 2 at once, per /24 3, all sources 4 (edge.unknownkeys: shares 1.5 and 2); refilling at
# 0.001 a second, so nothing refills while the test runs.
RATE, BURST, GLOBAL = "0.001", "2", 4
ADDRESSES = [f"127.1.{i}.{1 + i % 200}" for i in range(200)]  # 200 addresses in 200 /24s
PARTNER = "127.0.0.1"


def made_up_key() -> str:
    body = "svc_test_" + random_base62(32)
    return body + checksum(body)


def unknown_key_answers(metrics_port: int) -> float:
    return scraped(
        metrics_port, 'authsvc_authorize_decisions_total{decision="deny",error_type="invalid_api_key"}'
    )


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServiceProcess, ServiceProcess]]:
    tmp: pathlib.Path = tmp_path_factory.mktemp("many_addresses")
    procs: list[ServiceProcess] = []
    try:
        wh = start_service("webhookd", tmp, sqlite_url(tmp, "w.db"))
        procs.append(wh)
        auth = start_service("authsvc", tmp, sqlite_url(tmp, "a.db"), "--metrics-listen", "127.0.0.1:0")
        procs.append(auth)
        flags = edge_args(auth.grpc_target, wh.grpc_target, sqlite_url(tmp, "e.db"))
        flags += ["--unknown-key-rate", RATE, "--unknown-key-burst", BURST]
        edge = ServiceProcess("edge", flags).start(tmp / "edge.log")
        procs.append(edge)
        yield auth, edge
    finally:
        for proc in reversed(procs):
            proc.terminate()


async def test_a_flood_from_200_addresses_reaches_authsvc_only_within_the_global_budget(
    processes: tuple[ServiceProcess, ServiceProcess],
) -> None:
    authsvc, edge = processes
    url = f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account"
    async with grpc.aio.insecure_channel(authsvc.grpc_target) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        account_id, cached = await new_key(stub, scopes=["account:read"])
        _, fresh = await new_key(stub, scopes=["account:read"], account_id=account_id)
        _, stranger = await new_key(stub, scopes=["account:read"], account_id=account_id)

    def headers(key: str) -> dict[str, str]:
        return {"Host": SANDBOX_HOST, "Authorization": f"Svc {key}"}

    async with httpx.AsyncClient(timeout=30) as partner:
        assert (await partner.get(url, headers=headers(cached.secret))).status_code == 200
        before = unknown_key_answers(authsvc.ports["metrics_port"])

        async def attacker(address: str) -> tuple[int, str]:
            transport = httpx.AsyncHTTPTransport(local_address=address)
            async with httpx.AsyncClient(transport=transport, timeout=30) as c:
                r = await c.get(url, headers=headers(made_up_key()))
                return r.status_code, r.headers.get("retry-after", "")

        flood = await asyncio.gather(*(attacker(a) for a in ADDRESSES))
        statuses = Counter(status for status, _ in flood)
        assert statuses == {401: GLOBAL, 429: len(ADDRESSES) - GLOBAL}
        assert all(int(wait) >= 1 for status, wait in flood if status == 429)
        # authsvc was asked about the global budget's worth of made-up keys, not 200.
        assert unknown_key_answers(authsvc.ports["metrics_port"]) - before == GLOBAL

        # The partner (its key allowed before the flood): a cached key and a new key's first use served.
        assert (await partner.get(url, headers=headers(cached.secret))).status_code == 200
        assert (await partner.get(url, headers=headers(fresh.secret))).status_code == 200

    # An address the edge has never seen a key allowed from waits for the global budget: 429, not 401.
    transport = httpx.AsyncHTTPTransport(local_address="127.2.0.1")
    async with httpx.AsyncClient(transport=transport, timeout=30) as newcomer:
        r = await newcomer.get(url, headers=headers(stranger.secret))
        assert r.status_code == 429, r.text
        assert r.json()["error"]["type"] == "rate_limited"
        assert "right now" in r.json()["error"]["message"]
