"""The poll queue of polling endpoints (docs/webhooks.md "Polling"; the rules in ``webhookd._polling``).

A delivery to a polling endpoint is a row of the delivery log (``wh_deliveries``) like any other, pending
until a consumer commits it, and a row of ``wh_polled`` instead of the worker's ``wh_pending``: the worker
never claims it. A poll leases up to ``limit`` of the endpoint's unleased (or lease-expired) rows, oldest
event first, under a new lease id (the cursor) until ``lease_until``; each lease counts as an attempt of
the delivery. A commit of the cursor, within its lease, makes the lease's deliveries ``succeeded`` with one
attempt each in the attempt log and removes their rows. A lease that runs out uncommitted leaves its rows
to the next poll, which writes the expired lease into the attempt log (outcome ``timeout``).

Several consumers share an endpoint: on PostgreSQL a poll takes its rows ``FOR UPDATE SKIP LOCKED`` (two
polls never lease the same row: one skips what the other locked, and a row re-leased meanwhile fails the
re-checked condition); SQLite has one writer (``BEGIN IMMEDIATE``), so polls take turns. An ordered
endpoint's row is held back while an earlier row of its key is under a live lease; there polls of the
endpoint take turns on PostgreSQL too (the endpoint's row lock), so that rule reads a settled state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from svckit.ids import random_base62, sortable_id
from svckit.vocabulary import AttemptOutcome
from svckit.webhook_status import DeliveryOrder, DeliveryStatus
from webhookd._polling import (
    CURSOR_LENGTH,
    CURSOR_PREFIX,
    LAST_POLLED_EVERY,
    LEASE_KEPT,
    Bounds,
    Lease,
    Verdict,
    commit_verdict,
)
from webhookd._repository import DeliveryRecord, EndpointRecord
from webhookd._tables import (
    attempts,
    deliveries,
    endpoints,
    events,
    pending,
    poll_leases,
    polled,
    pollers,
)
from webhookd._times import at_us, from_us, us

EXPIRED_ERROR = "lease expired without a commit"


@dataclass(frozen=True, slots=True)
class Batch:
    """What a poll leased: (delivery id, envelope) oldest event first; no cursor when nothing was leased."""

    cursor: str
    expires_at: dt.datetime | None
    items: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Committed:
    verdict: Verdict
    committed: int  # deliveries this cursor's commit ended (ALREADY: the first commit's count)
    expires_at: dt.datetime | None  # the lease's expiry (EXPIRED: when it ran out)
    endpoint_id: str = ""  # FOREIGN: whose it is


@dataclass(frozen=True, slots=True)
class PollStatus:
    """An endpoint's poll queue now: deliveries waiting (leased or not), batches under a live lease (about
    one per active consumer), the deliveries in them, the last poll (None: never polled)."""

    pending: int
    leased_batches: int
    leased: int
    last_polled_at: dt.datetime | None


def new_cursor() -> str:
    return f"{CURSOR_PREFIX}_{random_base62(CURSOR_LENGTH)}"


def polled_rows(new: Sequence[DeliveryRecord]) -> list[dict[str, Any]]:
    """The poll queue's rows of new pending deliveries (to a polling endpoint)."""
    return [
        {
            "id": d.id,
            "endpoint_id": d.endpoint_id,
            "event_seq": d.event_seq or 0,
            "ordering_key": d.ordering_key,
            "lease_id": None,
            "lease_until": None,
            "leased_at": None,
            "leases": 0,
        }
        for d in new
        if d.status == DeliveryStatus.PENDING
    ]


def _attempt(row: Any, outcome: AttemptOutcome, error: str, at: int, now: dt.datetime) -> dict[str, Any]:
    """An attempt-log row for one lease of a polled delivery: its end (a commit, or the lease running out);
    latency is the time the consumer held it."""
    leased_at = row.leased_at if row.leased_at is not None else at
    return {
        "id": sortable_id("att", now),
        "delivery_id": row.id,
        "endpoint_id": row.endpoint_id,
        "event_id": row.event_id,
        "account_id": row.account_id,
        "environment": row.environment,
        "attempt_number": row.leases,
        "outcome": str(outcome),
        "response_status": 0,
        "response_body": "",
        "request_headers": "{}",
        "latency_ms": max(0.0, (at - leased_at) / 1000.0),
        "error": error,
        "attempted_at": at,
        "manual": False,
        "response_headers": "{}",
    }


