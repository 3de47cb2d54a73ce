"""Publishes the operational events (``webhookd._health``) from their outbox, ``wh_notices``.

The delivery worker writes a notice in the same transaction as the result that caused it, so none is lost
to a crash; this relay turns each into an event of the account, fanned out to its endpoints subscribed to
the kind except the endpoint the notice is about, with the notice id as the event's idempotency key (a
notice published twice, after a crash between publishing and marking it, is one event), then marks it
published. It runs in every webhookd process; two publishing the same notice still make one event.

An ``endpoint.failing`` notice also becomes a failing alert (an e-mail to the account's people,
``webhookd._mailer``) in the transaction that marks it published, unless ``webhookd._alert_policy`` holds it
back (the hourly floor); its id comes from the notice's, so it too is made once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from svckit.catalog import kind_of
from svckit.clock import Clock
from svckit.idlewait import idle_wait
from svckit.ids import sortable_id
from svckit.outage import OutageLog
from webhookd._alert_policy import FAILING_PREFIX, FLOOR, failing_alert_id, failing_email_due, level_of
from webhookd._events import Environment, build_envelope
from webhookd._repository import EventRecord
from webhookd._sql import SqlRepository
from webhookd._tables import alerts, notices
from webhookd._times import at_us, us

log = logging.getLogger("webhookd.notices")
OUTAGES = OutageLog(log)

BATCH = 100
# The longest wait between looks while nothing is waiting (each empty look doubles it from ``poll_seconds``,
# ``svckit.idlewait``): the worker wakes the relay when it writes a notice, so a look only finds what a
# process that stopped before publishing left behind.
IDLE_MAX_SECONDS = 30.0


class NoticeRelay:
    def __init__(
        self,
        repo: SqlRepository,
        clock: Clock,
        *,
        on_published: Callable[[], None] | None = None,
        on_alerts: Callable[[], None] | None = None,
        poll_seconds: float = 1.0,
        idle_max_seconds: float = IDLE_MAX_SECONDS,
    ) -> None:
        self.repo = repo
        self.clock = clock
        self.on_published = on_published
        self.on_alerts = on_alerts
        self.poll_seconds = poll_seconds
        self.idle_max_seconds = idle_max_seconds
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
            alerted = False
            try:
                async with self.repo.engine.begin() as conn:
                    if row.kind == "endpoint.failing":
                        alerted = await _failing_alert(conn, row)
                    await conn.execute(
                        notices.update().where(notices.c.id == row.id).values(published_at=us(now))
                    )
            except sa.exc.IntegrityError:
                alerted = False  # another process made this notice's alert (and marked it) first
            if alerted and self.on_alerts is not None:
                self.on_alerts()
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
        empty = 0  # passes in a row that found nothing to publish
        while not self._stopping:
            woken = self._wake.is_set()
            self._wake.clear()
            try:
                published = 0
                while (found := await self.publish_pending()) == BATCH:
                    published += found
                published += found
                empty = 0 if published or woken else empty + 1
            except Exception as exc:
                empty = 0  # look again soon
                if OUTAGES.count(exc) is None:  # an outage: one summary line per 10 s (svckit.outage)
                    log.exception("publishing operational events failed; they wait for the next pass")
            try:
                async with asyncio.timeout(idle_wait(empty, self.poll_seconds, self.idle_max_seconds)):
                    await self._wake.wait()
            except TimeoutError:
                pass


async def _failing_alert(conn: AsyncConnection, row: sa.Row[Any]) -> bool:
    """Write the failing alert of an ``endpoint.failing`` notice, unless the hourly floor holds it back;
    whether it was written."""
    data = json.loads(row.data)
    level = int(data["thresholdPercent"])
    c = alerts.c
    earlier = await conn.execute(
        sa.select(c.id, c.created_at).where(
            c.endpoint_id == row.endpoint_id,
            c.id.startswith(FAILING_PREFIX),
            c.created_at > row.created_at - int(FLOOR.total_seconds() * 1_000_000),
        )
    )
    created = at_us(row.created_at)
    if not failing_email_due(level, created, [(level_of(e.id), at_us(e.created_at)) for e in earlier]):
        log.info(
            "failing alert held back: one went out for this endpoint within the hour",
            extra={"endpoint_id": row.endpoint_id, "level": level},
        )
        return False
    await conn.execute(
        alerts.insert().values(
            id=failing_alert_id(row.id, level),
            account_id=row.account_id,
            environment=row.environment,
            endpoint_id=row.endpoint_id,
            url=str(data.get("url", "")),
            reason=str(data.get("error", "")),
            created_at=row.created_at,
            sent_at=None,
            error="",
        )
    )
    return True
