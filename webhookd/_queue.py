"""The delivery queue port, and the one place that picks its store (as svix-server's ``queue::new_pair``).

The worker's storage cycle (write the finished results, claim what is due) runs through a ``Queue``;
``new_queue`` picks ``SqliteQueue`` or ``PostgresQueue`` once, from the engine, at start. Both run the
named statements of ``webhookd._queue_sql``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from webhookd._pg_queue import PostgresQueue
from webhookd._repository import Alert, Claim, EndpointRecord, Outcome
from webhookd._sqlite_queue import SqliteQueue


class Queue(Protocol):
    async def record_and_claim(
        self,
        outcomes: Sequence[Outcome],
        owner: str,
        now: dt.datetime,
        limit: int,
        lease_until: dt.datetime,
    ) -> tuple[list[Alert], list[Claim]]:
        """One cycle, one transaction: write ``outcomes`` (their leases held by ``owner``), then lease up
        to ``limit`` due deliveries to ``owner`` until ``lease_until``."""
        ...

    async def release_leases(self, now: dt.datetime) -> int:
        """At start: hand back leases no live process can hold (the store decides which)."""
        ...

    def statement(self, text: str) -> str:
        """A ``webhookd._queue_sql`` statement as this store's driver takes it (for the repository's own
        transactions, through SQLAlchemy's ``exec_driver_sql``)."""
        ...

    async def close(self) -> None: ...


def new_queue(engine: AsyncEngine, endpoint_from_row: Callable[[Any], EndpointRecord]) -> Queue:
    """The store's queue; ``endpoint_from_row`` opens an endpoint row (its sealed secrets)."""
    if engine.dialect.name == "postgresql":
        return PostgresQueue(engine, endpoint_from_row)
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:" or "mode=memory" in path:
        raise ValueError(f"webhookd stores deliveries in a SQLite file or PostgreSQL, not {engine.url!r}")
    return SqliteQueue(path, endpoint_from_row)
