"""The event reads of the SQL repository (``webhookd._sql.SqlRepository`` takes them as a base): the
stream's reads by seq, the events list and one event, and the sandbox's count. Read only."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from svckit.webhook_status import DeliveryStatus
from webhookd._repository import EventFilter, EventRecord
from webhookd._rows import event_of
from webhookd._tables import deliveries, events
from webhookd._times import us


def keyset(created_col: Any, id_col: Any, after: tuple[dt.datetime, str] | None) -> Any:
    """Newest first: rows strictly after the cursor (created, id) in descending order."""
    if after is None:
        return sa.true()
    c = us(after[0])
    return sa.or_(created_col < c, sa.and_(created_col == c, id_col < after[1]))


def seq_after(after_seq: int, also: Sequence[int]) -> Any:
    """Events after ``after_seq``, and those of the seqs ``also`` (the stream's gaps, which may commit
    late)."""
    after = events.c.seq > after_seq
    return sa.or_(after, events.c.seq.in_(list(also))) if also else after


DAY_US = 86_400_000_000  # a UTC day in the events' created_at (microseconds since the epoch)


class EventReadsSql:
    engine: AsyncEngine

    async def event_seq(self, account_id: str, environment: str, event_id: str) -> int | None:
        async with self.engine.connect() as conn:
            value = (
                await conn.execute(
                    sa.select(events.c.seq).where(
                        events.c.id == event_id,
                        events.c.account_id == account_id,
                        events.c.environment == environment,
                    )
                )
            ).scalar()
        return int(value) if value is not None else None

    async def max_event_seq(self) -> int:
        async with self.engine.connect() as conn:
            value = (await conn.execute(sa.select(sa.func.max(events.c.seq)))).scalar()
        return int(value or 0)

    async def events_since(self, after_seq: int, limit: int, also: Sequence[int] = ()) -> list[EventRecord]:
        q = sa.select(events).where(seq_after(after_seq, also)).order_by(events.c.seq).limit(limit)
        async with self.engine.connect() as conn:
            return [event_of(r) for r in await conn.execute(q)]

    async def events_after(
        self,
        account_id: str,
        environment: str,
        after_seq: int,
        types: Sequence[str],
        limit: int,
        also: Sequence[int] = (),
    ) -> list[EventRecord]:
        conds = [
            events.c.account_id == account_id,
            events.c.environment == environment,
            seq_after(after_seq, also),
        ]
        if types:
            conds.append(events.c.type.in_(list(types)))
        q = sa.select(events).where(*conds).order_by(events.c.seq).limit(limit)
        async with self.engine.connect() as conn:
            return [event_of(r) for r in await conn.execute(q)]

    async def list_events(
        self, flt: EventFilter, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[EventRecord]:
        c = events.c
        conds = [
            c.account_id == flt.account_id,
            c.environment == flt.environment,
            c.created_at >= us(flt.since),
        ]
        if flt.until is not None:
            conds.append(c.created_at < us(flt.until))
        if flt.types:
            conds.append(c.type.in_(list(flt.types)))
        if flt.undelivered_to:
            d = deliveries.c
            waiting = [DeliveryStatus.HELD, DeliveryStatus.FAILED]
            stuck = sa.select(d.event_id).where(d.endpoint_id == flt.undelivered_to, d.status.in_(waiting))
            conds.append(c.id.in_(stuck))
        q = (
            sa.select(events)
            .where(*conds, keyset(c.created_at, c.id, after))
            .order_by(c.created_at.desc(), c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [event_of(r) for r in await conn.execute(q)]

    async def get_event(
        self, account_id: str, environment: str, event_id: str, since: dt.datetime
    ) -> EventRecord | None:
        c = events.c
        q = sa.select(events).where(
            c.id == event_id,
            c.account_id == account_id,
            c.environment == environment,
            c.created_at >= us(since),
        )
        async with self.engine.connect() as conn:
            row = (await conn.execute(q)).first()
        return event_of(row) if row is not None else None

    # The sandbox's bounds

    async def count_events(self, account_id: str, environment: str, since: dt.datetime) -> int:
        """The account's events of ``environment`` created at or after ``since``."""
        c = events.c
        query = (
            sa.select(sa.func.count())
            .select_from(events)
            .where(c.account_id == account_id, c.environment == environment, c.created_at >= us(since))
        )
        async with self.engine.connect() as conn:
            return int((await conn.execute(query)).scalar_one())

    async def count_events_by_day(
        self, account_id: str, environment: str, kind: str, since: dt.datetime, until: dt.datetime | None
    ) -> list[tuple[dt.date, int]]:
        c = events.c
        day = (c.created_at // DAY_US).label("day")
        q = (
            sa.select(day, sa.func.count())
            .where(
                c.account_id == account_id,
                c.environment == environment,
                c.type == kind,
                c.created_at >= us(since),
                c.created_at < us(until) if until else sa.true(),
            )
            .group_by(day)
            .order_by(day)
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        epoch = dt.date(1970, 1, 1)
        return [(epoch + dt.timedelta(days=int(d)), int(n)) for d, n in rows]
