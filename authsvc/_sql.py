"""SQLAlchemy 2 async Core adapter of the repository, for SQLite and PostgreSQL.

Every mutating method is one transaction: the change, its audit record and (for revocation and the
search threshold) the outbox row commit together or not at all. Times are stored as unix seconds.
Schema changes are Alembic revisions in authsvc/migrations.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from authsvc._errors import Conflict, NotFound, SearchQuotaExhausted
from authsvc._keys import Environment
from authsvc._model import (
    Account,
    AccountStatus,
    Actor,
    ApiKey,
    AuditEvent,
    AuditFilter,
    KeyChange,
    OutboxEvent,
    Usage,
)
from authsvc.migrations import SCHEMA
from svckit.db import is_postgres
from svckit.ids import new_id
from svckit.migrations import upgrade
from svckit.quota import THRESHOLD_PERCENT, threshold_of

metadata = sa.MetaData()

accounts = sa.Table(
    "auth_accounts",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("mode", sa.String(8), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("admin_emails", sa.Text, nullable=False),
    sa.Column("daily_search_allowance", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

keys = sa.Table(
    "auth_keys",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), sa.ForeignKey("auth_accounts.id"), nullable=False),
    sa.Column("environment", sa.String(8), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("scopes", sa.Text, nullable=False),
    sa.Column("allowed_sources", sa.Text, nullable=False),
    sa.Column("hint", sa.String(40), nullable=False),
    sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float),
    sa.Column("revoked_at", sa.Float),
    sa.Column("revoke_reason", sa.String(500)),
    sa.Column("last_used_at", sa.Float),
    sa.Column("rotated_to_key_id", sa.String(40), nullable=False, server_default=""),
    sa.Column("rate_limit", sa.Integer, nullable=False, server_default="0"),
    sa.Column("rotated_from_key_id", sa.String(40), nullable=False, server_default=""),
    sa.Column("rotated_at", sa.Float),
    sa.Index("auth_keys_account", "account_id", "created_at", "id"),
)

audit = sa.Table(
    "auth_audit_events",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(40), nullable=False, unique=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("key_id", sa.String(40), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("actor_user", sa.String(200), nullable=False),
    sa.Column("actor_source", sa.String(100), nullable=False),
    # Revision 0002 (portal users); "" for operators and services.
    sa.Column("actor_user_id", sa.String(40), nullable=False, server_default=""),
    sa.Column("actor_service", sa.String(100), nullable=False, server_default=""),
    sa.Column("occurred_at", sa.Float, nullable=False),
    sa.Column("before", sa.Text, nullable=False),
    sa.Column("after", sa.Text, nullable=False),
    sa.Index("auth_audit_account", "account_id", "seq"),
)

travellers = sa.Table(
    "auth_travellers",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("environment", sa.String(8), nullable=False),
    sa.Column("partner_ref", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("account_id", "environment", "partner_ref", name="auth_travellers_ref"),
)

usage = sa.Table(
    "auth_search_usage",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("day", sa.String(10), primary_key=True),
    sa.Column("used", sa.BigInteger, nullable=False),
    sa.Column("threshold_sent", sa.Boolean, nullable=False),
)

outbox = sa.Table(
    "auth_outbox",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(40), nullable=False, unique=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("environment", sa.String(8), nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("state", sa.String(64), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("sent_at", sa.Float),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", sa.Float, nullable=False),
    sa.Column("last_error", sa.String(500), nullable=False, server_default=""),
    sa.Index("auth_outbox_pending", "sent_at", "next_attempt_at"),
)


def _ts(value: dt.datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _dt(value: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(value, dt.UTC) if value is not None else None


def _req_dt(value: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, dt.UTC)


def _account(row: Mapping[Any, Any]) -> Account:
    return Account(
        id=row["id"],
        name=row["name"],
        mode=row["mode"],
        status=row["status"],
        admin_emails=tuple(json.loads(row["admin_emails"])),
        daily_search_allowance=int(row["daily_search_allowance"]),
        created_at=_req_dt(row["created_at"]),
        updated_at=_req_dt(row["updated_at"]),
    )


def _key(row: Mapping[Any, Any]) -> ApiKey:
    return ApiKey(
        id=row["id"],
        account_id=row["account_id"],
        environment=row["environment"],
        name=row["name"],
        scopes=tuple(json.loads(row["scopes"])),
        allowed_sources=tuple(json.loads(row["allowed_sources"])),
        hint=row["hint"],
        secret_hash=row["secret_hash"],
        created_at=_req_dt(row["created_at"]),
        expires_at=_dt(row["expires_at"]),
        revoked_at=_dt(row["revoked_at"]),
        last_used_at=_dt(row["last_used_at"]),
        rotated_at=_dt(row["rotated_at"]),
        rotated_to_key_id=row["rotated_to_key_id"] or "",
        rotated_from_key_id=row["rotated_from_key_id"] or "",
        rate_limit=int(row["rate_limit"]),
    )


def _key_values(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "account_id": key.account_id,
        "environment": key.environment,
        "name": key.name,
        "scopes": json.dumps(list(key.scopes)),
        "allowed_sources": json.dumps(list(key.allowed_sources)),
        "hint": key.hint,
        "secret_hash": key.secret_hash,
        "created_at": _ts(key.created_at),
        "expires_at": _ts(key.expires_at),
        "revoked_at": _ts(key.revoked_at),
        "last_used_at": _ts(key.last_used_at),
        "rotated_at": _ts(key.rotated_at),
        "rotated_to_key_id": key.rotated_to_key_id,
        "rotated_from_key_id": key.rotated_from_key_id,
        "rate_limit": key.rate_limit,
    }


def _audit_event(row: Mapping[Any, Any]) -> AuditEvent:
    return AuditEvent(
        id=row["id"],
        account_id=row["account_id"],
        key_id=row["key_id"],
        action=row["action"],
        actor=Actor(
            row["actor_user"], row["actor_source"], row["actor_user_id"] or "", row["actor_service"] or ""
        ),
        occurred_at=_req_dt(row["occurred_at"]),
        before=json.loads(row["before"]),
        after=json.loads(row["after"]),
    )


class SqlRepository:
    """The repository on an AsyncEngine. With ``notify_channel`` (PostgreSQL) changes also NOTIFY."""

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
        return _key(row)

    async def _get_account(self, conn: AsyncConnection, account_id: str, *, lock: bool = False) -> Account:
        stmt = accounts.select().where(accounts.c.id == account_id)
        if lock and is_postgres(self.engine):
            stmt = stmt.with_for_update()
        row = (await conn.execute(stmt)).mappings().first()
        if row is None:
            raise NotFound(f"account_id: no account {account_id!r}")
        return _account(row)

    # -- accounts --------------------------------------------------------------------------------

    async def create_account(self, account: Account, actor: Actor) -> Account:
        async with self.engine.begin() as conn:
            await conn.execute(
                accounts.insert().values(
                    id=account.id,
                    name=account.name,
                    mode=account.mode,
                    status=account.status,
                    admin_emails=json.dumps(list(account.admin_emails)),
                    daily_search_allowance=account.daily_search_allowance,
                    created_at=account.created_at.timestamp(),
                    updated_at=account.updated_at.timestamp(),
                )
            )
            await self._audit(
                conn,
                account_id=account.id,
                key_id="",
                action="account.created",
                actor=actor,
                now=account.created_at,
                before={},
                after={
                    "name": account.name,
                    "mode": account.mode,
                    "status": account.status,
                    "daily_search_allowance": account.daily_search_allowance,
                },
            )
        return account

    async def get_account(self, account_id: str) -> Account:
        async with self.engine.connect() as conn:
            return await self._get_account(conn, account_id)

    async def set_account_status(
        self, account_id: str, status: AccountStatus, actor: Actor, now: dt.datetime
    ) -> tuple[Account, bool]:
        async with self.engine.begin() as conn:
            before = await self._get_account(conn, account_id, lock=True)
            if before.status == status:
                return before, False
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == account_id)
                .values(status=status, updated_at=now.timestamp())
            )
            await self._audit(
                conn,
                account_id=account_id,
                key_id="",
                action="account.status_changed",
                actor=actor,
                now=now,
                before={"status": before.status},
                after={"status": status},
            )
            await self._notify(conn, KeyChange("account_updated", "", account_id, now))
            return await self._get_account(conn, account_id), True

    async def update_account(
        self, account_id: str, changes: dict[str, Any], actor: Actor, now: dt.datetime
    ) -> Account:
        """Change ``name``, ``admin_emails`` or ``daily_search_allowance``; audited with the changed fields
        before and after. Fields given with their current value are no change; no change writes nothing."""
        async with self.engine.begin() as conn:
            before = await self._get_account(conn, account_id, lock=True)
            old = {
                "name": before.name,
                "admin_emails": list(before.admin_emails),
                "daily_search_allowance": before.daily_search_allowance,
            }
            new = {f: list(v) if f == "admin_emails" else v for f, v in changes.items()}
            changed = sorted(f for f, v in new.items() if old[f] != v)
            if not changed:
                return before
            values: dict[str, Any] = {f: new[f] for f in changed}
            if "admin_emails" in values:
                values["admin_emails"] = json.dumps(values["admin_emails"])
            await conn.execute(
                accounts.update()
                .where(accounts.c.id == account_id)
                .values(**values, updated_at=now.timestamp())
            )
            await self._audit(
                conn,
                account_id=account_id,
                key_id="",
                action="account.updated",
                actor=actor,
                now=now,
                before={f: old[f] for f in changed},
                after={f: new[f] for f in changed},
            )
            await self._notify(conn, KeyChange("account_updated", "", account_id, now))
            return await self._get_account(conn, account_id)

    # -- keys ------------------------------------------------------------------------------------

    async def create_key(self, key: ApiKey, actor: Actor) -> ApiKey:
        async with self.engine.begin() as conn:
            await self._get_account(conn, key.account_id)
            await conn.execute(keys.insert().values(**_key_values(key)))
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
            key = _key(row)
            account = await self._get_account(conn, key.account_id)
        return key, account

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
            return [_key(r) for r in (await conn.execute(stmt)).mappings()]

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
            await conn.execute(keys.insert().values(**_key_values(new)))
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
                    state="revoked",
                    data={
                        "key_id": key_id,
                        "hint": before.hint,
                        "name": before.name,
                        "revoked_at": now.isoformat(),
                        "revoked_by": actor.user,
                        "reason": reason,
                    },
                    created_at=now,
                ),
            )
            await self._notify(conn, KeyChange("revoked", key_id, before.account_id, now))
            return after, True

    async def flush_last_used(self, used: Mapping[str, dt.datetime]) -> None:
        if not used:
            return
        async with self.engine.begin() as conn:
            for key_id, when in sorted(used.items()):
                t = when.timestamp()
                await conn.execute(
                    keys.update()
                    .where(keys.c.id == key_id)
                    .where(sa.or_(keys.c.last_used_at.is_(None), keys.c.last_used_at < t))
                    .values(last_used_at=t)
                )

    # -- audit -----------------------------------------------------------------------------------

    async def list_audit(
        self, account_id: str, key_id: str, limit: int, after_seq: int, filters: AuditFilter | None = None
    ) -> list[tuple[int, AuditEvent]]:
        async with self.engine.connect() as conn:
            await self._get_account(conn, account_id)
            stmt = audit.select().where(audit.c.account_id == account_id, audit.c.seq > after_seq)
            if key_id:
                stmt = stmt.where(audit.c.key_id == key_id)
            f = filters or AuditFilter()
            if f.actor_user_id:
                stmt = stmt.where(audit.c.actor_user_id == f.actor_user_id)
            if f.action:
                stmt = stmt.where(audit.c.action == f.action)
            if f.since is not None:
                stmt = stmt.where(audit.c.occurred_at >= f.since.timestamp())
            if f.until is not None:
                stmt = stmt.where(audit.c.occurred_at < f.until.timestamp())
            stmt = stmt.order_by(audit.c.seq).limit(limit)
            return [(int(r["seq"]), _audit_event(r)) for r in (await conn.execute(stmt)).mappings()]

    async def count_audit(self) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(sa.select(sa.func.count()).select_from(audit))).scalar_one())

    # -- travellers ------------------------------------------------------------------------------

    def _insert(self, table: sa.Table) -> Any:
        return (postgresql.insert if is_postgres(self.engine) else sqlite.insert)(table)

    async def resolve_traveller(
        self, account_id: str, environment: Environment, ref: str, now: dt.datetime
    ) -> tuple[str, bool]:
        async with self.engine.begin() as conn:
            await self._get_account(conn, account_id)
            new = new_id("trv")
            result = await conn.execute(
                self._insert(travellers)
                .values(
                    id=new,
                    account_id=account_id,
                    environment=environment,
                    partner_ref=ref,
                    created_at=now.timestamp(),
                )
                .on_conflict_do_nothing(index_elements=["account_id", "environment", "partner_ref"])
            )
            if result.rowcount == 1:
                return new, True
            row = (
                await conn.execute(
                    sa.select(travellers.c.id).where(
                        travellers.c.account_id == account_id,
                        travellers.c.environment == environment,
                        travellers.c.partner_ref == ref,
                    )
                )
            ).first()
            assert row is not None
            return str(row[0]), False

    async def delete_traveller(self, account_id: str, environment: Environment, ref: str) -> str:
        async with self.engine.begin() as conn:
            cond = (
                travellers.c.account_id == account_id,
                travellers.c.environment == environment,
                travellers.c.partner_ref == ref,
            )
            row = (await conn.execute(sa.select(travellers.c.id).where(*cond))).first()
            if row is None:
                raise NotFound("partner_ref: no traveller with this reference")
            await conn.execute(travellers.delete().where(*cond))
            return str(row[0])

    # -- search allowance ------------------------------------------------------------------------

    async def consume_search(
        self, account_id: str, environment: Environment, day: str, count: int, now: dt.datetime
    ) -> Usage:
        """Count ``count`` searches atomically: a conditional UPDATE never overshoots the allowance."""
        async with self.engine.begin() as conn:
            account = await self._get_account(conn, account_id)
            allowance = account.daily_search_allowance
            await conn.execute(
                self._insert(usage)
                .values(account_id=account_id, day=day, used=0, threshold_sent=False)
                .on_conflict_do_nothing(index_elements=["account_id", "day"])
            )
            row = (
                await conn.execute(
                    usage.update()
                    .where(
                        usage.c.account_id == account_id,
                        usage.c.day == day,
                        usage.c.used + count <= allowance,
                    )
                    .values(used=usage.c.used + count)
                    .returning(usage.c.used, usage.c.threshold_sent)
                )
            ).first()
            if row is None:
                used = (
                    await conn.execute(
                        sa.select(usage.c.used).where(usage.c.account_id == account_id, usage.c.day == day)
                    )
                ).scalar_one()
                raise SearchQuotaExhausted(
                    f"The daily search allowance of {allowance} is used up ({used} used on {day} UTC); "
                    f"it resets at 00:00 UTC."
                )
            used = int(row[0])
            if used >= threshold_of(allowance) and not row[1]:
                flipped = await conn.execute(
                    usage.update()
                    .where(
                        usage.c.account_id == account_id,
                        usage.c.day == day,
                        usage.c.threshold_sent.is_(False),
                    )
                    .values(threshold_sent=True)
                )
                if flipped.rowcount == 1:
                    await self._outbox(
                        conn,
                        OutboxEvent(
                            id=new_id("obx"),
                            account_id=account_id,
                            environment=environment,
                            type="search_quota.threshold",
                            state="threshold_reached",
                            data={
                                "date": day,
                                "searches_used": used,
                                "daily_search_allowance": allowance,
                                "remaining": max(0, allowance - used),
                                "threshold_percent": THRESHOLD_PERCENT,
                            },
                            created_at=now,
                        ),
                    )
            return Usage(day, used, allowance)

    async def get_usage(self, account_id: str, day: str) -> Usage:
        async with self.engine.connect() as conn:
            account = await self._get_account(conn, account_id)
            used = (
                await conn.execute(
                    sa.select(usage.c.used).where(usage.c.account_id == account_id, usage.c.day == day)
                )
            ).scalar()
            return Usage(day, int(used or 0), account.daily_search_allowance)

    # -- outbox ----------------------------------------------------------------------------------

    async def claim_outbox(self, now: dt.datetime, lease: float, limit: int = 50) -> list[OutboxEvent]:
        """Pending rows due now, each claimed for ``lease`` seconds so other processes skip them."""
        t = now.timestamp()
        async with self.engine.begin() as conn:
            rows = (
                (
                    await conn.execute(
                        outbox.select()
                        .where(outbox.c.sent_at.is_(None), outbox.c.next_attempt_at <= t)
                        .order_by(outbox.c.seq)
                        .limit(limit)
                    )
                )
                .mappings()
                .all()
            )
            claimed: list[OutboxEvent] = []
            for r in rows:
                res = await conn.execute(
                    outbox.update()
                    .where(outbox.c.id == r["id"], outbox.c.sent_at.is_(None), outbox.c.next_attempt_at <= t)
                    .values(next_attempt_at=t + lease)
                )
                if res.rowcount == 1:
                    claimed.append(
                        OutboxEvent(
                            id=r["id"],
                            account_id=r["account_id"],
                            environment=r["environment"],
                            type=r["type"],
                            state=r["state"],
                            data=json.loads(r["data"]),
                            created_at=_req_dt(r["created_at"]),
                            attempts=int(r["attempts"]),
                        )
                    )
            return claimed

    async def mark_sent(self, event_id: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                outbox.update()
                .where(outbox.c.id == event_id)
                .values(sent_at=now.timestamp(), attempts=outbox.c.attempts + 1, last_error="")
            )

    async def mark_failed(self, event_id: str, error: str, retry_at: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                outbox.update()
                .where(outbox.c.id == event_id, outbox.c.sent_at.is_(None))
                .values(
                    next_attempt_at=retry_at.timestamp(),
                    attempts=outbox.c.attempts + 1,
                    last_error=error[:500],
                )
            )

    async def purge_outbox(self, sent_before: dt.datetime) -> int:
        """Delete rows sent before ``sent_before``; pending rows are never deleted."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                outbox.delete().where(
                    outbox.c.sent_at.is_not(None), outbox.c.sent_at < sent_before.timestamp()
                )
            )
            return int(result.rowcount or 0)

    async def outbox_rows(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(outbox.select().order_by(outbox.c.seq))).mappings().all()
            return [dict(r) for r in rows]
