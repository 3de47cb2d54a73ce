"""Storage of leak reports: the keys named by secret hashes revoked at once, in one transaction per batch
-- each with its audit record, apikey.revoked and apikey.leaked outbox rows and its NOTIFY -- written with
one statement per table (executemany), so a batch of a thousand keys is a handful of round trips."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from authsvc._leak_rules import Leak, LeakAction, LeakOutcome, leak_action, leak_reason
from authsvc._model import Actor, ApiKey, KeyChange
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import audit, key_of, keys, outbox
from svckit.catalog import STATES, apikey_leaked, apikey_revoked
from svckit.db import is_postgres
from svckit.ids import new_id

_REVOKE = (
    keys.update()
    .where(keys.c.id == sa.bindparam("kid"), keys.c.revoked_at.is_(None))
    .values(revoked_at=sa.bindparam("at"), revoke_reason=sa.bindparam("reason"))
)


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
            if is_postgres(self.engine):
                stmt = stmt.with_for_update()  # a concurrent revocation waits, then finds it revoked
            found = {str(r["secret_hash"]): key_of(r) for r in (await conn.execute(stmt)).mappings()}
            done: set[str] = set()
            revoke: list[tuple[ApiKey, Leak]] = []
            for leak in leaks:
                key = found.get(leak.token_hash)
                if key is None or leak.token_hash in done:
                    continue
                done.add(leak.token_hash)
                live = leak_action(key, now) is LeakAction.REVOKE
                if live:
                    revoke.append((key, leak))
                out.append(LeakOutcome(leak.token_hash, key, live))
            if revoke:
                won = await self._revoke_all(conn, revoke, reporter, actor, now, new_event_id)
                out = [replace(o, revoked_now=o.key.id in won) if o.revoked_now else o for o in out]
        return out

    async def _revoke_all(
        self,
        conn: Any,
        revoke: list[tuple[ApiKey, Leak]],
        reporter: str,
        actor: Actor,
        now: dt.datetime,
        new_event_id: Callable[[], str],
    ) -> set[str]:
        """Revoke, audit, queue and announce; returns the ids this call revoked (one another call revoked
        since it was read is left to that call, which audited it)."""
        t = now.timestamp()
        reasons = {key.id: leak_reason(leak.url, leak.source, reporter) for key, leak in revoke}
        result = await conn.execute(
            _REVOKE, [{"kid": key.id, "at": t, "reason": reasons[key.id]} for key, _ in revoke]
        )
        if result.rowcount != len(revoke):
            ids = [key.id for key, _ in revoke]
            mine = sa.select(keys.c.id).where(keys.c.id.in_(ids), keys.c.revoked_at == t)
            won = {str(i) for (i,) in await conn.execute(mine)}
            revoke = [(key, leak) for key, leak in revoke if key.id in won]
        audit_rows: list[dict[str, Any]] = []
        outbox_rows: list[dict[str, Any]] = []
        for key, leak in revoke:
            after = {
                "revoked_at": now.isoformat(),
                "reason": reasons[key.id],
                "leak": {"url": leak.url, "source": leak.source, "reporter": reporter},
            }
            audit_rows.append(
                {
                    "id": new_id("aud"),
                    "account_id": key.account_id,
                    "key_id": key.id,
                    "action": "key.revoked",
                    "actor_user": actor.user,
                    "actor_source": actor.source_address,
                    "actor_user_id": actor.user_id,
                    "actor_service": actor.service,
                    "occurred_at": t,
                    "before": json.dumps({"revoked_at": None}, sort_keys=True),
                    "after": json.dumps(after, sort_keys=True),
                }
            )
            events = (
                (
                    "apikey.revoked",
                    apikey_revoked(key.id, key.hint, key.name, now, actor.user, reasons[key.id]),
                ),
                (
                    "apikey.leaked",
                    apikey_leaked(key.id, key.hint, key.name, leak.url, leak.source, reporter, now),
                ),
            )
            for kind, data in events:
                outbox_rows.append(
                    {
                        "id": new_event_id(),
                        "account_id": key.account_id,
                        "environment": key.environment,
                        "type": kind,
                        "state": STATES[kind],
                        "data": json.dumps(data, sort_keys=True),
                        "created_at": t,
                        "next_attempt_at": t,
                    }
                )
        if audit_rows:
            await conn.execute(audit.insert(), audit_rows)
            await conn.execute(outbox.insert(), outbox_rows)
        for key, _ in revoke:
            await self._notify(conn, KeyChange("revoked", key.id, key.account_id, now))
        return {key.id for key, _ in revoke}
