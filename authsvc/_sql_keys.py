"""Storage of API keys: creation, look-up by secret hash, listing, updates, rotation, revocation (with
its apikey.revoked outbox row) and the batched last-used times."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa

from authsvc._certify_gate import creation_refusal
from authsvc._errors import CertificationRequired, Conflict
from authsvc._model import Account, Actor, ApiKey, KeyChange, OutboxEvent
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import accounts, key_of, key_row, keys
from svckit.catalog import STATES, apikey_revoked
from svckit.vocabulary import Environment

# A key's last use, unless a later one is stored (a flush and another process's may cross).
_FLUSH_LAST_USED = (
    keys.update()
    .where(keys.c.id == sa.bindparam("used_key"))
    .where(sa.or_(keys.c.last_used_at.is_(None), keys.c.last_used_at < sa.bindparam("used_at")))
    .values(last_used_at=sa.bindparam("used_at"))
)


class KeyStorage(SqlBase):
    async def create_key(self, key: ApiKey, actor: Actor) -> ApiKey:
        async with self.engine.begin() as conn:
            account = await self._get_account(conn, key.account_id)
            refusal = creation_refusal(account, key.environment)
            if refusal:
                raise CertificationRequired(refusal)
            await conn.execute(keys.insert().values(**key_row(key)))
            await self._audit(
                conn,
                account_id=key.account_id,
                key_id=key.id,
                action="key.created",
                actor=actor,
                now=key.created_at,
                before={},
                after={**key.public_fields(), "environment": key.environment, "hint": key.hint},
            )
        return key

    async def get_key(self, key_id: str) -> ApiKey:
        async with self.engine.connect() as conn:
            return await self._get_key(conn, key_id)

    async def grant_by_hash(self, secret_hash: str) -> tuple[ApiKey, Account] | None:
        stmt = (
            sa.select(keys, accounts.c.id.label("a_id"))
            .select_from(keys.join(accounts, keys.c.account_id == accounts.c.id))
            .where(keys.c.secret_hash == secret_hash)
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(stmt)).mappings().first()
            if row is None:
                return None
            key = key_of(row)
            account = await self._get_account(conn, key.account_id)
        return key, account

    async def key_hashes(self, limit: int) -> list[str]:
        """The secret hashes of (at most ``limit``) stored keys, whatever their state."""
        async with self.engine.connect() as conn:
            rows = await conn.execute(sa.select(keys.c.secret_hash).limit(limit))
            return [str(h) for (h,) in rows]

    async def list_keys(
        self,
        account_id: str,
        environment: Environment | None,
        include_revoked: bool,
        limit: int,
        after: tuple[float, str] | None,
    ) -> list[ApiKey]:
        async with self.engine.connect() as conn:
            await self._get_account(conn, account_id)
            stmt = keys.select().where(keys.c.account_id == account_id)
            if environment is not None:
                stmt = stmt.where(keys.c.environment == environment)
            if not include_revoked:
                stmt = stmt.where(keys.c.revoked_at.is_(None))
            if after is not None:
                stmt = stmt.where(sa.tuple_(keys.c.created_at, keys.c.id) > sa.tuple_(*after))
            stmt = stmt.order_by(keys.c.created_at, keys.c.id).limit(limit)
            return [key_of(r) for r in (await conn.execute(stmt)).mappings()]

    async def update_key(
        self, key_id: str, changes: dict[str, Any], actor: Actor, now: dt.datetime
    ) -> ApiKey:
        async with self.engine.begin() as conn:
            before = await self._get_key(conn, key_id, lock=True)
            if before.revoked_at is not None:
                raise Conflict(f"key_id: key {key_id!r} is revoked and cannot be changed")
            values = {k: json.dumps(list(v)) if isinstance(v, tuple) else v for k, v in changes.items()}
            await conn.execute(keys.update().where(keys.c.id == key_id).values(**values))
            after = await self._get_key(conn, key_id)
            b, a = before.public_fields(), after.public_fields()
            changed = [f for f in changes if b[f] != a[f]]
            await self._audit(
                conn,
                account_id=before.account_id,
                key_id=key_id,
                action="key.updated",
                actor=actor,
                now=now,
                before={f: b[f] for f in changed},
                after={f: a[f] for f in changed},
            )
            await self._notify(conn, KeyChange("updated", key_id, before.account_id, now))
            return after

    async def rotate_key(
        self,
        key_id: str,
        new_key_factory: Callable[[ApiKey], ApiKey],
        expires_at: dt.datetime,
        actor: Actor,
        now: dt.datetime,
    ) -> tuple[ApiKey, ApiKey]:
        """``new_key_factory(old) -> ApiKey`` builds the successor; returns (new, old)."""
        async with self.engine.begin() as conn:
            old = await self._get_key(conn, key_id, lock=True)
            if old.revoked_at is not None:
                raise Conflict(f"key_id: key {key_id!r} is revoked and cannot be rotated")
            if old.rotated_to_key_id:
                raise Conflict(
                    f"key_id: key {key_id!r} was already rotated to {old.rotated_to_key_id!r}; "
                    "rotate that key"
                )
            if old.expires_at is not None and old.expires_at <= now:
                raise Conflict(f"key_id: key {key_id!r} has expired and cannot be rotated")
            new = new_key_factory(old)
            await conn.execute(keys.insert().values(**key_row(new)))
            await conn.execute(
                keys.update()
                .where(keys.c.id == key_id)
                .values(
                    expires_at=expires_at.timestamp(), rotated_to_key_id=new.id, rotated_at=now.timestamp()
                )
            )
            old_after = await self._get_key(conn, key_id)
            await self._audit(
                conn,
                account_id=old.account_id,
                key_id=key_id,
                action="key.rotated",
                actor=actor,
                now=now,
                before={"expires_at": None, "rotated_to_key_id": ""},
                after={"expires_at": expires_at.isoformat(), "rotated_to_key_id": new.id},
            )
            await self._audit(
                conn,
                account_id=new.account_id,
                key_id=new.id,
                action="key.created",
                actor=actor,
                now=now,
                before={},
                after={
                    **new.public_fields(),
                    "environment": new.environment,
                    "hint": new.hint,
                    "rotated_from_key_id": key_id,
                },
            )
            await self._notify(conn, KeyChange("rotated", key_id, old.account_id, now))
            return new, old_after

    async def revoke_key(
        self, key_id: str, reason: str, actor: Actor, now: dt.datetime, event_id: str
    ) -> tuple[ApiKey, bool]:
        """Revoke, audit and queue apikey.revoked in one transaction. Revoking twice changes nothing."""
        async with self.engine.begin() as conn:
            before = await self._get_key(conn, key_id, lock=True)
            if before.revoked_at is not None:
                return before, False
            result = await conn.execute(
                keys.update()
                .where(keys.c.id == key_id, keys.c.revoked_at.is_(None))
                .values(revoked_at=now.timestamp(), revoke_reason=reason)
            )
            if result.rowcount != 1:
                return await self._get_key(conn, key_id), False
            after = await self._get_key(conn, key_id)
            await self._audit(
                conn,
                account_id=before.account_id,
                key_id=key_id,
                action="key.revoked",
                actor=actor,
                now=now,
                before={"revoked_at": None},
                after={"revoked_at": now.isoformat(), "reason": reason},
            )
            await self._outbox(
                conn,
                OutboxEvent(
                    id=event_id,
                    account_id=before.account_id,
                    environment=before.environment,
                    type="apikey.revoked",
                    state=STATES["apikey.revoked"],
                    data=apikey_revoked(key_id, before.hint, before.name, now, actor.user, reason),
                    created_at=now,
                ),
            )
            await self._notify(conn, KeyChange("revoked", key_id, before.account_id, now))
            return after, True

    async def flush_last_used(self, used: Mapping[str, dt.datetime]) -> None:
        """Each key's last use, unless a later one is stored: one executemany of a statement compiled once,
        so a flush of many keys is one round trip (and a short write lock on SQLite), not one per key."""
        if not used:
            return
        rows = [{"used_key": key_id, "used_at": when.timestamp()} for key_id, when in sorted(used.items())]
        async with self.engine.begin() as conn:
            await conn.execute(_FLUSH_LAST_USED, rows)
