"""SQLAlchemy 2 async engines and versioned schema migrations, for SQLite and PostgreSQL.

URLs: ``sqlite+aiosqlite:///var/authsvc.db`` (embedded default) or
``postgresql+asyncpg://user@host:5432/db``. A ``search_path`` query parameter on a PostgreSQL URL
selects a schema (created if missing); tests use it to isolate themselves in one database.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

log = logging.getLogger(__name__)


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
    u = make_url(normalize_url(url))
    settings: dict[str, str] = {}
    schema = pg_schema(url)
    if schema:
        settings["search_path"] = schema
    u = u.difference_update_query(["search_path"]).set(drivername="postgresql")
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
    schema = pg_schema(url)
    if schema:
        kwargs["connect_args"] = {"server_settings": {"search_path": schema}}
        u = u.difference_update_query(["search_path"])
    engine = create_async_engine(u, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True, **kwargs)
    if schema:
        _SCHEMAS[engine.sync_engine] = schema
    return engine


_SCHEMAS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def schema_of(engine: AsyncEngine) -> str | None:
    """The PostgreSQL schema an engine was created for (``search_path`` of its URL), if any."""
    return _SCHEMAS.get(engine.sync_engine)


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[AsyncConnection], Awaitable[None]]


async def migrate(engine: AsyncEngine, service: str, migrations: Sequence[Migration]) -> int:
    """Apply every migration newer than the recorded version, each in its own transaction.

    A service's migration 1 may build its tables from the current ``MetaData`` only while it is the
    sole migration: the change that adds migration 2 must first freeze migration 1 as explicit DDL,
    or fresh databases would get version 2's columns from migration 1 and then fail migration 2.

    Returns the schema version after migrating. Safe to run from several processes at once:
    on PostgreSQL an advisory lock serialises them.
    """
    versions = [m.version for m in migrations]
    if versions != sorted(set(versions)):
        raise ValueError("migration versions must be unique and increasing")
    table = f"{service}_schema_version"
    if is_postgres(engine):
        schema = schema_of(engine)
        async with engine.begin() as conn:
            if schema:
                await conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    async with engine.begin() as conn:
        if is_postgres(engine):
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:n))"), {"n": table})
        await conn.exec_driver_sql(
            f"CREATE TABLE IF NOT EXISTS {table} (version INTEGER PRIMARY KEY, description TEXT NOT NULL)"
        )
        row = (await conn.exec_driver_sql(f"SELECT MAX(version) FROM {table}")).scalar()
        current = int(row or 0)
        for m in migrations:
            if m.version <= current:
                continue
            log.info("migrating", extra={"service": service, "version": m.version, "what": m.description})
            await m.apply(conn)
            await conn.execute(
                sa.text(f"INSERT INTO {table} (version, description) VALUES (:v, :d)"),
                {"v": m.version, "d": m.description},
            )
            current = m.version
    return current
