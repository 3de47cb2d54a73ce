"""A PostgreSQL that refuses connections, every way an operator's drill found, answered as an outage by
real authsvc, webhookd and edge processes: partner requests get 503 ``service_unavailable`` with
Retry-After and the error body, the services' gRPC callers UNAVAILABLE, ``dependency_failures_total``
counts the reason, the logs hold the summary line and no traceback; and when the outage ends, requests
succeed again.

The services run on a database and a role of this module's own (not a superuser: connection limits do
not bind a superuser), so nothing it does reaches other tests sharing the server. On this server
every login is trusted (pg_hba ``trust``), so a refused password cannot be provoked; a role refused
login (``NOLOGIN``, SQLSTATE 28000) is the same refusal of class 28 (a wrong password is 28P01)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import asyncpg
import grpc
import httpx
import pytest
from grpc_status import rpc_status

from edge.testing import SANDBOX_HOST, edge_args
from svckit.apikeys import checksum
from svckit.ids import random_base62
from svckit.outage import CREDENTIALS, MISSING, NOT_ACCEPTING, OUTAGE_MESSAGE, RETRY_AFTER, TOO_MANY
from tests.conftest import PG_DB, PG_HOST, PG_PORT, pg_skip_reason
from tests.support import ServiceProcess, csrf_of, scraped
from travel.auth.v1 import auth_pb2 as pb
from travel.auth.v1 import auth_pb2_grpc
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc

ACTOR = pb.Actor(user="ops@partner.example")
METRICS = ["--metrics-listen", "127.0.0.1:0"]


async def admin(*statements: str) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


def cut(name: str) -> str:
    """Ends the connections the services hold, so their next use has to open a new one."""
    return f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"


@dataclass
class Stack:
    name: str  # the database's and the role's
    auth: ServiceProcess
    hooks: ServiceProcess
    edge: ServiceProcess
    portal: ServiceProcess
    secret: str
    account_id: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    reason = pg_skip_reason()
    if reason:
        pytest.skip(reason)
    name = "outage_" + random_base62(10).lower()
    asyncio.run(admin(f"CREATE ROLE {name} LOGIN", f"CREATE DATABASE {name} OWNER {name}"))
    tmp = tmp_path_factory.mktemp("outage")
    url = f"postgresql+asyncpg://{name}@{PG_HOST}:{PG_PORT}/{name}"
    started: list[ServiceProcess] = []
    try:
        auth = ServiceProcess("authsvc", ["--listen", "127.0.0.1:0", *METRICS, "--database", url])
        started.append(auth.start(tmp / "authsvc.log"))
        hooks = ServiceProcess("webhookd", ["--listen", "127.0.0.1:0", *METRICS, "--database", url])
        started.append(hooks.start(tmp / "webhookd.log"))
        args = edge_args(
            auth.grpc_target, hooks.grpc_target, f"sqlite+aiosqlite:///{tmp / 'edge.db'}", None, *METRICS
        )
        edge = ServiceProcess("edge", args).start(tmp / "edge.log")
        started.append(edge)
        portal = ServiceProcess(
            "portal",
            ["--listen", "127.0.0.1:0", "--metrics-listen", "", "--authsvc", auth.grpc_target,
             "--webhookd", hooks.grpc_target],
        ).start(tmp / "portal.log")  # fmt: skip
        started.append(portal)
        account_id, secret = asyncio.run(sandbox_key(auth.grpc_target))
        yield Stack(name, auth, hooks, edge, portal, secret, account_id)
    finally:
        for process in reversed(started):
            process.terminate()
        asyncio.run(admin(cut(name), f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", f"DROP ROLE {name}"))
    for process in started:
        assert not tracebacks(process)


async def sandbox_key(target: str) -> tuple[str, str]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = auth_pb2_grpc.AuthServiceStub(channel)
        account = (await stub.CreateAccount(pb.CreateAccountRequest(name="P", actor=ACTOR))).account
        key = await stub.CreateKey(
            pb.CreateKeyRequest(
                account_id=account.id,
                environment=pb.ENVIRONMENT_SANDBOX,
                scopes=["account:read"],
                actor=ACTOR,
            )
        )
        return account.id, key.secret


def made_up_key() -> str:
    """A well-formed key authsvc has never seen: answering it needs the database."""
    body = "svc_test_" + random_base62(32)
    return body + checksum(body)


async def partner_get(stack: Stack, secret: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as c:
        return await c.get(
            f"http://127.0.0.1:{stack.edge.ports['sandbox_port']}/v1/account",
            headers={"Host": SANDBOX_HOST, "Authorization": f"Svc {secret}"},
        )


async def portal_sign_in(stack: Stack) -> httpx.Response:
    """A sign-in at the portal (authsvc checks the password in its database)."""
    async with httpx.AsyncClient(base_url=stack.portal.ports["url"], timeout=20) as browser:
        token = csrf_of((await browser.get("/signin")).text)
        form = {"csrf": token, "email": "nobody@partner.example", "password": "hunter2 hunter2"}
        return await browser.post("/signin", data=form)


async def grpc_calls(stack: Stack) -> list[grpc.aio.AioRpcError | None]:
    """A write to authsvc and a read of webhookd: the error each answered, None for an answer."""
    outcomes: list[grpc.aio.AioRpcError | None] = []
    async with (
        grpc.aio.insecure_channel(stack.auth.grpc_target) as ca,
        grpc.aio.insecure_channel(stack.hooks.grpc_target) as cw,
    ):
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: auth_pb2_grpc.AuthServiceStub(ca).CreateAccount(
                pb.CreateAccountRequest(name="Q", actor=ACTOR), timeout=20
            ),
            lambda: webhooks_pb2_grpc.WebhookServiceStub(cw).ListEndpoints(
                webhooks_pb2.ListEndpointsRequest(
                    account_id=stack.account_id, environment=webhooks_pb2.ENVIRONMENT_SANDBOX
                ),
                timeout=20,
            ),
        ]
        for call in calls:
            try:
                await call()
                outcomes.append(None)
            except grpc.aio.AioRpcError as exc:
                outcomes.append(exc)
    return outcomes


def tracebacks(process: ServiceProcess) -> list[str]:
    """The logger and message of each line of ``process``'s log that holds a traceback."""
    found = []
    for line in process.logs().splitlines():
        if "Traceback" in line:
            record = json.loads(line) if line.startswith("{") else {"msg": line}
            found.append(f"{process.module}: {record.get('logger')}: {record.get('msg')}")
    return found


