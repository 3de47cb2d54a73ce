"""The worker's hot path on SQLite: claims and group commits on one synchronous ``sqlite3`` connection in a
dedicated thread.

Through SQLAlchemy and aiosqlite every statement (BEGIN, each execute, each fetch, COMMIT) hops to
aiosqlite's thread and back, and SQLAlchemy builds parameters row by row; here a whole claim or a whole
group commit is one hop, plain ``executemany`` with tuples, and SQLite's own work runs outside the event
loop's thread. Same statements, same transactions (BEGIN IMMEDIATE ... COMMIT), same durability as
``SqlRepository``, which delegates ``claim_due`` and ``record_outcomes`` here for a SQLite file.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from svckit.ids import new_id
from svckit.webhook_status import DeliveryStatus, EndpointStatus
from webhookd._repository import (
    Alert,
    Claim,
    DeliveryRecord,
    EndpointRecord,
    Outcome,
)
from webhookd._sql import at_us, us

T = TypeVar("T")
log = logging.getLogger("webhookd.sqlite")
CHECKPOINT_SECONDS = 0.5

IN_CHUNK = 500  # ids per IN (...) list, far below SQLite's host-parameter limit

_ENDPOINT_COLUMNS = (
    "id account_id environment url events description status disabled_reason secrets created_at updated_at"
)
_EndpointRow = collections.namedtuple("_EndpointRow", _ENDPOINT_COLUMNS)  # type: ignore[misc]

_CLAIM = """
    UPDATE wh_deliveries SET next_attempt_at = ?, lease_owner = ?
    WHERE id IN (
        SELECT id FROM wh_deliveries
        WHERE status = 'pending' AND next_attempt_at <= ?
        ORDER BY next_attempt_at LIMIT ?
    )
    RETURNING id, event_id, endpoint_id, account_id, environment, event_type, status,
              attempt_count, schedule_count, due_at, created_at, updated_at
"""

_ATTEMPT_COLUMNS = (
    "id, delivery_id, endpoint_id, event_id, account_id, environment, attempt_number, outcome,"
    " response_status, response_body, request_headers, latency_ms, error, attempted_at, manual,"
    " response_headers"
)
_INSERT_ATTEMPTS = f"INSERT INTO wh_attempts ({_ATTEMPT_COLUMNS}) VALUES {{values}}"
_ATTEMPT_MARKS = "(" + ",".join("?" * 16) + ")"

# v.column1..3 = (status, next attempt, delivery id); the lease check keeps a result whose lease ran out
# (and was claimed again elsewhere) from overwriting the newer claim.
_UPDATE_DELIVERIES = """
    UPDATE wh_deliveries SET status = v.column1, next_attempt_at = v.column2, due_at = v.column2,
        lease_owner = NULL, updated_at = ?, attempt_count = attempt_count + {inc},
        schedule_count = schedule_count + {inc}
    FROM (VALUES {values}) AS v
    WHERE wh_deliveries.id = v.column3 AND wh_deliveries.lease_owner = ?
