"""The SQLAlchemy (async Core) adapter of the Repository port: endpoints, events, logs, alerts.

Its tables are ``webhookd._tables``' (schema migrations: webhookd/migrations), its rows become records in
``webhookd._rows``. Every write to the deliveries table (fan-out, a test send, holding, an endpoint's
deletion, a manual attempt, a recovery, the worker's cycles) is a named statement its ``Queue`` runs
(``webhookd._queue``), picked once here from the engine; where such a write goes with one of the
repository's own (an event, an endpoint), the queue runs it in the repository's transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from svckit.db import create_engine
from svckit.ids import sortable_id
from svckit.migrations import upgrade
from svckit.reseal import SealedColumn
from svckit.vocabulary import AttemptOutcome
from svckit.webhook_status import DeliveryOrder, DeliveryStatus, DestinationType, EndpointStatus
from webhookd._admission import NO_SKIPS, Skips
from webhookd._content import Passes
from webhookd._endpoint_cap import check_room
from webhookd._ordering import ordering_key
from webhookd._polls import PollStore
from webhookd._queue import StatementQueue
from webhookd._queues import new_queue
from webhookd._repository import (
    IDEMPOTENCY_WINDOW,
    Alert,
    AttemptRecord,
    Claim,
    DeliveryFilter,
    DeliveryRecord,
    DeliveryResult,
    EndpointRecord,
    EventRecord,
    IdempotencyRecord,
    Stats,
)
from webhookd._rows import alert_of, attempt_of, delivery_of, endpoint_of, endpoint_values, event_of
from webhookd._secretbox import SEALED_PREFIXES, SecretBox
from webhookd._sql_counts import DeliveryCountsSql
from webhookd._sql_events import EventReadsSql, keyset
from webhookd._subscriptions import receives
from webhookd._tables import alerts, attempts, deliveries, endpoints, events, idempotency, metadata
from webhookd._times import us
from webhookd.migrations import SCHEMA

# The tables, for the scripts and tests that take them from here.
# The sealed column ``python -m webhookd reseal`` and the ``sealed_rows_old_key`` gauge look at.
SEALED_SECRETS = SealedColumn(endpoints, "id", "secrets")
# Revision 0011: a broker destination's credentials, sealed the same way (``webhookd._destination_settings``).
SEALED_DESTINATIONS = SealedColumn(endpoints, "id", "destination_secret")
# Revision 0013: a receiver's client-certificate key and OAuth2 client secret (``_receiver_auth``).
SEALED_RECEIVER_SECRETS = SealedColumn(endpoints, "id", "receiver_secrets")
SEALED_COLUMNS = [SEALED_SECRETS, SEALED_DESTINATIONS, SEALED_RECEIVER_SECRETS]

__all__ = [
    "SEALED_COLUMNS",
    "SEALED_DESTINATIONS",
    "SEALED_RECEIVER_SECRETS",
    "SEALED_SECRETS",
    "SqlRepository",
    "alerts",
    "attempts",
    "deliveries",
    "endpoints",
    "events",
    "idempotency",
    "metadata",
]


def _filter_conditions(table: sa.Table, time_column: Any, flt: DeliveryFilter) -> list[Any]:
    """Account, environment, endpoint, event and time window: what delivery and attempt lists share."""
    c = table.c
    conds: list[Any] = [c.account_id == flt.account_id, c.environment == flt.environment]
    if flt.endpoint_id:
        conds.append(c.endpoint_id == flt.endpoint_id)
    if flt.event_id:
        conds.append(c.event_id == flt.event_id)
    if flt.since:
        conds.append(time_column >= us(flt.since))
    if flt.until:
        conds.append(time_column < us(flt.until))
    return conds


class SqlRepository(EventReadsSql, DeliveryCountsSql):
    def __init__(self, engine: AsyncEngine, box: SecretBox | None = None) -> None:
        self.engine = engine
        self.box = box or SecretBox()
        # The store is picked once, here: every write to the deliveries table goes through it.
        self.queue: StatementQueue = new_queue(engine, self._endpoint)
        # Polling endpoints' deliveries wait in a poll queue of their own (``webhookd._polls``).
        self.polls = PollStore(engine)

    @classmethod
    async def open(cls, url: str, box: SecretBox | None = None) -> SqlRepository:
        engine = create_engine(url)
        await upgrade(engine, SCHEMA)
        return cls(engine, box)

    def _endpoint(self, row: Any) -> EndpointRecord:
        return endpoint_of(row, self.box)

    async def seal_secrets(self) -> int:
        """With a key: seal every endpoint's signing secrets and destination credentials still stored in
        the clear (a database written before the key was set). Without one: refuse a database whose
        values are sealed. Values sealed."""
        return sum([await self._seal_column(column.column) for column in SEALED_COLUMNS])

    async def _seal_column(self, name: str) -> int:
        value = endpoints.c[name]
        cols = (endpoints.c.id, value.label("value"))
        sealed_rows = sa.or_(*(value.startswith(p) for p in SEALED_PREFIXES))
        column = SealedColumn(endpoints, "id", name)
        async with self.engine.begin() as conn:
            # A missing or wrong key is found at start, not at the first send: a row under a key id the
            # ring lacks, else one sealed row (an enc1 value names no key: it is opened to find out).
            unknown = column.unknown_key(self.box) if self.box.sealing else sealed_rows
            for where in (unknown, sealed_rows):
                probe = (await conn.execute(sa.select(*cols).where(where).limit(1))).first()
                if probe is not None:
                    self.box.open(probe.value, probe.id)
            if not self.box.sealing:
                return 0
            plain = (await conn.execute(sa.select(*cols).where(~sealed_rows, value != ""))).all()
            for r in plain:
                sealed = self.box.seal(r.value, r.id)
                await conn.execute(endpoints.update().where(endpoints.c.id == r.id).values({name: sealed}))
        return len(plain)

    async def close(self) -> None:
        await self.queue.close()
        await self.engine.dispose()

    # Endpoints

    async def create_endpoint(
        self, endpoint: EndpointRecord, idem: IdempotencyRecord | None = None, limit: int | None = None
    ) -> bool:
        try:
            async with self.engine.begin() as conn:
                if limit is not None:
                    await check_room(conn, endpoint.account_id, endpoint.environment, limit)
                await conn.execute(endpoints.insert().values(**endpoint_values(endpoint, self.box)))
                await self._record_idempotency(conn, endpoint, idem)
        except IntegrityError:
            if idem is None:
                raise
            return False
        return True

    @staticmethod
    async def _record_idempotency(
        conn: AsyncConnection, endpoint: EndpointRecord, idem: IdempotencyRecord | None
    ) -> None:
        if idem is None:
            return
        c = idempotency.c
        key = (
            (c.account_id == endpoint.account_id)
            & (c.environment == endpoint.environment)
            & (c.idempotency_key == idem.key)
        )
        # A record past the 24 h window no longer counts: the key may be used again.
        await conn.execute(
            idempotency.delete().where(key, c.created_at < us(idem.created_at - IDEMPOTENCY_WINDOW))
        )
        await conn.execute(
            idempotency.insert().values(
                account_id=endpoint.account_id,
                environment=endpoint.environment,
                idempotency_key=idem.key,
                request_hash=idem.request_hash,
                endpoint_id=endpoint.id,
                created_at=us(idem.created_at),
            )
        )

    async def find_idempotent(
        self, account_id: str, environment: str, key: str, since: dt.datetime
    ) -> tuple[str, str] | None:
        c = idempotency.c
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(c.request_hash, c.endpoint_id).where(
                        c.account_id == account_id,
                        c.environment == environment,
                        c.idempotency_key == key,
                        c.created_at >= us(since),
                    )
                )
            ).first()
        return (row.request_hash, row.endpoint_id) if row else None

    async def purge_idempotency(self, before: dt.datetime) -> int:
        async with self.engine.begin() as conn:
            result = await conn.execute(idempotency.delete().where(idempotency.c.created_at < us(before)))
        return int(result.rowcount or 0)

    async def get_endpoint(
        self, account_id: str, environment: str, endpoint_id: str
    ) -> EndpointRecord | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(endpoints).where(
                        endpoints.c.id == endpoint_id,
                        endpoints.c.account_id == account_id,
                        endpoints.c.environment == environment,
                        endpoints.c.deleted_at.is_(None),
                    )
                )
            ).first()
        return self._endpoint(row) if row else None

    async def list_endpoints(
        self, account_id: str, environment: str, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[EndpointRecord]:
        q = (
            sa.select(endpoints)
            .where(
                endpoints.c.account_id == account_id,
                endpoints.c.environment == environment,
                endpoints.c.deleted_at.is_(None),
                keyset(endpoints.c.created_at, endpoints.c.id, after),
            )
            .order_by(endpoints.c.created_at.desc(), endpoints.c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [self._endpoint(r) for r in await conn.execute(q)]

    async def save_endpoint(self, endpoint: EndpointRecord, idem: IdempotencyRecord | None = None) -> bool:
        values = endpoint_values(endpoint, self.box)
        for key in ("id", "account_id", "environment", "created_at"):
            values.pop(key)
        try:
            async with self.engine.begin() as conn:
                await self._record_idempotency(conn, endpoint, idem)
                was, was_type = (
                    await conn.execute(
                        sa.select(endpoints.c.ordering, endpoints.c.destination_type).where(
                            endpoints.c.id == endpoint.id
                        )
                    )
                ).one()
                await conn.execute(endpoints.update().where(endpoints.c.id == endpoint.id).values(**values))
                polling = endpoint.destination_type is DestinationType.POLLING
                if polling != (was_type == DestinationType.POLLING):  # what waits changes queue
                    await self.polls.retype(endpoint.id, polling, endpoint.updated_at, conn)
                if was != endpoint.ordering and endpoint.ordering is DeliveryOrder.UNORDERED:
                    await self.queue.unorder(endpoint.id, conn)
                    await self.polls.unorder(endpoint.id, conn)
                if endpoint.status != EndpointStatus.ENABLED:
                    await self.queue.hold(endpoint.id, endpoint.updated_at, conn)
        except IntegrityError:
            if idem is None:
                raise
            return False
        return True

    async def delete_endpoint(self, endpoint: EndpointRecord, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                endpoints.update()
                .where(endpoints.c.id == endpoint.id)
                .values(deleted_at=us(now), updated_at=us(now))
            )
            await self.queue.fail_endpoint(endpoint.id, now, conn)
            await self.polls.forget(endpoint.id, conn)

    # Events and fan-out

    async def publish(
        self, event: EventRecord, idempotency_key: str, now: dt.datetime, exclude_endpoint: str = ""
    ) -> tuple[EventRecord, int]:
        for _ in range(3):
            try:
                return await self._publish_once(event, idempotency_key, now, exclude_endpoint)
            except IntegrityError:
                if not idempotency_key:
                    raise
                # A concurrent publish with the same key won the insert: answer with its event.
        raise RuntimeError("publish: idempotency race did not settle")

    async def _publish_once(
        self, event: EventRecord, idempotency_key: str, now: dt.datetime, exclude_endpoint: str
    ) -> tuple[EventRecord, int]:
        async with self.engine.begin() as conn:
            if idempotency_key:
                row = (
                    await conn.execute(
                        sa.select(events).where(
                            events.c.account_id == event.account_id,
                            events.c.environment == event.environment,
                            events.c.idempotency_key == idempotency_key,
                        )
                    )
                ).first()
                if row is not None:
                    count = (
                        await conn.execute(
                            sa.select(sa.func.count())
                            .select_from(deliveries)
                            .where(deliveries.c.event_id == row.id)
                        )
                    ).scalar_one()
                    return event_of(row), int(count)
            result = await conn.execute(
                events.insert().values(
                    id=event.id,
                    account_id=event.account_id,
                    environment=event.environment,
                    type=event.type,
                    state=event.state,
                    created_at=us(event.created_at),
                    envelope=event.envelope,
                    idempotency_key=idempotency_key or None,
                )
            )
            event.seq = int(result.inserted_primary_key[0])  # type: ignore[index]
            targets = (
                await conn.execute(
                    sa.select(
                        endpoints.c.id,
                        endpoints.c.events,
                        endpoints.c.status,
                        endpoints.c.ordering,
                        endpoints.c.destination_type,
                        endpoints.c.filter,
                    )
                    .where(
                        endpoints.c.account_id == event.account_id,
                        endpoints.c.environment == event.environment,
                        endpoints.c.deleted_at.is_(None),
                    )
                    # The order the filters spend the publish's one step budget in (docs: Filters).
                    .order_by(endpoints.c.created_at, endpoints.c.id)
                )
            ).all()
            # The event's ordering key, for its ordered endpoints (its data read only if there is one).
            ordered = DeliveryOrder.PER_RESOURCE
            key = None
            if any(r.ordering == ordered for r in targets):
                key = ordering_key(ordered, event.type, event.data)
            # An endpoint whose filter the event does not match gets no delivery (``_filtering``).
            passes = Passes(event)
            new = [
                DeliveryRecord(
                    id=sortable_id("msg", now),
                    event_id=event.id,
                    endpoint_id=r.id,
                    account_id=event.account_id,
                    environment=event.environment,
                    event_type=event.type,
                    status=DeliveryStatus.PENDING
                    if r.status == EndpointStatus.ENABLED
                    else DeliveryStatus.HELD,
                    attempt_count=0,
                    schedule_count=0,
                    next_attempt_at=now,
                    created_at=now,
                    updated_at=now,
                    ordering_key=key if r.ordering == ordered else None,
                    event_seq=event.seq,
                    polled=r.destination_type == DestinationType.POLLING,
                )
                for r in targets
                if receives(json.loads(r.events), event.type)
                and r.id != exclude_endpoint
                and passes(r.filter)
            ]
            if new:
                await self.queue.fan_out(new, conn)
                await self.polls.fan_out([d for d in new if d.polled], conn)
            return event, len(new)

    async def create_test_delivery(self, event: EventRecord, delivery: DeliveryRecord) -> None:
        async with self.engine.begin() as conn:
            result = await conn.execute(
                events.insert().values(
                    id=event.id,
                    account_id=event.account_id,
                    environment=event.environment,
                    type=event.type,
                    state=event.state,
                    created_at=us(event.created_at),
                    envelope=event.envelope,
                    idempotency_key=None,
                )
            )
            event.seq = int(result.inserted_primary_key[0])  # type: ignore[index]
            delivery.event_seq = event.seq
            await self.queue.fan_out([delivery], conn)
            await self.polls.fan_out([d for d in (delivery,) if d.polled], conn)

    # The worker's: its queue's, for callers that hold the repository

    async def claim_due(
        self, now: dt.datetime, limit: int, lease_until: dt.datetime, owner: str
    ) -> list[Claim]:
        return await self.queue.claim_due(now, limit, lease_until, owner)

    async def record_outcomes(
        self, outcomes: Sequence[DeliveryResult], owner: str, now: dt.datetime
    ) -> list[Alert]:
        return await self.queue.record_outcomes(outcomes, owner, now)

    async def record_and_claim(
        self,
        outcomes: Sequence[DeliveryResult],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
        skips: Skips = NO_SKIPS,
    ) -> tuple[list[Alert], list[Claim]]:
        return await self.queue.record_and_claim(outcomes, owner, now, limit, lease_until, skips)

    async def release_leases(self, now: dt.datetime) -> int:
        return await self.queue.release_leases(now)

    async def next_due(self) -> dt.datetime | None:
        return await self.queue.next_due()

    async def next_due_after(self, now: dt.datetime) -> dt.datetime | None:
        return await self.queue.next_due_after(now)

    async def get_claim(self, delivery_id: str) -> Claim | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(deliveries).where(deliveries.c.id == delivery_id))).first()
            if row is None:
                return None
            d = delivery_of(row)
            body = (
                await conn.execute(sa.select(events.c.envelope).where(events.c.id == d.event_id))
            ).scalar_one()
            ep = (
                await conn.execute(
                    sa.select(endpoints).where(
                        endpoints.c.id == d.endpoint_id, endpoints.c.deleted_at.is_(None)
                    )
                )
            ).first()
        return Claim(d, bytes(body), self._endpoint(ep) if ep else None)

    async def get_attempt(self, account_id: str, environment: str, attempt_id: str) -> AttemptRecord | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(attempts).where(
                        attempts.c.id == attempt_id,
                        attempts.c.account_id == account_id,
                        attempts.c.environment == environment,
                    )
                )
            ).first()
        return attempt_of(row) if row else None

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(deliveries).where(deliveries.c.id == delivery_id))).first()
        return delivery_of(row) if row else None

    async def record_manual_attempt(self, attempt: AttemptRecord, succeeded: bool, now: dt.datetime) -> None:
        await self.queue.record_manual_attempt(attempt, succeeded, now)

    # Logs

    async def list_deliveries(
        self, flt: DeliveryFilter, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[DeliveryRecord]:
        c = deliveries.c
        conds = _filter_conditions(deliveries, c.created_at, flt)
        if flt.status:
            conds.append(c.status == flt.status)
        if flt.event_type:
            conds.append(c.event_type == flt.event_type)
        if flt.delivery_id:
            conds.append(c.id == flt.delivery_id)
        q = (
            sa.select(deliveries)
            .where(*conds, keyset(c.created_at, c.id, after))
            .order_by(c.created_at.desc(), c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [delivery_of(r) for r in await conn.execute(q)]

    async def list_attempts(
        self, flt: DeliveryFilter, outcome: str, limit: int, after: tuple[dt.datetime, str] | None
    ) -> list[AttemptRecord]:
        c = attempts.c
        conds = _filter_conditions(attempts, c.attempted_at, flt)
        if flt.delivery_id:
            conds.append(c.delivery_id == flt.delivery_id)
        if outcome:
            conds.append(c.outcome == outcome)
        q = (
            sa.select(attempts)
            .where(*conds, keyset(c.attempted_at, c.id, after))
            .order_by(c.attempted_at.desc(), c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [attempt_of(r) for r in await conn.execute(q)]

    async def attempt_stats(
        self, account_id: str, environment: str, since: dt.datetime, recent_since: dt.datetime | None = None
    ) -> tuple[int, int, int, int]:
        c = attempts.c
        ok = c.outcome == AttemptOutcome.SUCCEEDED.value
        recent = c.attempted_at >= us(recent_since) if recent_since else sa.false()

        def count(*conds: Any) -> Any:
            return sa.func.coalesce(sa.func.sum(sa.case((sa.and_(*conds), 1), else_=0)), 0)

        # Both windows in one pass over the scope index (which holds the outcome: revision 0006).
        q = sa.select(sa.func.count(), count(ok), count(recent), count(recent, ok)).where(
            c.account_id == account_id, c.environment == environment, c.attempted_at >= us(since)
        )
        async with self.engine.connect() as conn:
            total, succeeded, recent_total, recent_succeeded = (await conn.execute(q)).one()
        return int(total), int(succeeded), int(recent_total), int(recent_succeeded)

    async def recover(self, endpoint: EndpointRecord, since: dt.datetime | None, now: dt.datetime) -> int:
        if endpoint.destination_type is DestinationType.POLLING:
            return await self.polls.recover(endpoint.id, since, now)  # back in its poll queue
        return await self.queue.recover(endpoint.id, since, now)

    async def recoverable(self, endpoint: EndpointRecord, since: dt.datetime | None) -> int:
        return await self.queue.recoverable(endpoint.id, since)

    async def advance_sandbox(self, account_id: str, by: dt.timedelta, now: dt.datetime) -> int:
        return await self.queue.advance_sandbox(account_id, by, now)

    # Housekeeping

    async def purge_attempts(self, before: dt.datetime) -> int:
        return await self.queue.purge_attempts(before)

    async def purge_delivery_counts(self, now: dt.datetime) -> int:
        return await self.queue.purge_delivery_counts(now)

    async def purge_sandbox_attempts(self, before: dt.datetime) -> int:
        return await self.queue.purge_sandbox_attempts(before)

    async def pending_alerts(self, limit: int, after: tuple[dt.datetime, str] | None = None) -> list[Alert]:
        c = alerts.c
        page: sa.ColumnElement[bool] = sa.true()
        if after is not None:
            t = us(after[0])
            page = sa.or_(c.created_at > t, sa.and_(c.created_at == t, c.id > after[1]))
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                sa.select(alerts).where(c.sent_at.is_(None), page).order_by(c.created_at, c.id).limit(limit)
            )
            return [alert_of(r) for r in rows]

    async def finish_alert(self, alert_id: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                alerts.update().where(alerts.c.id == alert_id).values(sent_at=us(now), error="")
            )

    async def add_alert(self, alert: Alert) -> bool:
        values = {f: getattr(alert, f) for f in ("id", "account_id", "environment", "endpoint_id", "url")}
        row = {**values, "reason": alert.reason, "created_at": us(alert.created_at), "error": ""}
        try:
            async with self.engine.begin() as conn:
                await conn.execute(alerts.insert().values(**row))
        except sa.exc.IntegrityError:
            return False
        return True

    async def stats(self, now: dt.datetime) -> Stats:
        return await self.queue.stats(now)
