"""Storage of portal identity: users, invites, sessions and failed sign-ins (Alembic revision 0002).

Tokens are stored as SHA-256 hashes only; TOTP seeds are sealed by the caller before they get here.
User operations write the same audit trail as key operations, in the same transaction.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from authsvc import _validate as v
from authsvc._errors import Conflict, NotFound
from authsvc._identity_rules import Throttle, sign_in_throttle
from authsvc._model import Actor, AuditEvent
from authsvc._sql import SqlRepository
from authsvc._sql_tables import from_row, metadata, required_time_of, time_of, users
from svckit.db import is_postgres
from svckit.vocabulary import UserRole

# In authsvc's one MetaData (authsvc/migrations/env.py imports this module). The users table is in
# _sql_tables with the accounts: the account storage reads it too (an account's alert recipients).
invites = sa.Table(
    "auth_portal_invites",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("account_id", sa.String(40), nullable=False),
    sa.Column("email", sa.String(v.MAX_EMAIL), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("accepted_at", sa.Float),
)

sessions = sa.Table(
    "auth_portal_sessions",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("user_id", sa.String(40), nullable=False, index=True),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_seen_at", sa.Float, nullable=False),
    sa.Column("source_address", sa.String(v.MAX_SOURCE), nullable=False),
    sa.Column("user_agent", sa.String(v.MAX_USER_AGENT), nullable=False),
)

failures = sa.Table(
    "auth_portal_signin_failures",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("email", sa.String(v.MAX_EMAIL), nullable=False),
    sa.Column("source_address", sa.String(v.MAX_SOURCE), nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Index("auth_portal_failures_email", "email", "at"),
    sa.Index("auth_portal_failures_address", "source_address", "at"),
)

# Classes of the two-key advisory locks that serialise sign-in attempt counting on PostgreSQL.
_LOCK_EMAIL = 0x5349_4E01
_LOCK_ADDRESS = 0x5349_4E02

settings = sa.Table(
    "auth_portal_settings",
    metadata,
    sa.Column("account_id", sa.String(40), primary_key=True),
    sa.Column("require_totp", sa.Boolean, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    id: str
    account_id: str
    email: str
    role: str
    password_hash: str
    totp_seed: str | None
    totp_pending_seed: str | None
    totp_last_step: int
    created_at: dt.datetime
    last_sign_in_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class Invite:
    id: str
    account_id: str
    email: str
    role: str
    created_at: dt.datetime
    expires_at: dt.datetime
    accepted_at: dt.datetime | None


@dataclasses.dataclass(frozen=True, slots=True)
class Session:
    id: str
    user_id: str
    created_at: dt.datetime
    last_seen_at: dt.datetime
    source_address: str
    user_agent: str


def _user(r: Mapping[Any, Any]) -> User:
    return User(
        id=r["id"],
        account_id=r["account_id"],
        email=r["email"],
        role=r["role"],
        password_hash=r["password_hash"],
        totp_seed=r["totp_seed"],
        totp_pending_seed=r["totp_pending_seed"],
        totp_last_step=int(r["totp_last_step"] or 0),
        created_at=required_time_of(r["created_at"]),
        last_sign_in_at=time_of(r["last_sign_in_at"]),
    )


def _invite(r: Mapping[Any, Any]) -> Invite:
    return from_row(Invite, r, created_at=required_time_of, expires_at=required_time_of, accepted_at=time_of)


def _session(r: Mapping[Any, Any]) -> Session:
    return from_row(Session, r, created_at=required_time_of, last_seen_at=required_time_of)


class IdentityRepository:
    """Identity storage next to the key repository (same engine, same audit trail)."""

    def __init__(self, keys: SqlRepository) -> None:
        self.keys = keys
        self.engine = keys.engine

    async def _audit(
        self,
        conn: AsyncConnection,
        account_id: str,
        action: str,
        actor: Actor,
        now: dt.datetime,
        before: dict[str, Any] | None = None,
        after: dict[str, Any] | None = None,
    ) -> str:
        """One record of the account's audit trail (no key); returns its id."""
        return await self.keys._audit(
            conn,
            account_id=account_id,
            key_id="",
            action=action,
            actor=actor,
            now=now,
            before=before or {},
            after=after or {},
        )

    async def record_event(
        self,
        account_id: str,
        action: str,
        actor: Actor,
        now: dt.datetime,
        before: dict[str, Any],
        after: dict[str, Any],
    ) -> AuditEvent:
        """An operation done in another service, written to the account's audit trail
        (RecordAuditEvent)."""
        async with self.engine.begin() as conn:
            event_id = await self._audit(conn, account_id, action, actor, now, before, after)
        return AuditEvent(event_id, account_id, "", action, actor, now, before, after)

    # -- users -----------------------------------------------------------------------------------

    async def user_by_email(self, email: str) -> User | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(users.select().where(users.c.email == email))).mappings().first()
            return _user(row) if row else None

    async def get_user(self, user_id: str) -> User:
        async with self.engine.connect() as conn:
            row = (await conn.execute(users.select().where(users.c.id == user_id))).mappings().first()
            if row is None:
                raise NotFound(f"user_id: no user {user_id!r}")
            return _user(row)

    async def list_users(self, account_id: str, limit: int, after: tuple[float, str] | None) -> list[User]:
        stmt = users.select().where(users.c.account_id == account_id)
        if after is not None:
            stmt = stmt.where(sa.tuple_(users.c.created_at, users.c.id) > sa.tuple_(*after))
        stmt = stmt.order_by(users.c.created_at, users.c.id).limit(limit)
        async with self.engine.connect() as conn:
            return [_user(r) for r in (await conn.execute(stmt)).mappings()]

    async def count_owners(self, conn: AsyncConnection, account_id: str) -> int:
        stmt = sa.select(sa.func.count()).where(
            users.c.account_id == account_id, users.c.role == UserRole.OWNER
        )
        return int((await conn.execute(stmt)).scalar_one())

    async def change_user(
        self,
        user_id: str,
        role: str | None,
        check: Callable[[User, int], None],
        actor: Actor,
        now: dt.datetime,
    ) -> User:
        """Give the user ``role``, or remove it (and end its sessions) when ``role`` is None.
        ``check(user, owners)`` raises when the change is not allowed; it runs in the same transaction."""
        async with self.engine.begin() as conn:
            stmt = users.select().where(users.c.id == user_id)
            if is_postgres(self.engine):
                stmt = stmt.with_for_update()
            row = (await conn.execute(stmt)).mappings().first()
            if row is None:
                raise NotFound(f"user_id: no user {user_id!r}")
            old = _user(row)
            check(old, await self.count_owners(conn, old.account_id))
            before = {"user_id": user_id, "email": old.email, "role": old.role}
            if role is None:
                await conn.execute(sessions.delete().where(sessions.c.user_id == user_id))
                await conn.execute(users.delete().where(users.c.id == user_id))
                await self._audit(conn, old.account_id, "user.removed", actor, now, before=before)
                return old
            await conn.execute(users.update().where(users.c.id == user_id).values(role=role))
            after = {**before, "role": role}
            await self._audit(
                conn, old.account_id, "user.role_changed", actor, now, before=before, after=after
            )
            return dataclasses.replace(old, role=role)

    async def update_user(self, user_id: str, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(users.update().where(users.c.id == user_id).values(**values))

    async def set_password(
        self,
        user: User,
        password_hash: str,
        new_session: Session,
        token_hash: str,
        actor: Actor,
        now: dt.datetime,
    ) -> None:
        """New password, every session ended, one new session for the caller: one transaction."""
        async with self.engine.begin() as conn:
            await conn.execute(
                users.update().where(users.c.id == user.id).values(password_hash=password_hash)
            )
            await conn.execute(sessions.delete().where(sessions.c.user_id == user.id))
            await self._insert_session(conn, new_session, token_hash)
            await self._audit(conn, user.account_id, "user.password_changed", actor, now,
                              after={"user_id": user.id, "email": user.email})  # fmt: skip

    async def disable_totp(self, user: User, actor: Actor, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                users.update().where(users.c.id == user.id).values(totp_seed=None, totp_pending_seed=None)
            )
            await self._audit(conn, user.account_id, "user.totp_disabled", actor, now,
                              before={"user_id": user.id, "email": user.email, "totp": "on"},
                              after={"user_id": user.id, "email": user.email, "totp": "off"})  # fmt: skip

    async def confirm_totp(self, user: User, step: int, actor: Actor, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                users.update()
                .where(users.c.id == user.id)
                .values(totp_seed=user.totp_pending_seed, totp_pending_seed=None, totp_last_step=step)
            )
            await self._audit(conn, user.account_id, "user.totp_enabled", actor, now,
                              after={"user_id": user.id, "email": user.email})  # fmt: skip

    async def use_totp_step(self, user_id: str, step: int) -> bool:
        """Records ``step`` as used; False when it (or a later one) was used already (replay)."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                users.update()
                .where(users.c.id == user_id, users.c.totp_last_step < step)
                .values(totp_last_step=step)
            )
            return result.rowcount == 1

    # -- invites ---------------------------------------------------------------------------------

    async def create_invite(self, invite: Invite, token_hash: str, actor: Actor) -> None:
        async with self.engine.begin() as conn:
            await self.keys._get_account(conn, invite.account_id)
            taken = (await conn.execute(sa.select(users.c.id).where(users.c.email == invite.email))).first()
            if taken is not None:
                raise Conflict("email: a portal user with this e-mail address exists already")
            await conn.execute(
                invites.insert().values(
                    id=invite.id,
                    account_id=invite.account_id,
                    email=invite.email,
                    role=invite.role,
                    token_hash=token_hash,
                    created_at=invite.created_at.timestamp(),
                    expires_at=invite.expires_at.timestamp(),
                )
            )
            after = {"invite_id": invite.id, "email": invite.email, "role": invite.role}
            await self._audit(conn, invite.account_id, "user.invited", actor, invite.created_at, after=after)

    async def invite_by_hash(self, token_hash: str) -> Invite | None:
        async with self.engine.connect() as conn:
            row = (
                (await conn.execute(invites.select().where(invites.c.token_hash == token_hash)))
                .mappings()
                .first()
            )
            return _invite(row) if row else None

    async def accept_invite(
        self, invite: Invite, user: User, session: Session, token_hash: str, now: dt.datetime
    ) -> None:
        async with self.engine.begin() as conn:
            done = await conn.execute(
                invites.update()
                .where(invites.c.id == invite.id, invites.c.accepted_at.is_(None))
                .values(accepted_at=now.timestamp())
            )
            if done.rowcount != 1:
                raise Conflict("token: this invitation was used already")
            taken = (await conn.execute(sa.select(users.c.id).where(users.c.email == user.email))).first()
            if taken is not None:
                raise Conflict("email: a portal user with this e-mail address exists already")
            await conn.execute(
                users.insert().values(
                    id=user.id,
                    account_id=user.account_id,
                    email=user.email,
                    role=user.role,
                    password_hash=user.password_hash,
                    created_at=user.created_at.timestamp(),
                    last_sign_in_at=now.timestamp(),
                )
            )
            await self._insert_session(conn, session, token_hash)
            actor = Actor(user.email, session.source_address, user.id)
            await self._audit(conn, user.account_id, "user.joined", actor, now,
                              after={"user_id": user.id, "email": user.email, "role": user.role})  # fmt: skip

    # -- sessions --------------------------------------------------------------------------------

    async def _insert_session(self, conn: AsyncConnection, s: Session, token_hash: str) -> None:
        await conn.execute(
            sessions.insert().values(
                id=s.id,
                user_id=s.user_id,
                token_hash=token_hash,
                created_at=s.created_at.timestamp(),
                last_seen_at=s.last_seen_at.timestamp(),
                source_address=s.source_address,
                user_agent=s.user_agent,
            )
        )

    async def sign_in(self, user: User, session: Session, token_hash: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await self._insert_session(conn, session, token_hash)
            await conn.execute(
                users.update().where(users.c.id == user.id).values(last_sign_in_at=now.timestamp())
            )

    async def session_by_hash(self, token_hash: str) -> Session | None:
        async with self.engine.connect() as conn:
            row = (
                (await conn.execute(sessions.select().where(sessions.c.token_hash == token_hash)))
                .mappings()
                .first()
            )
            return _session(row) if row else None

    async def touch_session(self, session_id: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                sessions.update().where(sessions.c.id == session_id).values(last_seen_at=now.timestamp())
            )

    async def delete_session(self, session_id: str, user_id: str = "") -> int:
        stmt = sessions.delete().where(sessions.c.id == session_id)
        if user_id:
            stmt = stmt.where(sessions.c.user_id == user_id)
        async with self.engine.begin() as conn:
            return int((await conn.execute(stmt)).rowcount or 0)

    async def list_sessions(self, user_id: str) -> list[Session]:
        stmt = sessions.select().where(sessions.c.user_id == user_id).order_by(sessions.c.created_at)
        async with self.engine.connect() as conn:
            return [_session(r) for r in (await conn.execute(stmt)).mappings()]

    # -- account settings ------------------------------------------------------------------------

    async def requires_totp(self, account_id: str) -> bool:
        async with self.engine.connect() as conn:
            stmt = sa.select(settings.c.require_totp).where(settings.c.account_id == account_id)
            return bool((await conn.execute(stmt)).scalar())

    async def set_requires_totp(
        self, account_id: str, required: bool, actor: Actor, now: dt.datetime
    ) -> None:
        async with self.engine.begin() as conn:
            before = (
                await conn.execute(
                    sa.select(settings.c.require_totp).where(settings.c.account_id == account_id)
                )
            ).scalar()
            if before is None:
                await conn.execute(
                    settings.insert().values(
                        account_id=account_id, require_totp=required, updated_at=now.timestamp()
                    )
                )
            else:
                await conn.execute(
                    settings.update()
                    .where(settings.c.account_id == account_id)
                    .values(require_totp=required, updated_at=now.timestamp())
                )
            await self._audit(
                conn,
                account_id,
                "account.totp_requirement_changed",
                actor,
                now,
                before={"require_totp": bool(before)},
                after={"require_totp": required},
            )

    # -- throttling ------------------------------------------------------------------------------

    async def reserve_attempt(
        self, email: str, address: str, now: dt.datetime, window: dt.timedelta
    ) -> tuple[Throttle, int | None]:
        """Count a sign-in attempt as a failure before its password is checked: the verdict on the
        failures (and attempts under way) in ``window``, and when allowed the id of the failure recorded
        for this attempt (``release_attempt`` refunds it on success). The check and the record are one
        step: on PostgreSQL under transaction-scoped advisory locks on the e-mail and on the address
        (every authsvc process of the database queues on them), on SQLite in one BEGIN IMMEDIATE
        transaction (one writer at a time). So concurrent attempts never all see the same count."""
        since = (now - window).timestamp()
        async with self.engine.begin() as conn:
            if is_postgres(self.engine):
                # Always the e-mail's lock first, then the address's: one order, no deadlock.
                for klass, key in ((_LOCK_EMAIL, email), (_LOCK_ADDRESS, address)):
                    await conn.execute(
                        sa.text("SELECT pg_advisory_xact_lock(:c, hashtext(:k))"), {"c": klass, "k": key}
                    )
            by_email = (
                await conn.execute(
                    sa.select(failures.c.at, failures.c.source_address).where(
                        failures.c.email == email, failures.c.at > since
                    )
                )
            ).all()
            by_address = (
                await conn.execute(
                    sa.select(failures.c.at).where(
                        failures.c.source_address == address, failures.c.at > since
                    )
                )
            ).all()
            verdict = sign_in_throttle(
                [required_time_of(at) for at, source in by_email if source == address],
                [required_time_of(r[0]) for r in by_address],
                [required_time_of(at) for at, _ in by_email],
                now,
            )
            if not verdict.allowed:
                return verdict, None
            done = await conn.execute(
                failures.insert().values(email=email, source_address=address, at=now.timestamp())
            )
            await conn.execute(failures.delete().where(failures.c.at < since))
            inserted = done.inserted_primary_key
            assert inserted is not None
            return verdict, int(inserted[0])

    async def release_attempt(self, seq: int) -> None:
        """Refund a reserved attempt that turned out not to be a failure (signed in, or the password was
        right and the second factor is still to come)."""
        async with self.engine.begin() as conn:
            await conn.execute(failures.delete().where(failures.c.seq == seq))
