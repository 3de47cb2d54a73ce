"""Per-key rate limits shared in Redis (127.0.0.1:6379) by two real edge processes, a key's own limit
set in authsvc, and an edge whose Redis is unreachable falling back to its own bucket."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
import urllib.request

import grpc
import httpx
import redis.asyncio as aioredis
from google.protobuf import field_mask_pb2

from edge.testing import edge_args
from tests.e2e.test_edge_processes import ACTOR, authsvc, h
from tests.support import REDIS_URL, ServiceProcess, free_port
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc

RATE = 5  # the key's own limit: bursts of 10 (edge.ratelimit.BURST_SECONDS)
BURST = 2 * RATE


async def limited_key(target: str, rate: int) -> tuple[str, str]:
    """A sandbox key created with the environment's default, then given its own limit (svcctl's path)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        account = await stub.CreateAccount(pb.CreateAccountRequest(name="P", actor=ACTOR))
        key = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account.account.id,
                environment=pb.ENVIRONMENT_SANDBOX,
                scopes=["account:read"],
                actor=ACTOR,
            )
        )
        await stub.UpdateKey(
            pb.UpdateKeyRequest(
                key_id=key.key.id,
                update_mask=field_mask_pb2.FieldMask(paths=["rate_limit"]),
                rate_limit=rate,
                actor=ACTOR,
            )
        )
        return key.key.id, key.secret


def metrics(edge: ServiceProcess) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{edge.ports['metrics_port']}/metrics", timeout=5).read()
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("edge_ratelimit_"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


async def test_two_edges_share_one_keys_limit_in_redis(tmp_path: pathlib.Path, redis_prefix: str) -> None:
    auth = authsvc(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    # The environment default (25/s) is far above the key's own limit: the key's own must be what counts.
    edges = [
        ServiceProcess(
            "edge",
            edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / f'e{i}.db'}"),
            # A loaded test machine must not look like a Redis outage here.
            env={"EDGE_REDIS": REDIS_URL, "EDGE_REDIS_PREFIX": redis_prefix, "EDGE_REDIS_TIMEOUT": "5"},
        ).start(tmp_path / f"edge{i}.log")
        for i in range(2)
    ]
    try:
        key_id, secret = await limited_key(auth.grpc_target, RATE)
        urls = [f"http://127.0.0.1:{e.ports['sandbox_port']}/v1/account" for e in edges]
        async with httpx.AsyncClient() as c:
            started = time.monotonic()
            # Each edge asks authsvc about the key once (its first request), then serves it from its cache.
            codes = [(await c.get(url, headers=h(secret))).status_code for url in urls]
            assert codes == [200, 200]
            for _ in range(4):  # bursts of 30 requests spread over both edges, four times
                rounds = await asyncio.gather(*(c.get(urls[i % 2], headers=h(secret)) for i in range(30)))
                codes += [r.status_code for r in rounds]
            elapsed = time.monotonic() - started
        allowed = codes.count(200)
        assert set(codes) == {200, 429}
        # Two edges each limiting alone would allow a burst each (and the rate each); shared, the key
        # gets its limit over the window plus at most one burst, and at least the burst.
        assert BURST <= allowed <= RATE * elapsed + BURST, (allowed, elapsed)
        client = aioredis.Redis.from_url(REDIS_URL)
        try:
            assert 0 < await client.pttl(f"{redis_prefix}{key_id}") <= BURST / RATE * 1000  # nothing stale
        finally:
            await client.aclose()
    finally:
        for edge in edges:
            assert edge.terminate() == 0
        auth.terminate()
    assert all("Redis unreachable" not in e.logs() for e in edges)


async def test_an_edge_whose_redis_is_down_limits_locally_and_says_so(tmp_path: pathlib.Path) -> None:
    auth = authsvc(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'a.db'}")
    args = edge_args(auth.grpc_target, "127.0.0.1:1", f"sqlite+aiosqlite:///{tmp_path / 'e.db'}")
    closed = free_port()  # nobody listens there
    args += ["--metrics-listen", "127.0.0.1:0", "--redis", f"redis://127.0.0.1:{closed}/0"]
    edge = ServiceProcess("edge", args).start(tmp_path / "edge.log")
    try:
        _, secret = await limited_key(auth.grpc_target, 1)  # bursts of two
        url = f"http://127.0.0.1:{edge.ports['sandbox_port']}/v1/account"
        async with httpx.AsyncClient() as c:
            codes = [(await c.get(url, headers=h(secret))).status_code for _ in range(3)]
        assert codes == [200, 200, 429]  # rate limiting fails open to the local bucket, never to no limit
        seen = await asyncio.to_thread(metrics, edge)
        assert seen["edge_ratelimit_fallback_total"] == 3
        assert seen["edge_ratelimit_redis_up"] == 0
    finally:
        assert edge.terminate() == 0
        auth.terminate()
    down = [json.loads(line) for line in edge.logs().splitlines() if "Redis unreachable" in line]
    assert len(down) == 1 and "Connection" in down[0]["error"]
