"""Storage guarantees of the SQL repository on SQLite and PostgreSQL: atomic change + audit + outbox,
migrations, and the PostgreSQL listener's recovery."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa

from authsvc._model import Account, Actor, ApiKey, KeyChange
from authsvc._sql import SqlRepository
from authsvc.migrations import SCHEMA
from authsvc.testing import running_authsvc
from svckit.db import asyncpg_dsn, create_engine
from svckit.migrations import head
from svckit.vocabulary import AccountMode, AccountStatus, Environment
from travel.auth.v1 import auth_pb2 as pb

NOW = dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC)
ACTOR = Actor("alice@partner.example", "192.0.2.1")


async def seeded(db_url: str) -> tuple[SqlRepository, ApiKey]:
    repo = SqlRepository(create_engine(db_url))
    assert await repo.migrate() == head(SCHEMA)
    assert await repo.migrate() == head(SCHEMA)  # idempotent
    await repo.create_account(
        Account("acct_1", "P", AccountMode.A, AccountStatus.ACTIVE, (), 100, NOW, NOW), ACTOR
    )
    key = ApiKey(
        "key_1", "acct_1", Environment.LIVE, "k", ("hotels:read",), (), "svc_live_...abcd", "f" * 64, NOW
    )
    await repo.create_key(key, ACTOR)
    return repo, key


async def test_a_new_account_row_keeps_the_mode_spelling_older_releases_read(db_url: str) -> None:
    """During a rolling upgrade the previous release reads rows this one writes: its AccountMode knows
    only "a" and "b", so the stored spelling stays lower-case whatever the API spells."""
    repo, _ = await seeded(db_url)
    try:
        async with repo.engine.connect() as conn:
            stored = (
                await conn.execute(sa.text("SELECT mode FROM auth_accounts WHERE id = 'acct_1'"))
            ).scalar()
        assert stored == "a"
        assert (await repo.get_account("acct_1")).mode is AccountMode.A
    finally:
        await repo.engine.dispose()


async def test_revoke_commits_change_audit_and_outbox_together(db_url: str, monkeypatch: Any) -> None:
    repo, key = await seeded(db_url)
    try:
        audit_before = await repo.count_audit()

        async def boom(self: SqlRepository, conn: Any, change: KeyChange) -> None:
            raise RuntimeError("crash inside the transaction, after the outbox insert")

        monkeypatch.setattr(SqlRepository, "_notify", boom)
        with pytest.raises(RuntimeError):
            await repo.revoke_key(key.id, "r", ACTOR, NOW, "obx_1")
        assert (await repo.get_key(key.id)).revoked_at is None
        assert await repo.outbox_rows() == []
        assert await repo.count_audit() == audit_before

        monkeypatch.undo()
        revoked, changed = await repo.revoke_key(key.id, "r", ACTOR, NOW, "obx_2")
        assert changed and revoked.revoked_at == NOW
        assert [r["id"] for r in await repo.outbox_rows()] == ["obx_2"]
        assert await repo.count_audit() == audit_before + 1
    finally:
        await repo.engine.dispose()


async def test_search_threshold_event_is_atomic_with_the_count(db_url: str, monkeypatch: Any) -> None:
    repo, _ = await seeded(db_url)
    try:
        await repo.consume_search("acct_1", Environment.LIVE, "2026-05-01", 79, NOW)

        async def boom(self: SqlRepository, conn: Any, event: Any) -> None:
            raise RuntimeError("outbox insert fails")

        monkeypatch.setattr(SqlRepository, "_outbox", boom)
        with pytest.raises(RuntimeError):
            await repo.consume_search("acct_1", Environment.LIVE, "2026-05-01", 1, NOW)
        assert (await repo.get_usage("acct_1", "2026-05-01")).searches_used == 79
        monkeypatch.undo()
        usage = await repo.consume_search("acct_1", Environment.LIVE, "2026-05-01", 1, NOW)
        assert usage.searches_used == 80
        assert [r["type"] for r in await repo.outbox_rows()] == ["search_quota.threshold"]
        await repo.consume_search("acct_1", Environment.LIVE, "2026-05-01", 5, NOW)
        # A new UTC day fires again.
        await repo.consume_search("acct_1", Environment.LIVE, "2026-05-02", 90, NOW)
        assert [r["type"] for r in await repo.outbox_rows()] == ["search_quota.threshold"] * 2
    finally:
        await repo.engine.dispose()


async def test_outbox_claim_lease_keeps_a_second_relay_off(db_url: str) -> None:
    repo, key = await seeded(db_url)
    try:
        await repo.revoke_key(key.id, "", ACTOR, NOW, "obx_1")
        first = await repo.claim_outbox(NOW, lease=15)
        assert [e.id for e in first] == ["obx_1"]
        assert await repo.claim_outbox(NOW + dt.timedelta(seconds=1), lease=15) == []
        again = await repo.claim_outbox(NOW + dt.timedelta(seconds=16), lease=15)
        assert [e.id for e in again] == ["obx_1"]
        await repo.mark_sent("obx_1", NOW)
        assert await repo.claim_outbox(NOW + dt.timedelta(days=1), lease=15) == []
        await repo.create_key(dataclasses.replace(key, id="key_2", secret_hash="e" * 64), ACTOR)
        await repo.revoke_key("key_2", "", ACTOR, NOW, "obx_2")  # stays pending
        assert await repo.purge_outbox(NOW) == 0
        assert await repo.purge_outbox(NOW + dt.timedelta(seconds=1)) == 1
        assert [r["id"] for r in await repo.outbox_rows()] == ["obx_2"]
    finally:
        await repo.engine.dispose()


async def test_lost_listener_connection_is_answered_with_sync(pg_url: str) -> None:
    async with running_authsvc(pg_url) as (server, stub):
        watch = stub.WatchKeyChanges(pb.WatchKeyChangesRequest())
        try:
            assert (await asyncio.wait_for(watch.read(), 5)).kind == pb.KEY_CHANGE_KIND_SYNC
            assert server.listener is not None
            dsn, _ = asyncpg_dsn(pg_url)
            conn = await asyncpg.connect(dsn)
            try:
                killed = await conn.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = $1",
                    f'LISTEN "{server.listener.channel}"',
                )
            finally:
                await conn.close()
            assert killed == 1
            change = await asyncio.wait_for(watch.read(), 10)
            assert change.kind == pb.KEY_CHANGE_KIND_SYNC
        finally:
            watch.cancel()
