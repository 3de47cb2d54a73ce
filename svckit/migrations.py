"""Schema migrations by Alembic: one environment and one version table per service.

Each service ships an Alembic environment as package data (``authsvc/migrations``: ``env.py`` calling
``run_env`` and ``versions/``, explicit ``op`` revisions) and upgrades to head at start with
``upgrade``: programmatically (no alembic.ini), inside one transaction on the service's own async
engine (Alembic's ``run_sync`` pattern), serialised between processes by PostgreSQL advisory locks: one
per schema (under which a missing schema is created) and the one the previous release took (on SQLite,
``BEGIN IMMEDIATE`` does it). ``migrate`` goes to any revision, down as well as up (``python -m
<service> migrate --to REV``: ``add_migrate_command``); a database at a revision this release does not
know (a newer release's) is refused with a one-line ``SchemaError``. A database made by the previous
release (``<prefix>schema_version`` at its last version) is adopted: stamped at the first revision,
tables and rows kept, the old version table dropped.

Developers use the ``alembic`` command with the repository's alembic.ini (``alembic -n authsvc ...``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from svckit.db import add_password_file_flag, create_engine, is_postgres, normalize_url, schema_of
from svckit.flags import add_flag, env_name, or_default
from svckit.outage import describe, is_outage

log = logging.getLogger(__name__)
# Alembic says "Context impl ..." at INFO on every start; our "schema migrated" line says what changed.
logging.getLogger("alembic").setLevel(logging.WARNING)


@dataclasses.dataclass(frozen=True)
class Schema:
    """What one service's migrations own, and how the previous release's migrate() recorded its version."""

    service: str  # "authsvc": names the version table and the developer's ``alembic -n`` section
    prefix: str  # "auth_": every table the service owns starts with it
    legacy_table: str  # "auth_schema_version"
    adopt: Mapping[int, str]  # the previous release's migration number -> the revision with that schema

    @property
    def version_table(self) -> str:
        return f"{self.service}_alembic_version"

    @property
    def script_location(self) -> str:
        return f"{self.service}:migrations"

    def owns(self, name: str | None, type_: str, _parents: Any = None) -> bool:
        """Alembic's include_name: the service's own tables only (others may share the database)."""
        if type_ != "table" or name is None:
            return True
        return name.startswith(self.prefix) and name not in (self.version_table, self.legacy_table)


def config(schema: Schema, connection: sa.Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", schema.script_location)
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head(schema: Schema) -> str:
    """The revision a fresh ``upgrade`` ends at (refuses a service with several heads)."""
    found = ScriptDirectory.from_config(config(schema)).get_heads()
    if len(found) != 1:
        raise RuntimeError(f"{schema.service} migrations have {len(found)} heads {found}: merge them")
    return found[0]


def current(connection: sa.Connection, schema: Schema) -> str | None:
    ctx = MigrationContext.configure(connection, opts={"version_table": schema.version_table})
    return ctx.get_current_revision()


class SchemaError(RuntimeError):
    """The database's schema is not one this release can run on or migrate (one line, for the operator)."""


async def upgrade(engine: AsyncEngine, schema: Schema) -> str:
    """Bring the database to head (adopting a previous release's database). Returns the revision.

    Safe to run from several processes at once; every step is one transaction. A database at a revision
    this release does not know (a newer release migrated it) is a SchemaError, nothing changed.
    """
    return await migrate(engine, schema, "head")


async def downgrade(engine: AsyncEngine, schema: Schema, target: str) -> str:
    """Take the database back to revision ``target`` by running the revisions' own downgrades (for an
    operator's rollback, and for tests that need a database as an older release left it)."""
    return await migrate(engine, schema, target)


async def migrate(engine: AsyncEngine, schema: Schema, target: str = "head") -> str:
    """Upgrade or downgrade the database to ``target`` (a revision, ``head`` or ``base``), whichever way
    it lies from the current one, under the migration lock. Returns the revision reached."""
    if not is_postgres(engine):
        async with _one_at_a_time(), engine.begin() as conn:
            return await conn.run_sync(_migrate, schema, target, False)
    # On PostgreSQL an upgrade commits each revision on its own: processes of the previous release keep
    # serving meanwhile, and one transaction holding the locks of several revisions (a table locked by one,
    # another altered by the next) can deadlock with their statements, which take the same tables in the
    # other order.
    while True:
        async with _one_at_a_time(), engine.begin() as conn:
            await _lock_and_create_schema(conn, schema, schema_of(engine))
            before = await conn.run_sync(current, schema)
            reached = await conn.run_sync(_migrate, schema, target, True)
        if reached == (before or "base") or target != "head":
            return reached


