"""Alembic schema migrations of authsvc, webhookd and the edge, on SQLite and PostgreSQL (db_url):
no drift between the models and the revisions (``alembic check``), one version table per service in the
URL's schema, concurrent starts, and adoption of a database made by the previous release, rows kept."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import pathlib
import subprocess
import sys
import uuid
from typing import Any

import grpc
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

import authsvc._sql
import edge.idempotency
import webhookd._sql
from authsvc.migrations import SCHEMA as AUTHSVC
from authsvc.testing import new_key, running_authsvc
from edge.idempotency import SqlIdempotencyStore, Stored
from edge.migrations import SCHEMA as EDGE
from svckit.db import create_engine, schema_of
from svckit.migrations import Schema, SchemaError, current, drift, head, migrate, upgrade
from travel.auth.v1 import auth_pb2
from travel.webhooks.v1 import webhooks_pb2, webhooks_pb2_grpc
from webhookd._server import Config, run_server
from webhookd.migrations import SCHEMA as WEBHOOKD

ROOT = pathlib.Path(__file__).resolve().parents[2]
PREVIOUS = pathlib.Path(__file__).with_name("previous_release")
SERVICES = [
    (AUTHSVC, authsvc._sql.metadata),
    (WEBHOOKD, webhookd._sql.metadata),
    (EDGE, edge.idempotency.metadata),
]
IDS = [s.service for s, _ in SERVICES]
# The previous release's rows (previous_release/rows.json) were written at this time; this key's hash is
# in them (auth_keys.secret_hash).
WRITTEN_AT = dt.datetime(2026, 11, 20, 9, 30, tzinfo=dt.UTC)
PREVIOUS_KEY = "svc_live_0WDgAnDqUINm6jBNihBJVa3DoK9L2RLP4ciBNa"


async def tables(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as conn:
        return set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))


@pytest.mark.parametrize(("schema", "metadata"), SERVICES, ids=IDS)
async def test_revisions_match_the_models(db_url: str, schema: Schema, metadata: sa.MetaData) -> None:
    engine = create_engine(db_url)
    try:
        assert await upgrade(engine, schema) == head(schema)
        assert await upgrade(engine, schema) == head(schema)  # idempotent
        async with engine.connect() as conn:
            assert await conn.run_sync(drift, schema, metadata) == []
        owned = {t for t in await tables(engine) if schema.owns(t, "table")}
        assert owned == set(metadata.tables)
        assert schema.version_table in await tables(engine)
    finally:
        await engine.dispose()


async def test_drift_is_found(sqlite_url: str) -> None:
    """The check can fail: a column the revisions do not create is reported."""
    metadata = sa.MetaData()
    for table in edge.idempotency.metadata.tables.values():
        table.to_metadata(metadata)
    metadata.tables["edge_idempotency"].append_column(sa.Column("extra", sa.Text, nullable=True))
    engine = create_engine(sqlite_url)
    try:
        await upgrade(engine, EDGE)
        async with engine.connect() as conn:
            diffs = await conn.run_sync(drift, EDGE, metadata)
        assert [(d[0], d[3].name) for d in diffs] == [("add_column", "extra")]
    finally:
        await engine.dispose()


async def test_version_tables_land_in_the_urls_schema(pg_url: str) -> None:
    engine = create_engine(pg_url)
    try:
        for schema, _ in SERVICES:
            await upgrade(engine, schema)
        async with engine.connect() as conn:
            rows = await conn.execute(
                sa.text("SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                {"s": schema_of(engine)},
            )
            in_schema = {r[0] for r in rows}
        # (Other tests' schemas in the shared database have tables of these names too: look in ours.)
        for schema, metadata in SERVICES:
            assert {schema.version_table, *metadata.tables} <= in_schema
    finally:
        await engine.dispose()


async def test_concurrent_starts_migrate_once(db_url: str) -> None:
    engines = [create_engine(db_url) for _ in range(3)]
    try:
        results = await asyncio.gather(*(upgrade(e, schema) for e in engines for schema, _ in SERVICES))
        assert sorted(set(results)) == sorted({head(s) for s, _ in SERVICES})
        async with engines[0].connect() as conn:
            for schema, _ in SERVICES:
                rows = (await conn.execute(sa.text(f"SELECT version_num FROM {schema.version_table}"))).all()
                assert [r[0] for r in rows] == [head(schema)]
    finally:
        for e in engines:
            await e.dispose()


async def build_previous_release(url: str) -> None:
    """The database the previous release left. previous_release/<dialect>.sql is the DDL its
    svckit.db.migrate ran (captured from it, commit 6b9fc9c); rows.json the rows its repositories wrote
    (an account, a key, their audit events, an endpoint, an event, its delivery and attempt, an edge
    idempotency record)."""
    engine = create_engine(url)
    try:
        if engine.dialect.name == "postgresql":
            async with engine.begin() as conn:
                await conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema_of(engine)}"')
        script = (PREVIOUS / f"{engine.dialect.name}.sql").read_text()
        rows: dict[str, list[dict[str, Any]]] = json.loads((PREVIOUS / "rows.json").read_text())
        async with engine.begin() as conn:
            for statement in script.split(";\n"):
                body = "\n".join(line for line in statement.splitlines() if not line.startswith("--"))
                if body.strip():
                    await conn.exec_driver_sql(body)
            for name, values in rows.items():
                table = sa.table(name, *(sa.column(c) for c in values[0]))
                for row in values:
                    decoded = {
                        k: base64.b64decode(v["base64"]) if isinstance(v, dict) else v for k, v in row.items()
                    }
                    await conn.execute(table.insert().values(**decoded))
    finally:
        await engine.dispose()


class _Clock:
    """Real sleeps, the time just after the previous release wrote its rows (nothing is purged yet)."""

    def now(self) -> dt.datetime:
        return WRITTEN_AT + dt.timedelta(hours=1)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def test_a_previous_release_database_is_adopted_with_its_data(db_url: str) -> None:
    await build_previous_release(db_url)

    async with running_authsvc(db_url) as (_, stub):
        auth = await stub.Authenticate(auth_pb2.AuthenticateRequest(api_key=PREVIOUS_KEY))
        assert (auth.key.id, auth.account.id, auth.account.name) == (
            "key_prev1",
            "acct_prev1",
            "Previous Release Travel",
        )
        # Its row holds the mode spelt "a" (before AccountMode took the API's "A"): read as mode A.
        assert auth.account.mode == auth_pb2.ACCOUNT_MODE_A
        audit = await stub.ListAuditEvents(auth_pb2.ListAuditEventsRequest(account_id="acct_prev1"))
        assert [e.action for e in audit.events] == ["account.created", "key.created"]
        await new_key(stub, "acct_prev1", name="after-upgrade")  # new rows next to the old ones
        audit = await stub.ListAuditEvents(auth_pb2.ListAuditEventsRequest(account_id="acct_prev1"))
        assert [e.action for e in audit.events] == ["account.created", "key.created", "key.created"]

    app = await run_server(Config(database=db_url, listen="127.0.0.1:0"), clock=_Clock(), start_worker=False)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            wh = webhooks_pb2_grpc.WebhookServiceStub(channel)
            live = webhooks_pb2.ENVIRONMENT_LIVE
            scope: dict[str, Any] = {"account_id": "acct_prev1", "environment": live}
            ep = (
                await wh.GetEndpoint(webhooks_pb2.GetEndpointRequest(endpoint_id="we_prev1", **scope))
            ).endpoint
            assert (ep.url, list(ep.events)) == (
                "https://hooks.partner.example/travel",
                ["booking.confirmed"],
            )
            deliveries = (await wh.ListDeliveries(webhooks_pb2.ListDeliveriesRequest(**scope))).deliveries
            assert [(d.event_id, d.status) for d in deliveries] == [
                ("evt_prev1", webhooks_pb2.DELIVERY_STATUS_SUCCEEDED)
            ]
            attempts = (await wh.ListAttempts(webhooks_pb2.ListAttemptsRequest(**scope))).attempts
            assert [(a.id, a.response_status) for a in attempts] == [("att_prev1", 200)]
    finally:
        await app.stop(0)

    engine = create_engine(db_url)
    try:
        store = SqlIdempotencyStore(engine)
        assert await store.migrate() == head(EDGE)
        replay = await store.claim("acct_prev1", "live", "idem-edge-1", "a" * 64, _Clock().now().timestamp())
        assert replay == Stored(201, '{"id": "bk_1"}', {"Content-Type": "application/json"})

        names = await tables(engine)
        assert not {n for n in names if n.endswith("_schema_version")}  # the old version tables are gone
        async with engine.connect() as conn:
            for schema, metadata in SERVICES:
                assert await conn.run_sync(drift, schema, metadata) == []
                version = await conn.execute(sa.text(f"SELECT version_num FROM {schema.version_table}"))
                assert version.scalar_one() == head(schema)
    finally:
        await engine.dispose()


# What the release between (webhookd's old-style migration 2, create_all of this one table) added.
WH_V2 = """CREATE TABLE wh_idempotency (
    account_id VARCHAR(64) NOT NULL, environment VARCHAR(16) NOT NULL,
    idempotency_key VARCHAR(255) NOT NULL, request_hash VARCHAR(64) NOT NULL,
    endpoint_id VARCHAR(64) NOT NULL, created_at BIGINT NOT NULL,
    PRIMARY KEY (account_id, environment, idempotency_key))"""


async def test_webhookd_at_the_old_migration_2_is_adopted_at_its_revision(db_url: str) -> None:
    await build_previous_release(db_url)
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql(WH_V2)
            await conn.exec_driver_sql(
                "INSERT INTO wh_idempotency VALUES ('acct_prev1', 'live', 'reg-1', 'h', 'we_prev1', 1)"
            )
            await conn.exec_driver_sql("INSERT INTO wh_schema_version VALUES (2, 'idempotency keys')")
        assert await upgrade(engine, WEBHOOKD) == head(WEBHOOKD)
        async with engine.connect() as conn:
            assert await conn.run_sync(drift, WEBHOOKD, webhookd._sql.metadata) == []
            assert (
                await conn.exec_driver_sql("SELECT endpoint_id FROM wh_idempotency")
            ).scalar_one() == "we_prev1"
    finally:
        await engine.dispose()


async def test_a_previous_release_database_mid_migration_is_refused(sqlite_url: str) -> None:
    await build_previous_release(sqlite_url)
    engine = create_engine(sqlite_url)
    try:
        async with engine.begin() as conn:
            await conn.exec_driver_sql("UPDATE auth_schema_version SET version = 0")
        with pytest.raises(RuntimeError, match=r"auth_schema_version is at version 0, not one of \[1\]"):
            await upgrade(engine, AUTHSVC)
        names = await tables(engine)
        assert "auth_schema_version" in names and AUTHSVC.version_table not in names  # unchanged
    finally:
        await engine.dispose()


@pytest.mark.parametrize(("schema", "metadata"), SERVICES, ids=IDS)
def test_the_developers_alembic_check_passes(tmp_path: pathlib.Path, schema: Schema, metadata: Any) -> None:
    """``alembic -n <service> upgrade head`` then ``check`` with the repository's alembic.ini."""
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    for args in (["upgrade", "head"], ["check"]):
        cmd = [sys.executable, "-m", "alembic", "-n", schema.service, "-x", f"url={url}", *args]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    assert "No new upgrade operations detected" in done.stdout + done.stderr


