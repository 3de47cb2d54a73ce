"""What every part of the SQL repository shares: the engine, NOTIFY of changes, the audit and outbox
writes made inside a caller's transaction, and locked look-ups of a key or an account.

Every mutating method of the repository is one transaction: the change, its audit record and (for
revocation and the search threshold) the outbox row commit together or not at all.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authsvc._errors import NotFound
from authsvc._model import Account, Actor, ApiKey, KeyChange, OutboxEvent
from authsvc._sql_tables import account_of, accounts, audit, key_of, keys, outbox
from authsvc.migrations import SCHEMA
from svckit.db import is_postgres
from svckit.ids import new_id
from svckit.migrations import upgrade


class SqlBase:
    """The repository's engine and shared writes. With ``notify_channel`` (PostgreSQL) changes also NOTIFY."""

    def __init__(self, engine: AsyncEngine, notify_channel: str | None = None, origin: str = "") -> None:
        self.engine = engine
        self.notify_channel = notify_channel
        self.origin = origin

    async def migrate(self) -> str:
        """Upgrade the schema to the newest revision (authsvc/migrations). Returns the revision."""
        return await upgrade(self.engine, SCHEMA)

    # -- helpers ---------------------------------------------------------------------------------

    async def _notify(self, conn: AsyncConnection, change: KeyChange) -> None:
        """On PostgreSQL the change is announced in the same transaction (delivered on commit)."""
        if self.notify_channel is None:
            return
        payload = json.dumps(
            {
                "kind": change.kind,
                "key_id": change.key_id,
                "account_id": change.account_id,
                "at": change.changed_at.timestamp(),
                "origin": self.origin,
            }
        )
        await conn.execute(sa.text("SELECT pg_notify(:c, :p)"), {"c": self.notify_channel, "p": payload})

    async def _audit(
        self,
        conn: AsyncConnection,
        *,
        account_id: str,
        key_id: str,
        action: str,
        actor: Actor,
        now: dt.datetime,
        before: dict[str, Any],
        after: dict[str, Any],
    ) -> str:
        """Writes one audit record; returns its id."""
        event_id = new_id("aud")
        await conn.execute(
            audit.insert().values(
                id=event_id,
                account_id=account_id,
                key_id=key_id,
                action=action,
                actor_user=actor.user,
                actor_source=actor.source_address,
                actor_user_id=actor.user_id,
                actor_service=actor.service,
                occurred_at=now.timestamp(),
                before=json.dumps(before, sort_keys=True),
                after=json.dumps(after, sort_keys=True),
            )
        )
        return event_id

    async def _outbox(self, conn: AsyncConnection, event: OutboxEvent) -> None:
        await conn.execute(
            outbox.insert().values(
                id=event.id,
                account_id=event.account_id,
                environment=event.environment,
                type=event.type,
                state=event.state,
                data=json.dumps(event.data, sort_keys=True),
                created_at=event.created_at.timestamp(),
                next_attempt_at=event.created_at.timestamp(),
            )
        )

    async def _get_key(self, conn: AsyncConnection, key_id: str, *, lock: bool = False) -> ApiKey:
        stmt = keys.select().where(keys.c.id == key_id)
        if lock and is_postgres(self.engine):
            stmt = stmt.with_for_update()
        row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise NotFound(f"key_id: no key {key_id!r}")
        return key_of(row)

    async def _get_account(self, conn: AsyncConnection, account_id: str, *, lock: bool = False) -> Account:
        stmt = accounts.select().where(accounts.c.id == account_id)
        if lock and is_postgres(self.engine):
            stmt = stmt.with_for_update()
        row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise NotFound(f"account_id: no account {account_id!r}")
        return account_of(row)

    def _insert(self, table: sa.Table) -> Any:
        """An INSERT of the engine's dialect (for ON CONFLICT)."""
        return (postgresql.insert if is_postgres(self.engine) else sqlite.insert)(table)