async def _lock_and_create_schema(conn: Any, schema: Schema, pg_schema: str | None) -> None:
    """Take the migration locks for this transaction and create the URL's schema if missing, under them:
    two processes starting at once on an empty database must not both try to create it. The schema's
    lock is shared by every service (they may share one schema); then the service's own, the one the
    previous release took (old and new processes of a rolling upgrade take turns)."""
    if pg_schema:
        lock = sa.text("SELECT pg_advisory_xact_lock(hashtext(:n))")
        await conn.execute(lock, {"n": f"svckit schema {pg_schema}"})
        found = await conn.execute(sa.text("SELECT 1 FROM pg_namespace WHERE nspname = :s"), {"s": pg_schema})
        if found.first() is None:
            await conn.exec_driver_sql(f'CREATE SCHEMA "{pg_schema}"')
    await conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:n))"), {"n": schema.legacy_table})


# Alembic's ``context`` and ``op`` are process-wide proxies: two upgrades in one process (services or
# tests sharing it, on one event loop or several) must not interleave.
_ALEMBIC = threading.Lock()


@contextlib.asynccontextmanager
async def _one_at_a_time() -> AsyncIterator[None]:
    while not _ALEMBIC.acquire(blocking=False):  # noqa: ASYNC110  (a thread lock: nothing to await)
        await asyncio.sleep(0.005)
    try:
        yield
    finally:
        _ALEMBIC.release()


def _migrate(conn: sa.Connection, schema: Schema, target: str, one_step: bool) -> str:
    """Migrate to ``target``; with ``one_step`` an upgrade to head goes one revision only."""
    cfg = config(schema, conn)
    _adopt_previous_release(conn, schema, cfg)
    before = current(conn, schema)
    script = ScriptDirectory.from_config(cfg)
    newest = head(schema)
    if before is not None and _unknown(script, before):
        raise SchemaError(
            f"the {schema.service} schema of the database is at revision {before}, newer than this "
            f"release's {newest}: run the release that migrated it, or roll back with its "
            f"`python -m {schema.service} migrate --to {newest}` first"
        )
    if target != "head" and target != "base" and _unknown(script, target):
        raise SchemaError(f"{schema.service} has no revision {target!r} (this release's newest: {newest})")
    if target == "base" or (before is not None and target != "head" and _is_ancestor(script, target, before)):
        if target != before:
            command.downgrade(cfg, target)
    elif one_step and target == "head" and before != newest:
        command.upgrade(cfg, _next_after(script, before))
    else:
        command.upgrade(cfg, target)
    after = current(conn, schema)
    if after != before:
        log.info("schema migrated", extra={"service": schema.service, "from": before, "to": after})
    return after or "base"


def _next_after(script: ScriptDirectory, revision: str | None) -> str:
    """The revision that comes directly after ``revision`` (None: the first) on the way to head."""
    on_the_way = [r.revision for r in script.iterate_revisions("heads", revision or "base")]
    return on_the_way[-1]


def _unknown(script: ScriptDirectory, revision: str) -> bool:
    try:
        return script.get_revision(revision) is None
    except Exception:  # alembic's ResolutionError and CommandError for an id it has no file of
        return True


def _is_ancestor(script: ScriptDirectory, revision: str, of: str) -> bool:
    """Is ``revision`` ``of`` itself or one of the revisions before it?"""
    return any(r.revision == revision for r in script.iterate_revisions(of, "base"))


def _adopt_previous_release(conn: sa.Connection, schema: Schema, cfg: Config) -> None:
    if not sa.inspect(conn).has_table(schema.legacy_table):
        return
    if current(conn, schema) is None:
        version = conn.execute(sa.text(f"SELECT MAX(version) FROM {schema.legacy_table}")).scalar()
        revision = schema.adopt.get(version) if isinstance(version, int) else None
        if revision is None:
            raise RuntimeError(
                f"{schema.legacy_table} is at version {version}, not one of {sorted(schema.adopt)}: "
                "start the previous release once to finish its own migrations, then this one"
            )
        command.stamp(cfg, revision)
        log.info(
            "schema adopted from the previous release",
            extra={"service": schema.service, "legacy": version, "revision": revision},
        )
    conn.execute(sa.text(f"DROP TABLE {schema.legacy_table}"))