def migrate_command(service: str, url: str, *args: str) -> subprocess.Popen[str]:
    """``python -m <service> migrate --database URL ...`` started (not waited for)."""
    cmd = [sys.executable, "-m", service, "migrate", "--database", url, *args]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_processes_migrating_one_empty_database_at_once_all_succeed() -> None:
    """The reproduction: ``CREATE SCHEMA IF NOT EXISTS`` ran before the migration lock, so two processes
    starting at once on an empty database could both try to create the schema and one failed (authsvc and
    webhookd took different locks even after). Here an authsvc and a webhookd process migrate a schema
    that does not exist yet, at once, with ``python -m <service> migrate``."""
    from tests.conftest import PG_BASE, _drop_schema, pg_skip_reason

    reason = pg_skip_reason()
    if reason:
        pytest.skip(reason)
    name = f"t_{uuid.uuid4().hex[:12]}"  # not created: the processes do it
    url = f"{PG_BASE}?search_path={name}"
    try:
        procs = [migrate_command(s, url) for s in ("authsvc", "webhookd")]
        outputs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
        assert [out for out, _ in outputs] == [
            f"authsvc schema at revision {head(AUTHSVC)}\n",
            f"webhookd schema at revision {head(WEBHOOKD)}\n",
        ]
    finally:
        _drop_schema(name)


