"""Reads of the delivery counts (``webhookd._delivery_counts``): one scope's rows over a range, summed per
endpoint and outcome (and per period when asked), and the prune. ``SqlRepository`` inherits it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from svckit.usagecounts import BUCKETS
from webhookd._tables import delivery_counts

_LATENCY = tuple(f"lat_{i}" for i in range(BUCKETS))


@dataclass(frozen=True, slots=True)
class DeliveryCountRow:
    endpoint_id: str
    outcome: str
    # The period start (unix seconds) grouped by; -1: the whole range.
    period: int
    count: int
    latency_sum_ms: int
    buckets: tuple[int, ...]


class DeliveryCountsSql:
    engine: AsyncEngine

    async def query_delivery_counts(
        self,
        account_id: str,
        environment: str,
        start: dt.datetime,
        end: dt.datetime,
        grain: int,
        group_period: int,
        endpoint_id: str = "",
    ) -> list[DeliveryCountRow]:
        """The scope's counts in [start, end) from the ``grain`` rows, per endpoint and outcome (and per
        ``group_period`` seconds, a multiple of the grain, when not 0), ordered by period, endpoint,
        outcome."""
        c = delivery_counts.c
        groups: list[Any] = [c.endpoint_id, c.outcome]
        if group_period:
            period = c.period if group_period == grain else c.period - c.period % group_period
            groups.insert(0, period.label("period"))
        stmt = (
            sa.select(
                *groups,
                sa.func.sum(c["count"]).label("count"),
                sa.func.sum(c.latency_sum_ms).label("latency_sum_ms"),
                *(sa.func.sum(c[name]).label(name) for name in _LATENCY),
            )
            .where(
                c.account_id == account_id,
                c.environment == environment,
                c.grain == grain,
                c.period >= int(start.timestamp()),
                c.period < int(end.timestamp()),
            )
            .group_by(*groups)
            .order_by(*groups)
        )
        if endpoint_id:
            stmt = stmt.where(c.endpoint_id == endpoint_id)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        return [
            DeliveryCountRow(
                endpoint_id=r["endpoint_id"],
                outcome=r["outcome"],
                period=int(r["period"]) if group_period else -1,
                count=int(r["count"]),
                latency_sum_ms=int(r["latency_sum_ms"]),
                buckets=tuple(int(r[name]) for name in _LATENCY),
            )
            for r in rows
        ]
