"""The one place that picks the delivery queue's store, once, at start (as svix-server's
``queue::new_pair``): PostgreSQL for a PostgreSQL engine, SQLite for a SQLite file, memory without an
engine (tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from webhookd._memory_queue import MemoryQueue
from webhookd._pg_queue import PostgresQueue
from webhookd._queue import StatementQueue
from webhookd._repository import EndpointRecord
from webhookd._sqlite_queue import SqliteQueue


def new_queue(
    engine: AsyncEngine | None, endpoint_from_row: Callable[[Any], EndpointRecord] | None = None
) -> StatementQueue:
    """The store's queue; ``endpoint_from_row`` opens an endpoint row (its sealed secrets)."""
    if engine is None:
        return MemoryQueue(endpoint_from_row)
    if endpoint_from_row is None:
        raise ValueError("a database's queue opens endpoint rows with the repository's secrets box")
    if engine.dialect.name == "postgresql":
        return PostgresQueue(engine, endpoint_from_row)
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:" or "mode=memory" in path:
        raise ValueError(f"webhookd stores deliveries in a SQLite file or PostgreSQL, not {engine.url!r}")
    return SqliteQueue(path, endpoint_from_row)
