"""A PostgreSQL outage as partners and balancers see it (the reproduction of issue 24's first item:
PostgreSQL stopped for 10 s answered 500 ``internal_error`` naming the database user and SQLAlchemy's
error). authsvc and an edge process both reach PostgreSQL through a proxy in the test (the shared server
itself is never stopped); switching it off must give only 503 ``service_unavailable`` with a generic
message, ``/readyz`` 503 naming what failed, gRPC health NOT_SERVING, one counted log line instead of a
traceback per request; switching it on must bring every answer back without a restart."""

from __future__ import annotations

import asyncio
import json
import pathlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from authsvc.testing import new_account, new_key, running_authsvc
from edge.testing import edge_args
from svckit.outage import OUTAGE_MESSAGE
from tests.conftest import PG_HOST, PG_PORT
from tests.integration.edge_stack import hdrs
from tests.integration.switchproxy import SwitchProxy
from tests.support import ServiceProcess
from travel.auth.v1 import auth_pb2 as apb
from webhookd._server import Config, run_server

# What no answer to a partner may contain: the database's user, driver, library or a Python error.
LEAKS = ("postgres", "asyncpg", "sqlalchemy", "traceback", "connect call", "interfaceerror", "oserror")


LAST: list[Any] = []


async def until(what: Callable[[], Awaitable[bool]], deadline: float = 20.0) -> None:
    end = time.monotonic() + deadline
    while not await what():
        assert time.monotonic() < end, f"the condition did not hold in time {LAST}"
        await asyncio.sleep(0.1)


async def test_a_database_outage_is_503_only_and_recovers_without_restart(
    pg_url: str, tmp_path: pathlib.Path
) -> None:
    proxy = SwitchProxy(PG_HOST, PG_PORT)
    await proxy.on()
    url = pg_url.replace(f"{PG_HOST}:{PG_PORT}", f"127.0.0.1:{proxy.port}")
    wh = await run_server(
        Config(database=f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", listen="127.0.0.1:0"), start_worker=False
    )
    edge = ServiceProcess("edge", [])
    try:
        async with running_authsvc(url, db_probe_interval=0.1) as (auth, stub):
            account = await new_account(stub)
            scopes = ("account:read", "webhooks:read", "webhooks:write")
            key = (await new_key(stub, account.id, apb.ENVIRONMENT_LIVE, scopes)).secret
            edge.args = [
                *edge_args(f"127.0.0.1:{auth.port}", f"127.0.0.1:{wh.port}", url),
                "--insecure-dev",
            ]
            await asyncio.to_thread(edge.start, tmp_path / "edge.log")
            base = f"http://127.0.0.1:{edge.ports['live_port']}"
            async with (
                httpx.AsyncClient(base_url=base, timeout=10) as http,
                grpc.aio.insecure_channel(f"127.0.0.1:{auth.port}") as channel,
            ):
                health = health_pb2_grpc.HealthStub(channel)
                serial = iter(range(1_000_000))

                async def calls() -> list[httpx.Response]:
                    """A read through authsvc's database (usage, cached a second) and a write claiming
                    its idempotency key in the edge's."""
                    account_read = await http.get("/v1/account", headers=hdrs(key, "live"))
                    write = await http.post(
                        "/v1/webhooks/endpoints",
                        headers=hdrs(key, "live", Idempotency_Key=f"outage-{next(serial)}"),
                        json={"url": "http://127.0.0.1:9/hook", "events": ["booking.confirmed"]},
                    )
                    return [account_read, write]

                async def ready() -> tuple[int, dict[str, Any]]:
                    resp = await http.get("/readyz")
                    return resp.status_code, resp.json()

                assert [r.status_code < 500 for r in await calls()] == [True, True]
                assert await ready() == (
                    200,
                    {"status": "ready", "checks": {"database": "ok", "authsvc": "ok", "webhookd": "ok"}},
                )
                through = proxy.connections

                await proxy.off()
                seen: list[httpx.Response] = []

                async def both_refused() -> bool:
                    answers = await calls()
                    LAST[:] = [(r.status_code, r.text[:200]) for r in answers]
                    seen.extend(answers)
                    return all(r.status_code == 503 for r in answers)

                await until(both_refused)
                for _ in range(5):  # more requests into the outage: still 503 each
                    seen.extend(await calls())
                for resp in seen:
                    assert resp.status_code in (200, 503), resp.text  # 200: usage cached a second
                    if resp.status_code == 503:
                        error = resp.json()["error"]
                        # authsvc cannot vouch for a key while its database (and its listener) is
                        # away, so the edge may refuse before the backend call: both are the outage's.
                        assert error["type"] == "service_unavailable"
                        assert error["message"] in (
                            "a backend service cannot be reached; retry later",
                            "the authorisation service cannot be reached; the request was refused "
                            "(fail closed)",
                        )
                    assert not [leak for leak in LEAKS if leak.lower() in resp.text.lower()], resp.text

                async def not_ready() -> bool:
                    status, body = await ready()
                    return status == 503 and body["failing"] == ["authsvc", "database"]

                await until(not_ready)
                answer = await health.Check(health_pb2.HealthCheckRequest(service=""))
                assert answer.status == health_pb2.HealthCheckResponse.NOT_SERVING
                # authsvc's own answer to a call: UNAVAILABLE, the generic message only.
                try:
                    await stub.GetUsage(apb.GetUsageRequest(account_id=account.id))
                except grpc.aio.AioRpcError as exc:
                    assert (exc.code(), exc.details()) == (grpc.StatusCode.UNAVAILABLE, OUTAGE_MESSAGE)
                else:
                    raise AssertionError("GetUsage answered with its database unreachable")

                await proxy.on()

                async def recovered() -> bool:
                    return all(r.status_code < 500 for r in await calls()) and (await ready())[0] == 200

                await until(recovered)
                answer = await health.Check(health_pb2.HealthCheckRequest(service=""))
                assert answer.status == health_pb2.HealthCheckResponse.SERVING
                assert proxy.connections > through  # the traffic did go through the proxy
            assert await asyncio.to_thread(edge.terminate) == 0
    finally:
        await proxy.off()
        if edge.proc is not None and edge.proc.poll() is None:
            edge.kill()
        await wh.stop(0)
    text = (tmp_path / "edge.log").read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]  # (gRPC's own: not)
    assert not [line for line in lines if "exc" in line or line["level"] == "error"], lines
    summaries = [line for line in lines if line["msg"] == "dependency unavailable"]
    refused = [r for r in seen if r.status_code == 503]
    assert 1 <= len(summaries) < len(refused)  # counted, not a line each
