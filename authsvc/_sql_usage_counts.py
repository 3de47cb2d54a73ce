"""Storage of the usage counts (authsvc._usage_rules): a batch of minute cells added into the minute,
hour and day rollups in one transaction (skipped whole when its batch id was applied before), one
account's cells summed over a range and grouped, and the prune of rows past their retention.

The search allowance's counter (``_sql_usage``) is another thing: that one is a quota the edge consumes;
these are counts of what the edge answered, written after the fact."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from authsvc._sql_base import SqlBase
from authsvc._sql_usage_tables import (
    CELL_COLUMNS,
    LATENCY_COLUMNS,
    ROLLUPS,
    SUM_COLUMNS,
    usage_batches,
)
from authsvc._usage_rules import (
    BATCH_ID_RETENTION,
    Grain,
    Retention,
    UsageCell,
    UsageQuery,
    cutoffs,
    period_start,
)
from svckit.db import is_postgres

CellKey = tuple[str, int, str, str, str, int, str]  # account, period, environment, key, route, status, error


def rolled(cells: Sequence[UsageCell], grain: Grain) -> list[dict[str, Any]]:
    """``cells`` summed into ``grain`` periods: one row per cell key, in key order (two transactions
    upsert the same rows in the same order: they wait for each other, never deadlock crosswise)."""
    sums: dict[CellKey, list[int]] = {}
    for c in cells:
        key = (c.account_id, period_start(c.period, grain), c.environment, c.key_id, c.route, c.status,
               c.error_type)  # fmt: skip
        total = sums.get(key)
        if total is None:
            sums[key] = [c.count, c.latency_sum_ms, *c.buckets]
        else:
            for i, value in enumerate((c.count, c.latency_sum_ms, *c.buckets)):
                total[i] += value
    rows = []
    for key in sorted(sums):
        row: dict[str, Any] = dict(zip(("account_id", "period", *CELL_COLUMNS), key, strict=True))
        row.update(zip(SUM_COLUMNS, sums[key], strict=True))
        rows.append(row)
    return rows


class UsageCountStorage(SqlBase):
    async def record_usage_counts(
        self, batch_id: str, cells: Sequence[UsageCell], now: dt.datetime
    ) -> tuple[int, bool]:
        """Add ``cells`` (minute periods) into the three rollups, in one transaction with the batch id;
        (0, True) when the batch id was applied before. Returns (cells applied, duplicate)."""
        async with self.engine.begin() as conn:
            claimed = await conn.execute(
                self._insert(usage_batches)
                .values(batch_id=batch_id, applied_at=now.timestamp())
                .on_conflict_do_nothing(index_elements=["batch_id"])
            )
            if claimed.rowcount == 0:
                return 0, True
            for grain, table in ROLLUPS.items():
                rows = rolled(cells, grain)
                if not rows:
                    continue
                insert = self._insert(table)
                upsert = insert.on_conflict_do_update(
                    index_elements=[c.name for c in table.primary_key.columns],
                    set_={name: table.c[name] + insert.excluded[name] for name in SUM_COLUMNS},
                )
                await conn.execute(upsert, rows)
        return len(cells), False

    async def query_usage_counts(self, query: UsageQuery) -> list[UsageCell]:
        """One account's cells in [start, end) read from the ``grain`` rollup, summed per ``group``
        (DIMENSIONS) and per ``time_group`` period (None: over the whole range). NotFound for an unknown
        account when ``must_exist``."""
        account_id, environment, start, end = query.account_id, query.environment, query.start, query.end
        grain, group, time_group = query.grain, query.group, query.time_group
        key_id, status, must_exist = query.key_id, query.status, query.must_exist
        table = ROLLUPS[grain]
        c = table.c
        period: Any = None
        if time_group is not None:
            period = c.period if time_group == grain else c.period - c.period % int(time_group)
            period = period.label("period")
        groups: list[Any] = [c[name] for name in group]
        if period is not None:
            groups.insert(0, period)
        if is_postgres(self.engine):
            # PostgreSQL sums BIGINT into NUMERIC (arbitrary precision, slow: a 90-day query sums 14
            # columns of 40,000 rows); a float8 sum is exact below 2**53, far above any count.
            sums = [sa.func.sum(sa.cast(c[name], sa.Float(53))).label(name) for name in SUM_COLUMNS]
        else:
            sums = [sa.func.sum(c[name]).label(name) for name in SUM_COLUMNS]
        stmt = sa.select(*groups, *sums).where(
            c.account_id == account_id,
            c.period >= int(start.timestamp()),
            c.period < int(end.timestamp()),
        )
        if environment is not None:
            stmt = stmt.where(c.environment == environment)
        if key_id:
            stmt = stmt.where(c.key_id == key_id)
        if status:
            stmt = stmt.where(c.status == status)
        if groups:
            stmt = stmt.group_by(*groups).order_by(*groups)
        async with self.engine.connect() as conn:
            if must_exist:
                await self._get_account(conn, account_id)
            rows = (await conn.execute(stmt)).mappings().all()
        out = []
        for row in rows:
            count = int(row["count"] or 0)
            if not count:
                continue  # no cell at all: SUM over nothing is one row of NULLs
            out.append(
                UsageCell(
                    account_id=account_id,
                    environment=row["environment"] if "environment" in group else "",
                    key_id=row["key_id"] if "key_id" in group else "",
                    route=row["route"] if "route" in group else "",
                    status=int(row["status"]) if "status" in group else 0,
                    error_type=row["error_type"] if "error_type" in group else "",
                    period=int(row["period"]) if period is not None else -1,
                    count=count,
                    latency_sum_ms=int(row["latency_sum_ms"] or 0),
                    buckets=tuple(int(row[name] or 0) for name in LATENCY_COLUMNS),
                )
            )
        return out

    async def prune_usage_counts(self, now: dt.datetime, retention: Retention) -> int:
        """Delete the rollup rows past their retention and the batch ids older than BATCH_ID_RETENTION;
        returns the rows deleted."""
        removed = 0
        async with self.engine.begin() as conn:
            for grain, before in cutoffs(now, retention).items():
                table = ROLLUPS[grain]
                result = await conn.execute(table.delete().where(table.c.period < before))
                removed += int(result.rowcount or 0)
            await conn.execute(
                usage_batches.delete().where(
                    usage_batches.c.applied_at < (now - BATCH_ID_RETENTION).timestamp()
                )
            )
        return removed
