"""Liveness and readiness: ``GET /healthz`` (the process answers) and ``GET /readyz`` (it can serve: its
database and the peers it needs answer), and the gRPC health of a service that follows its database.

A balancer sends traffic only to a ready process, and a restart is for a process that is not alive: an
outage of the database must not make every process restart (liveness stays 200), but it must take them
out of rotation (readiness 503, naming what failed). Checks run concurrently, each bounded by
``timeout``; a check raises when its dependency does not answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from svckit.metrics import SetGauge

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[None]]
CHECK_TIMEOUT = 2.0
# The gRPC services look at their database this often (seconds).
PROBE_INTERVAL = 2.0
# Exported only by a process with a database (authsvc, webhookd, the edge), from its first probe at start.
DATABASE_UP = SetGauge(
    "database_up", "1 while the process's database answers SELECT 1, else 0 (authsvc, webhookd, the edge)"
)


def database_check(engine: Any) -> Check:
    """``SELECT 1`` on a SQLAlchemy ``AsyncEngine`` (a pooled connection, pre-pinged). SQLite passes
    without a query: an embedded file is no server that can be down on its own, and a transaction there
    (svckit.db begins every one IMMEDIATE) would queue behind the writers."""

    async def check() -> None:
        if engine.dialect.name == "sqlite":
            return
        async with engine.connect() as conn:
            await conn.exec_driver_sql("SELECT 1")

    return check


def peer_check(channel: grpc.aio.Channel, timeout: float = CHECK_TIMEOUT) -> Check:
    """The peer's overall gRPC health (service ""): SERVING, else the check fails."""
    stub = health_pb2_grpc.HealthStub(channel)

    async def check() -> None:
        answer = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
        if answer.status != health_pb2.HealthCheckResponse.SERVING:
            raise RuntimeError(health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status))

    return check


def _reason(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return str(exc.code().name)
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    # The class only: a driver's message may name the database user or host.
    return type(exc).__name__ if not isinstance(exc, RuntimeError) else str(exc)


async def readiness(checks: Mapping[str, Check], limit: float = CHECK_TIMEOUT) -> dict[str, str]:
    """Every check's outcome, each given ``limit`` seconds: ``ok`` or why not (never the driver's text)."""

    async def one(check: Check) -> str:
        try:
            async with asyncio.timeout(limit):
                await check()
        except Exception as exc:
            return _reason(exc)
        return "ok"

    names = list(checks)
    results = await asyncio.gather(*(one(checks[n]) for n in names))
    return dict(zip(names, results, strict=True))


def answer(results: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    """The status and body of ``GET /readyz``: 200 ``ready``, else 503 naming every failing check."""
    failing = sorted(name for name, result in results.items() if result != "ok")
    if failing:
        return 503, {"status": "not_ready", "failing": failing, "checks": dict(results)}
    return 200, {"status": "ready", "checks": dict(results)}


async def probe_database(check: Check) -> str:
    """One look at the database: ``ok`` or why not (``readiness``), and ``database_up`` set by it."""
    outcome = (await readiness({"database": check}))["database"]
    DATABASE_UP.set(1 if outcome == "ok" else 0)
    return outcome


async def watch_database(engine: Any, interval: float = PROBE_INTERVAL) -> None:
    """``database_up`` of a process whose database has no gRPC health to follow (the edge's): a probe
    at once and every ``interval`` seconds, for ever (cancel to stop)."""
    check = database_check(engine)
    while True:
        await probe_database(check)
        await asyncio.sleep(interval)


class DatabaseHealth:
    """Sets a gRPC server's health (``names``: its services and "") to NOT_SERVING while ``SELECT 1`` on
    its database fails, SERVING again once it answers; looks every ``interval`` seconds."""

    def __init__(
        self,
        engine: Any,
        health: health_aio.HealthServicer,
        names: Iterable[str],
        interval: float = PROBE_INTERVAL,
    ) -> None:
        self.check = database_check(engine)
        self.health = health
        self.names = [*names, ""]
        self.interval = interval
        self.serving = True
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        DATABASE_UP.set(1)  # it answered the migration just before
        self.task = asyncio.create_task(self._run(), name="database-health")

    async def probe(self) -> bool:
        """Look once and set the health; True when the database answered."""
        outcome = await probe_database(self.check)
        up = outcome == "ok"
        if up != self.serving:
            self.serving = up
            status = (
                health_pb2.HealthCheckResponse.SERVING if up else health_pb2.HealthCheckResponse.NOT_SERVING
            )
            if up:
                log.info("database answers again: serving")
            else:
                log.warning("database unreachable: health NOT_SERVING", extra={"reason": outcome})
            for name in self.names:
                await self.health.set(name, status)
        return up

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.probe()
            except Exception:  # the health servicer shut down (graceful stop): nothing left to tell
                return

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
