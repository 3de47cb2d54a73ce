"""Storage of travellers (partner references resolved to traveller ids) and of the daily search
allowance, whose threshold event is queued in the outbox in the same transaction."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from authsvc._errors import NotFound, SearchQuotaExhausted
from authsvc._model import OutboxEvent, Usage
from authsvc._sql_base import SqlBase
from authsvc._sql_tables import travellers, usage
from svckit.catalog import STATES, quota_threshold
from svckit.ids import new_id
from svckit.quota import threshold_of
from svckit.vocabulary import Environment


class UsageStorage(SqlBase):
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
                            state=STATES["search_quota.threshold"],
                            data=quota_threshold(allowance, day, used),
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