"""


def _pow2_chunks(rows: list[T]) -> list[list[T]]:
    """Split into power-of-two sized chunks (at most 256): few distinct statements for the statement cache,
    few statements per batch (the sqlite3 module drops and retakes the GIL at every step)."""
    out, i = [], 0
    while i < len(rows):
        size = min(256, 1 << ((len(rows) - i).bit_length() - 1))
        out.append(rows[i : i + size])
        i += size
    return out


def _chunks(ids: list[str]) -> list[list[str]]:
    return [ids[i : i + IN_CHUNK] for i in range(0, len(ids), IN_CHUNK)]


class SqliteQueue:
    def __init__(self, path: str, endpoint_from_row: Callable[[Any], EndpointRecord]) -> None:
        self.path = path
        self._endpoint_from_row = endpoint_from_row
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhookd-sqlite")
        self._db: sqlite3.Connection | None = None
        self._stop_checkpoints = threading.Event()
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="webhookd-sqlite-checkpoint", daemon=True
        )

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            # This connection never checkpoints itself: a commit that has to copy the WAL back into the
            # database (and fsync it) would stall claims and commits; the checkpointer thread does it.
            db.execute("PRAGMA wal_autocheckpoint=0")
            self._db = db
            self._checkpointer.start()
        return self._db

    def _checkpoint_loop(self) -> None:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            while not self._stop_checkpoints.wait(CHECKPOINT_SECONDS):
                try:
                    db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    log.exception("WAL checkpoint failed; retrying")
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            db.close()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")
        try:
            out = fn(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return out

    async def close(self) -> None:
        def close() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await self._run(close)
        self._pool.shutdown(wait=True)
        if self._checkpointer.is_alive():
            self._stop_checkpoints.set()
            await asyncio.to_thread(self._checkpointer.join, 10)

    # The worker's one hop per cycle: write the finished results, then claim what is due, in one transaction.
    # Rows are built before the hop and claims after it, on the event loop's thread: the SQLite thread is
    # the pipeline's serial stage, so it does nothing but run statements.

    async def claim_due(
        self, now: dt.datetime, limit: int, lease_until: dt.datetime, owner: str
    ) -> list[Claim]:
        _alerts, claims = await self.record_and_claim([], owner, now, limit, lease_until)
        return claims

    async def record_outcomes(self, outcomes: Sequence[Outcome], owner: str, now: dt.datetime) -> list[Alert]:
        alerts, _claims = await self.record_and_claim(outcomes, owner, now, 0, now)
        return alerts

    async def record_and_claim(
        self,
        outcomes: Sequence[Outcome],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
    ) -> tuple[list[Alert], list[Claim]]:
        writes = _Writes.build(outcomes, owner, now) if outcomes else None
        claim = (us(lease_until), owner, us(now), limit) if limit > 0 else None
        if writes is None and claim is None:
            return [], []  # no write lock for nothing
        alert_rows, (rows, bodies, eps) = await self._run(self._cycle_sync, writes, claim)
        alerts = [Alert(a[0], a[1], a[2], a[3], a[4], a[5], now) for a in alert_rows]
        return alerts, self._claims(rows, bodies, eps)

    def _cycle_sync(self, writes: _Writes | None, claim: tuple[int, str, int, int] | None) -> tuple[Any, Any]:
        def cycle(db: sqlite3.Connection) -> tuple[Any, Any]:
            alerts = writes.apply(db) if writes is not None else []
            claimed = self._claim_rows(db, claim) if claim is not None else ([], {}, {})
            return alerts, claimed

        return self._transaction(cycle)

    @staticmethod
    def _claim_rows(
        db: sqlite3.Connection, params: tuple[int, str, int, int]
    ) -> tuple[list[Any], dict[str, bytes], dict[str, Any]]:
        rows = db.execute(_CLAIM, params).fetchall()
        if not rows:
            return rows, {}, {}
        bodies: dict[str, bytes] = {}
        for chunk in _chunks(list({r[1] for r in rows})):
            marks = ",".join("?" * len(chunk))
            bodies.update(db.execute(f"SELECT id, envelope FROM wh_events WHERE id IN ({marks})", chunk))
        eps: dict[str, Any] = {}
        for chunk in _chunks(list({r[2] for r in rows})):
            marks = ",".join("?" * len(chunk))
            sql = (
                f"SELECT {', '.join(_ENDPOINT_COLUMNS.split())} FROM wh_endpoints "
                f"WHERE id IN ({marks}) AND deleted_at IS NULL"
            )
            for r in db.execute(sql, chunk):
                eps[r[0]] = r
        return rows, bodies, eps

    def _claims(self, rows: list[Any], bodies: dict[str, bytes], eps: dict[str, Any]) -> list[Claim]:
        endpoints = {k: self._endpoint_from_row(_EndpointRow(*r)) for k, r in eps.items()}
        claims = []
        for r in rows:
            status = DeliveryStatus(r[6])
            d = DeliveryRecord(
                id=r[0],
                event_id=r[1],
                endpoint_id=r[2],
                account_id=r[3],
                environment=r[4],
                event_type=r[5],
                status=status,
                attempt_count=r[7],
                schedule_count=r[8],
                next_attempt_at=at_us(r[9])
                if status == DeliveryStatus.PENDING and r[9] is not None
                else None,
                created_at=at_us(r[10]),
                updated_at=at_us(r[11]),
            )
            claims.append(Claim(d, bytes(bodies[d.event_id]), endpoints.get(d.endpoint_id)))
        claims.sort(key=lambda c: c.delivery.created_at)
        return claims


class _Writes:
    """One group commit's statements and parameters, built off the SQLite thread."""

    def __init__(self) -> None:
        self.attempts: list[tuple[Any, ...]] = []
        self.updates: dict[int, list[tuple[Any, ...]]] = {1: [], 0: []}
        self.failing: list[str] = []
        self.disabling: list[tuple[str, str]] = []
        self.t = 0
        self.owner = ""

    @classmethod
    def build(cls, outcomes: Sequence[Outcome], owner: str, now: dt.datetime) -> _Writes:
        w = cls()
        w.t = us(now)
        w.owner = owner
        for o in outcomes:
            a = o.attempt
            if a is not None:
                w.attempts.append(
                    (
                        a.id,
                        a.delivery_id,
                        a.endpoint_id,
                        a.event_id,
                        a.account_id,
                        a.environment,
                        a.attempt_number,
                        a.outcome,
                        a.response_status,
                        a.response_body,
                        json.dumps(a.request_headers),
                        a.latency_ms,
                        a.error,
                        us(a.attempted_at),
                        1 if a.manual else 0,
                        json.dumps(a.response_headers),
                    )
                )
            nxt = us(o.next_attempt_at) if o.next_attempt_at else None
            w.updates[1 if o.counts_attempt else 0].append((o.status, nxt, o.delivery_id))
            if o.disable_endpoint:
                w.disabling.append((o.endpoint_id, o.disabled_reason))
        w.failing = list({o.endpoint_id for o in outcomes if o.status != DeliveryStatus.SUCCEEDED})
        return w

    def apply(self, db: sqlite3.Connection) -> list[tuple[Any, ...]]:
        """Run the statements; the new alerts as rows (id, account, environment, endpoint, url, reason)."""
        t = self.t
        for part in _pow2_chunks(self.attempts):
            sql = _INSERT_ATTEMPTS.format(values=",".join([_ATTEMPT_MARKS] * len(part)))
            db.execute(sql, [value for row in part for value in row])
        for inc, rows in self.updates.items():
            for part in _pow2_chunks(rows):
                sql = _UPDATE_DELIVERIES.format(inc=inc, values=",".join(["(?,?,?)"] * len(part)))
                db.execute(sql, [t, *(value for row in part for value in row), self.owner])
        new_alerts: list[tuple[Any, ...]] = []
        for endpoint_id, reason in self.disabling:
            row = db.execute(
                "UPDATE wh_endpoints SET status = ?, disabled_reason = ?, updated_at = ?"
                " WHERE id = ? AND status = ? RETURNING account_id, environment, url",
                (EndpointStatus.DISABLED, reason, t, endpoint_id, EndpointStatus.ENABLED),
            ).fetchone()
            if row is None:
                continue
            alert = (new_id("alrt"), row[0], row[1], endpoint_id, row[2], reason)
            new_alerts.append(alert)
            db.execute(
                "INSERT INTO wh_alerts (id, account_id, environment, endpoint_id, url, reason,"
                " created_at, sent_at, error) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, '')",
                (*alert, t),
            )
        for chunk in _chunks(self.failing):
            # Deliveries waiting for an endpoint that is now disabled are kept, not sent.
            marks = ",".join("?" * len(chunk))
            db.execute(
                "UPDATE wh_deliveries SET status = 'held', updated_at = ?"
                " WHERE endpoint_id IN (SELECT id FROM wh_endpoints"
                f" WHERE id IN ({marks}) AND status = ?)"
                " AND status = 'pending' AND lease_owner IS NULL",
                (t, *chunk, EndpointStatus.DISABLED),
            )
        return new_alerts
