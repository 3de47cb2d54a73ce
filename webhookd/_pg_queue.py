"""The delivery queue on PostgreSQL: a step of ``webhookd._queue`` is one transaction on one asyncpg
connection of its own (``webhookd._queue_sql``): a worker's cycle is BEGIN, its results as arrays
(``unnest``) into the attempt log, the counts, the deliveries and the queue in one statement, one claim
that also returns each delivery's event body and endpoint, COMMIT (a cycle often carries few results: its
round trips, not its rows, were most of its cost). asyncpg prepares each statement once per connection
and reuses it. Several webhookd processes share the work: the claim skips rows another process has
locked (``FOR UPDATE SKIP LOCKED``), and leases left by a killed process run out instead of being
released at start.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from svckit.db import asyncpg_dsn, schema_of
from svckit.outage import is_outage
from webhookd import _queue_rows as qr
from webhookd import _queue_sql as q
from webhookd._queue import StatementQueue, Step, drive_async
from webhookd._repository import EndpointRecord

T = TypeVar("T")
_TEXTS = {name: statement.postgres_text() for name, statement in q.STATEMENTS.items()}


class PostgresQueue(StatementQueue):
    dialect = "postgresql"
    single_process = False

    def __init__(self, engine: AsyncEngine, endpoint_from_row: Callable[[Any], EndpointRecord]) -> None:
        super().__init__(endpoint_from_row)
        self._dsn, self._settings = asyncpg_dsn(engine.url.render_as_string(hide_password=False))
        schema = schema_of(engine)  # the engine keeps it as a connect argument, not in its URL
        if schema:
            self._settings["search_path"] = schema
        # The claim must walk the due index in order and stop at its limit. With stale statistics (a burst
        # fanned out since the last ANALYZE: the table "has" a few pending rows) the planner picks a bitmap
        # scan of every due row and sorts them all, per claim: 4x the claim's cost on a 20,000-row backlog.
        # Only this connection's queue statements run here; each has an index that serves it without one.
        self._settings["enable_bitmapscan"] = "off"
        # Two connections, each one step at a time (its lock): the worker's cycles and the other writes on
        # one, reads (the queue gauges, when the next delivery is due) on the other, so that a read's walk
        # (the gauges' count of expired leases walks every due row) never holds up a cycle.
        self._conns: dict[bool, asyncpg.Connection | None] = {True: None, False: None}  # by "writes"
        self._locks = {True: asyncio.Lock(), False: asyncio.Lock()}

    async def _connection(self, write: bool = True) -> asyncpg.Connection:
        conn = self._conns[write]
        if conn is None or conn.is_closed():
            conn = self._conns[write] = await asyncpg.connect(self._dsn, server_settings=self._settings)
        return conn

    async def close(self) -> None:
        for write, conn in self._conns.items():
            if conn is not None:
                await conn.close()
                self._conns[write] = None

    async def _run(self, step: Step[T], *, write: bool = True) -> T:
        async with self._locks[write]:
            conn = await self._connection(write)

            async def run(name: str, params: Any) -> Any:
                return await _execute(conn, name, params)

            try:
                async with conn.transaction(readonly=not write):
                    return await drive_async(step, run)
            except BaseException as exc:
                self._failed(conn, write, exc)
                raise

    async def _read_one(self, name: str, params: Any) -> Any:
        # A single SELECT outside a transaction block is its own snapshot: one round trip, not three.
        async with self._locks[False]:
            conn = await self._connection(False)
            try:
                return await _execute(conn, name, params)
            except BaseException as exc:
                self._failed(conn, False, exc)
                raise

    def _failed(self, conn: asyncpg.Connection, write: bool, exc: BaseException) -> None:
        """After a step failed: drop a connection left in doubt; a protocol clash is an ended connection."""
        # A statement that failed rolled back and the connection is fine; anything else (lost,
        # timed out, cancelled mid-statement, or the server ending it: 57P01 after
        # pg_terminate_backend is a PostgresError too) leaves it in doubt: the next step connects
        # again.
        if not isinstance(exc, asyncpg.PostgresError) or conn.is_closed() or is_outage(exc):
            self._conns[write] = None
            conn.terminate()
        if isinstance(exc, asyncpg.InternalClientError):
            # Steps take turns (the lock), so a protocol state clash ("another operation is in
            # progress") is a connection the server ended while it sat idle, met on first use.
            raise asyncpg.ConnectionDoesNotExistError(f"the queue's connection was ended: {exc}") from exc


async def _execute(conn: asyncpg.Connection, name: str, params: Any) -> Any:
    """Run the statement ``name`` as its kind says (``webhookd._queue_sql.Kind``)."""
    kind = q.STATEMENTS[name].kind
    text = _TEXTS[name]
    if kind is q.Kind.EXEC:
        status = await conn.execute(text, *params)  # "UPDATE 3"
        return int(status.rsplit(" ", 1)[-1])
    if kind is q.Kind.ONE:
        return await conn.fetchrow(text, *params)
    if kind is q.Kind.MANY:
        if params:
            await conn.executemany(text, params)
        return None
    if kind is q.Kind.RESULTS:
        t, owner, *parts = params
        arrays = [t, owner]
        for rows, width in zip(parts, q.RESULTS_WIDTHS, strict=True):
            arrays += zip(*rows, strict=True) if rows else [()] * width  # a column's values each
        await conn.execute(text, *arrays)
        return None
    if kind is q.Kind.BATCH:
        head, rows = params
        if rows:
            await conn.execute(text, *head, *zip(*rows, strict=True))
        return None
    return _claimed(await conn.fetch(text, *params))


def _claimed(rows: list[asyncpg.Record]) -> qr.Claimed:
    """The joined claim's rows: delivery columns, the event body, the endpoint's columns (NULLs: deleted)."""
    bodies: dict[str, bytes] = {}
    endpoints: dict[str, Any] = {}
    w = q.DELIVERY_WIDTH
    for r in rows:
        bodies[r[1]] = r[w]
        ep = r[w + 1 :]
        if ep[0] is not None:
            endpoints.setdefault(ep[0], ep)
    return qr.Claimed(rows, bodies, endpoints)
