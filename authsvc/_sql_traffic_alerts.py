"""Storage of the traffic alerts (authsvc._traffic_alerts): which accounts had live traffic in an hour,
which have a look-to-book target, their searches per day, and the sending of one alert: its event in the
outbox and the time it was sent, in one transaction, only if no other process sent it meanwhile."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from authsvc._model import OutboxEvent
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import accounts, traffic_alerts, usage
from authsvc._sql_usage_tables import usage_hour


class TrafficAlertStorage(SqlBase):
    async def accounts_active(self, start: dt.datetime, end: dt.datetime, environment: str) -> list[str]:
        """The accounts with counted requests in ``environment`` in [start, end) (hour rollups)."""
        c = usage_hour.c
        stmt = (
            sa.select(c.account_id)
            .where(
                c.period >= int(start.timestamp()),
                c.period < int(end.timestamp()),
                c.environment == environment,
                c.account_id != "",
            )
            .distinct()
            .order_by(c.account_id)
        )
        async with self.engine.connect() as conn:
            return [str(r[0]) for r in await conn.execute(stmt)]

    async def look_to_book_targets(self) -> list[tuple[str, int]]:
        """(account, target) of every account with a look-to-book target (a read-only one too: it still
        searches)."""
        c = accounts.c
        stmt = sa.select(c.id, c.look_to_book_target).where(c.look_to_book_target > 0).order_by(c.id)
        async with self.engine.connect() as conn:
            return [(str(r[0]), int(r[1])) for r in await conn.execute(stmt)]

    async def searches_per_day(self, account_id: str, first: dt.date, last: dt.date) -> dict[dt.date, int]:
        """The allowance's counter of each day in [first, last] that has one."""
        c = usage.c
        stmt = sa.select(c.day, c.used).where(
            c.account_id == account_id, c.day >= first.isoformat(), c.day <= last.isoformat()
        )
        async with self.engine.connect() as conn:
            return {dt.date.fromisoformat(str(r[0])): int(r[1]) for r in await conn.execute(stmt)}

    async def traffic_alert_sent(self, account_id: str, kind: str) -> dt.datetime | None:
        c = traffic_alerts.c
        async with self.engine.connect() as conn:
            at = (
                await conn.execute(sa.select(c.sent_at).where(c.account_id == account_id, c.kind == kind))
            ).scalar()
        return None if at is None else dt.datetime.fromtimestamp(float(at), dt.UTC)

    async def send_traffic_alert(self, kind: str, last_sent: dt.datetime | None, event: OutboxEvent) -> bool:
        """Queue ``event`` and mark ``kind`` sent now for its account, if it was last sent at ``last_sent``
        still (another authsvc may have sent it since: then nothing is written, False)."""
        c = traffic_alerts.c
        now = event.created_at.timestamp()
        async with self.engine.begin() as conn:
            if last_sent is None:
                done = await conn.execute(
                    self._insert(traffic_alerts)
                    .values(account_id=event.account_id, kind=kind, sent_at=now)
                    .on_conflict_do_nothing(index_elements=["account_id", "kind"])
                )
            else:
                done = await conn.execute(
                    traffic_alerts.update()
                    .where(
                        c.account_id == event.account_id,
                        c.kind == kind,
                        c.sent_at == last_sent.timestamp(),
                    )
                    .values(sent_at=now)
                )
            if done.rowcount != 1:
                return False
            await self._outbox(conn, event)
        return True
