"""What a repository sends to its database, seen from SQLAlchemy's cursor events: for tests that count
the work a write does (statements, round trips, compiles) rather than time it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.engine.interfaces import CacheStats
from sqlalchemy.ext.asyncio import AsyncEngine


@dataclass(frozen=True, slots=True)
class Sent:
    text: str
    # Its compiled form came from SQLAlchemy's cache (nothing compiled for it).
    cached: bool
    # Parameter sets it carried (an executemany carries one a row).
    rows: int


class Statements:
    """Every compiled statement sent on ``engine`` from now on (text sent as is, such as BEGIN IMMEDIATE,
    is left out: nothing is compiled for it)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.sent: list[Sent] = []
        sa.event.listen(engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(
        self,
        conn: Any,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: DefaultExecutionContext | None,
        executemany: bool,
    ) -> None:
        if context is None or context.compiled is None:
            return
        cached = context.cache_hit is CacheStats.CACHE_HIT
        self.sent.append(Sent(statement, cached, len(parameters) if executemany else 1))

    def take(self) -> list[Sent]:
        sent, self.sent = self.sent, []
        return sent


def starting(sent: list[Sent], prefix: str) -> list[Sent]:
    """The statements whose text starts with ``prefix`` (case and leading space ignored)."""
    return [s for s in sent if s.text.lstrip().upper().startswith(prefix.upper())]