def _options(schema: Schema, metadata: sa.MetaData) -> dict[str, Any]:
    return {
        "target_metadata": metadata,
        "version_table": schema.version_table,
        "include_name": schema.owns,
        "compare_type": True,
        "render_as_batch": True,  # SQLite alters tables by copying them
    }


def drift(connection: sa.Connection, schema: Schema, metadata: sa.MetaData) -> list[Any]:
    """What ``alembic check`` reports: how the models' tables differ from the database's ([] if none)."""
    ctx = MigrationContext.configure(connection, opts=_options(schema, metadata))
    return list(compare_metadata(ctx, metadata))


def run_env(schema: Schema, metadata: sa.MetaData) -> None:
    """The body of every service's ``env.py``: on the caller's connection (``upgrade``), else the
    developer's database: ``alembic -x url=...``, else the service's own (``<SERVICE>_DATABASE``, then
    ``DATABASE_URL``, then ``var/<service>.db``)."""
    from alembic import context as module

    context: EnvironmentContext = module  # type: ignore[assignment]  # the proxy of the running one
    opts = _options(schema, metadata)
    conn = context.config.attributes.get("connection")
    if conn is not None:
        _run(context, conn, opts)
        return
    url = (
        context.get_x_argument(as_dictionary=True).get("url")
        or os.environ.get(env_name(schema.service, "database"))
        or os.environ.get("DATABASE_URL")
        or f"var/{schema.service}.db"
    )
    url = normalize_url(url)
    if context.is_offline_mode():
        context.configure(
            url=url.replace("+aiosqlite", "").replace("+asyncpg", ""), literal_binds=True, **opts
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    asyncio.run(_run_developer(context, url, opts))


async def _run_developer(context: EnvironmentContext, url: str, opts: dict[str, Any]) -> None:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda c: _run(context, c, opts))
    finally:
        await engine.dispose()


def _run(context: EnvironmentContext, conn: sa.Connection, opts: dict[str, Any]) -> None:
    context.configure(connection=conn, **opts)
    with context.begin_transaction():
        context.run_migrations()


def add_database_flags(parser: argparse.ArgumentParser, service: str, database: str) -> None:
    """``--database URL`` and ``--database-password-file`` of a one-shot command (migrate, reseal), with
    the same environment fallbacks as the service's own flags."""
    add_flag(
        parser,
        "--database",
        env=env_name(service, "database"),
        also_env=("DATABASE_URL",),
        type=or_default(database),
        default=database,
        help="SQLAlchemy URL (sqlite+aiosqlite:///path or postgresql+asyncpg://...)",
    )
    add_password_file_flag(parser, service)


def add_migrate_command(commands: Any, service: str, database: str) -> None:
    """``python -m <service> migrate [--to REV] [--database URL]``: migrate, print the revision, exit."""
    parser = commands.add_parser(
        "migrate",
        help="upgrade the database schema to this release's newest revision (or --to any revision, older "
        "ones to roll back) and exit",
    )
    add_database_flags(parser, service, database)
    parser.add_argument(  # no environment fallback: where to go is said each time
        "--to",
        default="head",
        help="the revision to go to: head (default), an older one to roll back to (what the release rolled "
        "back to expects), or base (drops the service's tables)",
    )


def run_migrate(args: argparse.Namespace, schema: Schema) -> int:
    """The ``migrate`` command: 0 and ``<service> schema at revision REV`` on stdout, else 2 and one line
    on stderr."""

    async def go() -> str:
        engine = create_engine(args.database)
        try:
            return await migrate(engine, schema, args.to)
        finally:
            await engine.dispose()

    try:
        revision = asyncio.run(go())
    except SchemaError as exc:
        print(f"{schema.service}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if not is_outage(exc):  # a bug: its traceback
            raise
        # Refused, missing, a role refused, no slot free: one line, as an outage is logged (svckit.outage).
        print(f"{schema.service}: the database cannot be reached: {describe(exc)}", file=sys.stderr)
        return 2
    print(f"{schema.service} schema at revision {revision}")
    return 0
