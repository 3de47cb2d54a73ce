"""The delivery queue on PostgreSQL: a cycle is one transaction on one asyncpg connection of its own, with
one statement per step (``webhookd._queue_sql``): the results as arrays (``unnest``) into the attempt log
and the deliveries, then one claim that also returns each delivery's event body and endpoint. asyncpg
prepares each statement once per connection and reuses it. Several webhookd processes share the work:
the claim skips rows another process has locked (``FOR UPDATE SKIP LOCKED``), and leases left by a
killed process run out instead of being released at start.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from svckit.db import asyncpg_dsn, schema_of
from webhookd import _queue_sql as q
from webhookd._repository import Alert, Claim, EndpointRecord, Outcome
from webhookd._times import us

_DELIVERY_WIDTH = len(q.DELIVERY_COLUMNS.split(","))


class PostgresQueue:
    def __init__(self, engine: AsyncEngine, endpoint_from_row: Callable[[Any], EndpointRecord]) -> None:
        self._dsn, self._settings = asyncpg_dsn(engine.url.render_as_string(hide_password=False))
        schema = schema_of(engine)  # the engine keeps it as a connect argument, not in its URL
        if schema:
            self._settings["search_path"] = schema
        self._endpoint_from_row = endpoint_from_row
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()  # one cycle at a time on the connection

    async def _connection(self) -> asyncpg.Connection:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn, server_settings=self._settings)
        return self._conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    @staticmethod
    def statement(text: str) -> str:
        return text

    async def release_leases(self, now: dt.datetime) -> int:
        """Nothing: other processes may hold leases; a killed process's run out by themselves."""
        return 0

    async def record_and_claim(
        self,
        outcomes: Sequence[Outcome],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
    ) -> tuple[list[Alert], list[Claim]]:
        results = q.Results(outcomes, us(now)) if outcomes else None
        if results is None and limit <= 0:
            return [], []
        async with self._lock:
            conn = await self._connection()
            try:
                async with conn.transaction():
                    alert_rows = await _record(conn, results, owner) if results is not None else []
                    rows = (
                        await conn.fetch(q.CLAIM_POSTGRES, us(lease_until), owner, us(now), limit)
                        if limit > 0
                        else []
                    )
            except BaseException as exc:
                # A statement that failed rolled back and the connection is fine; anything else (lost,
                # timed out, cancelled mid-statement) leaves it in doubt: the next cycle connects again.
                if not isinstance(exc, asyncpg.PostgresError) or conn.is_closed():
                    self._conn = None
                    conn.terminate()
                raise
        bodies: dict[str, bytes] = {}
        endpoints: dict[str, EndpointRecord] = {}
        w = _DELIVERY_WIDTH
        for r in rows:
            bodies[r[1]] = r[w]
            ep = r[w + 1 :]
            if ep[0] is not None and ep[0] not in endpoints:
                endpoints[ep[0]] = self._endpoint_from_row(q.EndpointRow(*ep))
        return q.alerts_of(alert_rows, now), q.claimed(rows, bodies, endpoints)


async def _record(conn: asyncpg.Connection, results: q.Results, owner: str) -> list[tuple[Any, ...]]:
    t = results.t
    if results.attempts:
        await conn.execute(q.RECORD_ATTEMPTS_POSTGRES, *zip(*results.attempts, strict=True))
    status, nxt, ids, inc = zip(*results.deliveries, strict=True)
    await conn.execute(q.RECORD_DELIVERIES_POSTGRES, t, owner, status, nxt, ids, inc)
    new_alerts: list[tuple[Any, ...]] = []
    for endpoint_id, reason in results.disabling:
        row = await conn.fetchrow(q.DISABLE_ENDPOINT, reason, t, endpoint_id)
        if row is not None:
            alert = q.alert_row(endpoint_id, reason, row, t)
            await conn.execute(q.INSERT_ALERT, *alert)
            new_alerts.append(alert)
    if results.failing:
        await conn.executemany(q.HOLD, results.holds())
    return new_alerts
