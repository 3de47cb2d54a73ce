"""The edge refuses made-up keys without asking authsvc (issue 8 item 10): an edge process in front of a
real gRPC AuthService on loopback that counts the Authorize calls it receives and denies every key."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import duration_pb2

from edge.testing import SANDBOX_HOST, edge_args
from svckit.apikeys import checksum
from svckit.ids import random_base62
from tests.support import ServiceProcess
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

DENIAL_CACHE_SIZE = 5


# Implements only the RPCs the test calls: the generated base answers the others UNIMPLEMENTED, though
# its stubs declare every RPC abstract (hence the ignore[abstract] where one is built).
class CountingAuth(auth_pb2_grpc.AuthServiceServicer):
    """Denies every key (as authsvc does an unknown one, cacheable for 60 s) and counts the calls."""

    def __init__(self) -> None:
        self.authorized: list[str] = []

    async def Authorize(self, request: pb.AuthorizeRequest, context: Any) -> pb.AuthorizeResponse:
        self.authorized.append(request.api_key)
        return pb.AuthorizeResponse(
            decision=pb.DECISION_DENY,
            error_type="invalid_api_key",
            error_message="Invalid API key provided.",
            cache_ttl=duration_pb2.Duration(seconds=60),
        )

    async def WatchKeyChanges(self, request: pb.WatchKeyChangesRequest, context: Any) -> AsyncIterator[Any]:
        yield pb.WatchKeyChangesResponse(kind=pb.KEY_CHANGE_KIND_SYNC)
        await asyncio.Event().wait()  # the watch stays up until the edge goes


@pytest.fixture
async def counting_auth() -> AsyncIterator[tuple[CountingAuth, str]]:
    servicer = CountingAuth()  # type: ignore[abstract]  # (see the class)
    server = grpc.aio.server()
    auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


@pytest.fixture
def edge_url(counting_auth: tuple[CountingAuth, str], tmp_path: pathlib.Path) -> Iterator[str]:
    _, target = counting_auth
    args = edge_args(target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    edge = ServiceProcess("edge", [*args, "--denial-cache-size", str(DENIAL_CACHE_SIZE)]).start(
        tmp_path / "edge.log"
    )
    try:
        yield f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account"
    finally:
        edge.terminate()


def made_up_key(valid_checksum: bool) -> str:
    body = "svc_test_" + random_base62(32)
    check = checksum(body)
    if not valid_checksum:
        check = check[:-1] + ("A" if check[-1] != "A" else "B")
    return body + check


async def refused(client: httpx.AsyncClient, url: str, key: str) -> None:
    resp = await client.get(url, headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {key}"})
    assert resp.status_code == 401, resp.text
    assert resp.json()["error"]["type"] == "invalid_api_key"


async def test_a_bad_checksum_never_reaches_authsvc(
    counting_auth: tuple[CountingAuth, str], edge_url: str
) -> None:
    auth, _ = counting_auth
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(50):
            await refused(client, edge_url, made_up_key(valid_checksum=False))
        assert auth.authorized == []
        # The counter counts: a key whose checksum holds is asked about once, then its denial is cached.
        key = made_up_key(valid_checksum=True)
        await refused(client, edge_url, key)
        await refused(client, edge_url, key)
        assert auth.authorized == [key]


async def test_the_denial_cache_never_exceeds_its_bound(
    counting_auth: tuple[CountingAuth, str], edge_url: str
) -> None:
    auth, _ = counting_auth
    keys = [made_up_key(valid_checksum=True) for _ in range(3 * DENIAL_CACHE_SIZE)]
    async with httpx.AsyncClient(timeout=10) as client:
        for key in keys:
            await refused(client, edge_url, key)
        assert auth.authorized == keys
        # The most recent DENIAL_CACHE_SIZE denials are still cached: no call.
        for key in reversed(keys[-DENIAL_CACHE_SIZE:]):
            await refused(client, edge_url, key)
        assert len(auth.authorized) == len(keys)
        # Every older one was evicted (the cache holds no more than its bound): each is asked again.
        for key in keys[: 2 * DENIAL_CACHE_SIZE]:
            await refused(client, edge_url, key)
        assert auth.authorized == keys + keys[: 2 * DENIAL_CACHE_SIZE]