async def test_migrate_goes_down_and_up_again(sqlite_url: str) -> None:
    """``migrate`` to an older revision rolls back (the revisions' downgrades), to head upgrades again;
    an unknown revision is refused in one line."""
    engine = create_engine(sqlite_url)
    try:
        for target, reached in (("head", head(AUTHSVC)), ("0006", "0006"), ("head", head(AUTHSVC))):
            assert await migrate(engine, AUTHSVC, target) == reached
            async with engine.connect() as conn:
                assert await conn.run_sync(current, AUTHSVC) == reached
        with pytest.raises(SchemaError, match=r"^authsvc has no revision 'nope' \(this release's newest: "):
            await migrate(engine, AUTHSVC, "nope")
    finally:
        await engine.dispose()


async def test_an_older_release_refuses_a_newer_schema_in_one_line(tmp_path: pathlib.Path) -> None:
    """A database a newer release migrated (a revision this one does not know): the service exits 2 with
    one line naming both revisions, no traceback, nothing changed."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'a.db'}"
    engine = create_engine(url)
    try:
        await upgrade(engine, AUTHSVC)
        async with engine.begin() as conn:
            await conn.exec_driver_sql(f"UPDATE {AUTHSVC.version_table} SET version_num = '0099_future'")
    finally:
        await engine.dispose()
    args = ["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--database", url, "--insecure-dev"]
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "authsvc", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"authsvc: the authsvc schema of the database is at revision 0099_future, newer than this "
        f"release's {head(AUTHSVC)}: run the release that migrated it, or roll back with its "
        f"`python -m authsvc migrate --to {head(AUTHSVC)}` first"
    )
    engine = create_engine(url)
    try:  # nothing changed; a migrate (any target) refuses it the same way
        with pytest.raises(SchemaError, match="at revision 0099_future, newer than this release's"):
            await migrate(engine, AUTHSVC, "0006")
    finally:
        await engine.dispose()
