"""svckit.outage.classify by table: which exceptions are a dependency outage (answered 503 and counted
by dependency and reason) and which are bugs (500 with a traceback). The exceptions are the libraries'
own types, built as the drivers build them (asyncpg's error under SQLAlchemy's DBAPI wrapper, with the
SQLSTATE PostgreSQL sends) or provoked for real (a refused socket, a SQLite file that cannot be opened,
Redis on a closed port). The same failures provoked on a live PostgreSQL: tests/e2e/test_outage_answers.py."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable

import asyncpg
import grpc
import pytest
import redis
import redis.exceptions
import sqlalchemy.exc
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_dbapi

from svckit.outage import (
    CANNOT_OPEN,
    CREDENTIALS,
    LOCKED,
    LOST,
    MISSING,
    NOT_ACCEPTING,
    REFUSED,
    RESOURCES,
    TIMEOUT,
    TOO_MANY,
    UNAVAILABLE,
    Outage,
    classify,
)

DBAPI = AsyncAdapt_asyncpg_dbapi(asyncpg)


def via_sqlalchemy(
    error: BaseException, *, statement: str | None = None, invalidated: bool = False
) -> BaseException:
    """``error`` as a SQLAlchemy engine raises it: the driver's error translated into the dialect's DBAPI
    error (which copies its sqlstate), wrapped in sqlalchemy.exc.DBAPIError.instance, each the cause of
    the next."""
    translated = DBAPI.Error(str(error), error)
    translated.__cause__ = error
    wrapped = sqlalchemy.exc.DBAPIError.instance(
        statement, None, translated, DBAPI.Error, connection_invalidated=invalidated
    )
    wrapped.__cause__ = translated
    return wrapped


def via_sqlite(error: BaseException) -> BaseException:
    wrapped = sqlalchemy.exc.DBAPIError.instance("SELECT 1", None, error, sqlite3.Error)
    wrapped.__cause__ = error
    return wrapped


def refused_socket() -> BaseException:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: a connect is refused
        with socket.socket() as c:
            try:
                c.connect(("127.0.0.1", port))
            except OSError as exc:
                return exc
    raise AssertionError("connect was not refused")


def sqlite_cannot_open() -> BaseException:
    try:
        sqlite3.connect("/nonexistent-dir-for-outage-test/x.db")
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError("opened")


def sqlite_bug() -> BaseException:
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM no_such_table")
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError("no error")


def redis_refused() -> BaseException:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        try:
            redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1).ping()
        except redis.exceptions.RedisError as exc:
            return exc
    raise AssertionError("no error")


def rpc(code: grpc.StatusCode) -> BaseException:
    error: BaseException = grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), "details")
    return error


def pg(cls: type[asyncpg.PostgresError], message: str) -> asyncpg.PostgresError:
    return cls(message)


DB = "database"
CASES: list[tuple[str, Callable[[], BaseException], Outage | None]] = [
    # PostgreSQL refusing to open a connection, under SQLAlchemy's wrapper (statement None: at connect).
    (
        "ALLOW_CONNECTIONS false (55000, ObjectNotInPrerequisiteStateError)",
        lambda: via_sqlalchemy(
            pg(
                asyncpg.exceptions.ObjectNotInPrerequisiteStateError,
                'database "x" is not currently accepting connections',
            )
        ),
        Outage(DB, NOT_ACCEPTING),
    ),
    (
        "server starting or stopping (57P03, CannotConnectNowError)",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.CannotConnectNowError, "the database system is starting up")
        ),
        Outage(DB, NOT_ACCEPTING),
    ),
    (
        "no such database (3D000, InvalidCatalogNameError)",
        lambda: via_sqlalchemy(pg(asyncpg.exceptions.InvalidCatalogNameError, 'database "x" does not exist')),
        Outage(DB, MISSING),
    ),
    (
        "password refused (28P01, InvalidPasswordError)",
        lambda: via_sqlalchemy(pg(asyncpg.exceptions.InvalidPasswordError, "password authentication failed")),
        Outage(DB, CREDENTIALS),
    ),
    (
        "role may not log in (28000, InvalidAuthorizationSpecificationError)",
        lambda: via_sqlalchemy(
            pg(
                asyncpg.exceptions.InvalidAuthorizationSpecificationError,
                'role "x" is not permitted to log in',
            )
        ),
        Outage(DB, CREDENTIALS),
    ),
    (
        "connection slots full (53300, TooManyConnectionsError)",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.TooManyConnectionsError, "too many connections for role")
        ),
        Outage(DB, TOO_MANY),
    ),
    (
        "disk full (53100)",
        lambda: via_sqlalchemy(pg(asyncpg.exceptions.DiskFullError, "could not extend file")),
        Outage(DB, RESOURCES),
    ),
    (
        "server shut down under the connection (57P01, AdminShutdownError)",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.AdminShutdownError, "terminating connection due to administrator command"),
            statement="SELECT 1",
            invalidated=True,
        ),
        Outage(DB, LOST),
    ),
    (
        "database dropped under the connection (57P04)",
        lambda: via_sqlalchemy(pg(asyncpg.exceptions.DatabaseDroppedError, "database dropped")),
        Outage(DB, MISSING),
    ),
    (
        "statement_timeout (57014)",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.QueryCanceledError, "canceling statement"), statement="x"
        ),
        Outage(DB, TIMEOUT),
    ),
    (
        "connection closed mid-operation (asyncpg ConnectionDoesNotExistError)",
        lambda: via_sqlalchemy(
            asyncpg.exceptions.ConnectionDoesNotExistError(
                "connection was closed in the middle of operation"
            ),
            statement="SELECT 1",
        ),
        Outage(DB, LOST),
    ),
    (
        "asyncpg InterfaceError: connection is closed",
        lambda: asyncpg.exceptions.InterfaceError("cannot call Connection.fetch(): connection is closed"),
        Outage(DB, LOST),
    ),
    (
        "connection invalidated by SQLAlchemy (no SQLSTATE)",
        lambda: via_sqlalchemy(RuntimeError("gone"), statement="SELECT 1", invalidated=True),
        Outage(DB, LOST),
    ),
    (
        "the pool had no connection in time",
        lambda: sqlalchemy.exc.TimeoutError("QueuePool limit"),
        Outage(DB, TIMEOUT),
    ),
    ("a refused TCP connect (provoked)", refused_socket, Outage(DB, REFUSED)),
    (
        "a refused connect under SQLAlchemy",
        lambda: via_sqlalchemy(ConnectionRefusedError(111, "Connect call failed")),
        Outage(DB, REFUSED),
    ),
    ("a connect that timed out", lambda: TimeoutError(), Outage(DB, TIMEOUT)),
    ("no route to host", lambda: OSError(113, "No route to host"), Outage(DB, UNAVAILABLE)),
    # SQLite: only a file it cannot use is an outage.
    (
        "SQLite: unable to open database file (provoked)",
        lambda: via_sqlite(sqlite_cannot_open()),
        Outage(DB, CANNOT_OPEN),
    ),
    (
        "SQLite: database is locked",
        lambda: via_sqlite(sqlite3.OperationalError("database is locked")),
        Outage(DB, LOCKED),
    ),
    # Redis and gRPC peers.
    ("Redis on a closed port (provoked)", redis_refused, Outage("redis", REFUSED)),
    (
        "Redis timeout",
        lambda: redis.exceptions.TimeoutError("Timeout reading from socket"),
        Outage("redis", TIMEOUT),
    ),
    ("gRPC UNAVAILABLE", lambda: rpc(grpc.StatusCode.UNAVAILABLE), Outage("peer", UNAVAILABLE)),
    ("gRPC DEADLINE_EXCEEDED", lambda: rpc(grpc.StatusCode.DEADLINE_EXCEEDED), Outage("peer", TIMEOUT)),
    # Bugs and refusals of a statement: never outages.
    ("SQLite: no such table (provoked)", lambda: via_sqlite(sqlite_bug()), None),
    (
        "unique violation",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.UniqueViolationError, "duplicate key"), statement="INSERT"
        ),
        None,
    ),
    (
        "lock not available (55P03, a subclass of 55000's class)",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.LockNotAvailableError, "could not obtain lock"), statement="x"
        ),
        None,
    ),
    (
        "undefined table (42P01)",
        lambda: via_sqlalchemy(
            pg(asyncpg.exceptions.UndefinedTableError, "relation does not exist"), statement="x"
        ),
        None,
    ),
    ("gRPC INTERNAL", lambda: rpc(grpc.StatusCode.INTERNAL), None),
    ("gRPC INVALID_ARGUMENT", lambda: rpc(grpc.StatusCode.INVALID_ARGUMENT), None),
    ("Redis answering an error", lambda: redis.exceptions.ResponseError("WRONGTYPE"), None),
    ("a bug", lambda: KeyError("x"), None),
]


@pytest.mark.parametrize(("case", "make", "expected"), CASES, ids=[c[0] for c in CASES])
def test_classify(case: str, make: Callable[[], BaseException], expected: Outage | None) -> None:
    assert classify(make()) == expected


def test_an_error_raised_while_handling_an_outage_is_the_outage() -> None:
    """An error raised in an ``except`` of an outage (a rollback on a dead connection) keeps it as
    __context__: the answer is still 503, not a bug's 500."""
    try:
        try:
            raise via_sqlalchemy(pg(asyncpg.exceptions.TooManyConnectionsError, "too many"))
        except sqlalchemy.exc.DBAPIError:
            raise RuntimeError("rollback failed")  # noqa: B904 - the implicit context is the point
    except RuntimeError as exc:
        assert classify(exc) == Outage(DB, TOO_MANY)


def test_the_driver_error_a_wrapper_holds_only_as_orig() -> None:
    wrapped = sqlalchemy.exc.DBAPIError(
        "SELECT 1", {}, pg(asyncpg.exceptions.InvalidCatalogNameError, "gone")
    )
    assert wrapped.__cause__ is None
    assert classify(wrapped) == Outage(DB, MISSING)