EDGE_SAW = 'dependency_failures_total{dependency="authsvc",reason="unavailable"}'


def failures(process: ServiceProcess, reason: str) -> float:
    return scraped(
        process.ports["metrics_port"], f'dependency_failures_total{{dependency="database",reason="{reason}"}}'
    )


# reason -> (statements that start the outage, statements that end it), of the database/role ``{n}``.
OUTAGES: dict[str, tuple[list[str], list[str]]] = {
    NOT_ACCEPTING: (
        ["ALTER DATABASE {n} ALLOW_CONNECTIONS false", "{cut}"],
        ["ALTER DATABASE {n} ALLOW_CONNECTIONS true"],
    ),
    MISSING: (
        [
            "ALTER DATABASE {n} ALLOW_CONNECTIONS false",
            "{cut}",
            "ALTER DATABASE {n} RENAME TO {n}_away",
            "ALTER DATABASE {n}_away ALLOW_CONNECTIONS true",
        ],
        ["ALTER DATABASE {n}_away RENAME TO {n}"],
    ),
    CREDENTIALS: (["ALTER ROLE {n} NOLOGIN", "{cut}"], ["ALTER ROLE {n} LOGIN"]),
    TOO_MANY: (
        ["ALTER DATABASE {n} CONNECTION LIMIT 0", "{cut}"],
        ["ALTER DATABASE {n} CONNECTION LIMIT -1"],
    ),
}


@pytest.mark.parametrize("reason", list(OUTAGES))
async def test_a_database_refusing_connections_is_answered_503_and_counted(stack: Stack, reason: str) -> None:
    start, end = (
        [s.format(n=stack.name, cut=cut(stack.name)) for s in statements] for statements in OUTAGES[reason]
    )
    assert (await partner_get(stack, stack.secret)).status_code == 200
    before = {p.module: failures(p, reason) for p in (stack.auth, stack.hooks)}
    edge_before = scraped(stack.edge.ports["metrics_port"], EDGE_SAW)
    await admin(*start)
    try:
        for secret in (made_up_key(), made_up_key()):  # a known key's answers may come from caches
            r = await partner_get(stack, secret)
            assert r.status_code == 503, r.text
            assert r.headers["Retry-After"] == str(RETRY_AFTER)
            error = r.json()["error"]
            assert error["type"] == "service_unavailable"
            assert error["requestId"] == r.headers["X-Request-Id"]
            assert error["docUrl"].endswith("/errors#service_unavailable")
            assert stack.name not in r.text
        # The edge counts the calls authsvc answered UNAVAILABLE (its own job's DependencyFailures).
        assert scraped(stack.edge.ports["metrics_port"], EDGE_SAW) > edge_before
        page = await portal_sign_in(stack)
        assert page.status_code == 503, page.text
        assert page.headers["Retry-After"] == str(RETRY_AFTER)
        assert stack.name not in page.text
        for outcome in await grpc_calls(stack):
            assert outcome is not None and outcome.code() == grpc.StatusCode.UNAVAILABLE
            status = rpc_status.from_call(outcome)
            assert status is not None and status.message == OUTAGE_MESSAGE
        for process in (stack.auth, stack.hooks):
            assert failures(process, reason) > before[process.module], process.logs()[-2000:]
            assert "dependency unavailable" in process.logs()
    finally:
        await admin(*end)
    # Over: the pools open connections again (pre-ping drops the dead ones).
    deadline = time.monotonic() + 30
    while True:
        r = await partner_get(stack, stack.secret)
        if (
            r.status_code == 200
            and await grpc_calls(stack) == [None, None]
            and (await portal_sign_in(stack)).status_code == 401  # a wrong password, told as such again
        ):
            break
        assert time.monotonic() < deadline, r.text
        await asyncio.sleep(0.5)
    for process in (stack.auth, stack.hooks, stack.edge, stack.portal):
        assert not tracebacks(process)
