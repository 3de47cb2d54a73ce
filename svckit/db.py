"""SQLAlchemy 2 async engines for SQLite and PostgreSQL (schema migrations: ``svckit.migrations``).

URLs: ``sqlite+aiosqlite:///var/authsvc.db`` (embedded default) or
``postgresql+asyncpg://user@host:5432/db``. A ``search_path`` query parameter on a PostgreSQL URL
selects a schema (created if missing); tests use it to isolate themselves in one database.
"""

from __future__ import annotations

import pathlib
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


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
