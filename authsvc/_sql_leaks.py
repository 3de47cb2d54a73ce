"""Storage of leak reports: the keys named by secret hashes revoked at once, in one transaction per batch
(each with its audit record, apikey.revoked and apikey.leaked outbox rows and its NOTIFY)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from authsvc._leak_rules import Leak, LeakAction, LeakOutcome, leak_action, leak_reason
from authsvc._model import Actor, ApiKey, KeyChange, OutboxEvent
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import key_of, keys
from svckit.catalog import STATES, apikey_leaked, apikey_revoked


class LeakStorage(SqlBase):
    async def revoke_leaked(
        self,
        leaks: Sequence[Leak],
        reporter: str,
        actor: Actor,
        now: dt.datetime,
        new_event_id: Callable[[], str],
    ) -> list[LeakOutcome]:
        """The reported secrets that are keys of ours, in report order; those still working revoked."""
        hashes = sorted({leak.token_hash for leak in leaks})
        if not hashes:
            return []
        out: list[LeakOutcome] = []
        async with self.engine.begin() as conn:
            stmt = keys.select().where(keys.c.secret_hash.in_(hashes))
            found = {str(r["secret_hash"]): key_of(r) for r in (await conn.execute(stmt)).mappings()}
            done: set[str] = set()
            for leak in leaks:
                key = found.get(leak.token_hash)
                if key is None or leak.token_hash in done:
                    continue
                done.add(leak.token_hash)
                revoked = False
                if leak_action(key, now) is LeakAction.REVOKE:
                    revoked = await self._revoke_one(conn, key, leak, reporter, actor, now, new_event_id)
                out.append(LeakOutcome(leak.token_hash, key, revoked))
        return out

    async def _revoke_one(
        self,
        conn: AsyncConnection,
        key: ApiKey,
        leak: Leak,
        reporter: str,
        actor: Actor,
        now: dt.datetime,
        new_event_id: Callable[[], str],
    ) -> bool:
        reason = leak_reason(leak.url, leak.source, reporter)
        result = await conn.execute(
            keys.update()
            .where(keys.c.id == key.id, keys.c.revoked_at.is_(None))
            .values(revoked_at=now.timestamp(), revoke_reason=reason)
        )
        if result.rowcount != 1:
            return False  # revoked meanwhile by another call: that one audited it
        await self._audit(
            conn,
            account_id=key.account_id,
            key_id=key.id,
            action="key.revoked",
            actor=actor,
            now=now,
            before={"revoked_at": None},
            after={
                "revoked_at": now.isoformat(),
                "reason": reason,
                "leak": {"url": leak.url, "source": leak.source, "reporter": reporter},
            },
        )
        for kind, data in (
            ("apikey.revoked", apikey_revoked(key.id, key.hint, key.name, now, actor.user, reason)),
            (
                "apikey.leaked",
                apikey_leaked(key.id, key.hint, key.name, leak.url, leak.source, reporter, now),
            ),
        ):
            await self._outbox(
                conn,
                OutboxEvent(
                    id=new_event_id(),
                    account_id=key.account_id,
                    environment=key.environment,
                    type=kind,
                    state=STATES[kind],
                    data=data,
                    created_at=now,
                ),
            )
        await self._notify(conn, KeyChange("revoked", key.id, key.account_id, now))
        return True
