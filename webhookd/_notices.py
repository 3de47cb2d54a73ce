"""Publishes the operational events (``webhookd._health``) from their outbox, ``wh_notices``.

The delivery worker writes a notice in the same transaction as the result that caused it, so none is lost
to a crash; this relay turns each into an event of the account, fanned out to its endpoints subscribed to
the kind except the endpoint the notice is about, with the notice id as the event's idempotency key (a
notice published twice, after a crash between publishing and marking it, is one event), then marks it
published. It runs in every webhookd process; two publishing the same notice still make one event.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import sqlalchemy as sa

from svckit.catalog import kind_of
from svckit.clock import Clock
from svckit.ids import sortable_id
from svckit.outage import OutageLog
from webhookd._events import Environment, build_envelope
from webhookd._repository import EventRecord
from webhookd._sql import SqlRepository
from webhookd._tables import notices
from webhookd._times import at_us, us

log = logging.getLogger("webhookd.notices")
OUTAGES = OutageLog(log)

BATCH = 100


class NoticeRelay:
    def __init__(
        self,
        repo: SqlRepository,
        clock: Clock,
        *,
        on_published: Callable[[], None] | None = None,
        poll_seconds: float = 1.0,
    ) -> None:
        self.repo = repo
        self.clock = clock
        self.on_published = on_published
        self.poll_seconds = poll_seconds
        self._wake = asyncio.Event()
        self._stopping = False

    def wake(self, _alerts: object = None) -> None:
        self._wake.set()

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    async def publish_pending(self) -> int:
        """Publish every waiting notice once, oldest first; how many were published."""
        async with self.repo.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(notices)
                    .where(notices.c.published_at.is_(None))
                    .order_by(notices.c.created_at, notices.c.id)
                    .limit(BATCH)
                )
            ).all()
        for row in rows:
            now = self.clock.now()
            env = Environment(row.environment)
            created = at_us(row.created_at)
            event_id = sortable_id("evt", created)
            event = EventRecord(
                id=event_id,
                account_id=row.account_id,
                environment=row.environment,
                type=row.kind,
                state=kind_of(row.kind).state,
                created_at=created,
                envelope=build_envelope(
                    event_id=event_id,
                    kind=row.kind,
                    created=created,
                    environment=env,
                    account_id=row.account_id,
                    state=kind_of(row.kind).state,
                    data=json.loads(row.data),
                ),
            )
            stored, count = await self.repo.publish(event, row.id, now, exclude_endpoint=row.endpoint_id)
            async with self.repo.engine.begin() as conn:
                await conn.execute(
                    notices.update().where(notices.c.id == row.id).values(published_at=us(now))
                )
            log.info(
                "operational event published",
                extra={
                    "kind": row.kind,
                    "endpoint_id": row.endpoint_id,
                    "event_id": stored.id,
                    "deliveries": count,
                },
            )
        if rows and self.on_published is not None:
            self.on_published()
        return len(rows)

    async def run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                while await self.publish_pending() == BATCH:
                    pass
            except Exception as exc:
                if OUTAGES.count(exc) is None:  # an outage: one summary line per 10 s (svckit.outage)
                    log.exception("publishing operational events failed; they wait for the next pass")
            try:
                async with asyncio.timeout(self.poll_seconds):
                    await self._wake.wait()
            except TimeoutError:
                pass
