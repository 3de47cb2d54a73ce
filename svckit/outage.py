"""A dependency outage (the database refuses, lost or cannot take a connection; Redis or a peer does not
answer) told apart from a bug, counted by what failed and why, and logged as one line per outage, not one
per request.

``classify`` is the one place that says which exceptions are outages: a pure function of the exception
(and what caused it) to an ``Outage`` (dependency, reason), or None for a bug. Everything that answers a
caller asks it: the gRPC servers (UNAVAILABLE, svckit.grpc_server), the edge and the portal (503
``service_unavailable`` with Retry-After), and the background loops.

A caller must see neither the database's user nor the driver's message: an outage is answered as
``service_unavailable`` (503, gRPC UNAVAILABLE) with ``OUTAGE_MESSAGE``; the details go to the log,
where ``OutageLog`` counts the failures and logs at most one line every ``interval`` seconds (the first
at once), with the error and the id of one request it failed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import sqlalchemy.exc
from prometheus_client import Counter

from svckit.logs import request_id_var
from svckit.refusallog import RefusalTally

OUTAGE_MESSAGE = "a backend service is unavailable; retry later"
INTERNAL_MESSAGE = "internal error; the request id identifies it in our logs"
SUMMARY = "dependency unavailable"
# What an answer to an outage tells the caller to wait (seconds): the database probe's interval and the
# pool's reconnect make a few seconds the usual recovery step.
RETRY_AFTER = 5
# Every failure OutageLog counts, by what failed (database, redis, peer) and why (``REASONS``): what
# the DependencyFailures alert watches (docs/alerts.md).
FAILURES = Counter(
    "dependency_failures_total",
    "Requests or calls failed by an outage, by what failed and why",
    ["dependency", "reason"],
)

# The reasons ``classify`` gives (the label values of dependency_failures_total; a bounded set).
REFUSED = "connection_refused"
LOST = "connection_lost"
TIMEOUT = "timeout"
NOT_ACCEPTING = "not_accepting_connections"
MISSING = "database_missing"
CREDENTIALS = "credentials_refused"
TOO_MANY = "too_many_connections"
RESOURCES = "insufficient_resources"
CANNOT_OPEN = "cannot_open"
LOCKED = "locked"
UNAVAILABLE = "unavailable"
REASONS = (
    REFUSED, LOST, TIMEOUT, NOT_ACCEPTING, MISSING, CREDENTIALS, TOO_MANY, RESOURCES, CANNOT_OPEN, LOCKED,
    UNAVAILABLE,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Outage:
    """What failed (``database``, ``redis``, ``peer``) and why (one of ``REASONS``)."""

    dependency: str
    reason: str


# PostgreSQL SQLSTATEs of a server that cannot take or keep a connection (asyncpg's exceptions, and the
# DBAPI errors SQLAlchemy wraps them in, carry ``sqlstate``). Exact codes first, then classes (two
# characters). 55000 is asyncpg's ObjectNotInPrerequisiteStateError: "database ... is not currently
# accepting connections" (ALLOW_CONNECTIONS false); its subclasses (55P03 lock not available, 55006
# object in use) are a statement's conflicts, not outages, hence exact codes only.
_SQLSTATES: dict[str, str] = {
    "55000": NOT_ACCEPTING,
    "57P03": NOT_ACCEPTING,  # cannot connect now: the server is starting or shutting down
    "57P01": LOST,  # admin shutdown: the connection was ended by the server
    "57P02": LOST,  # crash shutdown
    "57P04": MISSING,  # the database was dropped under the connection
    "57014": TIMEOUT,  # query cancelled (statement_timeout)
    "3D000": MISSING,  # invalid catalog name: no such database
    "53300": TOO_MANY,
    "08001": REFUSED,  # the client could not open a connection
    "08004": REFUSED,  # the server rejected the connection
}
_SQLSTATE_CLASSES: dict[str, str] = {"08": LOST, "28": CREDENTIALS, "53": RESOURCES}

# SQLite's texts of a file it cannot use (sqlite3.OperationalError says nothing more precise); any other
# OperationalError there ("no such table", a syntax error) is a bug.
_SQLITE: tuple[tuple[str, str], ...] = (
    ("unable to open database file", CANNOT_OPEN),
    ("database is locked", LOCKED),
    ("disk i/o error", CANNOT_OPEN),
    ("database or disk is full", RESOURCES),
    ("readonly database", CANNOT_OPEN),
)
_GRPC = {
    grpc.StatusCode.UNAVAILABLE: UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: TIMEOUT,
}


def _sqlstate(exc: BaseException) -> str | None:
    code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    return code if isinstance(code, str) and len(code) == 5 else None


def _redis_errors() -> Any:
    """redis-py's exceptions module if this process imported it, else None: a process that never imported
    redis cannot have its errors, and not importing it here saves every service ~0.1 s of start."""
    return sys.modules.get("redis.exceptions")


def _one(exc: BaseException) -> Outage | None:
    """The outage ``exc`` itself says, without looking at its causes."""
    errors = _redis_errors()
    if errors is not None and isinstance(exc, errors.TimeoutError):
        return Outage("redis", TIMEOUT)
    if errors is not None and isinstance(exc, errors.ConnectionError):
        return Outage("redis", REFUSED if isinstance(exc.__cause__, ConnectionRefusedError) else UNAVAILABLE)
    if isinstance(exc, grpc.aio.AioRpcError) or (isinstance(exc, grpc.RpcError) and hasattr(exc, "code")):
        reason = _GRPC.get(exc.code())
        return Outage("peer", reason) if reason is not None else None
    code = _sqlstate(exc)
    if code is not None:
        reason = _SQLSTATES.get(code) or _SQLSTATE_CLASSES.get(code[:2])
        return Outage("database", reason) if reason is not None else None
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        for fragment, reason in _SQLITE:
            if fragment in text:
                return Outage("database", reason)
        return None
    if isinstance(exc, sqlalchemy.exc.TimeoutError):  # no pooled connection freed in time
        return Outage("database", TIMEOUT)
    if isinstance(exc, sqlalchemy.exc.DisconnectionError):
        return Outage("database", LOST)
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated:
        return Outage("database", LOST)
    if _asyncpg_connection_gone(exc):
        return Outage("database", LOST)
    if isinstance(exc, ConnectionRefusedError):
        return Outage("database", REFUSED)
    if isinstance(exc, TimeoutError):
        return Outage("database", TIMEOUT)
    if isinstance(exc, ConnectionError):
        return Outage("database", LOST)
    if isinstance(exc, OSError):  # no route, no such host, ...: the server cannot be reached
        return Outage("database", UNAVAILABLE)
    return None


def _asyncpg_connection_gone(exc: BaseException) -> bool:
    try:
        import asyncpg
    except ImportError:  # pragma: no cover - asyncpg is a dependency of every service
        return False
    # asyncpg's InterfaceError: "connection is closed", "connection was closed in the middle of operation".
    return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)


def _dependency(chain: list[BaseException], found: Outage) -> Outage:
    """A bare OSError or TimeoutError is named by what raised it: Redis and gRPC errors say so themselves;
    inside SQLAlchemy's or a driver's error it is the database."""
    errors = _redis_errors()
    for exc in chain:
        if errors is not None and isinstance(exc, errors.RedisError):
            return Outage("redis", found.reason)
    return found


def classify(exc: BaseException) -> Outage | None:
    """The dependency outage ``exc`` (or an exception that caused it) is, or None when it is a bug.

    Why it is shaped so: an outage is answered 503 and counted by (dependency, reason); a bug 500 with its
    traceback. Opening a connection that the server refuses in any way (it is down, the database does not
    allow connections or does not exist, the role is refused, the connection slots are full) and losing one
    are outages whichever layer wraps them (SQLAlchemy's DBAPIError wraps the driver's error, which carries
    the SQLSTATE). A statement the server rejects (a constraint, a syntax error, "no such table") is a bug
    (or a refusal the caller handles), never an outage. A bare OSError with no wrapper names the database:
    the services' only socket besides gRPC and Redis, whose errors say what they are.
    """
    seen: set[int] = set()
    chain: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        chain.append(current)
        # What caused it: the driver's error a DBAPIError wraps (``orig``, not always its __cause__), the
        # cause, and the context even under ``raise ... from None`` (a rollback failing on the
        # connection that was lost is still the outage).
        for nxt in (current.__context__, current.__cause__, getattr(current, "orig", None)):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    # The deepest error is the most precise (the driver's SQLSTATE under SQLAlchemy's wrapper), but a
    # wrapper may know more than what it wraps (connection_invalidated): first match from the bottom.
    for one in reversed(chain):
        found = _one(one)
        if found is not None:
            return _dependency(chain, found)
    # A SQLAlchemy OperationalError or InterfaceError whose driver error said nothing more (the driver
    # gone before it could say): the connection failed.
    for one in chain:
        if isinstance(
            one, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError
        ) and not isinstance(one.orig, sqlite3.Error):
            return Outage("database", UNAVAILABLE)
    return None


def is_outage(exc: BaseException) -> bool:
    """Is ``exc`` (or what caused it) a dependency outage rather than a bug? (``classify``)"""
    return classify(exc) is not None


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

    def count(self, exc: BaseException) -> Outage | None:
        """Count and log ``exc`` when it is an outage (``classify``); None (nothing done) for a bug."""
        outage = classify(exc)
        if outage is not None:
            self.add(outage.dependency, exc, outage.reason)
        return outage

    def add(self, what: str, exc: BaseException, reason: str | None = None) -> None:
        """Count a failure of ``what``; ``reason`` defaults to ``classify``'s (``unavailable`` if none)."""
        if reason is None:
            outage = classify(exc)
            reason = outage.reason if outage is not None else UNAVAILABLE
        FAILURES.labels(what, reason).inc()
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
