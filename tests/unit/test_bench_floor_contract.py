"""The benchmark's floor (scripts/benchwebhooks/floor.py) writes webhookd's own tables with statements of its
own: run on the schema the migrations make (SQLite, and PostgreSQL when it is there), one cycle claims what
is due, and the next records it as webhookd would (the attempt kept, the delivery succeeded, its queue row
gone), so a migration that changes those tables breaks this test rather than the bench."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent.parent / "scripts"))

from benchwebhooks.floor import PostgresStore, SqliteStore
from benchwebhooks.worker import endpoint, preload

from svckit.db import asyncpg_dsn
from webhookd._sql import SqlRepository

Cycle = Callable[[list[tuple[Any, ...]], int], Awaitable[list[tuple[Any, ...]]]]
Query = Callable[[str, str], Awaitable[tuple[Any, ...]]]
HEADERS = json.dumps({"X-Service-Signature": "t=1,v1=x"})


async def _preloaded(url: str, n: int) -> str:
    repo = await SqlRepository.open(url)
    ep = endpoint(8443)
    await repo.create_endpoint(ep)
    await preload(repo, ep.id, [dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)] * n)
    await repo.close()
    return str(ep.id)


async def _claims_then_records(cycle: Cycle, one: Query, endpoint_id: str) -> None:
    """Three due: a cycle claims two, the next the third, then nothing (the others leased); a cycle with one
    result records it."""
    claimed = await cycle([], 2)
    assert len(claimed) == 2
    assert await cycle([], 5) and not await cycle([], 5)
    d_id, event_id, ep_id, account_id, env, attempts, body = claimed[0]
    assert ep_id == endpoint_id and attempts == 0 and json.loads(body)["id"] == event_id
    result = (d_id, "att_1", d_id, ep_id, event_id, account_id, env, 1, 200, "ok", HEADERS, 1.5, 1, "{}")
    assert await cycle([result], 0) == []
    assert await one("SELECT status, attempt_count FROM wh_deliveries WHERE id = {}", d_id) == (
        "succeeded",
        1,
    )
    assert await one("SELECT count(*) FROM wh_pending WHERE id = {}", d_id) == (0,)
    assert await one("SELECT count(*) FROM wh_pending WHERE id <> {}", d_id) == (2,)
    assert await one(
        "SELECT outcome, response_status, request_headers FROM wh_attempts WHERE id = {}", "att_1"
    ) == (
        "succeeded",
        200,
        HEADERS,
    )


def test_the_sqlite_floor_claims_what_is_due_and_records_it(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "floor.db"
    endpoint_id = asyncio.run(_preloaded(f"sqlite+aiosqlite:///{path}", 3))
    store = SqliteStore(str(path))

    async def cycle(results: list[tuple[Any, ...]], limit: int) -> list[tuple[Any, ...]]:
        return list(store.cycle(results, limit))

    async def one(sql: str, value: str) -> tuple[Any, ...]:
        return tuple(store.db.execute(sql.format("?"), (value,)).fetchone())

    try:
        asyncio.run(_claims_then_records(cycle, one, endpoint_id))
    finally:
        store.close()


def test_the_postgresql_floor_claims_what_is_due_and_records_it(pg_url: str) -> None:
    async def run() -> None:
        endpoint_id = await _preloaded(pg_url, 3)
        dsn, settings = asyncpg_dsn(pg_url)
        conn = await asyncpg.connect(dsn, server_settings=settings)
        try:

            async def one(sql: str, value: str) -> tuple[Any, ...]:
                return tuple(await conn.fetchrow(sql.format("$1"), value))

            await _claims_then_records(PostgresStore(conn).cycle, one, endpoint_id)
        finally:
            await conn.close()

    asyncio.run(run())
