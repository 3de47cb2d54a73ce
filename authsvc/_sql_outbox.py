"""The transactional outbox's rows: claimed for a lease, marked sent or failed, purged once old."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import sqlalchemy as sa

from authsvc._model import OutboxEvent
from authsvc._repository import OUTBOX_BATCH
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import MAX_ERROR, outbox, required_time_of
from svckit.vocabulary import Environment


class OutboxStorage(SqlBase):
    async def claim_outbox(
        self, now: dt.datetime, lease: float, limit: int = OUTBOX_BATCH
    ) -> list[OutboxEvent]:
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
                            environment=Environment(r["environment"]),
                            type=r["type"],
                            state=r["state"],
                            data=json.loads(r["data"]),
                            created_at=required_time_of(r["created_at"]),
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
                    last_error=error[:MAX_ERROR],
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

    async def outbox_backlog(self) -> tuple[int, float | None]:
        """Rows not yet accepted by webhookd: how many, and when the oldest was written (epoch seconds)."""
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.min(outbox.c.created_at)).where(
                        outbox.c.sent_at.is_(None)
                    )
                )
            ).one()
            return int(row[0]), None if row[1] is None else float(row[1])

    async def outbox_rows(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(outbox.select().order_by(outbox.c.seq))).mappings().all()
            return [dict(r) for r in rows]
