"""authsvc's key-change listener survives any failure to reconnect, not only the database's refusals: asyncpg
raises InterfaceError (neither an OSError nor a PostgresError) for a connection unusable on its first use.
Before, that ended the listener's task for good, silently, and every later revocation made on another
authsvc process went unheard by this one's edges until their cache expired (the operators' drill: a revoked
key still accepted 15 s after a database outage)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from authsvc._watch import ChangeHub, PgListener
from svckit.db import asyncpg_dsn, normalize_url
from tests.conftest import PG_DB, PG_HOST, PG_PORT


async def test_listener_reconnects_after_any_connect_failure_and_syncs(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    channel = f"auth_key_changes_t{uuid.uuid4().hex[:12]}"
    dsn, settings = asyncpg_dsn(normalize_url(pg_url))
    hub = ChangeHub()
    listener = PgListener(dsn, settings, channel, "test-origin", hub)
    await listener.start()
    real_connect = asyncpg.connect
    failed: list[BaseException] = []

    async def connect_once_broken(*args: object, **kwargs: object) -> asyncpg.Connection:
        if not failed:
            failed.append(asyncpg.InterfaceError("cannot perform operation: connection is closed"))
            raise failed[0]
        return await real_connect(*args, **kwargs)

    monkeypatch.setattr(asyncpg, "connect", connect_once_broken)
    monkeypatch.setattr(asyncio, "sleep", _quick_sleep)  # the listener retries at once
    try:
        async with hub.subscribe() as changes:
            admin = await real_connect(host=PG_HOST, port=PG_PORT, user="postgres", database=PG_DB)
            try:
                killed = await admin.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE query LIKE $1 AND pid <> pg_backend_pid()",
                    f"LISTEN %{channel}%",
                )
            finally:
                await admin.close()
            assert killed == 1
            change = await asyncio.wait_for(changes.get(), 30)
            assert change is not None and change.kind == "sync"  # lost: every cache told to drop
            assert not hub.hearing
            change = await asyncio.wait_for(changes.get(), 30)
            assert change is not None and change.kind == "sync"  # back, and every cache told to drop
            assert hub.hearing
        assert failed and listener._task is not None and not listener._task.done()
    finally:
        await listener.stop()


_real_sleep = asyncio.sleep


async def _quick_sleep(seconds: float) -> None:
    await _real_sleep(min(seconds, 0.05))
