"""A dependency outage (the database cannot be reached, a connection was cut) told apart from a bug, and
logged as one line per outage, not one per request.

A caller must see neither the database's user nor the driver's message: an outage is answered as
``service_unavailable`` (503, gRPC UNAVAILABLE) with ``OUTAGE_MESSAGE``; the details go to the log,
where ``OutageLog`` counts the failures and logs at most one line every ``interval`` seconds (the first
at once), with the error and the id of one request it failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import sqlalchemy.exc
from prometheus_client import Counter

from svckit.logs import request_id_var
from svckit.refusallog import RefusalTally

OUTAGE_MESSAGE = "a backend service is unavailable; retry later"
INTERNAL_MESSAGE = "internal error; the request id identifies it in our logs"
SUMMARY = "dependency unavailable"
# Every failure OutageLog counts, by what failed (database, peer): what an alert watches (docs/alerts.md).
FAILURES = Counter(
    "dependency_failures_total", "Requests or calls failed by an outage, by what failed", ["dependency"]
)


def _driver_outage(exc: BaseException) -> bool:
    try:
        import asyncpg
    except ImportError:  # pragma: no cover - asyncpg is a dependency of every service
        return False
    return isinstance(
        exc,
        asyncpg.PostgresConnectionError
        | asyncpg.InterfaceError
        | asyncpg.CannotConnectNowError
        | asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError
        | asyncpg.TooManyConnectionsError,
    )


def is_outage(exc: BaseException) -> bool:
    """Is ``exc`` (or what caused it) a database or network outage rather than a bug?"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError | sqlalchemy.exc.TimeoutError | sqlalchemy.exc.DisconnectionError):
            return True
        if isinstance(current, sqlalchemy.exc.DBAPIError):
            if current.connection_invalidated or isinstance(
                current, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError
            ):
                return True
            if current.orig is not None and _driver_outage(current.orig):
                return True
        if _driver_outage(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def describe(exc: BaseException) -> str:
    """One line for the log: the error's class and first line (the driver's text stays in the log)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


class OutageLog:
    """Failures counted by what failed (``database``, ``authsvc``...); ``dependency unavailable`` logged
    at WARNING with ``counts``, ``total``, the last ``error`` and a ``request_id`` it failed."""

    def __init__(
        self, logger: logging.Logger, interval: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = logger
        self.tally = RefusalTally(interval)
        self.clock = clock
        self.error = ""
        self.request_id: str | None = None
        self.timer: asyncio.TimerHandle | None = None

    def add(self, what: str, exc: BaseException) -> None:
        FAILURES.labels(what).inc()
        self.error = describe(exc)
        self.request_id = request_id_var.get()
        counts = self.tally.add(what, self.clock())
        if counts is not None:
            self._emit(counts)
            return
        if self.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: the next failure logs the counts
                return
            self.timer = loop.call_later(self.tally.wait(self.clock()), self.flush)

    def flush(self) -> None:
        self.timer = None
        counts = self.tally.due(self.clock())
        if counts is not None:
            self._emit(counts)

    def _emit(self, counts: dict[str, int]) -> None:
        token = request_id_var.set(None)  # a summary is of many requests
        try:
            self.log.warning(
                SUMMARY,
                extra={
                    "counts": counts,
                    "total": sum(counts.values()),
                    "error": self.error,
                    "failed_request_id": self.request_id,
                },
            )
        finally:
            request_id_var.reset(token)
