"""The delivery queue on SQLite: each step of ``webhookd._queue`` runs whole on one synchronous ``sqlite3``
connection in a dedicated thread; reads (the queue gauges, when the next delivery is due) run on a second
connection in a thread of their own, so that a read's walk never holds up the worker's cycle (the count of
expired leases walks every due row: a third of a second for a million) and a write never holds up a read
(WAL: a reader sees the last commit and never waits for the writer).

Through SQLAlchemy and aiosqlite every statement (BEGIN, each execute, each fetch, COMMIT) hops to
aiosqlite's thread and back, and SQLAlchemy builds parameters row by row; here a whole step (a worker's
cycle: its results and its claim) is one hop, plain tuples, and SQLite's own work runs outside the event
loop's thread. The statements are ``webhookd._queue_sql``'s, as PostgreSQL's are. SQLite means one
webhookd process and one writer (``BEGIN IMMEDIATE``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from webhookd import _queue_rows as qr
from webhookd import _queue_sql as q
from webhookd._claim_sql import CLAIMED_ENDPOINTS_SQLITE, CLAIMED_SQLITE
from webhookd._queue import StatementQueue, Step, drive, result_parts
from webhookd._repository import EndpointRecord

T = TypeVar("T")
log = logging.getLogger("webhookd.sqlite")
CHECKPOINT_SECONDS = 0.5

_TEXTS = {name: statement.sqlite_text() for name, statement in q.STATEMENTS.items()}


@functools.lru_cache(maxsize=256)
def _batch_text(name: str, rows: int, width: int, first: int) -> str:
    """A BATCH statement's text for ``rows`` rows (a chunk's size is a power of two: few texts)."""
    return _TEXTS[name].format(values=q.values_list(rows, width, first))


def _pow2_chunks(rows: list[T]) -> list[list[T]]:
    """Split into power-of-two sized chunks (at most 256): few distinct statements for the statement cache,
    few statements per batch (the sqlite3 module drops and retakes the GIL at every step)."""
    out, i = [], 0
    while i < len(rows):
        size = min(256, 1 << ((len(rows) - i).bit_length() - 1))
        out.append(rows[i : i + size])
        i += size
    return out


class SqliteQueue(StatementQueue):
    dialect = "sqlite"
    single_process = True

    def __init__(self, path: str, endpoint_from_row: Callable[[Any], EndpointRecord]) -> None:
        super().__init__(endpoint_from_row)
        self.path = path
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhookd-sqlite")
        self._db: sqlite3.Connection | None = None
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="webhookd-sqlite-read")
        self._reader: sqlite3.Connection | None = None
        self._stop_checkpoints = threading.Event()
        # Set by each transaction of the queue that changed a row, cleared by a checkpoint that copied the
        # whole WAL back: with nothing written since, the checkpointer does nothing (an idle service's claim
        # every poll changes no row, and its WAL has nothing to copy back).
        self._written = threading.Event()
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

    def _reader_conn(self) -> sqlite3.Connection:
        if self._reader is None:
            self._conn()  # the writer's first: the file is in WAL mode before anything reads it
            db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA busy_timeout=30000")
            db.execute("PRAGMA query_only=ON")
            self._reader = db
        return self._reader

    def _checkpoint_loop(self) -> None:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA busy_timeout=30000")
            while not self._stop_checkpoints.wait(CHECKPOINT_SECONDS):
                if not self._written.is_set():
                    continue  # the queue wrote nothing; other connections checkpoint their own writes
                self._written.clear()
                try:
                    _busy, log_frames, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if copied < log_frames:  # a reader held some back: try again next time
                        self._written.set()
                except sqlite3.Error:
                    self._written.set()
                    log.exception("WAL checkpoint failed; retrying")
            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            db.close()

    async def _hop(self, fn: Callable[..., T], *args: Any, write: bool = True) -> T:
        """``fn(*args)`` in the writer's thread, or in the reads' (``write=False``)."""
        pool = self._pool if write else self._reads
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def _run(self, step: Step[T], *, write: bool = True) -> T:
        if write:
            return await self._hop(self._transaction, step)
        return await self._hop(self._read, step, write=False)

    def _read(self, step: Step[T]) -> T:
        db = self._reader_conn()
        db.execute("BEGIN")  # one snapshot for the step's statements
        try:
            return drive(step, lambda name, params: _execute(db, name, params))
        finally:
            db.execute("COMMIT")

    def _transaction(self, step: Step[T]) -> T:
        db = self._conn()
        db.execute("BEGIN IMMEDIATE")  # the write lock at once
        changes = db.total_changes
        try:
            out = drive(step, lambda name, params: _execute(db, name, params))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        if db.total_changes != changes:
            self._written.set()
        return out

    async def close(self) -> None:
        def close_reader() -> None:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

        def close() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await self._hop(close_reader, write=False)
        self._reads.shutdown(wait=True)
        await self._hop(close)
        self._pool.shutdown(wait=True)
        if self._checkpointer.is_alive():
            self._stop_checkpoints.set()
            await asyncio.to_thread(self._checkpointer.join, 10)


def _execute(db: sqlite3.Connection, name: str, params: Any) -> Any:
    """Run the statement ``name`` as its kind says (``webhookd._queue_sql.Kind``)."""
    kind = q.STATEMENTS[name].kind
    text = _TEXTS[name]
    if kind is q.Kind.EXEC:
        return db.execute(text, params).rowcount
    if kind is q.Kind.ONE:
        return db.execute(text, params).fetchone()
    if kind is q.Kind.MANY:
        db.executemany(text, params)
        return None
    if kind is q.Kind.RESULTS:
        for part_name, part_params in result_parts(params):
            _execute(db, part_name, part_params)
        return None
    if kind is q.Kind.BATCH:
        head, rows = params
        for part in _pow2_chunks(rows):
            sql = _batch_text(name, len(part), len(part[0]), len(head) + 1)
            db.execute(sql, [*head, *itertools.chain.from_iterable(part)])
        return None
    return _claim(db, text, params)


def _claim(db: sqlite3.Connection, text: str, params: tuple[Any, ...]) -> qr.Claimed:
    ids = [r[0] for r in db.execute(text, params).fetchall()]
    if not ids:
        return qr.NOTHING_CLAIMED
    rows = db.execute(CLAIMED_SQLITE, (json.dumps(ids),)).fetchall()
    w = q.DELIVERY_WIDTH
    endpoint_ids = json.dumps(list({r[2] for r in rows}))
    endpoints = {r[0]: r for r in db.execute(CLAIMED_ENDPOINTS_SQLITE, (endpoint_ids,))}
    return qr.Claimed([r[:w] for r in rows], {r[1]: r[w] for r in rows}, endpoints)
