"""The delivery queue on SQLite: claims and group commits on one synchronous ``sqlite3`` connection in a
dedicated thread.

Through SQLAlchemy and aiosqlite every statement (BEGIN, each execute, each fetch, COMMIT) hops to
aiosqlite's thread and back, and SQLAlchemy builds parameters row by row; here a whole cycle is one hop,
plain tuples, and SQLite's own work runs outside the event loop's thread. The statements are
``webhookd._queue_sql``'s, as PostgreSQL's are. SQLite means one webhookd process and one writer
(``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from webhookd import _queue_sql as q
from webhookd._repository import Alert, Claim, EndpointRecord, Outcome
from webhookd._times import us

T = TypeVar("T")
log = logging.getLogger("webhookd.sqlite")
CHECKPOINT_SECONDS = 0.5
IN_CHUNK = 500  # ids per IN (...) list, far below SQLite's host-parameter limit

_CLAIM = q.sqlite(q.CLAIM_SQLITE)
_RECORD_DELIVERIES = q.sqlite(q.RECORD_DELIVERIES_SQLITE)
_DISABLE_ENDPOINT = q.sqlite(q.DISABLE_ENDPOINT)
_INSERT_ALERT = q.sqlite(q.INSERT_ALERT)
_HOLD = q.sqlite(q.HOLD)
_RELEASE_LEASES = q.sqlite(q.RELEASE_LEASES)


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

    @staticmethod
    def statement(text: str) -> str:
        return q.sqlite(text)

    async def release_leases(self, now: dt.datetime) -> int:
        """At start: SQLite means one process, so every lease left is a killed predecessor's."""
        return await self._run(self._transaction, lambda db: db.execute(_RELEASE_LEASES).rowcount)

    # The worker's one hop per cycle: write the finished results, then claim what is due, in one transaction.
    # Rows are built before the hop and claims after it, on the event loop's thread: the SQLite thread is
    # the pipeline's serial stage, so it does nothing but run statements.

    async def record_and_claim(
        self,
        outcomes: Sequence[Outcome],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
    ) -> tuple[list[Alert], list[Claim]]:
        results = q.Results(outcomes, us(now)) if outcomes else None
        claim = (us(lease_until), owner, us(now), limit) if limit > 0 else None
        if results is None and claim is None:
            return [], []  # no write lock for nothing
        alert_rows, (rows, bodies, eps) = await self._run(self._cycle_sync, results, owner, claim)
        endpoints = {k: self._endpoint_from_row(q.EndpointRow(*r)) for k, r in eps.items()}
        return q.alerts_of(alert_rows, now), q.claimed(rows, bodies, endpoints)

    def _cycle_sync(
        self, results: q.Results | None, owner: str, claim: tuple[int, str, int, int] | None
    ) -> tuple[Any, Any]:
        def cycle(db: sqlite3.Connection) -> tuple[Any, Any]:
            alerts = _record(db, results, owner) if results is not None else []
            claimed = _claim(db, claim) if claim is not None else ([], {}, {})
            return alerts, claimed

        return self._transaction(cycle)


def _claim(
    db: sqlite3.Connection, params: tuple[int, str, int, int]
) -> tuple[list[Any], dict[str, bytes], dict[str, Any]]:
    rows = db.execute(_CLAIM, params).fetchall()
    if not rows:
        return rows, {}, {}
    bodies: dict[str, bytes] = {}
    for chunk in _chunks(list({r[1] for r in rows})):
        bodies.update(db.execute(q.CLAIMED_EVENTS_SQLITE.format(marks=",".join("?" * len(chunk))), chunk))
    eps: dict[str, Any] = {}
    for chunk in _chunks(list({r[2] for r in rows})):
        for r in db.execute(q.CLAIMED_ENDPOINTS_SQLITE.format(marks=",".join("?" * len(chunk))), chunk):
            eps[r[0]] = r
    return rows, bodies, eps


def _record(db: sqlite3.Connection, results: q.Results, owner: str) -> list[tuple[Any, ...]]:
    """Run the statements; the new alerts as INSERT_ALERT's rows."""
    t = results.t
    for part in _pow2_chunks(results.attempts):
        sql = q.RECORD_ATTEMPTS_SQLITE.format(values=q.values_list(len(part), 16, 1))
        db.execute(sql, [value for row in part for value in row])
    for part in _pow2_chunks(results.deliveries):
        sql = _RECORD_DELIVERIES.format(values=q.values_list(len(part), 4, 3))
        db.execute(sql, [t, owner, *(value for row in part for value in row)])
    new_alerts: list[tuple[Any, ...]] = []
    for endpoint_id, reason in results.disabling:
        row = db.execute(_DISABLE_ENDPOINT, (reason, t, endpoint_id)).fetchone()
        if row is not None:
            alert = q.alert_row(endpoint_id, reason, row, t)
            db.execute(_INSERT_ALERT, alert)
            new_alerts.append(alert)
    db.executemany(_HOLD, results.holds())
    return new_alerts