def _joined() -> Any:
    """The poll queue's rows with what the attempt log needs of their deliveries."""
    p, d = polled.c, deliveries.c
    return sa.select(
        p.id,
        p.endpoint_id,
        p.leases,
        p.leased_at,
        p.lease_until,
        d.event_id,
        d.account_id,
        d.environment,
    ).join_from(polled, deliveries, d.id == p.id)


class PollStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._pg = engine.dialect.name == "postgresql"

    # Written with the repository's own writes (same transaction)

    @staticmethod
    async def fan_out(new: Sequence[DeliveryRecord], conn: AsyncConnection) -> None:
        rows = polled_rows(new)
        if rows:
            await conn.execute(polled.insert(), rows)

    @staticmethod
    async def forget(endpoint_id: str, conn: AsyncConnection) -> None:
        """A deleted endpoint's poll queue goes (its deliveries are failed by the queue's fail_endpoint)."""
        await conn.execute(polled.delete().where(polled.c.endpoint_id == endpoint_id))
        await conn.execute(pollers.delete().where(pollers.c.endpoint_id == endpoint_id))

    @staticmethod
    async def unorder(endpoint_id: str, conn: AsyncConnection) -> None:
        await conn.execute(
            polled.update()
            .where(polled.c.endpoint_id == endpoint_id, polled.c.ordering_key.is_not(None))
            .values(ordering_key=None)
        )

    @staticmethod
    async def retype(endpoint_id: str, to_polling: bool, now: dt.datetime, conn: AsyncConnection) -> None:
        """The endpoint's type changed to or from polling: what it has waiting moves to the other queue,
        due now. To polling, the worker's unleased rows move (one it holds comes back by its result and is
        held, recoverable: ``webhookd._destinations``); from polling, every row of the poll queue moves, a
        live lease's too (its commit then ends nothing: the events are pushed instead)."""
        p, q, d = polled.c, pending.c, deliveries.c
        if to_polling:
            mine = sa.and_(q.endpoint_id == endpoint_id, q.lease_owner.is_(None))
            await conn.execute(
                polled.insert().from_select(
                    ["id", "endpoint_id", "event_seq", "ordering_key"],
                    sa.select(q.id, q.endpoint_id, sa.func.coalesce(q.event_seq, 0), q.ordering_key).where(
                        mine
                    ),
                )
            )
            await conn.execute(pending.delete().where(mine))
            return
        t = us(now)
        cols = {
            "id": d.id,
            "endpoint_id": d.endpoint_id,
            "account_id": d.account_id,
            "environment": d.environment,
            "attempt_count": d.attempt_count,
            "next_attempt_at": sa.literal(t, sa.BigInteger),
            "lease_owner": sa.null(),
            "ordering_key": d.ordering_key,
            "event_seq": d.event_seq,
        }
        moved = sa.select(p.id).where(p.endpoint_id == endpoint_id)
        await conn.execute(
            pending.insert().from_select(
                list(cols), sa.select(*(c.label(n) for n, c in cols.items())).where(d.id.in_(moved))
            )
        )
        await conn.execute(deliveries.update().where(d.id.in_(moved)).values(due_at=t))
        await conn.execute(polled.delete().where(p.endpoint_id == endpoint_id))

    # A poll and a commit

    async def poll(self, endpoint: EndpointRecord, bounds: Bounds, now: dt.datetime) -> Batch:
        t = us(now)
        until = us(now + bounds.lease)
        p = polled.c
        async with self.engine.begin() as conn:
            ordered = endpoint.ordering is DeliveryOrder.PER_RESOURCE
            if ordered and self._pg:
                await conn.execute(
                    sa.select(endpoints.c.id).where(endpoints.c.id == endpoint.id).with_for_update()
                )
            conds: list[Any] = [
                p.endpoint_id == endpoint.id,
                sa.or_(p.lease_until.is_(None), p.lease_until <= t),
            ]
            if ordered:
                e = polled.alias("e")
                conds.append(
                    sa.or_(
                        p.ordering_key.is_(None),
                        ~sa.exists().where(
                            e.c.endpoint_id == p.endpoint_id,
                            e.c.ordering_key == p.ordering_key,
                            e.c.event_seq < p.event_seq,
                            e.c.lease_until > t,
                        ),
                    )
                )
            picked = (
                await conn.execute(
                    sa.select(p.id, p.lease_id)
                    .where(*conds)
                    .order_by(p.event_seq, p.id)
                    .limit(bounds.limit)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            await self._polled(conn, endpoint.id, t)
            if not picked:
                return Batch("", None, [])
            ids = [r.id for r in picked]
            expired = [r.id for r in picked if r.lease_id is not None]
            if expired:
                rows = (await conn.execute(_joined().where(p.id.in_(expired)))).all()
                await conn.execute(
                    attempts.insert(),
                    [_attempt(r, AttemptOutcome.TIMEOUT, EXPIRED_ERROR, r.lease_until, now) for r in rows],
                )
            cursor = new_cursor()
            await conn.execute(
                polled.update()
                .where(p.id.in_(ids))
                .values(lease_id=cursor, lease_until=until, leased_at=t, leases=p.leases + 1)
            )
            d = deliveries.c
            await conn.execute(
                deliveries.update()
                .where(d.id.in_(ids))
                .values(attempt_count=d.attempt_count + 1, schedule_count=d.schedule_count + 1, updated_at=t)
            )
            await conn.execute(
                poll_leases.insert().values(
                    id=cursor,
                    endpoint_id=endpoint.id,
                    account_id=endpoint.account_id,
                    environment=endpoint.environment,
                    size=len(ids),
                    created_at=t,
                    expires_at=until,
                    committed_at=None,
                    committed=0,
                )
            )
            bodies = dict(
                (
                    await conn.execute(
                        sa.select(d.id, events.c.envelope)
                        .join_from(deliveries, events, events.c.id == d.event_id)
                        .where(d.id.in_(ids))
                    )
                ).all()
            )
        return Batch(cursor, at_us(until), [(i, bytes(bodies[i])) for i in ids])

    async def _polled(self, conn: AsyncConnection, endpoint_id: str, t: int) -> None:
        """Record the poll's time (at most every ``LAST_POLLED_EVERY``: an idle consumer writes little)."""
        insert = (postgresql.insert if self._pg else sqlite.insert)(pollers)
        await conn.execute(
            insert.values(endpoint_id=endpoint_id, last_polled_at=t).on_conflict_do_update(
                index_elements=[pollers.c.endpoint_id],
                set_={"last_polled_at": t},
                where=pollers.c.last_polled_at <= t - us_of(LAST_POLLED_EVERY),
            )
        )

    async def commit(self, endpoint: EndpointRecord, cursor: str, now: dt.datetime) -> Committed:
        t = us(now)
        lc, p = poll_leases.c, polled.c
        async with self.engine.begin() as conn:
            row = (
                await conn.execute(sa.select(poll_leases).where(lc.id == cursor).with_for_update())
            ).first()
            lease = (
                Lease(
                    row.endpoint_id,
                    row.account_id,
                    row.environment,
                    at_us(row.expires_at),
                    from_us(row.committed_at),
                )
                if row is not None
                else None
            )
            verdict = commit_verdict(lease, endpoint.id, endpoint.account_id, endpoint.environment, now)
            if verdict is not Verdict.COMMIT:
                assert row is not None or verdict is Verdict.UNKNOWN
                return Committed(
                    verdict,
                    row.committed if row is not None and verdict is Verdict.ALREADY else 0,
                    at_us(row.expires_at) if row is not None and verdict is Verdict.EXPIRED else None,
                    row.endpoint_id if row is not None and verdict is Verdict.FOREIGN else "",
                )
            rows = (
                await conn.execute(_joined().where(p.lease_id == cursor).with_for_update(of=polled))
            ).all()
            ids = [r.id for r in rows]
            if rows:
                await conn.execute(
                    attempts.insert(), [_attempt(r, AttemptOutcome.SUCCEEDED, "", t, now) for r in rows]
                )
                d = deliveries.c
                await conn.execute(
                    deliveries.update()
                    .where(d.id.in_(ids))
                    .values(status=str(DeliveryStatus.SUCCEEDED), due_at=None, updated_at=t)
                )
                await conn.execute(polled.delete().where(p.id.in_(ids)))
            await conn.execute(
                poll_leases.update().where(lc.id == cursor).values(committed_at=t, committed=len(ids))
            )
        return Committed(Verdict.COMMIT, len(ids), lease.expires_at if lease is not None else None)

    # Recovery, status, housekeeping

    async def recover(self, endpoint_id: str, since: dt.datetime | None, now: dt.datetime) -> int:
        """Held and failed deliveries (created at or after ``since``) of the polling endpoint are offered to
        the next poll again, with a fresh count (as ``RecoverEndpoint`` starts a new retry schedule)."""
        d = deliveries.c
        t = us(now)
        conds = [
            d.endpoint_id == endpoint_id,
            d.status.in_([str(DeliveryStatus.HELD), str(DeliveryStatus.FAILED)]),
        ]
        if since is not None:
            conds.append(d.created_at >= us(since))
        async with self.engine.begin() as conn:
            cols = [d.id, d.endpoint_id, sa.func.coalesce(d.event_seq, 0), d.ordering_key]
            await conn.execute(
                polled.insert().from_select(
                    ["id", "endpoint_id", "event_seq", "ordering_key"], sa.select(*cols).where(*conds)
                )
            )
            result = await conn.execute(
                deliveries.update()
                .where(*conds)
                .values(status=str(DeliveryStatus.PENDING), due_at=t, schedule_count=0, updated_at=t)
            )
        return int(result.rowcount or 0)

    async def status(self, endpoint_id: str, now: dt.datetime) -> PollStatus:
        t = us(now)
        p, lc = polled.c, poll_leases.c
        async with self.engine.connect() as conn:
            pending = (
                await conn.execute(sa.select(sa.func.count()).where(p.endpoint_id == endpoint_id))
            ).scalar_one()
            batches, leased = (
                await conn.execute(
                    sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(lc.size), 0)).where(
                        lc.endpoint_id == endpoint_id, lc.expires_at > t, lc.committed_at.is_(None)
                    )
                )
            ).one()
            last = (
                await conn.execute(
                    sa.select(pollers.c.last_polled_at).where(pollers.c.endpoint_id == endpoint_id)
                )
            ).scalar()
        return PollStatus(int(pending), int(batches), int(leased), from_us(last))

    async def expire(self, before: dt.datetime, now: dt.datetime) -> int:
        """Housekeeping: deliveries waiting in a poll queue since before ``before`` (the retention) fail
        (recoverable like any failed delivery); lease rows a day past their expiry go. The failed count."""
        d, p = deliveries.c, polled.c
        t = us(now)
        old = sa.select(d.id).where(d.id.in_(sa.select(p.id)), d.created_at < us(before))
        async with self.engine.begin() as conn:
            ids = [r.id for r in (await conn.execute(old.limit(10_000))).all()]
            if ids:
                await conn.execute(
                    deliveries.update()
                    .where(d.id.in_(ids))
                    .values(status=str(DeliveryStatus.FAILED), due_at=None, updated_at=t)
                )
                await conn.execute(polled.delete().where(p.id.in_(ids)))
            await conn.execute(poll_leases.delete().where(poll_leases.c.expires_at < us(now - LEASE_KEPT)))
        return len(ids)


def us_of(delta: dt.timedelta) -> int:
    return delta // dt.timedelta(microseconds=1)
