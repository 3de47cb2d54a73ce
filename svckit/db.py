"""SQLAlchemy 2 async engines for SQLite and PostgreSQL (schema migrations: ``svckit.migrations``).

URLs: ``sqlite+aiosqlite:///var/authsvc.db`` (embedded default) or
``postgresql+asyncpg://user@host:5432/db``. A ``search_path`` query parameter on a PostgreSQL URL
selects a schema (created if missing); tests use it to isolate themselves in one database.

The password may stay out of the URL: ``--database-password-file FILE`` (``add_password_file_flag``) puts
the file's path on the URL as ``password_file``, and the engine reads the file when it is made and hands
the password to the driver as a connection parameter, so the URL a process holds, logs or shows in an
error names the file, never the password.
"""

from __future__ import annotations

import argparse
import pathlib
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from svckit.fileerrors import cannot_read
from svckit.flags import ArgumentError, add_flag, after_parse, env_name

PASSWORD_FILE = "password_file"


class PasswordFileError(ValueError):
    """The database password file cannot be read (the message names the file, never its content)."""


def read_password(path: str) -> str:
    """The first line of ``path`` (a trailing newline is no part of a password)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = cannot_read(exc, path) if isinstance(exc, OSError) else f"not UTF-8 text: {path}"
        raise PasswordFileError(f"database password file: {reason}") from None
    password = text.splitlines()[0] if text else ""
    if not password:
        raise PasswordFileError(f"database password file is empty: {path}")
    return password


def with_password_file(url: str, path: str) -> str:
    """``url`` naming ``path`` as its password file (the password itself is read by ``create_engine``)."""
    u = make_url(normalize_url(url))
    if u.get_backend_name() != "postgresql":
        raise PasswordFileError("--database-password-file is for a postgresql:// database URL")
    return u.update_query_dict({PASSWORD_FILE: path}).render_as_string(hide_password=False)


def _split_password(u: Any) -> tuple[Any, str | None]:
    """The URL without ``password_file`` and the password that file holds (None without one)."""
    path = u.query.get(PASSWORD_FILE)
    if not isinstance(path, str):
        return u, None
    return u.difference_update_query([PASSWORD_FILE]), read_password(path)


def add_password_file_flag(parser: Any, service: str) -> None:
    """``--database-password-file FILE`` (``<SERVICE>_DATABASE_PASSWORD_FILE``) next to ``--database``."""
    add_flag(
        parser,
        "--database-password-file",
        env=env_name(service, "database-password-file"),
        default="",
        help="file whose first line is the PostgreSQL password (kept out of the URL, logs and errors)",
    )

    def fold(ns: argparse.Namespace) -> None:
        if ns.database_password_file:
            try:
                read_password(ns.database_password_file)
                ns.database = with_password_file(ns.database, ns.database_password_file)
            except PasswordFileError as exc:
                raise ArgumentError(f"argument --database-password-file: {exc}") from None

    after_parse(parser, fold)


def normalize_url(url: str) -> str:
    """Accept plain ``sqlite:///`` / ``postgresql://`` URLs and a bare file path."""
    if "://" not in url:
        return f"sqlite+aiosqlite:///{url}"
    if url.startswith("sqlite://"):
        return "sqlite+aiosqlite://" + url[len("sqlite://") :]
    if url.startswith("postgres://"):
        return "postgresql+asyncpg://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        return "postgresql+asyncpg://" + url[len("postgresql://") :]
    return url


def is_postgres(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "postgresql"


def pg_schema(url: str) -> str | None:
    u = make_url(normalize_url(url))
    value = u.query.get("search_path")
    return value if isinstance(value, str) else None


def asyncpg_dsn(url: str) -> tuple[str, dict[str, str]]:
    """A plain asyncpg DSN and server settings for raw connections (LISTEN/NOTIFY)."""
    u, password = _split_password(make_url(normalize_url(url)))
    settings: dict[str, str] = {}
    schema = pg_schema(url)
    if schema:
        settings["search_path"] = schema
    u = u.difference_update_query(["search_path"]).set(drivername="postgresql")
    if password is not None:
        u = u.set(password=password)
    return u.render_as_string(hide_password=False), settings


def create_engine(url: str, *, pool_size: int = 10) -> AsyncEngine:
    url = normalize_url(url)
    u = make_url(url)
    kwargs: dict[str, Any] = {}
    if u.get_backend_name() == "sqlite":
        db = u.database or ""
        if db and db != ":memory:":
            pathlib.Path(db).parent.mkdir(parents=True, exist_ok=True)
        kwargs["connect_args"] = {"timeout": 30}
        engine = create_async_engine(u, **kwargs)

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()
            # Let the "begin" hook below emit BEGIN IMMEDIATE instead of the driver's deferred BEGIN.
            dbapi_conn.isolation_level = None

        @event.listens_for(engine.sync_engine, "begin")
        def _begin_immediate(conn: Any) -> None:
            # One writer at a time, taken at BEGIN: no deadlocking read-then-write upgrades.
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    u, password = _split_password(u)
    connect_args: dict[str, Any] = {}
    if password is not None:
        connect_args["password"] = password
    schema = pg_schema(url)
    if schema:
        connect_args["server_settings"] = {"search_path": schema}
        u = u.difference_update_query(["search_path"])
    if connect_args:
        kwargs["connect_args"] = connect_args
    engine = create_async_engine(u, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True, **kwargs)
    if schema:
        _SCHEMAS[engine.sync_engine] = schema
    _watch_pool(engine)
    return engine


_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def pool_usage() -> tuple[int, int]:
    """(connections checked out, most the pools may open) over the PostgreSQL engines of this process."""
    in_use = limit = 0
    for engine in list(_POOLS):
        pool = engine.pool
        in_use += int(pool.checkedout())
        limit += int(pool.size()) + max(0, int(getattr(pool, "_max_overflow", 0)))
    return in_use, limit


class _PoolCollector:
    """``db_pool_connections_in_use`` and ``db_pool_connections_max`` at each scrape; nothing at all
    before the process made a PostgreSQL engine (SQLite has no pool worth watching, the portal no
    database)."""

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        if not _POOLS:
            return
        in_use, limit = pool_usage()
        yield GaugeMetricFamily(
            "db_pool_connections_in_use", "Database connections checked out of the pool now", value=in_use
        )
        yield GaugeMetricFamily(
            "db_pool_connections_max",
            "Most database connections the pool opens (size + overflow)",
            value=limit,
        )


def _watch_pool(engine: AsyncEngine) -> None:
    if not _REGISTERED:
        from prometheus_client import REGISTRY

        REGISTRY.register(_PoolCollector())
        _REGISTERED.append(True)
    _POOLS.add(engine.sync_engine)


_REGISTERED: list[bool] = []


_SCHEMAS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def schema_of(engine: AsyncEngine) -> str | None:
    """The PostgreSQL schema an engine was created for (``search_path`` of its URL), if any."""
    return _SCHEMAS.get(engine.sync_engine)


def account_columns(*, primary_key: bool = False) -> tuple[sa.Column[Any], sa.Column[Any]]:
    """The account and environment a row belongs to, as webhookd's and the edge's tables spell them
    (``account_id`` VARCHAR(64), ``environment`` VARCHAR(16)): leading the primary key, or required."""
    key: dict[str, Any] = {"primary_key": True} if primary_key else {"nullable": False}
    return sa.Column("account_id", sa.String(64), **key), sa.Column("environment", sa.String(16), **key)
