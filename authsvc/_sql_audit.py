"""Reading the audit trail (every write of it happens inside the change it records: SqlBase._audit)."""

from __future__ import annotations

import sqlalchemy as sa

from authsvc._model import AuditEvent, AuditFilter
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import audit, audit_event_of


class AuditStorage(SqlBase):
    async def list_audit(
        self,
        account_id: str,
        key_id: str,
        limit: int,
        after_seq: int,
        filters: AuditFilter | None = None,
        newest_first: bool = False,
    ) -> list[tuple[int, AuditEvent]]:
        """Keyset paging on ``seq`` (the (account_id, seq) index serves both directions): oldest first
        the events after ``after_seq``; newest first those before it (0: from the newest)."""
        async with self.engine.connect() as conn:
            await self._get_account(conn, account_id)
            stmt = audit.select().where(audit.c.account_id == account_id)
            if not newest_first:
                stmt = stmt.where(audit.c.seq > after_seq)
            elif after_seq:
                stmt = stmt.where(audit.c.seq < after_seq)
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
            stmt = stmt.order_by(audit.c.seq.desc() if newest_first else audit.c.seq).limit(limit)
            return [(int(r["seq"]), audit_event_of(r)) for r in (await conn.execute(stmt)).mappings()]

    async def count_audit(self) -> int:
        async with self.engine.connect() as conn:
            return int((await conn.execute(sa.select(sa.func.count()).select_from(audit))).scalar_one())
