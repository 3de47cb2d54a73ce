"""SQLAlchemy (async Core) adapter of the Repository port (schema migrations: webhookd/migrations).

Times are stored as integer microseconds since the epoch (UTC): exact, index-friendly, the same on
SQLite and PostgreSQL. A claimed delivery's ``next_attempt_at`` is its lease expiry: if the worker dies,
the delivery becomes due again when the lease runs out (on SQLite, a single process, leases are
released at start).
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
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd import _queue_sql as q
from webhookd._queue import new_queue
from webhookd._repository import (
    IDEMPOTENCY_WINDOW,
    Alert,
    AttemptRecord,
    Claim,
    DeliveryFilter,
    DeliveryRecord,
    EndpointRecord,
    EventFilter,
    EventRecord,
    IdempotencyRecord,
    Outcome,
    SigningSecret,
    Stats,
)
from webhookd._retry import Outcome as AttemptOutcome
from webhookd._secretbox import PREFIX as SEALED_PREFIX
from webhookd._secretbox import SecretBox
from webhookd._times import at_us, from_us, us
from webhookd.migrations import SCHEMA

metadata = sa.MetaData()
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

endpoints = sa.Table(
    "wh_endpoints",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("events", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("disabled_reason", sa.Text, nullable=False, default=""),
    sa.Column("secrets", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("deleted_at", sa.BigInteger, nullable=True),
    sa.Index("wh_endpoints_scope", "account_id", "environment", "created_at"),
)

events = sa.Table(
    "wh_events",
    metadata,
    sa.Column("seq", _SEQ, primary_key=True, autoincrement=True),
    sa.Column("id", sa.String(64), nullable=False, unique=True),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("state", sa.String(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("envelope", sa.LargeBinary, nullable=False),
    sa.Column("idempotency_key", sa.String(255), nullable=True),
    sa.Index("wh_events_scope", "account_id", "environment", "seq"),
    sa.Index("wh_events_idem", "account_id", "environment", "idempotency_key", unique=True),
)

deliveries = sa.Table(
    "wh_deliveries",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt_count", sa.Integer, nullable=False, default=0),
    sa.Column("schedule_count", sa.Integer, nullable=False, default=0),
    # When the next attempt is due; next_attempt_at is that, or the lease expiry while claimed.
    sa.Column("due_at", sa.BigInteger, nullable=True),
    sa.Column("next_attempt_at", sa.BigInteger, nullable=True),
    sa.Column("lease_owner", sa.String(64), nullable=True),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Index("wh_deliveries_due", "status", "next_attempt_at"),
    sa.Index("wh_deliveries_endpoint", "endpoint_id", "created_at"),
    sa.Index("wh_deliveries_event", "event_id"),
    sa.Index("wh_deliveries_scope", "account_id", "environment", "created_at"),
    # Revision 0005: the delivery log filtered by event kind, newest first.
    sa.Index("wh_deliveries_scope_type", "account_id", "environment", "event_type", "created_at"),
)

attempts = sa.Table(
    "wh_attempts",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("delivery_id", sa.String(64), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("event_id", sa.String(64), nullable=False),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("attempt_number", sa.Integer, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("response_status", sa.Integer, nullable=False),
    sa.Column("response_body", sa.Text, nullable=False),
    sa.Column("request_headers", sa.Text, nullable=False),
    sa.Column("latency_ms", sa.Float, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("attempted_at", sa.BigInteger, nullable=False),
    sa.Column("manual", sa.Boolean, nullable=False, default=False),
    # JSON object (revision 0003).
    sa.Column("response_headers", sa.Text, nullable=False, server_default="{}"),
    sa.Index("wh_attempts_delivery", "delivery_id"),
    # With the outcome (revision 0006), GetAttemptStats counts from the index alone.
    sa.Index("wh_attempts_scope_outcome", "account_id", "environment", "attempted_at", "outcome"),
    sa.Index("wh_attempts_time", "attempted_at"),
)

alerts = sa.Table(
    "wh_alerts",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(64), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("sent_at", sa.BigInteger, nullable=True),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Index("wh_alerts_pending", "sent_at"),
)


# The idempotency keys of endpoint registrations and rotations (kept 24 h): a retry after the caller
# lost the answer (the edge crashed after the call) gets the same endpoint instead of a second one.
idempotency = sa.Table(
    "wh_idempotency",
    metadata,
    sa.Column("account_id", sa.String(64), primary_key=True),
    sa.Column("environment", sa.String(16), primary_key=True),
    sa.Column("idempotency_key", sa.String(255), primary_key=True),
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("endpoint_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)


def _secrets_json(secrets: Sequence[SigningSecret]) -> str:
    return json.dumps([{"s": s.secret, "exp": us(s.expires_at) if s.expires_at else None} for s in secrets])


def _endpoint(row: Any, box: SecretBox) -> EndpointRecord:
    return EndpointRecord(
        id=row.id,
        account_id=row.account_id,
        environment=row.environment,
        url=row.url,
        events=json.loads(row.events),
        description=row.description,
        status=EndpointStatus(row.status),
        disabled_reason=row.disabled_reason,
        created_at=at_us(row.created_at),
        updated_at=at_us(row.updated_at),
        secrets=[SigningSecret(x["s"], from_us(x["exp"])) for x in json.loads(box.open(row.secrets, row.id))],
    )


def _event(row: Any) -> EventRecord:
    return EventRecord(
        id=row.id,
        account_id=row.account_id,
        environment=row.environment,
        type=row.type,
        state=row.state,
        created_at=at_us(row.created_at),
        envelope=bytes(row.envelope),
        seq=row.seq,
    )


def _delivery(row: Any) -> DeliveryRecord:
    return DeliveryRecord(
        id=row.id,
        event_id=row.event_id,
        endpoint_id=row.endpoint_id,
        account_id=row.account_id,
        environment=row.environment,
        event_type=row.event_type,
        status=DeliveryStatus(row.status),
        attempt_count=row.attempt_count,
        schedule_count=row.schedule_count,
        next_attempt_at=from_us(row.due_at) if row.status == DeliveryStatus.PENDING else None,
        created_at=at_us(row.created_at),
        updated_at=at_us(row.updated_at),
    )


def _attempt(row: Any) -> AttemptRecord:
    return AttemptRecord(
        id=row.id,
        delivery_id=row.delivery_id,
        endpoint_id=row.endpoint_id,
        event_id=row.event_id,
        account_id=row.account_id,
        environment=row.environment,
        attempt_number=row.attempt_number,
        outcome=row.outcome,
        response_status=row.response_status,
        response_body=row.response_body,
        request_headers=json.loads(row.request_headers),
        latency_ms=row.latency_ms,
        error=row.error,
        attempted_at=at_us(row.attempted_at),
        manual=bool(row.manual),
        response_headers=json.loads(row.response_headers),
    )


def _attempt_row(a: AttemptRecord) -> dict[str, Any]:
    return {
        "id": a.id,
        "delivery_id": a.delivery_id,
        "endpoint_id": a.endpoint_id,
        "event_id": a.event_id,
        "account_id": a.account_id,
        "environment": a.environment,
        "attempt_number": a.attempt_number,
        "outcome": a.outcome,
        "response_status": a.response_status,
        "response_body": a.response_body,
        "request_headers": json.dumps(a.request_headers),
        "latency_ms": a.latency_ms,
        "error": a.error,
        "attempted_at": us(a.attempted_at),
        "manual": a.manual,
        "response_headers": json.dumps(a.response_headers),
    }


def _alert(row: Any) -> Alert:
    return Alert(
        id=row.id,
        account_id=row.account_id,
        environment=row.environment,
        endpoint_id=row.endpoint_id,
        url=row.url,
        reason=row.reason,
        created_at=at_us(row.created_at),
    )


def _keyset(created_col: Any, id_col: Any, after: tuple[dt.datetime, str] | None) -> Any:
    """Newest first: rows strictly after the cursor (created, id) in descending order."""
    if after is None:
        return sa.true()
    c = us(after[0])
    return sa.or_(created_col < c, sa.and_(created_col == c, id_col < after[1]))


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


class SqlRepository:
    def __init__(self, engine: AsyncEngine, box: SecretBox | None = None) -> None:
        self.engine = engine
        self.box = box or SecretBox()
        # The store is picked once, here: the worker's cycles go through it.
        self.queue = new_queue(engine, self._endpoint)

    @classmethod
    async def open(cls, url: str, box: SecretBox | None = None) -> SqlRepository:
        engine = create_engine(url)
        await upgrade(engine, SCHEMA)
        return cls(engine, box)

    def _endpoint(self, row: Any) -> EndpointRecord:
        return _endpoint(row, self.box)

    async def seal_secrets(self) -> int:
        """With a key: seal every endpoint's signing secrets still stored in the clear (a database written
        before the key was set). Without one: refuse a database whose secrets are sealed. Rows sealed."""
        cols = (endpoints.c.id, endpoints.c.secrets)
        sealed_rows = endpoints.c.secrets.startswith(SEALED_PREFIX)
        async with self.engine.begin() as conn:
            # One sealed row finds a missing or wrong key at start, not at the first send.
            probe = (await conn.execute(sa.select(*cols).where(sealed_rows).limit(1))).first()
            if probe is not None:
                self.box.open(probe.secrets, probe.id)
            if not self.box.sealing:
                return 0
            plain = (await conn.execute(sa.select(*cols).where(~sealed_rows))).all()
            for r in plain:
                sealed = self.box.seal(r.secrets, r.id)
                await conn.execute(endpoints.update().where(endpoints.c.id == r.id).values(secrets=sealed))
        return len(plain)

    async def close(self) -> None:
        await self.queue.close()
        await self.engine.dispose()

    # Endpoints

    async def create_endpoint(self, endpoint: EndpointRecord, idem: IdempotencyRecord | None = None) -> bool:
        try:
            async with self.engine.begin() as conn:
                await conn.execute(endpoints.insert().values(**self._endpoint_values(endpoint)))
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

    def _endpoint_values(self, e: EndpointRecord) -> dict[str, Any]:
        return {
            "id": e.id,
            "account_id": e.account_id,
            "environment": e.environment,
            "url": e.url,
            "events": json.dumps(e.events),
            "description": e.description,
            "status": e.status,
            "disabled_reason": e.disabled_reason,
            "secrets": self.box.seal(_secrets_json(e.secrets), e.id),
            "created_at": us(e.created_at),
            "updated_at": us(e.updated_at),
        }

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
                _keyset(endpoints.c.created_at, endpoints.c.id, after),
            )
            .order_by(endpoints.c.created_at.desc(), endpoints.c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [self._endpoint(r) for r in await conn.execute(q)]

    async def save_endpoint(self, endpoint: EndpointRecord, idem: IdempotencyRecord | None = None) -> bool:
        values = self._endpoint_values(endpoint)
        for key in ("id", "account_id", "environment", "created_at"):
            values.pop(key)
        try:
            async with self.engine.begin() as conn:
                await self._record_idempotency(conn, endpoint, idem)
                await conn.execute(endpoints.update().where(endpoints.c.id == endpoint.id).values(**values))
                if endpoint.status != EndpointStatus.ENABLED:
                    await self._hold_pending(conn, endpoint)
        except IntegrityError:
            if idem is None:
                raise
            return False
        return True

    async def _hold_pending(self, conn: AsyncConnection, endpoint: EndpointRecord) -> None:
        await conn.exec_driver_sql(self.queue.statement(q.HOLD), (us(endpoint.updated_at), endpoint.id))

    async def delete_endpoint(self, endpoint: EndpointRecord, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                endpoints.update()
                .where(endpoints.c.id == endpoint.id)
                .values(deleted_at=us(now), updated_at=us(now))
            )
            await conn.execute(
                deliveries.update()
                .where(
                    deliveries.c.endpoint_id == endpoint.id,
                    deliveries.c.status.in_([DeliveryStatus.PENDING, DeliveryStatus.HELD]),
                )
                .values(status=DeliveryStatus.FAILED, updated_at=us(now), lease_owner=None)
            )

    # Events and fan-out

    async def publish(
        self, event: EventRecord, idempotency_key: str, now: dt.datetime
    ) -> tuple[EventRecord, int]:
        for _ in range(3):
            try:
                return await self._publish_once(event, idempotency_key, now)
            except IntegrityError:
                if not idempotency_key:
                    raise
                # A concurrent publish with the same key won the insert: answer with its event.
        raise RuntimeError("publish: idempotency race did not settle")

    async def _publish_once(
        self, event: EventRecord, idempotency_key: str, now: dt.datetime
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
                    return _event(row), int(count)
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
            targets = await conn.execute(
                sa.select(endpoints.c.id, endpoints.c.events, endpoints.c.status).where(
                    endpoints.c.account_id == event.account_id,
                    endpoints.c.environment == event.environment,
                    endpoints.c.deleted_at.is_(None),
                )
            )
            t = us(now)
            rows = [
                {
                    "id": sortable_id("msg", now),
                    "event_id": event.id,
                    "endpoint_id": r.id,
                    "account_id": event.account_id,
                    "environment": event.environment,
                    "event_type": event.type,
                    "status": DeliveryStatus.PENDING
                    if r.status == EndpointStatus.ENABLED
                    else DeliveryStatus.HELD,
                    "attempt_count": 0,
                    "schedule_count": 0,
                    "due_at": t,
                    "next_attempt_at": t,
                    "lease_owner": None,
                    "created_at": t,
                    "updated_at": t,
                }
                for r in targets
                if event.type in json.loads(r.events)
            ]
            if rows:
                await conn.execute(deliveries.insert(), rows)
            return event, len(rows)

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
            await conn.execute(deliveries.insert().values(**self._delivery_values(delivery)))

    @staticmethod
    def _delivery_values(d: DeliveryRecord) -> dict[str, Any]:
        return {
            "id": d.id,
            "event_id": d.event_id,
            "endpoint_id": d.endpoint_id,
            "account_id": d.account_id,
            "environment": d.environment,
            "event_type": d.event_type,
            "status": d.status,
            "attempt_count": d.attempt_count,
            "schedule_count": d.schedule_count,
            "due_at": us(d.next_attempt_at) if d.next_attempt_at else None,
            "next_attempt_at": us(d.next_attempt_at) if d.next_attempt_at else None,
            "lease_owner": None,
            "created_at": us(d.created_at),
            "updated_at": us(d.updated_at),
        }

    # The worker: its cycles go through the queue

    async def claim_due(
        self, now: dt.datetime, limit: int, lease_until: dt.datetime, owner: str
    ) -> list[Claim]:
        _alerts, claims = await self.queue.record_and_claim([], owner, now, limit, lease_until)
        return claims

    async def record_outcomes(self, outcomes: Sequence[Outcome], owner: str, now: dt.datetime) -> list[Alert]:
        alerts, _claims = await self.queue.record_and_claim(outcomes, owner, now, 0, now)
        return alerts

    async def record_and_claim(
        self,
        outcomes: Sequence[Outcome],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
    ) -> tuple[list[Alert], list[Claim]]:
        return await self.queue.record_and_claim(outcomes, owner, now, limit, lease_until)

    async def release_leases(self, now: dt.datetime) -> int:
        return await self.queue.release_leases(now)

    async def get_claim(self, delivery_id: str) -> Claim | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(deliveries).where(deliveries.c.id == delivery_id))).first()
            if row is None:
                return None
            d = _delivery(row)
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
        return _attempt(row) if row else None

    async def get_delivery(self, delivery_id: str) -> DeliveryRecord | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(sa.select(deliveries).where(deliveries.c.id == delivery_id))).first()
        return _delivery(row) if row else None

    async def record_manual_attempt(self, attempt: AttemptRecord, succeeded: bool, now: dt.datetime) -> None:
        values: dict[str, Any] = {"attempt_count": deliveries.c.attempt_count + 1, "updated_at": us(now)}
        if succeeded:
            values.update(status=DeliveryStatus.SUCCEEDED, next_attempt_at=None, due_at=None)
        async with self.engine.begin() as conn:
            await conn.execute(attempts.insert().values(**_attempt_row(attempt)))
            await conn.execute(
                deliveries.update().where(deliveries.c.id == attempt.delivery_id).values(**values)
            )

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
        q = (
            sa.select(deliveries)
            .where(*conds, _keyset(c.created_at, c.id, after))
            .order_by(c.created_at.desc(), c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [_delivery(r) for r in await conn.execute(q)]

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
            .where(*conds, _keyset(c.attempted_at, c.id, after))
            .order_by(c.attempted_at.desc(), c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [_attempt(r) for r in await conn.execute(q)]

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
        conds = [
            deliveries.c.endpoint_id == endpoint.id,
            deliveries.c.status.in_([DeliveryStatus.HELD, DeliveryStatus.FAILED]),
        ]
        if since is not None:
            conds.append(deliveries.c.created_at >= us(since))
        async with self.engine.begin() as conn:
            result = await conn.execute(
                deliveries.update()
                .where(*conds)
                .values(
                    status=DeliveryStatus.PENDING,
                    next_attempt_at=us(now),
                    schedule_count=0,
                    lease_owner=None,
                    updated_at=us(now),
                )
            )
        return int(result.rowcount or 0)

    # Stream

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

    async def events_after(
        self, account_id: str, environment: str, after_seq: int, types: Sequence[str], limit: int
    ) -> list[EventRecord]:
        conds = [
            events.c.account_id == account_id,
            events.c.environment == environment,
            events.c.seq > after_seq,
        ]
        if types:
            conds.append(events.c.type.in_(list(types)))
        q = sa.select(events).where(*conds).order_by(events.c.seq).limit(limit)
        async with self.engine.connect() as conn:
            return [_event(r) for r in await conn.execute(q)]

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
        q = (
            sa.select(events)
            .where(*conds, _keyset(c.created_at, c.id, after))
            .order_by(c.created_at.desc(), c.id.desc())
            .limit(limit)
        )
        async with self.engine.connect() as conn:
            return [_event(r) for r in await conn.execute(q)]

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
        return _event(row) if row is not None else None

    # Housekeeping

    async def purge_attempts(self, before: dt.datetime) -> int:
        async with self.engine.begin() as conn:
            result = await conn.exec_driver_sql(self.queue.statement(q.PURGE_ATTEMPTS), (us(before),))
        return int(result.rowcount or 0)

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
            return [_alert(r) for r in rows]

    async def finish_alert(self, alert_id: str, now: dt.datetime) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                alerts.update().where(alerts.c.id == alert_id).values(sent_at=us(now), error="")
            )

    async def stats(self, now: dt.datetime) -> Stats:
        c = deliveries.c
        async with self.engine.connect() as conn:
            depth = (
                await conn.execute(
                    sa.select(sa.func.count())
                    .select_from(deliveries)
                    .where(c.status == DeliveryStatus.PENDING)
                )
            ).scalar_one()
            oldest = (
                await conn.execute(
                    sa.select(sa.func.min(c.next_attempt_at)).where(
                        c.status == DeliveryStatus.PENDING,
                        c.lease_owner.is_(None),
                        c.next_attempt_at <= us(now),
                    )
                )
            ).scalar()
        age = max(0.0, (us(now) - int(oldest)) / 1_000_000) if oldest is not None else 0.0
        return Stats(int(depth), age)

    async def next_due(self) -> dt.datetime | None:
        c = deliveries.c
        async with self.engine.connect() as conn:
            value = (
                await conn.execute(
                    sa.select(sa.func.min(c.next_attempt_at)).where(c.status == DeliveryStatus.PENDING)
                )
            ).scalar()
        return from_us(value)
