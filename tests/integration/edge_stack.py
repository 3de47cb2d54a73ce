"""The edge over real HTTP (httpx) against real authsvc and webhookd processes on loopback, with two
edge processes sharing one SQLite idempotency store, and recording product upstreams: the ``stack``,
``auth`` and ``http`` fixtures and the helpers of the test_edge_*_http.py modules (and others)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest

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
